//! SQL of recovery reviews (`runner.run_reviews`) and state-schema migrations
//! (`runner.state_migrations`), and the fenced commits they make on a run. Lock order: the run
//! row (`FOR UPDATE`, `runs::lock`), then the rows appended in the same read-committed
//! transaction. Both commits raise the run's lease generation and free its lease, so a runner
//! that held it before is fenced and the next claim is a new fenced lease.

use sqlx::{PgPool, Postgres, Row, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

use super::runs::{
    CHECKPOINT, CheckpointRow, NewTransition, RUN, RunRow, checkpoint_row, insert_checkpoint, made,
    progress_of, run,
};
use super::transitions::append;
use crate::domain::checkpoint::Checkpoint;

/// Every checkpoint of run `id` before `version`, newest first.
pub async fn checkpoints_before(
    tx: &mut Transaction<'_, Postgres>,
    id: Uuid,
    version: i64,
) -> Result<Vec<CheckpointRow>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "SELECT {CHECKPOINT} FROM runner.run_checkpoints WHERE run_id = $1 AND version < $2 \
          ORDER BY version DESC"
    ))
    .bind(id)
    .bind(version)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(checkpoint_row).collect()
}

/// The run version whose transition last entered `QUARANTINED` (none: never quarantined).
pub async fn quarantined_version(
    tx: &mut Transaction<'_, Postgres>,
    id: Uuid,
) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT max(version) FROM runner.run_transitions \
          WHERE run_id = $1 AND target_state = 'QUARANTINED'",
    )
    .bind(id)
    .fetch_one(&mut **tx)
    .await
}

/// Commit `t` on `current` as a recovery (or migration): under the fence of `current`'s
/// state, version and generation, with a new generation, the lease freed, the interrupt
/// cleared when the run ends, `progress` (JSON; `None` keeps it) and the state-schema
/// version `schema` (`None` keeps it); its transition row (none when `t` is `None`: a
/// migration is no FSM transition) and `checkpoint` of the version it makes. The run after,
/// `None` when the fence moved.
pub async fn commit(
    tx: &mut Transaction<'_, Postgres>,
    current: &RunRow,
    t: Option<&NewTransition<'_>>,
    terminal_category: Option<&str>,
    checkpoint: &Checkpoint,
    progress: Option<&str>,
    schema: Option<&str>,
) -> Result<Option<RunRow>, sqlx::Error> {
    let to = t.map_or(current.state.as_str(), |t| t.target_state);
    let row = sqlx::query(&format!(
        "UPDATE runner.runs SET state = $5, terminal_category = $6, version = version + 1, \
                generation = generation + 1, progress = COALESCE($7::jsonb, progress), \
                state_schema_version = COALESCE($8, state_schema_version), \
                interrupt_pending = interrupt_pending AND $6::text IS NULL, \
                lease_holder = NULL, lease_expires_at = NULL, not_before = NULL, \
                updated_at = now() \
          WHERE id = $1 AND state = $2 AND version = $3 AND generation = $4 RETURNING {RUN}"
    ))
    .bind(current.id)
    .bind(&current.state)
    .bind(current.version)
    .bind(current.generation)
    .bind(to)
    .bind(terminal_category)
    .bind(progress)
    .bind(schema)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let after = run(&row)?;
    if let Some(t) = t {
        append(
            tx,
            &made(&after),
            t,
            &progress_of(current),
            &progress_of(&after),
        )
        .await?;
    }
    insert_checkpoint(tx, &after, checkpoint).await?;
    Ok(Some(after))
}

/// A review to record.
pub struct NewReview<'a> {
    pub run_id: Uuid,
    pub quarantined_version: i64,
    pub decision: &'a str,
    pub reviewer: &'a str,
    pub recovery_version: Option<i64>,
    pub recovery_checksum: &'a str,
    pub rationale: &'a str,
    pub version: i64,
    pub generation: i64,
}

/// A review as stored (its rationale is not read back).
#[derive(Debug, Clone)]
pub struct ReviewRow {
    pub run_id: Uuid,
    pub quarantined_version: i64,
    pub decision: String,
    pub reviewer: String,
    pub recovery_version: Option<i64>,
    pub recovery_checksum: String,
    pub version: i64,
    pub generation: i64,
    pub reviewed_at: OffsetDateTime,
}

const REVIEW: &str = "run_id, quarantined_version, decision, reviewer, recovery_version, \
     recovery_checksum, version, generation, reviewed_at";

