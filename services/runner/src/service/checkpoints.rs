//! Checkpoints: read one back and verify its checksum. A corrupt latest checkpoint
//! quarantines the run (the FSM's `checksum_mismatch` edge, issued by the runner itself) for
//! recovery review; the quarantine commits its own, fresh checkpoint.

use uuid::Uuid;

use super::Service;
use super::runs::{Reader, RunRow};
use crate::domain::checkpoint::verifies;
use crate::error::RunnerError;
use crate::store::provenance;
pub use crate::store::provenance::SnapshotRow;
use crate::store::runs;
pub use crate::store::runs::CheckpointRow;

/// The FSM event a checksum mismatch is.
pub const MISMATCH_EVENT: &str = "checksum_mismatch";
/// Who issues it.
pub const RUNNER_ACTOR: &str = "runner";

/// A checkpoint read back.
pub struct Inspected {
    pub checkpoint: CheckpointRow,
    /// Its checksum verifies over its body.
    pub verified: bool,
    /// The run after the inspection (quarantined when its latest checkpoint is corrupt).
    pub run: RunRow,
}

impl Service {
    /// Checkpoint `version` (the latest when `None`) of run `id`, as `reader` may see it.
    pub async fn inspect(
        &self,
        id: Uuid,
        reader: Reader<'_>,
        version: Option<i64>,
    ) -> Result<Inspected, RunnerError> {
        let run = self.get(id, reader).await?;
        let checkpoint = runs::checkpoint(&self.pool, id, version)
            .await?
            .ok_or(RunnerError::CheckpointNotFound)?;
        let verified = verifies(&checkpoint.body, &checkpoint.checksum);
        if verified || checkpoint.version != run.version {
            return Ok(Inspected {
                checkpoint,
                verified,
                run,
            });
        }
        tracing::warn!(run = %id, version = checkpoint.version, "checkpoint checksum mismatch");
        let run = self.quarantine(id, reader, checkpoint.version).await?;
        Ok(Inspected {
            checkpoint,
            verified,
            run,
        })
    }

    /// The provenance snapshots of run `id`, as `reader` may see it.
    pub async fn provenance(
        &self,
        id: Uuid,
        reader: Reader<'_>,
    ) -> Result<Vec<SnapshotRow>, RunnerError> {
        self.get(id, reader).await?;
        Ok(provenance::list(&self.pool, id).await?)
    }

    /// Quarantine run `id` whose checkpoint of `version` is corrupt, if the run is still at
    /// that version and its state has the FSM's `checksum_mismatch` edge; the run after.
    async fn quarantine(
        &self,
        id: Uuid,
        reader: Reader<'_>,
        version: i64,
    ) -> Result<RunRow, RunnerError> {
        let mut tx = self.pool.begin().await?;
        let run = runs::lock(&mut tx, id, reader.owner())
            .await?
            .ok_or(RunnerError::RunNotFound)?;
        let edge = match self.fsm.next(&run.state, MISMATCH_EVENT) {
            Some(edge) if run.version == version => edge,
            // Moved on, already quarantined, or ended: nothing to do.
            _ => return Ok(run),
        };
        let after = self
            .take(&mut tx, &run, &edge.to, MISMATCH_EVENT, RUNNER_ACTOR)
            .await?
            .ok_or(RunnerError::Fenced)?;
        tx.commit().await?;
        Ok(after)
    }
}
