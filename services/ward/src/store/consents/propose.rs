//! Recording a proposal: ONE statement that finds an identical consent or inserts a new one,
//! granted by the first standing rule that still grants or left pending.
//!
//! Invariant: a rule never grants more than its `max_uses`, and a rule being disabled never
//! grants.

use sqlx::postgres::PgPool;
use uuid::Uuid;

use super::read::get;
use super::record::*;
use crate::domain::consent::{ConsentState, Proposal};
use crate::error::{Result, WardError};

/// What a proposal stores besides the proposal itself.
pub struct Derived<'a> {
    pub censored_arguments: &'a str,
    pub arguments_digest: &'a str,
    pub binding_digest: &'a str,
    pub ttl_seconds: i64,
}

/// Record `p` (by `requested_by`) as a consent in ONE statement: granted by the first of the
/// standing rules `slugs` (in order, each at its policy digest in `digests`: the rules that
/// match it, `service::proposals::grant_candidates`) that still grants and has a use — the use consumed by
/// the same statement — else pending. An identical earlier proposal is returned as it stands
/// (`false`) and consumes nothing.
///
/// Concurrency: two statements that pick the same limited rule update its row one after the
/// other; the second re-checks the use limit on the row the first left, so a rule never grants
/// more than `max_uses` (a proposal that lost that race stays pending rather than trying a lower
/// rule). A rule without a limit grants without updating its row (no counter to keep: its uses
/// are the consents it granted), so concurrent grants by one busy rule do not queue on it.
/// A concurrent identical proposal makes the insert fail on `consents_identity`, which undoes the
/// whole statement — the use included — and the next attempt reads the winner's consent.
pub async fn propose(
    pool: &PgPool,
    p: &Proposal,
    requested_by: Uuid,
    d: &Derived<'_>,
    (slugs, digests): (&[&str], &[String]),
) -> Result<(ConsentRecord, bool)> {
    let document = binding_document(p, d.arguments_digest, requested_by);
    for _ in 0..3 {
        // Lock order with `DisablePreauthRule`: the rule that grants is locked in the same
        // statement, `FOR SHARE` (an unlimited rule; concurrent grants share it) or by the
        // guarded use-counting update (a limited rule), and re-checked on its latest version
        // after any wait: a disable committed before the lock is seen and grants nothing, one
        // begun after it waits for this grant to commit. So a rule being disabled never grants.
        let answer: std::result::Result<Option<Proposed>, sqlx::Error> = sqlx::query_as(&format!(
            "WITH existing AS (
                     SELECT {COLUMNS} FROM ward.consents c
                     WHERE c.run_id = $2 AND c.deferred_call_id = $3 AND c.binding_digest = $5),
                 pick AS (
                     SELECT k.slug FROM unnest($8::text[], $9::text[]) WITH ORDINALITY
                         AS k(slug, digest, ord)
                     JOIN ward.preauth_rules r ON r.slug = k.slug
                     WHERE r.policy_digest = k.digest AND {RULE_GRANTS}
                       AND (r.max_uses IS NULL OR r.uses < r.max_uses)
                     ORDER BY k.ord LIMIT 1),
                 counted AS (
                     UPDATE ward.preauth_rules r SET uses = r.uses + 1
                     FROM pick
                     WHERE r.slug = pick.slug AND NOT EXISTS (SELECT 1 FROM existing)
                       AND r.max_uses IS NOT NULL AND r.uses < r.max_uses AND {RULE_GRANTS}
                     RETURNING r.slug, r.policy_digest),
                 shared AS (
                     SELECT r.slug, r.policy_digest FROM ward.preauth_rules r
                     WHERE r.slug IN (SELECT slug FROM pick) AND r.max_uses IS NULL
                       AND {RULE_GRANTS} AND NOT EXISTS (SELECT 1 FROM existing)
                     FOR SHARE OF r),
                 used AS (
                     SELECT slug, policy_digest FROM counted
                     UNION ALL
                     SELECT slug, policy_digest FROM shared),
                 ins AS (
                     INSERT INTO ward.consents AS c (id, {bound}, censored_arguments,
                         binding_digest, expires_at, state, decided_at, granted_by_rule,
                         rule_policy_digest)
                     SELECT $1, {values}, $4, $5,
                         statement_timestamp() + make_interval(secs => $7),
                         CASE WHEN u.slug IS NULL THEN 'pending' ELSE 'granted' END,
                         CASE WHEN u.slug IS NULL THEN NULL ELSE statement_timestamp() END,
                         u.slug, u.policy_digest
                     FROM (SELECT 1) AS one LEFT JOIN used u ON true
                     WHERE NOT EXISTS (SELECT 1 FROM existing)
                     RETURNING {COLUMNS})
                 SELECT *, false AS created FROM existing
                 UNION ALL
                 SELECT *, true AS created FROM ins",
            bound = bound_columns(),
            values = bound_values(6),
        ))
        .bind(Uuid::new_v4())
        .bind(&p.run_id)
        .bind(&p.deferred_call_id)
        .bind(d.censored_arguments)
        .bind(d.binding_digest)
        .bind(&document)
        .bind(d.ttl_seconds as f64)
        .bind(slugs)
        .bind(digests)
        .fetch_optional(pool)
        .await;
        match answer {
            Ok(Some(Proposed { row, created })) => {
                let record = row.record()?;
                // A replay of a pending consent: read again after the expiry sweep, so one
                // whose TTL has passed (by the database clock) is answered expired.
                if !created && record.state == ConsentState::Pending {
                    return Ok((get(pool, record.id).await?.unwrap_or(record), false));
                }
                return Ok((record, created));
            }
            Ok(None) => {}
            Err(e) if lychd_runtime::refusal::is_unique_violation(&e, "consents_identity") => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(WardError::Database(sqlx::Error::Protocol(
        "an identical proposal neither inserted nor found".into(),
    )))
}

#[derive(sqlx::FromRow)]
pub(crate) struct Proposed {
    #[sqlx(flatten)]
    row: Row,
    created: bool,
}

/// Insert a pending consent for `p` (no standing rule is tried: for live-only proposals made
/// inside a caller's transaction). `None` when an identical consent exists.
pub(crate) async fn insert_pending(
    conn: &mut sqlx::PgConnection,
    p: &Proposal,
    requested_by: Uuid,
    d: &Derived<'_>,
) -> Result<Option<ConsentRecord>> {
    sqlx::query_as::<_, Row>(&format!(
        "INSERT INTO ward.consents AS c (id, {bound}, censored_arguments, binding_digest,
             expires_at)
         VALUES ($1, {values}, $3, $4, statement_timestamp() + make_interval(secs => $5))
         ON CONFLICT ON CONSTRAINT consents_identity DO NOTHING
         RETURNING {COLUMNS}",
        bound = bound_columns(),
        values = bound_values(2),
    ))
    .bind(Uuid::new_v4())
    .bind(binding_document(p, d.arguments_digest, requested_by))
    .bind(d.censored_arguments)
    .bind(d.binding_digest)
    .bind(d.ttl_seconds as f64)
    .fetch_optional(&mut *conn)
    .await?
    .map(Row::record)
    .transpose()
}

/// The consent identical to `p` (same run, deferred call id and binding digest), if any.
pub(crate) async fn find_identical(
    conn: &mut sqlx::PgConnection,
    p: &Proposal,
    binding_digest: &str,
) -> Result<Option<ConsentRecord>> {
    sqlx::query_as::<_, Row>(&format!(
        "SELECT {COLUMNS} FROM ward.consents c
         WHERE c.run_id = $1 AND c.deferred_call_id = $2 AND c.binding_digest = $3"
    ))
    .bind(&p.run_id)
    .bind(&p.deferred_call_id)
    .bind(binding_digest)
    .fetch_optional(&mut *conn)
    .await?
    .map(Row::record)
    .transpose()
}
