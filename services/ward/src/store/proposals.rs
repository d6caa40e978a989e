//! Proposal history: proposals (`ward.proposals`) and their append-only record sequences
//! (`ward.proposal_records`).
//!
//! Sequence numbers are assigned by the appending statement itself: one statement bumps the
//! proposal's record counter (a row lock: concurrent appends to one proposal queue) and inserts
//! the record with the new value, so a failed insert gives the number back and the sequence is
//! 1, 2, 3… without gaps or duplicates. A consent's judgment is appended by the statement that
//! settles it (the `consents_judged` trigger), so the judgment history commits with the state.
//!
//! Lock order, in every transaction that touches both: the consent first, then the proposal
//! (as a verdict does: it updates the consent, then its trigger the proposal).

use sqlx::postgres::{PgConnection, PgPool};
use time::OffsetDateTime;
use uuid::Uuid;

use super::consents::{self, ConsentRecord};
use super::{Page, paginate};
use crate::domain::consent::{ConsentRefusal, ConsentState};
use crate::domain::paging::{self, List};
use crate::domain::proposal::{Close, CloseRefusal, NewRecord, RecordKind, Source, closing};
use crate::error::{Entity, Result, WardError};

/// A proposal as stored, with what its records say about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposalRecord {
    pub id: Uuid,
    pub seq: i64,
    pub group_id: Uuid,
    pub consent_id: Uuid,
    pub revises: Option<Uuid>,
    pub run_id: String,
    pub occurrence: String,
    pub initiated_by: Uuid,
    pub created_at: OffsetDateTime,
    /// Records appended so far (the last sequence number).
    pub records: i64,
    pub withdrawn: bool,
    pub superseded_by: Option<Uuid>,
}

const COLUMNS: &str = "p.id, p.seq, p.group_id, p.consent_id, p.revises, p.run_id, \
     p.occurrence, p.initiated_by, p.created_at, p.records, \
     EXISTS (SELECT 1 FROM ward.proposal_records w \
             WHERE w.proposal_id = p.id AND w.kind = 'withdrawal') AS withdrawn, \
     (SELECT s.successor FROM ward.proposal_records s \
      WHERE s.proposal_id = p.id AND s.kind = 'supersession') AS superseded_by";

type Row = (
    Uuid,
    i64,
    Uuid,
    Uuid,
    Option<Uuid>,
    String,
    String,
    Uuid,
    OffsetDateTime,
    i64,
    bool,
    Option<Uuid>,
);

fn proposal(r: Row) -> ProposalRecord {
    let (
        id,
        seq,
        group_id,
        consent_id,
        revises,
        run_id,
        occurrence,
        initiated_by,
        created_at,
        records,
        withdrawn,
        superseded_by,
    ) = r;
    ProposalRecord {
        id,
        seq,
        group_id,
        consent_id,
        revises,
        run_id,
        occurrence,
        initiated_by,
        created_at,
        records,
        withdrawn,
        superseded_by,
    }
}

impl ProposalRecord {
    /// Withdrawn or superseded: nothing more can close it.
    pub fn closed(&self) -> bool {
        self.withdrawn || self.superseded_by.is_some()
    }
}

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

const RECORD_COLUMNS: &str = "r.id, r.proposal_id, r.seq, r.kind, r.actor, r.source, \
     r.recorded_at, r.body, r.attempt_id, r.receipt_id, r.successor, r.judged, r.rule";

