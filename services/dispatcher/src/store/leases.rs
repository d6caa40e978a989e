//! Durable leases: registration (with its dispatch event and, under a request id, its kept
//! answer), renewal, release, lookup, listing. Expiry is decided by the database clock (`now()`)
//! inside the deciding statement. A lease belongs to the principal that obtained it
//! (`principal_id`): renew, release and reads take the caller as `owner` (`None` only for a
//! caller Ward allowed the administrative action), and another principal's lease is answered as
//! not found.

use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::key::CapabilityKey;
use crate::domain::lease::LeaseState;
use crate::domain::observation::Observed;
use crate::error::{DispatcherError, Result};
use crate::store::observations::REPLACE;

/// A lease to register.
#[derive(Debug, Clone)]
pub struct NewLease<'a> {
    pub id: Uuid,
    pub key: &'a CapabilityKey,
    pub key_text: &'a str,
    pub holder: &'a str,
    pub principal_id: &'a str,
    pub run_id: &'a str,
    pub attempt_id: &'a str,
    pub priority: i16,
    pub ttl_seconds: i32,
    /// The animator's admission generation captured before the probe.
    pub generation: i64,
    /// The fresh observation the grant was decided on (recorded whether or not the lease is).
    pub observed: &'a Observed,
    /// The caller's request id, with the request in canonical form ([`Answer::demand`]).
    pub request: Option<(&'a str, &'a str)>,
}

/// Outcome of a registration.
#[derive(Debug, Clone)]
pub enum Registered {
    Granted {
        issued_at: OffsetDateTime,
        expires_at: OffsetDateTime,
        generation: i64,
        sequence: i64,
    },
    /// Admission closed, or closed and reopened, since the generation was captured: nothing
    /// was written (no lease, no event).
    Raced,
    /// The request id was answered already (by an earlier or a concurrent call): nothing was
    /// written; this is the answer kept.
    Answered(Box<Kept>),
}

/// Record the fresh observation of the leased key, and register the lease and its dispatch
/// event only if the animator's admission is still open at the captured generation.
pub async fn register(pool: &PgPool, l: &NewLease<'_>) -> Result<Registered> {
    // Under a request id, the answer row is the guard: inserted with the lease, ON CONFLICT
    // DO NOTHING — a second call with the same id waits for the first one's row to commit,
    // then inserts neither answer, lease nor event, and reads the first answer back.
    // One statement (READ COMMITTED, autocommit). The observation is written whatever the
    // guard decides (a data-modifying CTE runs whether or not it is read); it locks only its
    // own observations row, which no statement locks together with admission. Lock order for
    // the lease: the animator's admission row FOR SHARE first — CloseAdmission and
    // ReopenAdmission take it FOR UPDATE, so a close either waits for this lease to commit
    // (and its drain then counts it) or commits first, in which case the row is re-checked at
    // its new version, fails the guard, and no lease or event is written. Issue and expiry
    // times come from the database clock.
    let row = sqlx::query(&format!(
        "WITH observed AS (
             INSERT INTO observations (capability_key, animator, phase, reason, observed_at)
             VALUES ($4, $1, $13, $14, now())
             {REPLACE}
         ), adm AS (
             SELECT animator, generation FROM admission
              WHERE animator = $1 AND generation = $2 AND open_closures = 0
                FOR SHARE
         ), claim AS (
             INSERT INTO lease_requests (principal_id, request_id, demand, outcome, lease_id,
                                         capability_key, animator)
             SELECT $8, $15, $16, 'GRANTED', $3, $4, adm.animator
               FROM adm WHERE $15::text IS NOT NULL
             ON CONFLICT (principal_id, request_id) DO NOTHING
             RETURNING lease_id
         ), lease AS (
             INSERT INTO leases (id, capability_key, key_version, family, model_id, animator,
                                 holder, principal_id, run_id, attempt_id, priority,
                                 admission_generation, issued_at, expires_at, request_id)
             SELECT $3, $4, 1, $5, $6, adm.animator, $7, $8, $9, $10, $11, adm.generation,
                    now(), now() + $12::int * interval '1 second', $15
               FROM adm
              WHERE $15::text IS NULL OR EXISTS (SELECT 1 FROM claim)
             RETURNING id, capability_key, animator, holder, run_id, attempt_id, priority,
                       issued_at, expires_at, admission_generation
         ), event AS (
             INSERT INTO dispatch_events (lease_id, capability_key, animator, holder, run_id,
                                          attempt_id, priority, admitted_at)
             SELECT id, capability_key, animator, holder, run_id, attempt_id, priority, issued_at
               FROM lease
             RETURNING sequence
         )
         SELECT lease.issued_at, lease.expires_at, lease.admission_generation, event.sequence
           FROM lease, event"
    ))
    .bind(&l.key.animator)
    .bind(l.generation)
    .bind(l.id)
    .bind(l.key_text)
    .bind(l.key.family.as_str())
    .bind(&l.key.model_id)
    .bind(l.holder)
    .bind(l.principal_id)
    .bind(l.run_id)
    .bind(l.attempt_id)
    .bind(l.priority)
    .bind(l.ttl_seconds)
    .bind(l.observed.phase.as_str())
    .bind(l.observed.reason.as_str())
    .bind(l.request.map(|(id, _)| id))
    .bind(l.request.map(|(_, demand)| demand).unwrap_or_default())
    .fetch_optional(pool)
    .await?;
    match row {
        None => match l.request {
            // Nothing written: either the request id was answered already, or admission
            // moved (read after the statement, so a concurrent answer is committed by now).
            Some((request_id, _)) => Ok(match kept(pool, l.principal_id, request_id).await? {
                Some(k) => Registered::Answered(Box::new(k)),
                None => Registered::Raced,
            }),
            None => Ok(Registered::Raced),
        },
        Some(r) => Ok(Registered::Granted {
            issued_at: r.try_get("issued_at")?,
            expires_at: r.try_get("expires_at")?,
            generation: r.try_get("admission_generation")?,
            sequence: r.try_get("sequence")?,
        }),
    }
}

