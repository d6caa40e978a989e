//! Consents: one row per exact proposed call (`ward.consents`).
//!
//! Every change is one guarded statement, so concurrency needs no lock of ours: the first
//! verdict wins (`… WHERE state = 'pending'`: a concurrent writer of the same row waits, then
//! finds it settled and changes nothing), an approval is consumed once (`… consumed_at IS NULL`),
//! and expiry is decided by the database clock. Pending consents past their TTL are settled as
//! `expired` (decided at the instant they expired) by [`expire_due`] before any consent is read
//! or changed, so nobody ever sees a pending consent whose time has passed.

use sqlx::postgres::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{Page, paginate};
use crate::domain::consent::{
    Binding, ConsentRefusal, ConsentState, ConsumeFacts, EffectClass, Proposal, Verdict, consumable,
};
use crate::domain::paging::{self, List};
use crate::domain::preauth::Rule;
use crate::error::{Entity, Result, WardError};

/// A consent as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsentRecord {
    pub id: Uuid,
    pub seq: i64,
    pub run_id: String,
    pub effect_owner: String,
    pub effect_id: String,
    pub effect_revision: i64,
    pub tool_name: String,
    pub deferred_call_id: String,
    /// Canonical-order JSON text of the censored arguments.
    pub censored_arguments: String,
    pub arguments_digest: String,
    pub class: EffectClass,
    pub binding: Binding,
    pub binding_digest: String,
    pub requested_by: Uuid,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub state: ConsentState,
    pub decided_at: Option<OffsetDateTime>,
    pub decided_by: Option<Uuid>,
    pub consumed_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
    /// The standing rule that granted it, and the digest of its policy then.
    pub granted_by_rule: Option<(String, String)>,
}

const COLUMNS: &str = "c.id, c.seq, c.run_id, c.effect_owner, c.effect_id, c.effect_revision, \
     c.tool_name, c.deferred_call_id, c.censored_arguments, c.arguments_digest, \
     c.effect_class, c.binding::text, c.binding_digest, c.requested_by, c.created_at, c.expires_at, \
     c.state, c.decided_at, c.decided_by, c.consumed_at, c.revoked_at, c.granted_by_rule, \
     c.rule_policy_digest";

#[derive(sqlx::FromRow)]
struct Row {
    id: Uuid,
    seq: i64,
    run_id: String,
    effect_owner: String,
    effect_id: String,
    effect_revision: i64,
    tool_name: String,
    deferred_call_id: String,
    censored_arguments: String,
    arguments_digest: String,
    effect_class: String,
    binding: String,
    binding_digest: String,
    requested_by: Uuid,
    created_at: OffsetDateTime,
    expires_at: OffsetDateTime,
    state: String,
    decided_at: Option<OffsetDateTime>,
    decided_by: Option<Uuid>,
    consumed_at: Option<OffsetDateTime>,
    revoked_at: Option<OffsetDateTime>,
    granted_by_rule: Option<String>,
    rule_policy_digest: Option<String>,
}

fn corrupt(id: Uuid, what: &str) -> WardError {
    WardError::Database(sqlx::Error::Decode(
        format!("unreadable {what} in ward.consents {id}").into(),
    ))
}

impl Row {
    fn record(self) -> Result<ConsentRecord> {
        let id = self.id;
        let bound: serde_json::Value =
            serde_json::from_str(&self.binding).map_err(|_| corrupt(id, "binding"))?;
        let text = |k: &str| bound.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        let binding = Binding {
            workflow_version: text("workflow_version"),
            action_hash: text("action_hash"),
            artifact_hash: text("artifact_hash"),
            destination_hash: text("destination_hash"),
            visibility: text("visibility"),
            scope: text("scope"),
            actor: text("actor"),
            expiry: bound.get("expiry").and_then(|v| v.as_i64()),
            nonce: text("nonce"),
            rationale: text("rationale"),
        };
        Ok(ConsentRecord {
            id,
            seq: self.seq,
            run_id: self.run_id,
            effect_owner: self.effect_owner,
            effect_id: self.effect_id,
            effect_revision: self.effect_revision,
            tool_name: self.tool_name,
            deferred_call_id: self.deferred_call_id,
            censored_arguments: self.censored_arguments,
            arguments_digest: self.arguments_digest,
            class: EffectClass::parse(&self.effect_class)
                .ok_or_else(|| corrupt(id, "effect class"))?,
            binding,
            binding_digest: self.binding_digest,
            requested_by: self.requested_by,
            created_at: self.created_at,
            expires_at: self.expires_at,
            state: ConsentState::parse(&self.state).ok_or_else(|| corrupt(id, "state"))?,
            decided_at: self.decided_at,
            decided_by: self.decided_by,
            consumed_at: self.consumed_at,
            revoked_at: self.revoked_at,
            granted_by_rule: self.granted_by_rule.zip(self.rule_policy_digest),
        })
    }
}

