//! Recall (the lexical query) and its text-free receipts. Callers hold the namespace row
//! `FOR SHARE` first.

use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use super::notes::{NOTE_COLUMNS, NoteRow};

/// A receipt as stored: no query, no note text.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ReceiptRow {
    pub id: Uuid,
    pub namespace: String,
    pub request_id: String,
    pub request_digest: Vec<u8>,
    pub subject: String,
    pub purpose: String,
    pub policy_revision: i64,
    pub query_digest: Vec<u8>,
    pub max_results: i32,
    pub max_chars: i32,
    pub selected_ids: Vec<Uuid>,
    pub selected_versions: Vec<i64>,
    pub projection_digests: Vec<Vec<u8>>,
    pub scores: Vec<f32>,
    pub omitted_ids: Vec<Uuid>,
    pub created_at: OffsetDateTime,
}

const RECEIPT_COLUMNS: &str = "id, namespace, request_id, request_digest, subject, purpose, \
     policy_revision, query_digest, max_results, max_chars, selected_ids, selected_versions, \
     projection_digests, scores, omitted_ids, created_at";

/// The receipt of a request id.
pub async fn find(
    conn: &mut PgConnection,
    namespace: &str,
    request_id: &str,
) -> Result<Option<ReceiptRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {RECEIPT_COLUMNS} FROM archive.recall_receipts
         WHERE namespace = $1 AND request_id = $2"
    ))
    .bind(namespace)
    .bind(request_id)
    .fetch_optional(conn)
    .await
}

/// Store a receipt (`created_at` is the database's); answers it as stored.
pub async fn insert(conn: &mut PgConnection, r: &ReceiptRow) -> Result<ReceiptRow, sqlx::Error> {
    sqlx::query_as(&format!(
        "INSERT INTO archive.recall_receipts (id, namespace, request_id, request_digest, subject,
             purpose, policy_revision, query_digest, max_results, max_chars, selected_ids,
             selected_versions, projection_digests, scores, omitted_ids)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
         RETURNING {RECEIPT_COLUMNS}"
    ))
    .bind(r.id)
    .bind(&r.namespace)
    .bind(&r.request_id)
    .bind(&r.request_digest)
    .bind(&r.subject)
    .bind(&r.purpose)
    .bind(r.policy_revision)
    .bind(&r.query_digest)
    .bind(r.max_results)
    .bind(r.max_chars)
    .bind(&r.selected_ids)
    .bind(&r.selected_versions)
    .bind(&r.projection_digests)
    .bind(&r.scores)
    .bind(&r.omitted_ids)
    .fetch_one(conn)
    .await
}

/// One ranked match with its text.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Hit {
    #[sqlx(flatten)]
    pub note: NoteRow,
    pub body: String,
    pub score: f32,
}

/// The lexical recall's ranking, run on the recall index (exactly the promoted revisions) of
/// one namespace: `simple` text-search matching, ranked by `ts_rank` with the revision id as
/// the stable tie break; at most `$3` revision ids with their scores.
pub const SEARCH_SQL: &str = "\
    SELECT i.revision_id, ts_rank(i.search, q.q) AS score
    FROM archive.recall_index i
    CROSS JOIN (SELECT plainto_tsquery('simple', $2) AS q) q
    WHERE i.namespace = $1 AND i.search @@ q.q
    ORDER BY score DESC, i.revision_id ASC
    LIMIT $3";

/// The ranked hits of [`SEARCH_SQL`] with their metadata and text. The join re-checks the
/// promoted state, so an index entry could only ever drop a hit, never add an ineligible one.
pub async fn search(
    conn: &mut PgConnection,
    namespace: &str,
    query: &str,
    limit: i64,
) -> Result<Vec<Hit>, sqlx::Error> {
    sqlx::query_as(&format!(
        "WITH hits AS ({SEARCH_SQL})
         SELECT {NOTE_COLUMNS}, t.body, h.score
         FROM hits h
         JOIN archive.note_revisions r ON r.id = h.revision_id
         JOIN archive.lifecycle l ON l.revision_id = h.revision_id AND l.state = 'promoted'
         JOIN archive.note_texts t ON t.revision_id = h.revision_id
         ORDER BY h.score DESC, h.revision_id ASC"
    ))
    .bind(namespace)
    .bind(query)
    .bind(limit)
    .fetch_all(conn)
    .await
}