/// A lease as recorded, with its state at the database time of the read.
#[derive(Debug, Clone)]
pub struct LeaseRow {
    pub id: Uuid,
    pub capability_key: String,
    pub animator: String,
    pub holder: String,
    pub principal_id: String,
    pub run_id: String,
    pub attempt_id: String,
    pub priority: i16,
    pub issued_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub released_at: Option<OffsetDateTime>,
    pub state: LeaseState,
    /// The request id it was asked under.
    pub request_id: Option<String>,
}

const COLUMNS: &str = "id, capability_key, animator, holder, principal_id, run_id, attempt_id,
     priority, issued_at, expires_at, released_at, request_id,
     released_at IS NOT NULL AS released, expires_at <= now() AS expired";

/// [`COLUMNS`] qualified by the `leases` alias `l` (for statements that join).
const L_COLUMNS: &str = "l.id, l.capability_key, l.animator, l.holder, l.principal_id, l.run_id,
     l.attempt_id, l.priority, l.issued_at, l.expires_at, l.released_at, l.request_id,
     l.released_at IS NOT NULL AS released, l.expires_at <= now() AS expired";

fn lease_row(r: &PgRow) -> std::result::Result<LeaseRow, sqlx::Error> {
    Ok(LeaseRow {
        id: r.try_get("id")?,
        capability_key: r.try_get("capability_key")?,
        animator: r.try_get("animator")?,
        holder: r.try_get("holder")?,
        principal_id: r.try_get("principal_id")?,
        run_id: r.try_get("run_id")?,
        attempt_id: r.try_get("attempt_id")?,
        priority: r.try_get("priority")?,
        issued_at: r.try_get("issued_at")?,
        expires_at: r.try_get("expires_at")?,
        released_at: r.try_get("released_at")?,
        state: LeaseState::of(r.try_get("released")?, r.try_get("expired")?),
        request_id: r.try_get("request_id")?,
    })
}

