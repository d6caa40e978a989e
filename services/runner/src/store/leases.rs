//! SQL of the runner lease on a run (`runner.runs`): a claim of a drivable run whose lease is
//! free or expired (`FOR UPDATE SKIP LOCKED`, a new generation on every claim), its heartbeat
//! renewal, its release (with an optional not-before for a typed wait), and what the step loop
//! reads of a run besides its row (its workflow and input bytes).

use sqlx::PgPool;
use uuid::Uuid;

use super::runs::{RUN, RunRow, run};
use crate::domain::run::STATE_SCHEMA_VERSION;

/// The states the step loop drives (a run elsewhere waits for someone else, or has ended).
/// The effect path's states are driven too; a run in `HUMAN_RECONCILIATION` waits for an
/// operator and is claimed only to end it when a budget or its deadline runs out (the driver
/// gives it back until then).
pub const DRIVABLE: &str = "('CREATED', 'PLAN', 'ACT', 'WAIT_CAPABILITY', 'INGEST', 'VERIFY', \
     'WAIT_VERIFICATION', 'PLAN_EFFECTS', 'WAIT_APPROVAL', 'COMMIT_INTENT', 'EXECUTE', \
     'RECONCILE', 'HONOR_PENDING_INTERRUPT', 'HUMAN_RECONCILIATION')";

/// Claim one drivable run whose lease is free or expired (oldest first, skipping rows another
/// claimer has locked): `holder` takes its lease until `ttl_ms` from now, under a new
/// generation. Only runs in the office's state-schema version are claimed. The run as claimed.
pub async fn claim(
    pool: &PgPool,
    holder: &str,
    ttl_ms: i64,
) -> Result<Option<RunRow>, sqlx::Error> {
    claim_in(pool, holder, ttl_ms, STATE_SCHEMA_VERSION).await
}

/// [`claim`] of a run in `state_schema_version` (the one the claimer writes).
pub async fn claim_in(
    pool: &PgPool,
    holder: &str,
    ttl_ms: i64,
    state_schema_version: &str,
) -> Result<Option<RunRow>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "UPDATE runner.runs SET lease_holder = $1, \
                lease_expires_at = now() + make_interval(secs => $2::double precision / 1000), \
                generation = generation + 1 \
          WHERE id = (SELECT id FROM runner.runs \
                       WHERE state IN {DRIVABLE} \
                         AND (lease_expires_at IS NULL OR lease_expires_at < now()) \
                         AND (not_before IS NULL OR not_before <= now()) \
                         AND state_schema_version = $3 \
                       ORDER BY listed LIMIT 1 FOR UPDATE SKIP LOCKED) \
          RETURNING {RUN}"
    ))
    .bind(holder)
    .bind(ttl_ms)
    .bind(state_schema_version)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(run).transpose()
}

/// Renew `holder`'s lease on run `id` under `generation` until `ttl_ms` from now; `false`
/// when the lease is no longer its own (another runner took it over: stop driving).
pub async fn renew(
    pool: &PgPool,
    id: Uuid,
    generation: i64,
    holder: &str,
    ttl_ms: i64,
) -> Result<bool, sqlx::Error> {
    let r = sqlx::query(
        "UPDATE runner.runs \
            SET lease_expires_at = now() + make_interval(secs => $4::double precision / 1000) \
          WHERE id = $1 AND generation = $2 AND lease_holder = $3",
    )
    .bind(id)
    .bind(generation)
    .bind(holder)
    .bind(ttl_ms)
    .execute(pool)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Give up `holder`'s lease on run `id` under `generation`, not to be claimed again before
/// `wait_ms` from now (0: at once).
pub async fn release(
    pool: &PgPool,
    id: Uuid,
    generation: i64,
    holder: &str,
    wait_ms: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE runner.runs SET lease_holder = NULL, lease_expires_at = NULL, \
                not_before = CASE WHEN $4 > 0 \
                    THEN now() + make_interval(secs => $4::double precision / 1000) END \
          WHERE id = $1 AND generation = $2 AND lease_holder = $3",
    )
    .bind(id)
    .bind(generation)
    .bind(holder)
    .bind(wait_ms)
    .execute(pool)
    .await?;
    Ok(())
}

/// Hand run `id` back to the step loop at once after a person moved it (in the transaction of
/// that commit): its lease freed, no not-before, and a new generation, so a runner that held
/// it while it waited (and would give it back with a later not-before) is fenced.
pub async fn wake(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE runner.runs SET generation = generation + 1, lease_holder = NULL, \
                lease_expires_at = NULL, not_before = NULL \
          WHERE id = $1",
    )
    .bind(id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The workflow bytes of run `id`.
pub async fn workflow(pool: &PgPool, id: Uuid) -> Result<Vec<u8>, sqlx::Error> {
    sqlx::query_scalar("SELECT workflow FROM runner.runs WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
}

/// The input bytes of run `id` (data: sent to a model step, never logged).
pub async fn input(pool: &PgPool, id: Uuid) -> Result<Vec<u8>, sqlx::Error> {
    sqlx::query_scalar("SELECT input FROM runner.runs WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
}
