//! SQL of the host lease (`host_leases`, migration 0005): taking it (one guarded statement),
//! renewing it, reading who holds it, and the fence every recorded write passes first — the
//! lease row held at the writer's generation for the rest of its transaction. Expiry is the
//! database clock's.

use std::time::Duration;

use sqlx::{PgPool, Postgres, Row, Transaction};
use time::OffsetDateTime;

/// The SQLSTATE `orchestrator.hold_host_lease` fails with when the writer does not hold the
/// lease at its generation (another process took the host over, or the lease lapsed).
pub const NOT_HELD: &str = "LH001";

/// What a write proves it holds: this host's lease, by this process, at this generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub host_id: String,
    pub holder: String,
    pub generation: i64,
}

/// The lease as recorded.
#[derive(Debug, Clone)]
pub struct LeaseRow {
    pub holder: String,
    pub generation: i64,
    pub expires_at: OffsetDateTime,
    /// Whether it has lapsed, by the database clock.
    pub lapsed: bool,
}

/// Whether `e` is the fence's refusal: the writer no longer holds the lease at its generation.
pub fn not_held(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == NOT_HELD)
}

/// Hold the lease row inside `tx` (a takeover waits until `tx` ends), or fail [`not_held`].
pub async fn hold(tx: &mut Transaction<'_, Postgres>, fence: &Fence) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT orchestrator.hold_host_lease($1, $2, $3)")
        .bind(&fence.host_id)
        .bind(&fence.holder)
        .bind(fence.generation)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A transaction that holds the lease first (every fenced write begins with this).
pub async fn fenced(
    pool: &PgPool,
    fence: &Fence,
) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    hold(&mut tx, fence).await?;
    Ok(tx)
}

fn ttl_seconds(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

/// Take the lease of `host_id` for `holder`: a new row (generation 1), or a lapsed one taken
/// over (generation + 1) — one statement; `None` while another holder's lease runs.
pub async fn acquire(
    pool: &PgPool,
    host_id: &str,
    holder: &str,
    ttl: Duration,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO orchestrator.host_leases AS l \
         (host_id, holder, generation, acquired_at, renewed_at, expires_at) \
         VALUES ($1, $2, 1, now(), now(), now() + make_interval(secs => $3)) \
         ON CONFLICT (host_id) DO UPDATE SET holder = EXCLUDED.holder, \
         generation = l.generation + 1, acquired_at = now(), renewed_at = now(), \
         expires_at = EXCLUDED.expires_at \
         WHERE l.expires_at <= now() \
         RETURNING generation",
    )
    .bind(host_id)
    .bind(holder)
    .bind(ttl_seconds(ttl))
    .fetch_optional(pool)
    .await
}

/// Renew `fence`'s lease for `ttl` from now; `false` when it is no longer this holder's at
/// this generation (taken over). A lapsed lease nobody took over is renewed.
pub async fn renew(pool: &PgPool, fence: &Fence, ttl: Duration) -> Result<bool, sqlx::Error> {
    let r = sqlx::query(
        "UPDATE orchestrator.host_leases SET renewed_at = now(), \
         expires_at = now() + make_interval(secs => $4) \
         WHERE host_id = $1 AND holder = $2 AND generation = $3",
    )
    .bind(&fence.host_id)
    .bind(&fence.holder)
    .bind(fence.generation)
    .bind(ttl_seconds(ttl))
    .execute(pool)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Let the lease lapse now (a graceful stop: a standby need not wait for the TTL).
pub async fn release(pool: &PgPool, fence: &Fence) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE orchestrator.host_leases SET expires_at = now() \
         WHERE host_id = $1 AND holder = $2 AND generation = $3",
    )
    .bind(&fence.host_id)
    .bind(&fence.holder)
    .bind(fence.generation)
    .execute(pool)
    .await?;
    Ok(())
}

/// The lease of `host_id` as recorded, if any process ever took it.
pub async fn current(pool: &PgPool, host_id: &str) -> Result<Option<LeaseRow>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT holder, generation, expires_at, expires_at <= now() AS lapsed \
         FROM orchestrator.host_leases WHERE host_id = $1",
    )
    .bind(host_id)
    .fetch_optional(pool)
    .await?;
    row.map(|r| {
        Ok(LeaseRow {
            holder: r.try_get("holder")?,
            generation: r.try_get("generation")?,
            expires_at: r.try_get("expires_at")?,
            lapsed: r.try_get("lapsed")?,
        })
    })
    .transpose()
}