async fn get(pool: &PgPool, id: Uuid) -> Result<Option<(LeaseRow, bool)>> {
    let r = sqlx::query(&format!(
        "SELECT {L_COLUMNS},
                (SELECT open_closures = 0 FROM admission a WHERE a.animator = l.animator) AS open
           FROM leases l WHERE l.id = $1"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?;
    match r {
        None => Ok(None),
        Some(r) => Ok(Some((
            lease_row(&r)?,
            r.try_get::<Option<bool>, _>("open")?.unwrap_or(false),
        ))),
    }
}

/// Whether `owner` (the caller; `None`: an administrator) may touch `lease`.
fn owned_by(lease: &LeaseRow, owner: Option<&str>) -> bool {
    owner.is_none_or(|o| lease.principal_id == o)
}

/// Renew a live lease of `owner` (`None`: any principal's): expiry becomes now +
/// `ttl_seconds`. Another principal's lease is [`DispatcherError::LeaseNotOwned`].
pub async fn renew(
    pool: &PgPool,
    id: Uuid,
    holder: &str,
    ttl_seconds: i32,
    owner: Option<&str>,
) -> Result<LeaseRow> {
    // One statement (READ COMMITTED). Lock order: the animator's admission row FOR SHARE (a
    // lease on an animator being drained cannot be extended), then the lease row by the
    // guarded UPDATE (its owner and holder among the guards). Liveness by the database clock.
    let r = sqlx::query(&format!(
        "WITH adm AS (
             SELECT a.animator FROM admission a JOIN leases x ON x.animator = a.animator
              WHERE x.id = $1 AND a.open_closures = 0
                FOR SHARE OF a
         )
         UPDATE leases l SET expires_at = now() + $3::int * interval '1 second', renewed_at = now()
           FROM adm
          WHERE l.id = $1 AND l.animator = adm.animator AND l.holder = $2
            AND ($4::text IS NULL OR l.principal_id = $4)
            AND l.released_at IS NULL AND l.expires_at > now()
         RETURNING {L_COLUMNS}"
    ))
    .bind(id)
    .bind(holder)
    .bind(ttl_seconds)
    .bind(owner)
    .fetch_optional(pool)
    .await?;
    if let Some(r) = r {
        return Ok(lease_row(&r)?);
    }
    // Why not: diagnose from the current row (the answer is as of this read).
    let Some((lease, open)) = get(pool, id).await? else {
        return Err(DispatcherError::LeaseNotFound);
    };
    if !owned_by(&lease, owner) {
        return Err(DispatcherError::LeaseNotOwned);
    }
    Err(if lease.holder != holder {
        DispatcherError::HolderMismatch
    } else {
        match lease.state {
            LeaseState::Released => DispatcherError::LeaseReleased,
            LeaseState::Expired => DispatcherError::LeaseExpired,
            LeaseState::Active if !open => DispatcherError::AdmissionClosed,
            LeaseState::Active => DispatcherError::Conflict,
        }
    })
}

/// Release a lease of `owner` (`None`: any principal's). Idempotent: a lease already released
/// or expired is returned unchanged with `already_over = true`. Another principal's lease is
/// [`DispatcherError::LeaseNotOwned`].
pub async fn release(
    pool: &PgPool,
    id: Uuid,
    holder: &str,
    owner: Option<&str>,
) -> Result<(LeaseRow, bool)> {
    // One guarded UPDATE on the lease row (READ COMMITTED; no other lock).
    let r = sqlx::query(&format!(
        "UPDATE leases SET released_at = now()
          WHERE id = $1 AND holder = $2 AND ($3::text IS NULL OR principal_id = $3)
            AND released_at IS NULL AND expires_at > now()
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(holder)
    .bind(owner)
    .fetch_optional(pool)
    .await?;
    if let Some(r) = r {
        return Ok((lease_row(&r)?, false));
    }
    let Some((lease, _)) = get(pool, id).await? else {
        return Err(DispatcherError::LeaseNotFound);
    };
    if !owned_by(&lease, owner) {
        return Err(DispatcherError::LeaseNotOwned);
    }
    if lease.holder != holder {
        return Err(DispatcherError::HolderMismatch);
    }
    match lease.state {
        LeaseState::Active => Err(DispatcherError::Conflict),
        _ => Ok((lease, true)),
    }
}

/// A keyset position for listing (newest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub issued_at: OffsetDateTime,
    pub id: Uuid,
}

/// What to list.
#[derive(Debug, Clone, Copy)]
pub struct Filter<'a> {
    /// Only leases on these animators (empty: all).
    pub animators: &'a [String],
    pub include_inactive: bool,
    /// Only this principal's leases (`None`: every principal's).
    pub owner: Option<&'a str>,
    /// Only the lease asked under this request id.
    pub request_id: Option<&'a str>,
}

/// List leases newest first.
pub async fn list(
    pool: &PgPool,
    filter: Filter<'_>,
    after: Option<Cursor>,
    limit: i64,
) -> Result<Vec<LeaseRow>> {
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM leases
          WHERE (cardinality($1::text[]) = 0 OR animator = ANY($1::text[]))
            AND ($2 OR (released_at IS NULL AND expires_at > now()))
            AND ($3::timestamptz IS NULL OR (issued_at, id) < ($3::timestamptz, $4::uuid))
            AND ($6::text IS NULL OR principal_id = $6)
            AND ($7::text IS NULL OR request_id = $7)
          ORDER BY issued_at DESC, id DESC
          LIMIT $5"
    ))
    .bind(filter.animators)
    .bind(filter.include_inactive)
    .bind(after.map(|c| c.issued_at))
    .bind(after.map(|c| c.id))
    .bind(limit)
    .bind(filter.owner)
    .bind(filter.request_id)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .iter()
        .map(lease_row)
        .collect::<std::result::Result<_, _>>()?)
}

