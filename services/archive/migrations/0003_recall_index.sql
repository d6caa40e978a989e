-- The recall index: the `simple` search vector of every PROMOTED revision, and of nothing else,
-- in a narrow table of its own. Recall ranks over it alone (no join, no note text in the pages
-- it reads), so a term found in thousands of notes costs a bitmap scan of narrow rows and a
-- rank each, not a heap walk of texts plus a lifecycle probe per match. The row is written in
-- the statement that promotes a revision and deleted in the statement that moves it out of
-- `promoted` (archive, supersession, revocation), under the namespace row `FOR UPDATE` like
-- every lifecycle change, so it is exactly the promoted set at every commit. Candidates carry
-- no search data any more: intake no longer computes a vector nor touches a GIN index.
--
-- It is derived data (the text stays in `note_texts`), keyed like `note_texts` by (namespace,
-- revision id), so later derivations (embedding generations, vectors) attach the same way.

CREATE TABLE archive.recall_index (
    revision_id uuid PRIMARY KEY,
    namespace   text NOT NULL,
    search      tsvector NOT NULL,
    FOREIGN KEY (namespace, revision_id) REFERENCES archive.note_revisions (namespace, id)
);
CREATE INDEX recall_index_search ON archive.recall_index USING gin (search);

INSERT INTO archive.recall_index (revision_id, namespace, search)
    SELECT t.revision_id, t.namespace, t.search
    FROM archive.note_texts t
    JOIN archive.lifecycle l ON l.revision_id = t.revision_id
    WHERE l.state = 'promoted';

DROP INDEX archive.note_texts_search;
ALTER TABLE archive.note_texts DROP COLUMN search;
