//! The driver's state commits: the resume check of a claimed run's latest checkpoint, and
//! every FSM event it commits (fenced, with the tree's gate, the provenance of a model answer
//! and a descendant's charge to its root in one transaction).

use super::*;

impl Driver {
    /// Check the run's latest checkpoint before resuming it: its checksum must verify, it must
    /// be of the run's version, and its progress must be the row's. Otherwise the run is
    /// quarantined for recovery review (and not driven).
    pub(super) async fn resume(&self, run: RunRow) -> Result<Result<RunRow, Stopped>, RunnerError> {
        let s = &self.service;
        let latest = runs::checkpoint(&s.pool, run.id, None).await?;
        // A run in a state-schema version this process does not write is not driven (nothing is
        // corrupt: it is migrated first); claims skip such runs, this is the last guard.
        if run.state_schema_version != s.migrations.writes() {
            tracing::warn!(run = %run.id, state_schema_version = %run.state_schema_version, "state-schema version not written by this process; not resuming");
            return Ok(Err(Stopped::Idle));
        }
        let sound = latest.as_ref().is_some_and(|c| {
            c.version == run.version
                && verifies(&c.body, &c.checksum)
                && version_of(&c.body).as_deref() == Some(run.state_schema_version.as_str())
                && progress_of(&c.body).as_ref() == Some(&progress_of_row(&run))
        });
        if sound {
            return Ok(Ok(run));
        }
        tracing::warn!(run = %run.id, version = run.version, "checkpoint does not verify on resume; quarantining");
        let Some(edge) = s.fsm.next(&run.state, MISMATCH_EVENT) else {
            return Ok(Err(Stopped::Idle));
        };
        let mut tx = s.pool.begin().await?;
        let to = edge.to.clone();
        let taken = s
            .take(&mut tx, &run, &to, MISMATCH_EVENT, RUNNER_ACTOR)
            .await?;
        tx.commit().await?;
        // Fenced: what was read is stale (another runner holds the run); nothing was written.
        Ok(Err(if taken.is_some() {
            Stopped::Idle
        } else {
            Stopped::Fenced
        }))
    }

    /// Commit FSM `event` from the run's state with `progress`, under the fence; `None` when
    /// the fence moved (nothing written).
    pub(super) async fn advance(
        &self,
        w: &Workflow,
        run: &RunRow,
        event: &str,
        progress: &Progress,
        tape: &mut Tape,
    ) -> Result<Option<RunRow>, RunnerError> {
        self.advance_on(w, run, event, progress, "", tape).await
    }

