//! SQL on schema `orchestrator` only: transitions that entered the rite and the durable
//! containment records; `lease`: the host lease and its fence; `resources`: requests and the
//! feed. Every write is fenced: its transaction first holds the host lease at the writer's
//! generation ([`lease::fenced`]) and fails [`lease::not_held`] when another process took the
//! host over. READ COMMITTED; the database clock stamps every row.

pub mod lease;
pub mod memory;
pub mod metrics;
pub mod resources;
pub mod retention;

use sqlx::{PgPool, Row};
use time::OffsetDateTime;

use crate::domain::intent::{Operation, TransitionIntent};
use crate::domain::phase::TransitionPhase;
use crate::domain::plan::Plan;
pub use lease::Fence;

/// A transition row as recorded before admission closes.
pub struct NewTransition<'a> {
    pub id: &'a str,
    pub priority: u8,
    pub requested_by: &'a str,
    pub plan: &'a Plan,
}

/// Record a transition entering the rite (phase `draining`), before admission is closed.
pub async fn insert(
    pool: &PgPool,
    fence: &Fence,
    t: &NewTransition<'_>,
) -> Result<(), sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    sqlx::query(
        "INSERT INTO orchestrator.transitions (id, capability_key, priority, requested_by, action, \
         phase, config_digest, target_animator, evict, launch, expected_active, affected, \
         generation) \
         VALUES ($1, $2, $3, $4, $5, $12, $6, $7, $8, $9, $10, $11, $13)",
    )
    .bind(t.id)
    .bind(&t.plan.capability_key)
    .bind(i16::from(t.priority))
    .bind(t.requested_by)
    .bind(t.plan.action.as_str())
    .bind(&t.plan.config_digest)
    .bind(&t.plan.target)
    .bind(&t.plan.evict)
    .bind(&t.plan.launch)
    .bind(&t.plan.expected_active)
    .bind(t.plan.affected())
    .bind(TransitionPhase::Draining.as_str())
    .bind(fence.generation)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

pub async fn set_closure(
    pool: &PgPool,
    fence: &Fence,
    id: &str,
    token: &str,
) -> Result<(), sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    sqlx::query(
        "UPDATE orchestrator.transitions SET closure_token = $2, updated_at = now() WHERE id = $1",
    )
    .bind(id)
    .bind(token)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// Record the transition contained, ending in `phase` (`contained_uncertain` or `failed`),
/// and its containment, in one statement (fenced).
pub async fn contain_as(
    pool: &PgPool,
    fence: &Fence,
    id: &str,
    phase: TransitionPhase,
    cause: &str,
) -> Result<(), sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    sqlx::query(
        "WITH t AS (UPDATE orchestrator.transitions SET phase = $3, detail = $2, \
         updated_at = now(), generation = $4 WHERE id = $1 RETURNING id) \
         INSERT INTO orchestrator.containments (transition_id, cause, generation) \
         SELECT id, $2, $4 FROM t \
         ON CONFLICT (transition_id) DO NOTHING",
    )
    .bind(id)
    .bind(cause)
    .bind(phase.as_str())
    .bind(fence.generation)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// Arm the runtime guard of a soft activation (before it is invoked).
pub async fn arm_guard(
    pool: &PgPool,
    fence: &Fence,
    id: &str,
    target_animator: &str,
    capability_key: &str,
) -> Result<(), sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    sqlx::query(
        "INSERT INTO orchestrator.runtime_guards (transition_id, target_animator, capability_key) \
         VALUES ($1, $2, $3)",
    )
    .bind(id)
    .bind(target_animator)
    .bind(capability_key)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// Clear an armed guard after its target was observed WARM (`WARM_OBSERVED`) or the actuator
/// refused before the call began (`NOT_INVOKED`); true when this call cleared it.
pub async fn clear_guard(
    pool: &PgPool,
    fence: &Fence,
    id: &str,
    by: &str,
) -> Result<bool, sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    let r = sqlx::query(
        "UPDATE orchestrator.runtime_guards SET cleared_at = now(), cleared_by = $2 \
         WHERE transition_id = $1 AND cleared_at IS NULL",
    )
    .bind(id)
    .bind(by)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(r.rows_affected() == 1)
}

