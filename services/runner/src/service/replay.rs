//! `ReplayRun`: re-execute a finished run's transitions from its record, read-only, under the
//! versions it recorded, and report the first divergence (`domain::replay`). The record is read
//! in one read-only transaction (`store::replay`); the re-execution is a pure computation over
//! those rows — it calls no runtime, no Dispatcher, no Ward for an effect, and writes nothing.

use uuid::Uuid;

use super::Service;
use super::runs::Reader;
use crate::domain::budgets::Budgets;
use crate::domain::checkpoint::Envelope;
use crate::domain::replay::{self, Input, Kind, Recorded, Report};
use crate::domain::run::sha256;
use crate::domain::workflow::Workflow;
use crate::error::RunnerError;
use crate::store::replay::{self as store, Record};

/// A replay's answer: what it found and the frozen versions it replayed under.
pub struct Replayed {
    pub report: Report,
    pub workflow_version: String,
    pub state_schema_version: String,
    pub fsm_sha256: String,
    pub rules_version: &'static str,
}

impl Service {
    /// Replay run `id`, as `reader` may see it.
    pub async fn replay(&self, id: Uuid, reader: Reader<'_>) -> Result<Replayed, RunnerError> {
        let mut record = store::load(&self.pool, id, reader.owner())
            .await?
            .ok_or(RunnerError::RunNotFound)?;
        if record.run.terminal_category.is_none() {
            return Err(RunnerError::RunNotEnded);
        }
        let (workflow, recorded) = self.replayable(&mut record)?;
        let run = &record.run;
        let run_id = run.id.hyphenated().to_string();
        let frozen = replay::Frozen {
            fsm: &self.fsm,
            workflow: &workflow,
            budgets: Budgets(run.budgets.map(|b| u64::try_from(b).unwrap_or(0))),
            run_id: &run_id,
            created_ns: run.created_at.unix_timestamp_nanos(),
            deadline_ns: run.deadline_at.map(|d| d.unix_timestamp_nanos()),
            envelope: Envelope {
                workflow_name: &run.workflow_name,
                workflow_version: &run.workflow_version,
                workflow_sha256: &run.workflow_sha256,
                state_schema_version: &run.state_schema_version,
                fsm_sha256: &run.fsm_sha256,
            },
        };
        let report = replay::replay(&frozen, &recorded);
        tracing::info!(
            run = %id,
            replayed = report.replayed,
            total = report.total,
            diverged = report.divergence.is_some(),
            "run replayed"
        );
        Ok(Replayed {
            report,
            workflow_version: run.workflow_version.clone(),
            state_schema_version: run.state_schema_version.clone(),
            fsm_sha256: run.fsm_sha256.clone(),
            rules_version: replay::RULES_VERSION,
        })
    }

    /// The workflow and the transitions of `record`, when this process can replay them: its
    /// inputs recorded under the rules it runs, its FSM the one the process is bound to, its
    /// state-schema version the one it writes and never migrated (every checkpoint a
    /// transition's), its workflow the bytes it was started with.
    /// The bytes of checkpoints and inputs move out of `record` (no copy).
    fn replayable(&self, record: &mut Record) -> Result<(Workflow, Vec<Recorded>), RunnerError> {
        let run = &record.run;
        let unsupported = RunnerError::ReplayUnsupported;
        let migrated = usize::try_from(record.checkpoints).ok() != Some(record.steps.len());
        if record.inputs_recorded != Some(true)
            || run.fsm_sha256 != self.fsm.sha256()
            || run.state_schema_version != self.migrations.writes()
            || migrated
            || sha256(&record.workflow) != run.workflow_sha256
            || record
                .inputs
                .iter()
                .any(|i| i.rules_version != replay::RULES_VERSION)
        {
            return Err(unsupported);
        }
        let workflow = Workflow::parse(&record.workflow).map_err(|_| unsupported)?;
        let mut inputs = record.inputs.iter_mut().peekable();
        let mut recorded = Vec::with_capacity(record.steps.len());
        for (i, s) in record.steps.iter_mut().enumerate() {
            let Some((checksum, body)) = s.checkpoint.take() else {
                return Err(RunnerError::ReplayUnsupported);
            };
            if usize::try_from(s.version).ok() != Some(i + 1) {
                return Err(RunnerError::ReplayUnsupported);
            }
            let mut mine = Vec::new();
            while let Some(row) = inputs.next_if(|r| r.version == s.version) {
                let kind = Kind::parse(&row.kind).ok_or(RunnerError::ReplayUnsupported)?;
                let meta =
                    serde_json::from_str(&row.meta).map_err(|_| RunnerError::ReplayUnsupported)?;
                mine.push(Input {
                    kind,
                    meta,
                    body: std::mem::take(&mut row.body),
                });
            }
            recorded.push(Recorded {
                version: s.version,
                generation: s.generation,
                trigger: std::mem::take(&mut s.trigger),
                actor: std::mem::take(&mut s.actor),
                target_state: std::mem::take(&mut s.target_state),
                checksum,
                body,
                inputs: mine,
            });
        }
        // Inputs of a version without a transition: a record this process did not write.
        if inputs.next().is_some() {
            return Err(RunnerError::ReplayUnsupported);
        }
        Ok((workflow, recorded))
    }
}
