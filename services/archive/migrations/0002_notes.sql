-- The `local-public-notes@1` profile (design rule 27, "Memory"; persistence: the Archive
-- paragraph of the persistence section): namespaces bound to an owner and a policy revision,
-- sources, immutable attributed note revisions, their controlled text and search data (the only
-- rows revocation deletes), lifecycle with versions, exact intake replay bindings and text-free
-- recall receipts, each in its own table.
--
-- Lock order of every Archive transaction: the namespace row first (`FOR UPDATE` by mutations,
-- `FOR SHARE` by recall, resolution and reads), then lifecycle rows by revision id, then texts.
--
-- Room for semantic recall later: derivation generations and vectors attach to
-- (namespace, revision id) through the composite key below and to `note_texts` lifecycle,
-- without rewriting a revision; receipts name their `method`.

CREATE TABLE archive.namespaces (
    name            text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    -- The Ward principal id that created the namespace by its first intake.
    owner           text NOT NULL CHECK (length(owner) BETWEEN 1 AND 128),
    -- The office's configured policy revision the namespace is bound to; a changed
    -- configuration refuses the namespace until an explicit migration admits it.
    policy_revision bigint NOT NULL CHECK (policy_revision >= 1),
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE archive.sources (
    namespace  text NOT NULL REFERENCES archive.namespaces (name),
    source_key text NOT NULL CHECK (length(source_key) BETWEEN 1 AND 256),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, source_key)
);

-- Immutable: never updated, never deleted (the tombstone of a revoked note is this row).
CREATE TABLE archive.note_revisions (
    id              uuid PRIMARY KEY,
    namespace       text NOT NULL,
    source_key      text NOT NULL,
    source_revision text NOT NULL CHECK (length(source_revision) BETWEEN 1 AND 128),
    -- SHA-256 of the text's UTF-8 bytes.
    content_digest  bytea NOT NULL CHECK (length(content_digest) = 32),
    chars           integer NOT NULL CHECK (chars >= 1),
    producer        text NOT NULL CHECK (length(producer) BETWEEN 1 AND 128),
    classification  text NOT NULL CHECK (classification ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    observed_at     timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (namespace, source_key) REFERENCES archive.sources (namespace, source_key),
    CONSTRAINT note_revisions_source_revision_key UNIQUE (namespace, source_key, source_revision),
    CONSTRAINT note_revisions_namespace_id_key UNIQUE (namespace, id)
);

-- Controlled text and search data. Revocation deletes the row; nothing else changes it.
CREATE TABLE archive.note_texts (
    revision_id uuid PRIMARY KEY,
    namespace   text NOT NULL,
    body        text NOT NULL,
    search      tsvector NOT NULL,
    FOREIGN KEY (namespace, revision_id) REFERENCES archive.note_revisions (namespace, id)
);
CREATE INDEX note_texts_search ON archive.note_texts USING gin (search);

CREATE TABLE archive.lifecycle (
    revision_id   uuid PRIMARY KEY,
    namespace     text NOT NULL,
    source_key    text NOT NULL,
    state         text NOT NULL CHECK (state IN ('candidate', 'promoted', 'archived', 'revoked')),
    version       bigint NOT NULL CHECK (version >= 1),
    -- The revision whose promotion archived this one.
    superseded_by uuid,
    changed_at    timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (namespace, revision_id) REFERENCES archive.note_revisions (namespace, id),
    CHECK (superseded_by IS NULL OR state IN ('archived', 'revoked'))
);
CREATE INDEX lifecycle_namespace_state ON archive.lifecycle (namespace, state, revision_id);
-- At most one promoted revision per source.
CREATE UNIQUE INDEX lifecycle_one_promoted_per_source
    ON archive.lifecycle (namespace, source_key) WHERE state = 'promoted';

-- Exact intake replay: a request id names exactly one request (its digest) and its revision.
CREATE TABLE archive.intake_requests (
    namespace      text NOT NULL REFERENCES archive.namespaces (name),
    request_id     text NOT NULL CHECK (length(request_id) BETWEEN 1 AND 128),
    request_digest bytea NOT NULL CHECK (length(request_digest) = 32),
    revision_id    uuid NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, request_id),
    FOREIGN KEY (namespace, revision_id) REFERENCES archive.note_revisions (namespace, id)
);

-- Text-free: neither the query nor any note text; the selection in rank order as parallel
-- arrays (revision ids, lifecycle versions, projection digests, scores).
CREATE TABLE archive.recall_receipts (
    id                 uuid PRIMARY KEY,
    namespace          text NOT NULL REFERENCES archive.namespaces (name),
    request_id         text NOT NULL CHECK (length(request_id) BETWEEN 1 AND 128),
    -- SHA-256 of the complete recall request (query digest, purpose, budgets): what a replay
    -- under the same request id must equal.
    request_digest     bytea NOT NULL CHECK (length(request_digest) = 32),
    subject            text NOT NULL,
    purpose            text NOT NULL,
    policy_revision    bigint NOT NULL,
    method             text NOT NULL DEFAULT 'lexical-simple@1',
    query_digest       bytea NOT NULL CHECK (length(query_digest) = 32),
    max_results        integer NOT NULL CHECK (max_results >= 1),
    max_chars          integer NOT NULL CHECK (max_chars >= 1),
    selected_ids       uuid[] NOT NULL,
    selected_versions  bigint[] NOT NULL,
    projection_digests bytea[] NOT NULL,
    scores             real[] NOT NULL,
    omitted_ids        uuid[] NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT recall_receipts_request_key UNIQUE (namespace, request_id),
    CHECK (cardinality(selected_ids) = cardinality(selected_versions)
       AND cardinality(selected_ids) = cardinality(projection_digests)
       AND cardinality(selected_ids) = cardinality(scores))
);