/// The bound fields as stored (`jsonb`): the canonical JSON of the domain's value.
fn binding_json(b: &Binding) -> String {
    lychd_helmloop::to_canonical_string(&b.to_value()).unwrap_or_else(|_| {
        unreachable!("invariant: bound fields are plain strings and an integer")
    })
}

/// Settle every pending consent past its TTL as `expired`, decided at the instant it expired.
pub async fn expire_due(conn: &mut sqlx::PgConnection) -> Result<u64> {
    Ok(sqlx::query(
        "UPDATE ward.consents SET state = 'expired', decided_at = expires_at
         WHERE state = 'pending' AND expires_at <= statement_timestamp()",
    )
    .execute(&mut *conn)
    .await?
    .rows_affected())
}

/// What a proposal stores besides the proposal itself.
pub struct Derived<'a> {
    pub censored_arguments: &'a str,
    pub arguments_digest: &'a str,
    pub binding_digest: &'a str,
    pub ttl_seconds: i64,
}

/// Record `p` (by `requested_by`, named `principal_name`) as a consent in ONE statement: granted
/// by the first of `rules` (in order) that matches it and still has a use — the use consumed by
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
    principal_name: &str,
    d: &Derived<'_>,
    rules: &[Rule],
) -> Result<(ConsentRecord, bool)> {
    let (slugs, digests): (Vec<&str>, Vec<String>) = if p.class.live_only() {
        (Vec::new(), Vec::new())
    } else {
        rules
            .iter()
            .filter(|r| r.matches(p, principal_name))
            .map(|r| (r.slug.as_str(), r.policy_digest()))
            .unzip()
    };
    let binding = binding_json(&p.binding);
    for _ in 0..3 {
        let answer: std::result::Result<Option<Proposed>, sqlx::Error> = sqlx::query_as(&format!(
            "WITH existing AS (
                     SELECT {COLUMNS} FROM ward.consents c
                     WHERE c.run_id = $2 AND c.deferred_call_id = $7 AND c.binding_digest = $12),
                 pick AS (
                     SELECT k.slug FROM unnest($15::text[], $16::text[]) WITH ORDINALITY
                         AS k(slug, digest, ord)
                     JOIN ward.preauth_rules r ON r.slug = k.slug
                     WHERE r.policy_digest = k.digest AND r.in_files AND r.disabled_at IS NULL
                       AND (r.expires_at IS NULL OR r.expires_at > statement_timestamp())
                       AND (r.max_uses IS NULL OR r.uses < r.max_uses)
                     ORDER BY k.ord LIMIT 1),
                 counted AS (
                     UPDATE ward.preauth_rules r SET uses = r.uses + 1
                     FROM pick
                     WHERE r.slug = pick.slug AND NOT EXISTS (SELECT 1 FROM existing)
                       AND r.max_uses IS NOT NULL AND r.uses < r.max_uses
                     RETURNING r.slug, r.policy_digest),
                 used AS (
                     SELECT slug, policy_digest FROM counted
                     UNION ALL
                     SELECT r.slug, r.policy_digest FROM pick
                     JOIN ward.preauth_rules r ON r.slug = pick.slug
                     WHERE r.max_uses IS NULL AND NOT EXISTS (SELECT 1 FROM existing)),
                 ins AS (
                     INSERT INTO ward.consents AS c (id, run_id, effect_owner, effect_id,
                         effect_revision, tool_name, deferred_call_id, censored_arguments,
                         arguments_digest, effect_class, binding, binding_digest, requested_by,
                         expires_at, state, decided_at, granted_by_rule, rule_policy_digest)
                     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13,
                         statement_timestamp() + make_interval(secs => $14),
                         CASE WHEN u.slug IS NULL THEN 'pending' ELSE 'granted' END,
                         CASE WHEN u.slug IS NULL THEN NULL ELSE statement_timestamp() END,
                         u.slug, u.policy_digest
                     FROM (SELECT 1) AS one LEFT JOIN used u ON true
                     WHERE NOT EXISTS (SELECT 1 FROM existing)
                     RETURNING {COLUMNS})
                 SELECT *, false AS created FROM existing
                 UNION ALL
                 SELECT *, true AS created FROM ins"
        ))
        .bind(Uuid::new_v4())
        .bind(&p.run_id)
        .bind(&p.effect_owner)
        .bind(&p.effect_id)
        .bind(p.effect_revision)
        .bind(&p.tool_name)
        .bind(&p.deferred_call_id)
        .bind(d.censored_arguments)
        .bind(d.arguments_digest)
        .bind(p.class.as_str())
        .bind(&binding)
        .bind(d.binding_digest)
        .bind(requested_by)
        .bind(d.ttl_seconds as f64)
        .bind(&slugs)
        .bind(&digests)
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
struct Proposed {
    #[sqlx(flatten)]
    row: Row,
    created: bool,
}

/// One consent, `None` when no consent has the id.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<ConsentRecord>> {
    let mut conn = pool.acquire().await?;
    expire_due(&mut conn).await?;
    read(&mut conn, id).await
}