    /// [`Self::advance`] naming the capability of the step the transition concerns (a trace
    /// field of the contract).
    pub(super) async fn advance_on(
        &self,
        w: &Workflow,
        run: &RunRow,
        event: &str,
        progress: &Progress,
        capability: &str,
        tape: &mut Tape,
    ) -> Result<Option<RunRow>, RunnerError> {
        let s = &self.service;
        let before = progress_of_row(run);
        // A commit that consumes (steps, tokens, tool calls, cost) counts against its tree's
        // root: the tree's totals are checked against the root's budgets. A descendant's
        // commit locks the root's row first (lock order: root, then the run) and adds its
        // consumption to the root in its transaction; a model answer's provenance is written
        // in that transaction too. A root's own commit without an answer checks its totals as
        // read and fences on its descendants' (`Holder::desc`): its one statement alone (one
        // round trip), as is a commit that consumes nothing.
        let consumes = tree::delta(&before.used, &progress.used) != [0; 4];
        let answer = event == "step_result" && !capability.is_empty();
        let root_alone = consumes && !answer && run.root_run_id.is_none();
        // The budget governor ending a run whose effect outcome nobody knows writes its
        // `reconciliation` ledger entry in the ending's transaction.
        let unknown = progress
            .effect
            .as_ref()
            .filter(|_| run.state == RECONCILING && matches!(event, BUDGET_EVENT | DEADLINE_EVENT))
            .map(|e| e.sequence);
        let mut tx = if ((consumes || answer) && !root_alone) || unknown.is_some() {
            Some(s.pool.begin().await?)
        } else {
            None
        };
        let (event, progress) = match tx.as_mut() {
            Some(tx) => gate(tx, w, run, &before, event, progress.clone(), tape).await?,
            None if root_alone => gate_root(w, run, &before, event, progress.clone(), tape),
            None => (event, progress.clone()),
        };
        let Some(edge) = s.fsm.next(&run.state, event) else {
            // The rules only issue events the FSM has from the state; never commit another.
            tracing::error!(run = %run.id, state = %run.state, event, "no FSM edge; not committing");
            return Err(RunnerError::Fenced);
        };
        let to = edge.to.clone();
        let actor = if progress.verification.is_some()
            && matches!(
                event,
                "verified_pass"
                    | "verification_hold"
                    | "verification_reject"
                    | "verification_changed"
            ) {
            HELMLOOP_VERIFIER
        } else if event == "verified_reject" {
            // An open obligation's repair round: the runner's own obligation check (it never
            // ends a run in success: `verified_pass` is HelmLoop's alone).
            OBLIGATION_CHECK
        } else if event == BUDGET_EVENT || event == DEADLINE_EVENT {
            BUDGET_GOVERNOR
        } else {
            RUNNER_ACTOR
        };
        let checkpoint = s.checkpoint_with(run, run.version + 1, &to, &progress);
        let t = NewTransition {
            source_state: &run.state,
            target_state: &to,
            trigger: event,
            actor,
            capability,
        };
        let category = s.fsm.category(&to);
        // The holder's commit is also its heartbeat.
        let renew = Some(Holder {
            renew_ms: self.ttl(),
            desc: root_alone.then_some(run.desc),
            inputs: tape,
        });
        let Some(mut tx) = tx.take() else {
            let after = runs::commit_with(
                &s.pool,
                run,
                &t,
                category,
                &checkpoint,
                Some(&progress),
                renew,
            )
            .await?;
            log_committed(run, after.as_ref(), event, actor);
            return Ok(after);
        };
        let after = runs::commit_with(
            &mut *tx,
            run,
            &t,
            category,
            &checkpoint,
            Some(&progress),
            renew,
        )
        .await?;
        let charged = tree::delta(&before.used, &progress.used);
        if after.is_some() && run.root_run_id.is_some() && charged != [0; 4] {
            crate::store::tree::charge(
                &mut tx,
                run.root(),
                charged.map(|x| i64::try_from(x).unwrap_or(i64::MAX)),
            )
            .await?;
        }
        if let (Some(a), Some(sequence)) = (&after, unknown) {
            crate::store::effects::append(
                &mut *tx,
                a.id,
                sequence,
                "reconciliation",
                run.generation,
                actor,
                &unresolved(event, &a.state, a.version),
            )
            .await?;
        }
        if let (Some(a), true) = (&after, answer) {
            // A model answer the run uses is a retrieved source (its digest only).
            provenance::record_answer(
                &mut tx,
                a.id,
                a.version,
                capability,
                progress.results.last(),
            )
            .await?;
        }
        tx.commit().await?;
        log_committed(run, after.as_ref(), event, actor);
        Ok(after)
    }
}

/// The `reconciliation` ledger entry of an unknown outcome the budget governor ended
/// (`event`: `budget_exhausted` or `deadline_passed`) in `terminal` at run version `version`:
/// nobody settled it, and it stays unknown (never success, never a plain failure).
fn unresolved(event: &str, terminal: &str, version: i64) -> serde_json::Value {
    serde_json::json!({
        "resolution": "unresolved", "outcome": "unknown", "ended_by": event,
        "terminal_state": terminal, "version": version,
    })
}

/// The log event of a committed transition (its trace fields are on its span).
pub(super) fn log_committed(run: &RunRow, after: Option<&RunRow>, event: &str, actor: &str) {
    if let Some(a) = after {
        tracing::info!(
            run_id = %a.id,
            workflow_version = %a.workflow_version,
            state_schema_version = %a.state_schema_version,
            source_state = %run.state,
            target_state = %a.state,
            trigger = event,
            actor,
            generation = a.generation,
            checkpoint_id = a.version,
            "transition committed"
        );
    }
}