/// On taking the lease: every transition whose runtime guard is still armed is contained
/// (cause `RUNTIME_GUARD_ARMED`, whatever phase it recorded) — an interrupted or uncertain
/// soft activation fences the new holder. Returns how many were contained.
pub async fn contain_guarded(pool: &PgPool, fence: &Fence) -> Result<u64, sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    let r = sqlx::query(
        "WITH t AS (UPDATE orchestrator.transitions t SET phase = $1, \
         detail = 'RUNTIME_GUARD_ARMED', updated_at = now(), generation = $2 \
         FROM orchestrator.runtime_guards g \
         WHERE g.transition_id = t.id AND g.cleared_at IS NULL \
         AND NOT EXISTS (SELECT 1 FROM orchestrator.containments c \
                         WHERE c.transition_id = t.id AND c.recovered_at IS NULL) \
         RETURNING t.id) \
         INSERT INTO orchestrator.containments (transition_id, cause, generation) \
         SELECT id, 'RUNTIME_GUARD_ARMED', $2 FROM t \
         ON CONFLICT (transition_id) DO UPDATE SET cause = EXCLUDED.cause, recorded_at = now(), \
         recovered_at = NULL, recovered_by = NULL, generation = EXCLUDED.generation",
    )
    .bind(TransitionPhase::ContainedUncertain.as_str())
    .bind(fence.generation)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(r.rows_affected())
}

/// On taking the lease: every transition left in a non-final phase by a process that is gone
/// (killed, crashed, or one whose lease lapsed) is contained — admission stays closed and
/// nothing reopens without proof. Returns how many were contained.
pub async fn contain_interrupted(pool: &PgPool, fence: &Fence) -> Result<u64, sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    let r = sqlx::query(
        "WITH t AS (UPDATE orchestrator.transitions SET phase = $1, \
         detail = 'INTERRUPTED', updated_at = now(), generation = $3 \
         WHERE phase = ANY($2) RETURNING id) \
         INSERT INTO orchestrator.containments (transition_id, cause, generation) \
         SELECT id, 'INTERRUPTED', $3 FROM t \
         ON CONFLICT (transition_id) DO NOTHING",
    )
    .bind(TransitionPhase::ContainedUncertain.as_str())
    .bind(TransitionPhase::open())
    .bind(fence.generation)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(r.rows_affected())
}

/// Whether any containment fences transitions now.
pub async fn fenced(pool: &PgPool) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM orchestrator.containments WHERE recovered_at IS NULL)",
    )
    .fetch_one(pool)
    .await
}

/// A containment with what its transition recorded.
#[derive(Debug, Clone)]
pub struct ContainmentRow {
    pub id: i64,
    pub transition_id: String,
    pub cause: String,
    pub recorded_at: OffsetDateTime,
    pub recovered_at: Option<OffsetDateTime>,
    pub capability_key: String,
    pub target_animator: String,
    pub evict: Vec<String>,
    pub launch: Vec<String>,
    pub expected_active: Vec<String>,
    pub affected: Vec<String>,
    pub config_digest: String,
    pub closure_token: Option<String>,
    /// The transition's runtime guard (a soft activation) is still armed.
    pub guard_armed: bool,
}

impl ContainmentRow {
    /// The forward intent the transition froze (or would have).
    pub fn forward(&self) -> TransitionIntent {
        TransitionIntent {
            id: self.transition_id.clone(),
            operation: Operation::Forward,
            config_digest: self.config_digest.clone(),
            target_animator: self.target_animator.clone(),
            capability_key: self.capability_key.clone(),
            evict: self.evict.clone(),
            launch: self.launch.clone(),
            expected_active: self.expected_active.clone(),
        }
    }
}