pub(crate) async fn read(conn: &mut sqlx::PgConnection, id: Uuid) -> Result<Option<ConsentRecord>> {
    sqlx::query_as::<_, Row>(&format!(
        "SELECT {COLUMNS} FROM ward.consents c WHERE c.id = $1"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .map(Row::record)
    .transpose()
}

/// Settle `id` with `verdict` by `by`, if it is pending and `review_digest` is its binding
/// digest. The consent as it stands afterwards, and whether this call settled it.
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
    unsettled(&mut conn, id).await
}

/// The guarded update of [`decide`]: the consent as settled by this statement, `None` when it
/// settled nothing (already settled, expired, or another digest reviewed).
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
         RETURNING {COLUMNS}"
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

/// What a verdict that settled nothing answers: the settled consent (`false`), or
/// `REVIEW_DIGEST_MISMATCH` when it is still pending.
pub(crate) async fn unsettled(
    conn: &mut sqlx::PgConnection,
    id: Uuid,
) -> Result<(ConsentRecord, bool)> {
    // Not settled by this call: already settled, expired meanwhile, or another call reviewed.
    expire_due(&mut *conn).await?;
    let current = read(&mut *conn, id)
        .await?
        .ok_or(WardError::NotFound(Entity::Consent))?;
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

/// Insert a pending consent for `p` (no standing rule is tried: for live-only proposals made
/// inside a caller's transaction). `None` when an identical consent exists.
pub(crate) async fn insert_pending(
    conn: &mut sqlx::PgConnection,
    p: &Proposal,
    requested_by: Uuid,
    d: &Derived<'_>,
) -> Result<Option<ConsentRecord>> {
    sqlx::query_as::<_, Row>(&format!(
        "INSERT INTO ward.consents AS c (id, run_id, effect_owner, effect_id, effect_revision,
             tool_name, deferred_call_id, censored_arguments, arguments_digest, effect_class,
             binding, binding_digest, requested_by, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13,
             statement_timestamp() + make_interval(secs => $14))
         ON CONFLICT ON CONSTRAINT consents_identity DO NOTHING
         RETURNING {COLUMNS}"
    ))
    .bind(Uuid::new_v4())
    .bind(&p.run_id)
    .bind(&p.effect_owner)
    .bind(&p.effect_id)
    .bind(p.effect_revision)
    .bind(&p.tool_name)
    .bind(&p.deferred_call_id)
    .bind(d.censored_arguments)
    .bind(d.arguments_digest)
    .bind(p.class.as_str())
    .bind(binding_json(&p.binding))
    .bind(d.binding_digest)
    .bind(requested_by)
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

/// A consent granted by a standing rule is honoured only while that rule is still in the
/// files, not disabled, unexpired by database time and the same policy (digest-equal); a human
/// verdict does not depend on any rule.
const RULE_STILL_VALID: &str = "(c.granted_by_rule IS NULL OR EXISTS (
    SELECT 1 FROM ward.preauth_rules p
    WHERE p.slug = c.granted_by_rule AND p.policy_digest = c.rule_policy_digest AND p.in_files
      AND p.disabled_at IS NULL
      AND (p.expires_at IS NULL OR p.expires_at > statement_timestamp())))";

