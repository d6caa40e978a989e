//! A proposal's life: created bound to its consent, closed by withdrawal or supersession (with
//! its consent's remaining eligibility), read and listed.
//!
//! Invariant: lock order, the consent first, then the proposal.

use sqlx::postgres::PgPool;
use uuid::Uuid;

use super::history::*;
use super::row::*;
use crate::domain::consent::{ConsentRefusal, ConsentState};
use crate::domain::paging::{self, List};
use crate::domain::proposal::{Close, CloseRefusal, RecordKind, Source, closing};
use crate::error::reasons::PROPOSAL_ID_MALFORMED;
use crate::error::{Entity, Result, WardError};
use crate::store::consents::{self, ConsentRecord};
use crate::store::{Page, paginate};

/// Record a proposal bound to consent `n.consent_id`, which `by` must have proposed. A revision
/// joins the group of the proposal it revises, which must exist (so links stay acyclic). A
/// consent already settled (e.g. granted by a standing rule) gets its judgment as record 1.
pub async fn create(pool: &PgPool, n: &NewProposal<'_>, by: Uuid) -> Result<ProposalRecord> {
    // The expiry sweep runs on its own, before this transaction (never inside it: its row
    // locks would be held for this request's whole transaction).
    consents::expire_due(&mut *pool.acquire().await?).await?;
    let mut tx = crate::store::begin(pool).await?;
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
            let parent = read(&mut tx, parent, Lock::None).await?.ok_or_else(|| {
                crate::store::invalid("revises", PROPOSAL_ID_MALFORMED, "names no proposal")
            })?;
            match n.group_id {
                Some(g) if g != parent.group_id => {
                    return Err(crate::store::invalid(
                        "group_id",
                        PROPOSAL_ID_MALFORMED,
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
    let created = read(&mut tx, id, Lock::None)
        .await?
        .ok_or(WardError::NotFound(Entity::Proposal))?;
    lychd_runtime::refusal::commit(tx).await?;
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
    // The expiry sweep runs on its own, before this transaction (never inside it: its row
    // locks would be held for this request's whole transaction).
    consents::expire_due(&mut *pool.acquire().await?).await?;
    let mut tx = crate::store::begin(pool).await?;
    let found = read(&mut tx, id, Lock::None)
        .await?
        .ok_or(WardError::NotFound(Entity::Proposal))?;
    // The consent, then the proposal (the lock order of a verdict).
    let consent = consents::lock(&mut tx, found.consent_id)
        .await?
        .ok_or(WardError::NotFound(Entity::Consent))?;
    let p = read(&mut tx, id, Lock::Update)
        .await?
        .ok_or(WardError::NotFound(Entity::Proposal))?;
    if p.initiated_by != by {
        return Err(WardError::NotProposer);
    }
    if p.closed() {
        return Err(WardError::ProposalClosed);
    }
    if let Closing::Supersede(successor) = how {
        // The successor is locked `FOR SHARE` before it is admitted: a withdrawal or
        // supersession of it (which locks it `FOR UPDATE`) either committed before — and is
        // seen by the read after the lock, a new snapshot — or waits until this supersession
        // commits. So a predecessor is never superseded by a proposal closed meanwhile.
        read(&mut tx, successor, Lock::Share)
            .await?
            .ok_or_else(|| {
                crate::store::invalid("successor_id", PROPOSAL_ID_MALFORMED, "names no proposal")
            })?;
        let s = read(&mut tx, successor, Lock::None).await?.ok_or_else(|| {
            crate::store::invalid("successor_id", PROPOSAL_ID_MALFORMED, "names no proposal")
        })?;
        if s.group_id != p.group_id {
            return Err(crate::store::invalid(
                "successor_id",
                PROPOSAL_ID_MALFORMED,
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
    let closed = read(&mut tx, id, Lock::None)
        .await?
        .ok_or(WardError::NotFound(Entity::Proposal))?;
    lychd_runtime::refusal::commit(tx).await?;
    Ok((closed, consent))
}

/// One proposal, `None` when no proposal has the id.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<ProposalRecord>> {
    let mut conn = pool.acquire().await?;
    consents::expire_due(&mut conn).await?;
    read(&mut conn, id, Lock::None).await
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