#[derive(sqlx::FromRow)]
struct RecordRow {
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

fn corrupt(id: Uuid, what: &str) -> WardError {
    WardError::Database(sqlx::Error::Decode(
        format!("unreadable {what} in ward.proposal_records {id}").into(),
    ))
}

impl RecordRow {
    fn record(self) -> Result<HistoryRecord> {
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
struct Fields<'a> {
    text: Option<&'a str>,
    attempt_id: Option<&'a str>,
    receipt_id: Option<&'a str>,
    successor: Option<Uuid>,
    judged: Option<ConsentState>,
    rule: Option<&'a str>,
    /// Given only for a judgment; otherwise derived from the actor's kind.
    source: Option<Source>,
}

/// Append one record to `proposal` in one statement: the counter bump (row lock) and the insert
/// with the new number. The source is the actor's kind (human or service) unless given.
async fn append(
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

async fn read(conn: &mut PgConnection, id: Uuid, lock: bool) -> Result<Option<ProposalRecord>> {
    let lock = if lock { " FOR UPDATE OF p" } else { "" };
    Ok(sqlx::query_as::<_, Row>(&format!(
        "SELECT {COLUMNS} FROM ward.proposals p WHERE p.id = $1{lock}"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .map(proposal))
}

/// What `CreateProposal` asks for.
pub struct NewProposal<'a> {
    pub consent_id: Uuid,
    pub group_id: Option<Uuid>,
    pub revises: Option<Uuid>,
    pub occurrence: &'a str,
}

/// Record a proposal bound to consent `n.consent_id`, which `by` must have proposed. A revision
/// joins the group of the proposal it revises, which must exist (so links stay acyclic). A
/// consent already settled (e.g. granted by a standing rule) gets its judgment as record 1.
pub async fn create(pool: &PgPool, n: &NewProposal<'_>, by: Uuid) -> Result<ProposalRecord> {
    let mut tx = super::begin(pool).await?;
    consents::expire_due(&mut tx).await?;
    // The consent first (the lock order of a verdict): a verdict racing this creation either
    // commits before (and is recorded below) or waits and is recorded by its trigger.
    let consent = consents::lock(&mut tx, n.consent_id)
        .await?
        .ok_or(WardError::NotFound(Entity::Consent))?;
    if consent.requested_by != by {
        return Err(WardError::NotProposer);
    }
    let group = match n.revises {
        None => n.group_id.unwrap_or_else(Uuid::new_v4),
        Some(parent) => {
            let parent = read(&mut tx, parent, false)
                .await?
                .ok_or_else(|| WardError::invalid("revises", "names no proposal"))?;
            match n.group_id {
                Some(g) if g != parent.group_id => {
                    return Err(WardError::invalid(
                        "group_id",
                        "is not the group of the proposal revised",
                    ));
                }
                _ => parent.group_id,
            }
        }
    };
    let id = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO ward.proposals (id, group_id, consent_id, revises, run_id, occurrence,
             initiated_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(id)
    .bind(group)
    .bind(n.consent_id)
    .bind(n.revises)
    .bind(&consent.run_id)
    .bind(n.occurrence)
    .bind(by)
    .execute(&mut *tx)
    .await?;
    if consent.state != ConsentState::Pending {
        let source = match (&consent.granted_by_rule, consent.decided_by) {
            (Some(_), _) => Some(Source::StandingPolicy),
            (None, None) => Some(Source::Service),
            (None, Some(_)) => None,
        };
        append(
            &mut tx,
            id,
            RecordKind::Judgment,
            consent.decided_by,
            Fields {
                judged: Some(consent.state),
                rule: consent
                    .granted_by_rule
                    .as_ref()
                    .map(|(slug, _)| slug.as_str()),
                source,
                ..Fields::default()
            },
        )
        .await?;
    }
    let created = read(&mut tx, id, false)
        .await?
        .ok_or(WardError::NotFound(Entity::Proposal))?;
    tx.commit().await?;
    Ok(created)
}

/// Who may act on a proposal: the effect owner of its consent and its initiating principal.
pub async fn parties(pool: &PgPool, id: Uuid) -> Result<Option<(String, Uuid)>> {
    Ok(sqlx::query_as(
        "SELECT c.effect_owner, p.initiated_by
         FROM ward.proposals p JOIN ward.consents c ON c.id = p.consent_id WHERE p.id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?)
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

/// How a proposal is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    Withdraw,
    /// Superseded by this proposal of the same group (open, not the predecessor).
    Supersede(Uuid),
}

/// Close proposal `id` by `by` (its initiator), in one transaction: first its consent's
/// remaining eligibility (pending → `cancelled`, granted and unconsumed → revoked, by the
/// consent's own guarded changes; a consumed approval refuses the close), then the
/// withdrawal or supersession record. The proposal and its consent as they stand afterwards.
pub async fn close(
    pool: &PgPool,
    id: Uuid,
    how: Closing,
    by: Uuid,
) -> Result<(ProposalRecord, ConsentRecord)> {
    let mut tx = super::begin(pool).await?;
    consents::expire_due(&mut tx).await?;
    let found = read(&mut tx, id, false)
        .await?
        .ok_or(WardError::NotFound(Entity::Proposal))?;
    // The consent, then the proposal (the lock order of a verdict).
    let consent = consents::lock(&mut tx, found.consent_id)
        .await?
        .ok_or(WardError::NotFound(Entity::Consent))?;
    let p = read(&mut tx, id, true)
        .await?
        .ok_or(WardError::NotFound(Entity::Proposal))?;
    if p.initiated_by != by {
        return Err(WardError::NotProposer);
    }
    if p.closed() {
        return Err(WardError::ProposalClosed);
    }
    if let Closing::Supersede(successor) = how {
        let s = read(&mut tx, successor, false)
            .await?
            .ok_or_else(|| WardError::invalid("successor_id", "names no proposal"))?;
        if s.group_id != p.group_id {
            return Err(WardError::invalid(
                "successor_id",
                "is not in the predecessor's group",
            ));
        }
        if s.closed() {
            return Err(WardError::ProposalClosed);
        }
    }
    let step = closing(
        consent.state,
        consent.consumed_at.is_some(),
        consent.revoked_at.is_some(),
    )
    .map_err(|CloseRefusal::Consumed| WardError::Consent(ConsentRefusal::Consumed))?;
    // The consent row is locked: the guarded change cannot lose a race here; it still says
    // so if it ever changes nothing.
    let consent = match step {
        Close::Cancel => consents::cancel_pending(&mut tx, consent.id, by).await?,
        Close::Revoke => consents::revoke_unconsumed(&mut tx, consent.id, by).await?,
        Close::Nothing => Some(consent),
    }
    .ok_or(WardError::Consent(ConsentRefusal::NotGranted))?;
    let (kind, successor) = match how {
        Closing::Withdraw => (RecordKind::Withdrawal, None),
        Closing::Supersede(s) => (RecordKind::Supersession, Some(s)),
    };
    append(
        &mut tx,
        id,
        kind,
        Some(by),
        Fields {
            successor,
            ..Fields::default()
        },
    )
    .await?;
    let closed = read(&mut tx, id, false)
        .await?
        .ok_or(WardError::NotFound(Entity::Proposal))?;
    tx.commit().await?;
    Ok((closed, consent))
}

/// One proposal, `None` when no proposal has the id.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<ProposalRecord>> {
    let mut conn = pool.acquire().await?;
    consents::expire_due(&mut conn).await?;
    read(&mut conn, id, false).await
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

/// Proposals of group `group` in creation order (a revision after the proposal it revises),
/// `size` a page, after the proposal with sequence number `after`.
pub async fn list(
    pool: &PgPool,
    group: Uuid,
    size: u32,
    after: Option<i64>,
) -> Result<Page<ProposalRecord>> {
    let mut conn = pool.acquire().await?;
    consents::expire_due(&mut conn).await?;
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM ward.proposals p
         WHERE p.group_id = $1 AND p.seq > COALESCE($2, 0)
         ORDER BY p.seq LIMIT $3"
    ))
    .bind(group)
    .bind(after)
    .bind(i64::from(size) + 1)
    .fetch_all(&mut *conn)
    .await?;
    Ok(paginate(
        rows.into_iter().map(proposal).collect(),
        size,
        |p| paging::seq_token(List::Proposals, p.seq),
    ))
}
