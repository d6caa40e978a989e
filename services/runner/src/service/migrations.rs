//! State-schema migrations of a run: a registered, pure migration (`domain::migration`)
//! applied to the run's latest checkpoint, recorded with the state's before/after digests and
//! the rollback rule, and committed as a checkpoint under the new version. A rollback must give
//! back exactly the state the forward migration started from.
//!
//! A migration is no FSM transition (the run's state does not change): it raises the run's
//! version (a checkpoint per version) and its lease generation, writes no transition row, and
//! is refused while a runner holds the run's lease.

use uuid::Uuid;

use super::Service;
use super::runs::RunRow;
use crate::domain::checkpoint::{progress_of, verifies};
use crate::domain::migration::{self, Direction};
use crate::error::RunnerError;
use crate::store::recovery::{self as store, MigrationRow, NewMigration};
use crate::store::runs;

impl Service {
    /// Move run `id`'s state to state-schema version `to` by the registered migration (or
    /// rollback) from its current version, as `actor`; the run and the ledger row after.
    pub async fn migrate_state(
        &self,
        id: Uuid,
        to: &str,
        actor: &str,
    ) -> Result<(RunRow, MigrationRow), RunnerError> {
        // Read committed; the run row is locked first, so no commit of the run interleaves. A
        // refusal rolls back at once (no row lock left on a pooled connection).
        let mut tx = self.pool.begin().await?;
        match self.migrate_in(&mut tx, id, to, actor).await {
            Ok(done) => {
                tx.commit().await?;
                Ok(done)
            }
            Err(e) => {
                tx.rollback().await?;
                Err(e)
            }
        }
    }

    async fn migrate_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
        id: Uuid,
        to: &str,
        actor: &str,
    ) -> Result<(RunRow, MigrationRow), RunnerError> {
        let run = runs::lock(tx, id, None)
            .await?
            .ok_or(RunnerError::RunNotFound)?;
        if self.fsm.is_terminal(&run.state) {
            return Err(RunnerError::RunFinished);
        }
        let leased: bool = sqlx::query_scalar(
            "SELECT lease_holder IS NOT NULL AND lease_expires_at > now() \
               FROM runner.runs WHERE id = $1",
        )
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
        if leased {
            return Err(RunnerError::RunLeased);
        }
        let latest = runs::checkpoint(&self.pool, id, None)
            .await?
            .ok_or(RunnerError::CheckpointNotFound)?;
        if latest.version != run.version || !verifies(&latest.body, &latest.checksum) {
            return Err(RunnerError::CheckpointCorrupt);
        }
        let m = migration::migrate(
            &self.migrations,
            &latest.body,
            to,
            run.version + 1,
            run.generation + 1,
        )
        .map_err(|_| RunnerError::MigrationUnknown)?;
        if m.direction == Direction::Rollback {
            // Exact: the state given back is the one the forward migration started from.
            let forward = store::migrations(&self.pool, id)
                .await?
                .into_iter()
                .rev()
                .find(|f| {
                    f.direction == "forward" && f.migration == m.name && f.to_version == m.from
                });
            if forward.is_none_or(|f| f.before_sha256 != m.after_sha256) {
                return Err(RunnerError::RollbackNotExact);
            }
        }
        // The run row's progress follows its migrated checkpoint (a resume compares the two).
        let progress = progress_of(&m.checkpoint.body)
            .ok_or(RunnerError::MigrationUnknown)?
            .to_json()
            .to_string();
        let after = store::commit(
            tx,
            &run,
            None,
            None,
            &m.checkpoint,
            Some(&progress),
            Some(to),
        )
        .await?
        .ok_or(RunnerError::Fenced)?;
        let row = store::record_migration(
            tx,
            &NewMigration {
                run_id: id,
                migration: m.name,
                direction: m.direction.name(),
                from_version: &m.from,
                to_version: &m.to,
                before_sha256: &m.before_sha256,
                after_sha256: &m.after_sha256,
                rollback_rule: m.rollback_rule,
                checkpoint_version: after.version,
                actor,
            },
        )
        .await?;
        tracing::info!(
            run = %id,
            migration = m.name,
            direction = m.direction.name(),
            from = %m.from,
            to = %m.to,
            "state-schema migrated"
        );
        Ok((after, row))
    }
}
