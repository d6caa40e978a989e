//! The append-only audit trail: who did what to whom under which generations. Details hold
//! identifiers, names of actions and objects, reasons and generations — never a secret, a token
//! or a digest.

use serde_json::{Map, Value};
use sqlx::postgres::{PgConnection, PgPool};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{Page, paginate};
use crate::domain::paging;
use crate::error::Result;

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub seq: i64,
    pub at: OffsetDateTime,
    pub event: String,
    pub actor_id: Option<Uuid>,
    pub subject_id: Option<Uuid>,
    pub detail: Map<String, Value>,
}

/// Append an event inside the caller's transaction (committed, durably, with the change).
pub(crate) async fn record(
    conn: &mut PgConnection,
    event: &str,
    actor_id: Option<Uuid>,
    subject_id: Option<Uuid>,
    detail: Value,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO ward.audit (event, actor_id, subject_id, detail) VALUES ($1, $2, $3, $4::jsonb)",
    )
    .bind(event)
    .bind(actor_id)
    .bind(subject_id)
    .bind(detail.to_string())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[derive(sqlx::FromRow)]
struct Row {
    seq: i64,
    at: OffsetDateTime,
    event: String,
    actor_id: Option<Uuid>,
    subject_id: Option<Uuid>,
    detail: String,
}

/// The trail, newest first.
pub async fn list(pool: &PgPool, size: u32, before: Option<i64>) -> Result<Page<AuditRecord>> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT seq, at, event, actor_id, subject_id, detail::text AS detail FROM ward.audit
         WHERE ($1::bigint IS NULL OR seq < $1) ORDER BY seq DESC LIMIT $2",
    )
    .bind(before)
    .bind(i64::from(size) + 1)
    .fetch_all(pool)
    .await?;
    let records = rows
        .into_iter()
        .map(|r| AuditRecord {
            seq: r.seq,
            at: r.at,
            event: r.event,
            actor_id: r.actor_id,
            subject_id: r.subject_id,
            detail: match serde_json::from_str(&r.detail) {
                Ok(Value::Object(map)) => map,
                _ => Map::new(),
            },
        })
        .collect();
    Ok(paginate(records, size, |r| {
        paging::seq_token(paging::List::Audit, r.seq)
    }))
}
