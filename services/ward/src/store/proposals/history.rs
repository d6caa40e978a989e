//! A proposal's records: the append-only sequence (`ward.proposal_records`), appended by one
//! statement that numbers it.
//!
//! Invariant: sequence numbers are 1, 2, 3… without gaps or duplicates; a record is never
//! changed or deleted.

use sqlx::postgres::{PgConnection, PgPool};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::consent::ConsentState;
use crate::domain::paging::{self, List};
use crate::domain::proposal::{NewRecord, RecordKind, Source};
use crate::error::{Entity, Result, WardError};
use crate::store::{Page, paginate};

/// One record of a proposal's sequence as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRecord {
    pub id: Uuid,
    pub proposal_id: Uuid,
    pub seq: i64,
    pub kind: RecordKind,
    pub actor: Option<Uuid>,
    pub source: Source,
    pub recorded_at: OffsetDateTime,
    pub text: Option<String>,
    pub attempt_id: Option<String>,
    pub receipt_id: Option<String>,
    pub successor: Option<Uuid>,
    pub judged: Option<ConsentState>,
    pub rule: Option<String>,
}

pub(crate) const RECORD_COLUMNS: &str = "r.id, r.proposal_id, r.seq, r.kind, r.actor, r.source, \
     r.recorded_at, r.body, r.attempt_id, r.receipt_id, r.successor, r.judged, r.rule";

#[derive(sqlx::FromRow)]
pub(crate) struct RecordRow {
    id: Uuid,
    proposal_id: Uuid,
    seq: i64,
    kind: String,
    actor: Option<Uuid>,
    source: String,
    recorded_at: OffsetDateTime,
    body: Option<String>,
    attempt_id: Option<String>,
    receipt_id: Option<String>,
    successor: Option<Uuid>,
    judged: Option<String>,
    rule: Option<String>,
}

pub(crate) fn corrupt(id: Uuid, what: &str) -> WardError {
    WardError::Database(sqlx::Error::Decode(
        format!("unreadable {what} in ward.proposal_records {id}").into(),
    ))
}

impl RecordRow {
    pub(crate) fn record(self) -> Result<HistoryRecord> {
        let id = self.id;
        Ok(HistoryRecord {
            id,
            proposal_id: self.proposal_id,
            seq: self.seq,
            kind: RecordKind::parse(&self.kind).ok_or_else(|| corrupt(id, "kind"))?,
            actor: self.actor,
            source: Source::parse(&self.source).ok_or_else(|| corrupt(id, "source"))?,
            recorded_at: self.recorded_at,
            text: self.body,
            attempt_id: self.attempt_id,
            receipt_id: self.receipt_id,
            successor: self.successor,
            judged: match self.judged {
                None => None,
                Some(j) => Some(ConsentState::parse(&j).ok_or_else(|| corrupt(id, "judged"))?),
            },
            rule: self.rule,
        })
    }
}

/// What a record appended by Ward carries besides its kind.
#[derive(Default)]
pub(crate) struct Fields<'a> {
    pub(crate) text: Option<&'a str>,
    pub(crate) attempt_id: Option<&'a str>,
    pub(crate) receipt_id: Option<&'a str>,
    pub(crate) successor: Option<Uuid>,
    pub(crate) judged: Option<ConsentState>,
    pub(crate) rule: Option<&'a str>,
    /// Given only for a judgment; otherwise derived from the actor's kind.
    pub(crate) source: Option<Source>,
}

/// Append one record to `proposal` in one statement: the counter bump (row lock) and the insert
/// with the new number. The source is the actor's kind (human or service) unless given.
pub(crate) async fn append(
    conn: &mut PgConnection,
    proposal: Uuid,
    kind: RecordKind,
    actor: Option<Uuid>,
    f: Fields<'_>,
) -> Result<HistoryRecord> {
    let row: Option<RecordRow> = sqlx::query_as(&format!(
        "WITH n AS (UPDATE ward.proposals SET records = records + 1 WHERE id = $1
                    RETURNING records),
              r AS (INSERT INTO ward.proposal_records (id, proposal_id, seq, kind, actor,
                        source, body, attempt_id, receipt_id, successor, judged, rule)
                    SELECT $2, $1, n.records, $3, $4,
                        COALESCE($5, CASE WHEN (SELECT kind FROM ward.principals
                                                WHERE id = $4) = 'human'
                                          THEN 'human' ELSE 'service' END),
                        $6, $7, $8, $9, $10, $11
                    FROM n
                    RETURNING *)
         SELECT {RECORD_COLUMNS} FROM r"
    ))
    .bind(proposal)
    .bind(Uuid::new_v4())
    .bind(kind.as_str())
    .bind(actor)
    .bind(f.source.map(Source::as_str))
    .bind(f.text)
    .bind(f.attempt_id)
    .bind(f.receipt_id)
    .bind(f.successor)
    .bind(f.judged.map(ConsentState::as_str))
    .bind(f.rule)
    .fetch_optional(&mut *conn)
    .await?;
    row.ok_or(WardError::NotFound(Entity::Proposal))?.record()
}

/// Append `r` to proposal `id`, by `by` (kind and fields already checked by the domain).
pub async fn append_record(
    pool: &PgPool,
    id: Uuid,
    r: &NewRecord,
    by: Uuid,
) -> Result<HistoryRecord> {
    let mut conn = pool.acquire().await?;
    append(
        &mut conn,
        id,
        r.kind,
        Some(by),
        Fields {
            text: r.text.as_deref(),
            attempt_id: r.attempt_id.as_deref(),
            receipt_id: r.receipt_id.as_deref(),
            ..Fields::default()
        },
    )
    .await
}

/// Records of proposal `id` in sequence order, `size` a page, after record number `after`.
pub async fn records(
    pool: &PgPool,
    id: Uuid,
    size: u32,
    after: Option<i64>,
) -> Result<Page<HistoryRecord>> {
    let rows: Vec<RecordRow> = sqlx::query_as(&format!(
        "SELECT {RECORD_COLUMNS} FROM ward.proposal_records r
         WHERE r.proposal_id = $1 AND r.seq > COALESCE($2, 0)
         ORDER BY r.seq LIMIT $3"
    ))
    .bind(id)
    .bind(after)
    .bind(i64::from(size) + 1)
    .fetch_all(pool)
    .await?;
    let records = rows
        .into_iter()
        .map(RecordRow::record)
        .collect::<Result<Vec<_>>>()?;
    Ok(paginate(records, size, |r| {
        paging::seq_token(List::ProposalRecords, r.seq)
    }))
}
