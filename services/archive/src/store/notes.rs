//! Note revisions (immutable), their texts (deleted by revocation only), lifecycle rows and
//! intake replay bindings. Callers hold the namespace row first.

use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

/// A revision's metadata with its current lifecycle (never its text).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct NoteRow {
    pub id: Uuid,
    pub namespace: String,
    pub source_key: String,
    pub source_revision: String,
    pub content_digest: Vec<u8>,
    pub chars: i32,
    pub producer: String,
    pub classification: String,
    pub observed_at: OffsetDateTime,
    pub created_at: OffsetDateTime,
    pub state: String,
    pub version: i64,
    pub changed_at: OffsetDateTime,
    pub superseded_by: Option<Uuid>,
    pub text_held: bool,
}

/// The columns of a [`NoteRow`] over `r` (revisions) and `l` (lifecycle).
pub const NOTE_COLUMNS: &str = "r.id, r.namespace, r.source_key, r.source_revision, \
     r.content_digest, r.chars, r.producer, r.classification, r.observed_at, r.created_at, \
     l.state, l.version, l.changed_at, l.superseded_by, \
     EXISTS (SELECT 1 FROM archive.note_texts t WHERE t.revision_id = r.id) AS text_held";

/// One revision's metadata.
pub async fn get(
    conn: &mut PgConnection,
    namespace: &str,
    id: Uuid,
) -> Result<Option<NoteRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {NOTE_COLUMNS} FROM archive.note_revisions r
         JOIN archive.lifecycle l ON l.revision_id = r.id
         WHERE r.namespace = $1 AND r.id = $2"
    ))
    .bind(namespace)
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// A page of metadata by revision id, after `after`, optionally in one state.
pub async fn list(
    conn: &mut PgConnection,
    namespace: &str,
    state: Option<&str>,
    after: Option<Uuid>,
    limit: i64,
) -> Result<Vec<NoteRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {NOTE_COLUMNS} FROM archive.note_revisions r
         JOIN archive.lifecycle l ON l.revision_id = r.id
         WHERE r.namespace = $1 AND ($2::text IS NULL OR l.state = $2)
           AND ($3::uuid IS NULL OR r.id > $3)
         ORDER BY r.id LIMIT $4"
    ))
    .bind(namespace)
    .bind(state)
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await
}

/// What an intake finds under the namespace lock, in one statement: the binding of its
/// request id (request digest, revision) and the revision already stored under its source key
/// and source revision (id, content digest, lifecycle state).
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct Found {
    pub bound_digest: Option<Vec<u8>>,
    pub bound_revision: Option<Uuid>,
    pub existing_id: Option<Uuid>,
    pub existing_digest: Option<Vec<u8>>,
    pub existing_state: Option<String>,
}

pub async fn find_for_intake(
    conn: &mut PgConnection,
    namespace: &str,
    request_id: &str,
    source_key: &str,
    source_revision: &str,
) -> Result<Found, sqlx::Error> {
    sqlx::query_as(
        "SELECT b.request_digest AS bound_digest, b.revision_id AS bound_revision,
                r.id AS existing_id, r.content_digest AS existing_digest,
                l.state AS existing_state
         FROM (SELECT 1) one
         LEFT JOIN archive.intake_requests b ON b.namespace = $1 AND b.request_id = $2
         LEFT JOIN archive.note_revisions r
             ON r.namespace = $1 AND r.source_key = $3 AND r.source_revision = $4
         LEFT JOIN archive.lifecycle l ON l.revision_id = r.id",
    )
    .bind(namespace)
    .bind(request_id)
    .bind(source_key)
    .bind(source_revision)
    .fetch_one(conn)
    .await
}

/// Bind a request id to a revision.
pub async fn bind(
    conn: &mut PgConnection,
    namespace: &str,
    request_id: &str,
    digest: &[u8],
    revision: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO archive.intake_requests (namespace, request_id, request_digest, revision_id)
         VALUES ($1, $2, $3, $4)",
    )
    .bind(namespace)
    .bind(request_id)
    .bind(digest)
    .bind(revision)
    .execute(conn)
    .await?;
    Ok(())
}

/// A new revision to store.
pub struct NewNote<'a> {
    pub id: Uuid,
    pub namespace: &'a str,
    pub source_key: &'a str,
    pub source_revision: &'a str,
    pub text: &'a str,
    pub content_digest: &'a [u8],
    pub chars: i32,
    pub producer: &'a str,
    pub classification: &'a str,
    pub observed_at: OffsetDateTime,
}