const CONTAINMENT: &str = "SELECT c.id, c.transition_id, c.cause, c.recorded_at, c.recovered_at, \
     t.capability_key, t.target_animator, t.evict, t.launch, t.expected_active, t.affected, \
     t.config_digest, t.closure_token, \
     EXISTS (SELECT 1 FROM orchestrator.runtime_guards g \
             WHERE g.transition_id = t.id AND g.cleared_at IS NULL) AS guard_armed \
     FROM orchestrator.containments c JOIN orchestrator.transitions t ON t.id = c.transition_id";

fn containment(r: &sqlx::postgres::PgRow) -> Result<ContainmentRow, sqlx::Error> {
    Ok(ContainmentRow {
        id: r.try_get("id")?,
        transition_id: r.try_get("transition_id")?,
        cause: r.try_get("cause")?,
        recorded_at: r.try_get("recorded_at")?,
        recovered_at: r.try_get("recovered_at")?,
        capability_key: r.try_get("capability_key")?,
        target_animator: r.try_get("target_animator")?,
        evict: r.try_get("evict")?,
        launch: r.try_get("launch")?,
        expected_active: r.try_get("expected_active")?,
        affected: r.try_get("affected")?,
        config_digest: r.try_get("config_digest")?,
        closure_token: r.try_get("closure_token")?,
        guard_armed: r.try_get("guard_armed")?,
    })
}

/// Containments, newest first (at most 1000).
pub async fn containments(
    pool: &PgPool,
    include_recovered: bool,
) -> Result<Vec<ContainmentRow>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "{CONTAINMENT} WHERE $1 OR c.recovered_at IS NULL ORDER BY c.id DESC LIMIT 1000"
    ))
    .bind(include_recovered)
    .fetch_all(pool)
    .await?;
    rows.iter().map(containment).collect()
}

pub async fn containment_by_id(
    pool: &PgPool,
    id: i64,
) -> Result<Option<ContainmentRow>, sqlx::Error> {
    let row = sqlx::query(&format!("{CONTAINMENT} WHERE c.id = $1"))
        .bind(id)
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(containment).transpose()
}

/// Mark a containment recovered (only if it still fences) and clear its transition's armed
/// runtime guard, in one statement; true when this call did it.
pub async fn recover(pool: &PgPool, fence: &Fence, id: i64, by: &str) -> Result<bool, sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    let r = sqlx::query(
        "WITH c AS (UPDATE orchestrator.containments SET recovered_at = now(), recovered_by = $2 \
         WHERE id = $1 AND recovered_at IS NULL RETURNING transition_id), \
         g AS (UPDATE orchestrator.runtime_guards SET cleared_at = now(), cleared_by = 'RECOVERED' \
         WHERE cleared_at IS NULL AND transition_id IN (SELECT transition_id FROM c)) \
         SELECT transition_id FROM c",
    )
    .bind(id)
    .bind(by)
    .fetch_optional(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(r.is_some())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use crate::domain::phase::TransitionPhase;

    /// The phases the database accepts: the quoted values of the last `CHECK (phase IN (…))`
    /// on `orchestrator.transitions` across the migrations, applied in order.
    fn accepted_by_the_migrations() -> BTreeSet<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("migrations")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "sql"))
            .collect();
        files.sort();
        let sql: String = files
            .iter()
            .map(|p| std::fs::read_to_string(p).expect("read"))
            .collect();
        let at = sql.rfind("CHECK (phase IN (").expect("a phase check");
        let list = &sql[at + "CHECK (phase IN (".len()..];
        let list = &list[..list.find(')').expect("its end")];
        list.split(',')
            .map(|v| v.trim().trim_matches('\'').to_owned())
            .collect()
    }

    #[test]
    fn the_database_accepts_exactly_the_recorded_phases() {
        let ours: BTreeSet<String> = TransitionPhase::ALL
            .into_iter()
            .filter(|p| p.is_recorded())
            .map(|p| p.as_str().to_owned())
            .collect();
        assert_eq!(accepted_by_the_migrations(), ours);
    }
}