/// How a caller names one lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<'a> {
    Id(Uuid),
    /// The request id the owner asked under (request ids are their principal's own).
    Request(&'a str),
}

/// One lease, if `owner` may see it (`None`: any principal's). By request id, only the
/// caller's own request ids are meant: `caller` is the principal whose request id it is.
pub async fn find(
    pool: &PgPool,
    lookup: Lookup<'_>,
    caller: &str,
    owner: Option<&str>,
) -> Result<LeaseRow> {
    let r = match lookup {
        Lookup::Id(id) => {
            sqlx::query(&format!("SELECT {COLUMNS} FROM leases WHERE id = $1"))
                .bind(id)
                .fetch_optional(pool)
                .await?
        }
        Lookup::Request(request_id) => {
            sqlx::query(&format!(
                "SELECT {COLUMNS} FROM leases WHERE principal_id = $1 AND request_id = $2"
            ))
            .bind(caller)
            .bind(request_id)
            .fetch_optional(pool)
            .await?
        }
    };
    let lease = match r {
        Some(r) => lease_row(&r)?,
        None => return Err(DispatcherError::LeaseNotFound),
    };
    if owned_by(&lease, owner) {
        Ok(lease)
    } else {
        Err(DispatcherError::LeaseNotFound)
    }
}

/// The outcome kinds an answer is kept as (`lease_requests.outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeKind {
    Granted,
    TransitionRequired,
    Unavailable,
}

impl OutcomeKind {
    fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Granted => "GRANTED",
            OutcomeKind::TransitionRequired => "HARDWARE_TRANSITION_REQUIRED",
            OutcomeKind::Unavailable => "UNAVAILABLE",
        }
    }

    fn parse(s: &str) -> Option<OutcomeKind> {
        [
            OutcomeKind::Granted,
            OutcomeKind::TransitionRequired,
            OutcomeKind::Unavailable,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// An answer that is not a grant, to keep under a request id (a grant is kept by
/// [`register`]).
#[derive(Debug, Clone)]
pub struct Answer<'a> {
    pub principal_id: &'a str,
    pub request_id: &'a str,
    /// The decoded request in canonical form: a retry must ask for exactly the same.
    pub demand: &'a str,
    pub outcome: OutcomeKind,
    pub capability_key: &'a str,
    pub animator: &'a str,
    pub ready_estimate_seconds: Option<u32>,
    /// The `Unavailable` code.
    pub reason: &'a str,
    pub observed: Option<&'a Observed>,
}

/// An answer kept under a request id.
#[derive(Debug, Clone)]
pub struct Kept {
    pub demand: String,
    pub outcome: OutcomeKind,
    pub capability_key: String,
    pub animator: String,
    pub ready_estimate_seconds: Option<u32>,
    pub reason: String,
    pub observed: Option<Observed>,
    /// The lease, for a grant.
    pub lease: Option<LeaseRow>,
    /// The admission generation the lease was admitted under, for a grant.
    pub generation: i64,
}

/// Keep `answer` under its request id unless one is kept already: `None` when this one was
/// kept, else the answer kept before (by an earlier or concurrent call).
pub async fn keep(pool: &PgPool, answer: &Answer<'_>) -> Result<Option<Kept>> {
    // One guarded insert (READ COMMITTED): a concurrent insert of the same id waits for the
    // first to commit, then does nothing.
    let inserted = sqlx::query(
        "INSERT INTO lease_requests (principal_id, request_id, demand, outcome, capability_key,
                                     animator, ready_estimate_seconds, reason, observed_phase,
                                     observed_reason)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (principal_id, request_id) DO NOTHING",
    )
    .bind(answer.principal_id)
    .bind(answer.request_id)
    .bind(answer.demand)
    .bind(answer.outcome.as_str())
    .bind(answer.capability_key)
    .bind(answer.animator)
    .bind(
        answer
            .ready_estimate_seconds
            .map(|s| i32::try_from(s).unwrap_or(i32::MAX)),
    )
    .bind(answer.reason)
    .bind(answer.observed.map(|o| o.phase.as_str()))
    .bind(answer.observed.map(|o| o.reason.as_str()).unwrap_or(""))
    .execute(pool)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(None);
    }
    kept(pool, answer.principal_id, answer.request_id)
        .await?
        .map(Some)
        .ok_or(DispatcherError::Conflict)
}

