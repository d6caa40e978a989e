//! Durable leases: registration (with its dispatch event), renewal, release, listing. Expiry
//! is decided by the database clock (`now()`) inside the deciding statement.

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
}

/// Outcome of a registration.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

/// Record the fresh observation of the leased key, and register the lease and its dispatch
/// event only if the animator's admission is still open at the captured generation.
pub async fn register(pool: &PgPool, l: &NewLease<'_>) -> Result<Registered> {
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
         ), lease AS (
             INSERT INTO leases (id, capability_key, key_version, family, model_id, animator,
                                 holder, principal_id, run_id, attempt_id, priority,
                                 admission_generation, issued_at, expires_at)
             SELECT $3, $4, 1, $5, $6, adm.animator, $7, $8, $9, $10, $11, adm.generation,
                    now(), now() + $12::int * interval '1 second'
               FROM adm
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
    .fetch_optional(pool)
    .await?;
    match row {
        None => Ok(Registered::Raced),
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
}

const COLUMNS: &str = "id, capability_key, animator, holder, principal_id, run_id, attempt_id,
     priority, issued_at, expires_at, released_at,
     released_at IS NOT NULL AS released, expires_at <= now() AS expired";

/// [`COLUMNS`] qualified by the `leases` alias `l` (for statements that join).
const L_COLUMNS: &str = "l.id, l.capability_key, l.animator, l.holder, l.principal_id, l.run_id,
     l.attempt_id, l.priority, l.issued_at, l.expires_at, l.released_at,
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

/// Renew a live lease: expiry becomes now + `ttl_seconds`.
pub async fn renew(pool: &PgPool, id: Uuid, holder: &str, ttl_seconds: i32) -> Result<LeaseRow> {
    // One statement (READ COMMITTED). Lock order: the animator's admission row FOR SHARE (a
    // lease on an animator being drained cannot be extended), then the lease row by the
    // guarded UPDATE. Liveness by the database clock.
    let r = sqlx::query(&format!(
        "WITH adm AS (
             SELECT a.animator FROM admission a JOIN leases x ON x.animator = a.animator
              WHERE x.id = $1 AND a.open_closures = 0
                FOR SHARE OF a
         )
         UPDATE leases l SET expires_at = now() + $3::int * interval '1 second', renewed_at = now()
           FROM adm
          WHERE l.id = $1 AND l.animator = adm.animator AND l.holder = $2
            AND l.released_at IS NULL AND l.expires_at > now()
         RETURNING {L_COLUMNS}"
    ))
    .bind(id)
    .bind(holder)
    .bind(ttl_seconds)
    .fetch_optional(pool)
    .await?;
    if let Some(r) = r {
        return Ok(lease_row(&r)?);
    }
    // Why not: diagnose from the current row (the answer is as of this read).
    let Some((lease, open)) = get(pool, id).await? else {
        return Err(DispatcherError::LeaseNotFound);
    };
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

/// Release a lease. Idempotent: a lease already released or expired is returned unchanged
/// with `already_over = true`.
pub async fn release(pool: &PgPool, id: Uuid, holder: &str) -> Result<(LeaseRow, bool)> {
    // One guarded UPDATE on the lease row (READ COMMITTED; no other lock).
    let r = sqlx::query(&format!(
        "UPDATE leases SET released_at = now()
          WHERE id = $1 AND holder = $2 AND released_at IS NULL AND expires_at > now()
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(holder)
    .fetch_optional(pool)
    .await?;
    if let Some(r) = r {
        return Ok((lease_row(&r)?, false));
    }
    let Some((lease, _)) = get(pool, id).await? else {
        return Err(DispatcherError::LeaseNotFound);
    };
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

/// List leases newest first.
pub async fn list(
    pool: &PgPool,
    animators: &[String],
    include_inactive: bool,
    after: Option<Cursor>,
    limit: i64,
) -> Result<Vec<LeaseRow>> {
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM leases
          WHERE (cardinality($1::text[]) = 0 OR animator = ANY($1::text[]))
            AND ($2 OR (released_at IS NULL AND expires_at > now()))
            AND ($3::timestamptz IS NULL OR (issued_at, id) < ($3::timestamptz, $4::uuid))
          ORDER BY issued_at DESC, id DESC
          LIMIT $5"
    ))
    .bind(animators)
    .bind(include_inactive)
    .bind(after.map(|c| c.issued_at))
    .bind(after.map(|c| c.id))
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .iter()
        .map(lease_row)
        .collect::<std::result::Result<_, _>>()?)
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