/// Store a candidate revision bound to its intake request: its source (once), the immutable
/// revision, its text, its lifecycle at version 1 and the replay binding of `request_id`. One
/// statement; answers the stored note. (A candidate has no search data: promotion indexes it.)
pub async fn insert(
    conn: &mut PgConnection,
    n: &NewNote<'_>,
    request_id: &str,
    request_digest: &[u8],
) -> Result<NoteRow, sqlx::Error> {
    let (created_at, changed_at): (OffsetDateTime, OffsetDateTime) = sqlx::query_as(
        "WITH s AS (
             INSERT INTO archive.sources (namespace, source_key) VALUES ($2, $3)
             ON CONFLICT DO NOTHING
         ), r AS (
             INSERT INTO archive.note_revisions (id, namespace, source_key, source_revision,
                 content_digest, chars, producer, classification, observed_at)
             VALUES ($1, $2, $3, $4, $6, $7, $8, $9, $10)
             RETURNING id, created_at
         ), t AS (
             INSERT INTO archive.note_texts (revision_id, namespace, body)
             SELECT id, $2, $5 FROM r
         ), l AS (
             INSERT INTO archive.lifecycle (revision_id, namespace, source_key, state, version)
             SELECT id, $2, $3, 'candidate', 1 FROM r
             RETURNING changed_at
         ), b AS (
             INSERT INTO archive.intake_requests (namespace, request_id, request_digest, revision_id)
             SELECT $2, $11, $12, id FROM r
         )
         SELECT r.created_at, l.changed_at FROM r, l",
    )
    .bind(n.id)
    .bind(n.namespace)
    .bind(n.source_key)
    .bind(n.source_revision)
    .bind(n.text)
    .bind(n.content_digest)
    .bind(n.chars)
    .bind(n.producer)
    .bind(n.classification)
    .bind(n.observed_at)
    .bind(request_id)
    .bind(request_digest)
    .fetch_one(conn)
    .await?;
    Ok(NoteRow {
        id: n.id,
        namespace: n.namespace.to_owned(),
        source_key: n.source_key.to_owned(),
        source_revision: n.source_revision.to_owned(),
        content_digest: n.content_digest.to_vec(),
        chars: n.chars,
        producer: n.producer.to_owned(),
        classification: n.classification.to_owned(),
        observed_at: n.observed_at,
        created_at,
        state: "candidate".to_owned(),
        version: 1,
        changed_at,
        superseded_by: None,
        text_held: true,
    })
}

/// A lifecycle row, locked.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Lifecycle {
    pub revision_id: Uuid,
    pub source_key: String,
    pub state: String,
    pub version: i64,
}

/// Lock one revision's lifecycle row.
pub async fn lock_lifecycle(
    conn: &mut PgConnection,
    namespace: &str,
    id: Uuid,
) -> Result<Option<Lifecycle>, sqlx::Error> {
    sqlx::query_as(
        "SELECT revision_id, source_key, state, version FROM archive.lifecycle
         WHERE namespace = $1 AND revision_id = $2 FOR UPDATE",
    )
    .bind(namespace)
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// Lock the source's promoted revision, if any.
pub async fn lock_promoted_of_source(
    conn: &mut PgConnection,
    namespace: &str,
    source_key: &str,
) -> Result<Option<Lifecycle>, sqlx::Error> {
    sqlx::query_as(
        "SELECT revision_id, source_key, state, version FROM archive.lifecycle
         WHERE namespace = $1 AND source_key = $2 AND state = 'promoted' FOR UPDATE",
    )
    .bind(namespace)
    .bind(source_key)
    .fetch_optional(conn)
    .await
}

/// Move a revision's lifecycle, compare-and-set on its version (the namespace lock makes the
/// comparison exact; the guard keeps it so), and keep the recall index equal to the promoted
/// set in the same statement: entering `promoted` indexes the text (`simple` configuration),
/// leaving it drops the entry. False when the version was not `from_version` (nothing changed).
pub async fn set_state(
    conn: &mut PgConnection,
    id: Uuid,
    from_version: i64,
    state: &str,
    superseded_by: Option<Uuid>,
) -> Result<bool, sqlx::Error> {
    let moved: Option<i32> = sqlx::query_scalar(
        "WITH u AS (
             UPDATE archive.lifecycle
             SET state = $3, version = version + 1, superseded_by = $4, changed_at = now()
             WHERE revision_id = $1 AND version = $2
             RETURNING revision_id, namespace, state
         ), dropped AS (
             DELETE FROM archive.recall_index i USING u
             WHERE i.revision_id = u.revision_id AND u.state <> 'promoted'
         ), indexed AS (
             INSERT INTO archive.recall_index (revision_id, namespace, search)
             SELECT u.revision_id, u.namespace, to_tsvector('simple', t.body)
             FROM u JOIN archive.note_texts t ON t.revision_id = u.revision_id
             WHERE u.state = 'promoted'
         )
         SELECT 1 FROM u",
    )
    .bind(id)
    .bind(from_version)
    .bind(state)
    .bind(superseded_by)
    .fetch_optional(conn)
    .await?;
    Ok(moved.is_some())
}

/// Revocation: delete the controlled text (its search data left with the move to `revoked`;
/// the revision row, with source identity and digest, stays as the tombstone).
pub async fn clear_text(conn: &mut PgConnection, id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM archive.note_texts WHERE revision_id = $1")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// The texts held for `ids` (absent ones are not returned).
pub async fn texts(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<Vec<(Uuid, String)>, sqlx::Error> {
    sqlx::query_as("SELECT revision_id, body FROM archive.note_texts WHERE revision_id = ANY($1)")
        .bind(ids)
        .fetch_all(conn)
        .await
}
