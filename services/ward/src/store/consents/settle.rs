//! Changing a consent: verdicts, consumption, revocation and cancellation, each one guarded
//! statement (the first verdict wins; an approval is consumed once).
//!
//! Invariant: who may settle is part of each statement's guard, not a check before it.

use sqlx::postgres::PgPool;
use uuid::Uuid;

use super::read::*;
use super::record::*;
use crate::domain::consent::{
    self as rules, ConsentRefusal, ConsentState, ConsumeFacts, Verdict, VerdictFacts, consumable,
};
use crate::error::{Entity, Result, WardError};
use lychd_runtime::refusal::ambiguous;

/// Settle `id` with `verdict` by `by`, if it is pending, `review_digest` is its binding
/// digest and `by` may give it a verdict ([`rules::verdict_allowed`]). The consent as it stands
/// afterwards, and whether this call settled it.
pub async fn decide(
    pool: &PgPool,
    id: Uuid,
    verdict: Verdict,
    review_digest: &str,
    by: Uuid,
) -> Result<(ConsentRecord, bool)> {
    let mut conn = pool.acquire().await?;
    expire_due(&mut conn).await?;
    if let Some(record) = settle(&mut conn, id, verdict, review_digest, by).await? {
        return Ok((record, true));
    }
    unsettled(&mut conn, id, by).await
}

/// The guarded update of [`decide`]: the consent as settled by this statement, `None` when it
/// settled nothing (already settled, expired, another digest reviewed, or a decider who may
/// not settle it). Who may decide is part of the guard, not a check before it: the decider is
/// never the requester, and a live-only class is settled by a human only (the principal's kind
/// and the consent's requester and class never change, so nothing can race past it).
pub(crate) async fn settle(
    conn: &mut sqlx::PgConnection,
    id: Uuid,
    verdict: Verdict,
    review_digest: &str,
    by: Uuid,
) -> Result<Option<ConsentRecord>> {
    sqlx::query_as::<_, Row>(&format!(
        "UPDATE ward.consents c
         SET state = $2, decided_at = statement_timestamp(), decided_by = $3
         WHERE c.id = $1 AND c.state = 'pending' AND c.binding_digest = $4
           AND c.expires_at > statement_timestamp()
           AND c.requested_by <> $3
           AND (c.effect_class IN ({any})
                OR EXISTS (SELECT 1 FROM ward.principals d WHERE d.id = $3 AND d.kind = 'human'))
         RETURNING {COLUMNS}",
        any = classes_settled_by_any(),
    ))
    .bind(id)
    .bind(verdict.state().as_str())
    .bind(by)
    .bind(review_digest)
    .fetch_optional(&mut *conn)
    .await?
    .map(Row::record)
    .transpose()
}

/// What a verdict by `by` that settled nothing answers: `SELF_APPROVAL` or
/// `LIVE_VERDICT_REQUIRED` when `by` may not give it a verdict at all (settled or not: nothing
/// is changed or revealed by a refused decider's call), else the settled consent (`false`), or
/// `REVIEW_DIGEST_MISMATCH` when it is still pending.
pub(crate) async fn unsettled(
    conn: &mut sqlx::PgConnection,
    id: Uuid,
    by: Uuid,
) -> Result<(ConsentRecord, bool)> {
    // Not settled by this call: already settled, expired meanwhile, another call reviewed, or
    // a decider who may not.
    expire_due(&mut *conn).await?;
    let current = read(&mut *conn, id)
        .await?
        .ok_or(WardError::NotFound(Entity::Consent))?;
    let human: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM ward.principals WHERE id = $1 AND kind = 'human')",
    )
    .bind(by)
    .fetch_one(&mut *conn)
    .await?;
    rules::verdict_allowed(VerdictFacts {
        decider_is_requester: current.requested_by == by,
        decider_is_human: human,
        class: current.class,
    })
    .map_err(WardError::Consent)?;
    if current.state == ConsentState::Pending {
        return Err(WardError::Consent(ConsentRefusal::ReviewDigestMismatch));
    }
    Ok((current, false))
}