/// Consume the approval `id` once, by `by`, for the call whose binding digest is `digest`.
pub async fn consume(pool: &PgPool, id: Uuid, digest: &str, by: Uuid) -> Result<ConsentRecord> {
    let mut conn = pool.acquire().await?;
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
        .await?;
        if let Some(row) = consumed {
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

/// Consent `id` locked for this transaction (`FOR UPDATE`: no verdict, consumption or
/// revocation of it interleaves until the transaction ends), `None` when unknown.
pub(crate) async fn lock(conn: &mut sqlx::PgConnection, id: Uuid) -> Result<Option<ConsentRecord>> {
    sqlx::query_as::<_, Row>(&format!(
        "SELECT {COLUMNS} FROM ward.consents c WHERE c.id = $1 FOR UPDATE"
    ))
    .bind(id)
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

/// The effect owner of consent `id` (to decide who may act on it), `None` when unknown.
pub async fn owner_of(pool: &PgPool, id: Uuid) -> Result<Option<String>> {
    Ok(
        sqlx::query_scalar("SELECT effect_owner FROM ward.consents WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// Consents newest first, optionally of one run and in one state, `size` a page, after the
/// consent with sequence number `before`.
pub async fn list(
    pool: &PgPool,
    run_id: Option<&str>,
    state: Option<ConsentState>,
    size: u32,
    before: Option<i64>,
) -> Result<Page<ConsentRecord>> {
    let mut conn = pool.acquire().await?;
    expire_due(&mut conn).await?;
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM ward.consents c
         WHERE ($1::text IS NULL OR c.run_id = $1) AND ($2::text IS NULL OR c.state = $2)
           AND ($3::bigint IS NULL OR c.seq < $3)
         ORDER BY c.seq DESC LIMIT $4"
    ))
    .bind(run_id)
    .bind(state.map(ConsentState::as_str))
    .bind(before)
    .bind(i64::from(size) + 1)
    .fetch_all(&mut *conn)
    .await?;
    let records = rows
        .into_iter()
        .map(Row::record)
        .collect::<Result<Vec<_>>>()?;
    Ok(paginate(records, size, |c| {
        paging::seq_token(List::Consents, c.seq)
    }))
}

/// One recorded change of a consent, with the consent as it stands now.
#[derive(Debug, Clone)]
pub struct Change {
    pub seq: i64,
    pub changed_to: ConsentState,
    pub consent: ConsentRecord,
}

#[derive(sqlx::FromRow)]
struct ChangeRow {
    change_seq: i64,
    changed_to: String,
    #[sqlx(flatten)]
    row: Row,
}

/// Up to `limit` changes after `after`, in sequence order (every run: a filter is applied by
/// the reader, after the gap rule, which needs the unfiltered sequence).
pub async fn changes_after(pool: &PgPool, after: i64, limit: i64) -> Result<Vec<Change>> {
    let mut conn = pool.acquire().await?;
    expire_due(&mut conn).await?;
    let rows: Vec<ChangeRow> = sqlx::query_as(&format!(
        "SELECT e.seq AS change_seq, e.state AS changed_to, {COLUMNS}
         FROM ward.consent_changes e JOIN ward.consents c ON c.id = e.consent_id
         WHERE e.seq > $1 ORDER BY e.seq LIMIT $2"
    ))
    .bind(after)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter()
        .map(|r| {
            let id = r.row.id;
            Ok(Change {
                seq: r.change_seq,
                changed_to: ConsentState::parse(&r.changed_to)
                    .ok_or_else(|| corrupt(id, "change state"))?,
                consent: r.row.record()?,
            })
        })
        .collect()
}