/// The answer kept under `principal`'s `request_id`, with its lease for a grant.
pub async fn kept(pool: &PgPool, principal: &str, request_id: &str) -> Result<Option<Kept>> {
    let r = sqlx::query(&format!(
        "SELECT r.demand, r.outcome, r.capability_key AS kept_key, r.animator AS kept_animator,
                r.ready_estimate_seconds, r.reason, r.observed_phase, r.observed_reason,
                l.admission_generation, {L_COLUMNS}
           FROM lease_requests r LEFT JOIN leases l ON l.id = r.lease_id
          WHERE r.principal_id = $1 AND r.request_id = $2"
    ))
    .bind(principal)
    .bind(request_id)
    .fetch_optional(pool)
    .await?;
    let Some(r) = r else {
        return Ok(None);
    };
    let outcome: String = r.try_get("outcome")?;
    let outcome = OutcomeKind::parse(&outcome)
        .ok_or_else(|| sqlx::Error::Decode(format!("unknown kept outcome {outcome:?}").into()))?;
    let lease = match r.try_get::<Option<Uuid>, _>("id")? {
        Some(_) => Some(lease_row(&r)?),
        None => None,
    };
    let phase: Option<String> = r.try_get("observed_phase")?;
    Ok(Some(Kept {
        demand: r.try_get("demand")?,
        outcome,
        capability_key: r.try_get("kept_key")?,
        animator: r.try_get("kept_animator")?,
        ready_estimate_seconds: r
            .try_get::<Option<i32>, _>("ready_estimate_seconds")?
            .and_then(|s| u32::try_from(s).ok()),
        reason: r.try_get("reason")?,
        observed: phase.map(|p| {
            Observed::with_reason(
                crate::domain::observation::Phase::parse(&p)
                    .unwrap_or(crate::domain::observation::Phase::Unknown),
                r.try_get::<String, _>("observed_reason")
                    .unwrap_or_default(),
            )
        }),
        generation: r
            .try_get::<Option<i64>, _>("admission_generation")?
            .unwrap_or(0),
        lease,
    }))
}

/// A dispatch event.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub sequence: i64,
    pub lease_id: Uuid,
    pub capability_key: String,
    pub animator: String,
    pub holder: String,
    pub run_id: String,
    pub attempt_id: String,
    pub priority: i16,
    pub admitted_at: OffsetDateTime,
}

/// Events with `sequence > after`, in order.
pub async fn events_after(pool: &PgPool, after: i64, limit: i64) -> Result<Vec<EventRow>> {
    let rows = sqlx::query(
        "SELECT sequence, lease_id, capability_key, animator, holder, run_id, attempt_id,
                priority, admitted_at
           FROM dispatch_events WHERE sequence > $1 ORDER BY sequence LIMIT $2",
    )
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(EventRow {
                sequence: r.try_get("sequence")?,
                lease_id: r.try_get("lease_id")?,
                capability_key: r.try_get("capability_key")?,
                animator: r.try_get("animator")?,
                holder: r.try_get("holder")?,
                run_id: r.try_get("run_id")?,
                attempt_id: r.try_get("attempt_id")?,
                priority: r.try_get("priority")?,
                admitted_at: r.try_get("admitted_at")?,
            })
        })
        .collect::<std::result::Result<_, sqlx::Error>>()
        .map_err(Into::into)
}