fn review(r: &sqlx::postgres::PgRow) -> Result<ReviewRow, sqlx::Error> {
    Ok(ReviewRow {
        run_id: r.try_get("run_id")?,
        quarantined_version: r.try_get("quarantined_version")?,
        decision: r.try_get("decision")?,
        reviewer: r.try_get("reviewer")?,
        recovery_version: r.try_get("recovery_version")?,
        recovery_checksum: r.try_get("recovery_checksum")?,
        version: r.try_get("version")?,
        generation: r.try_get("generation")?,
        reviewed_at: r.try_get("reviewed_at")?,
    })
}

/// Record `r`.
pub async fn record_review(
    tx: &mut Transaction<'_, Postgres>,
    r: &NewReview<'_>,
) -> Result<ReviewRow, sqlx::Error> {
    let row = sqlx::query(&format!(
        "INSERT INTO runner.run_reviews (run_id, quarantined_version, decision, reviewer, \
         recovery_version, recovery_checksum, rationale, version, generation) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {REVIEW}"
    ))
    .bind(r.run_id)
    .bind(r.quarantined_version)
    .bind(r.decision)
    .bind(r.reviewer)
    .bind(r.recovery_version)
    .bind(r.recovery_checksum)
    .bind(r.rationale)
    .bind(r.version)
    .bind(r.generation)
    .fetch_one(&mut **tx)
    .await?;
    review(&row)
}

/// The latest review of run `id`, with whether its rationale is `rationale`.
pub async fn latest_review(
    tx: &mut Transaction<'_, Postgres>,
    id: Uuid,
    rationale: &str,
) -> Result<Option<(ReviewRow, bool)>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "SELECT {REVIEW}, rationale = $2 AS same_rationale FROM runner.run_reviews \
          WHERE run_id = $1 ORDER BY quarantined_version DESC LIMIT 1"
    ))
    .bind(id)
    .bind(rationale)
    .fetch_optional(&mut **tx)
    .await?;
    row.map(|r| Ok((review(&r)?, r.try_get("same_rationale")?)))
        .transpose()
}

/// A migration to record.
pub struct NewMigration<'a> {
    pub run_id: Uuid,
    pub migration: &'a str,
    pub direction: &'a str,
    pub from_version: &'a str,
    pub to_version: &'a str,
    pub before_sha256: &'a str,
    pub after_sha256: &'a str,
    pub rollback_rule: &'a str,
    pub checkpoint_version: i64,
    pub actor: &'a str,
}

/// A migration as stored.
#[derive(Debug, Clone)]
pub struct MigrationRow {
    pub migration: String,
    pub direction: String,
    pub from_version: String,
    pub to_version: String,
    pub before_sha256: String,
    pub after_sha256: String,
    pub rollback_rule: String,
    pub checkpoint_version: i64,
    pub actor: String,
}

fn migration(r: &sqlx::postgres::PgRow) -> Result<MigrationRow, sqlx::Error> {
    Ok(MigrationRow {
        migration: r.try_get("migration")?,
        direction: r.try_get("direction")?,
        from_version: r.try_get("from_version")?,
        to_version: r.try_get("to_version")?,
        before_sha256: r.try_get("before_sha256")?,
        after_sha256: r.try_get("after_sha256")?,
        rollback_rule: r.try_get("rollback_rule")?,
        checkpoint_version: r.try_get("checkpoint_version")?,
        actor: r.try_get("actor")?,
    })
}

const MIGRATION: &str = "migration, direction, from_version, to_version, before_sha256, \
     after_sha256, rollback_rule, checkpoint_version, actor";

/// Record `m`.
pub async fn record_migration(
    tx: &mut Transaction<'_, Postgres>,
    m: &NewMigration<'_>,
) -> Result<MigrationRow, sqlx::Error> {
    let row = sqlx::query(&format!(
        "INSERT INTO runner.state_migrations (run_id, migration, direction, from_version, \
         to_version, before_sha256, after_sha256, rollback_rule, checkpoint_version, actor) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {MIGRATION}"
    ))
    .bind(m.run_id)
    .bind(m.migration)
    .bind(m.direction)
    .bind(m.from_version)
    .bind(m.to_version)
    .bind(m.before_sha256)
    .bind(m.after_sha256)
    .bind(m.rollback_rule)
    .bind(m.checkpoint_version)
    .bind(m.actor)
    .fetch_one(&mut **tx)
    .await?;
    migration(&row)
}

/// The migrations of run `id`, oldest first.
pub async fn migrations(pool: &PgPool, id: Uuid) -> Result<Vec<MigrationRow>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "SELECT {MIGRATION} FROM runner.state_migrations WHERE run_id = $1 ORDER BY id"
    ))
    .bind(id)
    .fetch_all(pool)
    .await?;
    rows.iter().map(migration).collect()
}