/// Mark a granted consent consumed by `by` at its decision instant (a promotion's approval is
/// consumed by the issuance it causes, in the same transaction).
pub(crate) async fn consume_at_decision(
    conn: &mut sqlx::PgConnection,
    id: Uuid,
    by: Uuid,
) -> Result<ConsentRecord> {
    sqlx::query_as::<_, Row>(&format!(
        "UPDATE ward.consents c SET consumed_at = c.decided_at, consumed_by = $2
         WHERE c.id = $1 AND c.state = 'granted' AND c.consumed_at IS NULL
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(by)
    .fetch_one(&mut *conn)
    .await?
    .record()
}

/// Consume the approval `id` once, by `by`, for the call whose binding digest is `digest`.
///
/// Idempotent for its consumer: when `by` consumed it already with this `digest`, the consumed
/// consent is answered again, so a consumption whose answer was lost (the update is one
/// self-committing statement: a connection lost after it was sent is `OUTCOME_UNKNOWN`) is
/// retried safely. Any other principal, or another digest, is refused `CONSENT_CONSUMED`.
pub async fn consume(pool: &PgPool, id: Uuid, digest: &str, by: Uuid) -> Result<ConsentRecord> {
    let mut conn = pool.acquire().await?;
    verify_binding(&mut conn, id).await?;
    // A consent granted between the guarded update and the read of its facts is consumable on
    // the next attempt; every other outcome is final after one.
    for _ in 0..3 {
        let consumed = sqlx::query_as::<_, Row>(&format!(
            "UPDATE ward.consents c
             SET consumed_at = statement_timestamp(), consumed_by = $3
             FROM ward.principals r
             WHERE c.id = $1 AND r.id = c.requested_by
               AND c.state = 'granted' AND c.consumed_at IS NULL AND c.revoked_at IS NULL
               AND c.binding_digest = $2
               AND (c.binding->'expiry' IS NULL
                    OR to_timestamp((c.binding->>'expiry')::bigint) > statement_timestamp())
               AND r.revoked_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM ward.principals d
                               WHERE d.id = c.decided_by AND d.revoked_at IS NOT NULL)
               AND {RULE_STILL_VALID}
             RETURNING {COLUMNS}"
        ))
        .bind(id)
        .bind(digest)
        .bind(by)
        .fetch_optional(&mut *conn)
        .await
        .map_err(ambiguous)?;
        if let Some(row) = consumed {
            return row.record();
        }
        // Consumed by this consumer for this very call already: the same success again.
        let again = sqlx::query_as::<_, Row>(&format!(
            "SELECT {COLUMNS} FROM ward.consents c
             WHERE c.id = $1 AND c.consumed_by = $3 AND c.binding_digest = $2
               AND c.consumed_at IS NOT NULL"
        ))
        .bind(id)
        .bind(digest)
        .bind(by)
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(row) = again {
            return row.record();
        }
        // Why not: the facts in one snapshot, judged by the domain's rule.
        type Facts = (String, bool, bool, bool, bool, bool, bool);
        let facts: Option<Facts> = sqlx::query_as(&format!(
            "SELECT c.state, c.consumed_at IS NOT NULL, c.revoked_at IS NOT NULL,
                    COALESCE(to_timestamp((c.binding->>'expiry')::bigint)
                             <= statement_timestamp(), false),
                    r.revoked_at IS NOT NULL OR COALESCE(d.revoked_at IS NOT NULL, false),
                    c.binding_digest = $2,
                    NOT {RULE_STILL_VALID}
             FROM ward.consents c
             JOIN ward.principals r ON r.id = c.requested_by
             LEFT JOIN ward.principals d ON d.id = c.decided_by
             WHERE c.id = $1"
        ))
        .bind(id)
        .bind(digest)
        .fetch_optional(&mut *conn)
        .await?;
        let Some((
            state,
            consumed,
            revoked,
            binding_expired,
            principal_revoked,
            digest_equal,
            rule_invalid,
        )) = facts
        else {
            return Err(WardError::NotFound(Entity::Consent));
        };
        let state = ConsentState::parse(&state).ok_or_else(|| corrupt(id, "state"))?;
        consumable(ConsumeFacts {
            state,
            consumed,
            revoked,
            binding_expired,
            principal_revoked,
            digest_equal,
            rule_invalid,
        })
        .map_err(WardError::Consent)?;
    }
    Err(WardError::Consent(ConsentRefusal::Consumed))
}

/// The stored binding of consent `id` (every [`BoundField`], read from its columns) must still
/// digest to the stored binding digest: the comparison at consumption covers every bound field
/// the one definition names, not only the digest column. The binding columns never change (a
/// trigger), so this read cannot race the guarded update that follows. A row whose columns do
/// not match its digest is refused as another call (`CONSENT_BINDING_MISMATCH`) and logged.
pub(crate) async fn verify_binding(conn: &mut sqlx::PgConnection, id: Uuid) -> Result<()> {
    let stored: Option<(String, String)> = sqlx::query_as(&format!(
        "SELECT {}, c.binding_digest FROM ward.consents c WHERE c.id = $1",
        stored_document()
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let (document, digest) = stored.ok_or(WardError::NotFound(Entity::Consent))?;
    let intact = lychd_helmloop::parse(document.as_bytes())
        .is_ok_and(|d| rules::document_matches(&d, &digest));
    if !intact {
        tracing::error!(consent = %id, "stored binding does not digest to its binding digest");
        return Err(WardError::Consent(ConsentRefusal::BindingMismatch));
    }
    Ok(())
}

/// Revoke the granted, unconsumed approval `id` (idempotent: an already revoked one is
/// returned as it is).
pub async fn revoke(pool: &PgPool, id: Uuid, by: Uuid) -> Result<ConsentRecord> {
    let mut conn = pool.acquire().await?;
    if let Some(revoked) = revoke_unconsumed(&mut conn, id, by).await? {
        return Ok(revoked);
    }
    let current = read(&mut conn, id)
        .await?
        .ok_or(WardError::NotFound(Entity::Consent))?;
    match current {
        c if c.revoked_at.is_some() => Ok(c),
        c if c.consumed_at.is_some() => Err(WardError::Consent(ConsentRefusal::Consumed)),
        _ => Err(WardError::Consent(ConsentRefusal::NotGranted)),
    }
}

/// The guarded revocation: revoke `id` by `by` if it is granted, unconsumed and not revoked
/// (the consent as revoked), else change nothing (`None`).
pub(crate) async fn revoke_unconsumed(
    conn: &mut sqlx::PgConnection,
    id: Uuid,
    by: Uuid,
) -> Result<Option<ConsentRecord>> {
    sqlx::query_as::<_, Row>(&format!(
        "UPDATE ward.consents c SET revoked_at = statement_timestamp(), revoked_by = $2
         WHERE c.id = $1 AND c.state = 'granted' AND c.consumed_at IS NULL
           AND c.revoked_at IS NULL
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(by)
    .fetch_optional(&mut *conn)
    .await?
    .map(Row::record)
    .transpose()
}

/// The guarded cancellation of one consent (as [`cancel_for_run`] does for a run's): settle
/// `id` as `cancelled` by `by` if it is still pending and unexpired, else change nothing
/// (`None`).
pub(crate) async fn cancel_pending(
    conn: &mut sqlx::PgConnection,
    id: Uuid,
    by: Uuid,
) -> Result<Option<ConsentRecord>> {
    sqlx::query_as::<_, Row>(&format!(
        "UPDATE ward.consents c
         SET state = 'cancelled', decided_at = statement_timestamp(), decided_by = $2
         WHERE c.id = $1 AND c.state = 'pending' AND c.expires_at > statement_timestamp()
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(by)
    .fetch_optional(&mut *conn)
    .await?
    .map(Row::record)
    .transpose()
}

/// Settle every pending consent of `run_id` as `cancelled` by `by`; how many.
pub async fn cancel_for_run(pool: &PgPool, run_id: &str, by: Uuid) -> Result<u64> {
    let mut conn = pool.acquire().await?;
    expire_due(&mut conn).await?;
    Ok(sqlx::query(
        "UPDATE ward.consents
         SET state = 'cancelled', decided_at = statement_timestamp(), decided_by = $2
         WHERE run_id = $1 AND state = 'pending' AND expires_at > statement_timestamp()",
    )
    .bind(run_id)
    .bind(by)
    .execute(&mut *conn)
    .await?
    .rows_affected())
}
