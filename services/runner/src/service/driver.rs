//! The step loop: each runner process claims runnable runs under a lease (a new generation on
//! every claim or takeover, renewed by heartbeat), verifies the latest checkpoint before
//! resuming (a mismatch quarantines the run), and takes the control FSM's edges through the
//! workflow's steps, every state commit fenced by the generation it holds. The rules of what
//! to do next are pure (`domain::progress`); this module only reads, calls and commits.
//!
//! A commit refused by the fence means another runner holds the run (or a caller moved it):
//! the driver re-reads it and stops when the generation is no longer its own.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::Service;
use super::checkpoints::{MISMATCH_EVENT, RUNNER_ACTOR};
use super::runs::{RunRow, progress_of_row};
use crate::config::Settings;
use crate::domain::budgets::Budgets;
use crate::domain::checkpoint::{progress_of, verifies};
use crate::domain::migration::version_of;
use crate::domain::progress::{self, Next, Progress};
use crate::domain::trace;
use crate::domain::workflow::Workflow;
use crate::error::RunnerError;
use crate::model::{Answer, COLD_WAIT_MS, Failure, Held, Leased, Models};
use crate::store::runs::{self, NewTransition};
use crate::store::{leases, provenance};

/// Who records the verdict in Runner I: the runner's own obligation check, standing in for the
/// independent completion verifier (Runner II asks HelmLoop).
pub const VERIFIER_STAND_IN: &str = "runner-obligation-check";

/// One runner process's step loop.
pub struct Driver {
    service: Arc<Service>,
    models: Models,
    settings: Settings,
    /// This process's lease holder name (unique per process).
    holder: String,
}

/// Why driving a run stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The run reached a state the runner does not drive (terminal, quarantined, waiting).
    Idle,
    /// The run's generation moved: another runner holds it.
    Fenced,
    /// The run waits (a cold capability): given back, not claimed before this many ms.
    Waiting(u64),
}

impl Driver {
    pub fn new(service: Arc<Service>, models: Models, settings: Settings) -> Driver {
        let holder = format!("runner-{}-{}", std::process::id(), Uuid::new_v4().simple());
        Driver {
            service,
            models,
            settings,
            holder,
        }
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    fn ttl(&self) -> i64 {
        i64::try_from(self.settings.lease_ttl_ms).unwrap_or(i64::MAX)
    }

    /// Claim and drive runs until the process ends (at most `concurrency` at once).
    pub async fn run(self: Arc<Self>) {
        let slots = Arc::new(tokio::sync::Semaphore::new(self.settings.concurrency));
        let poll = Duration::from_millis(self.settings.poll_ms);
        tracing::info!(holder = %self.holder, "step loop started");
        loop {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            match leases::claim_in(
                &self.service.pool,
                &self.holder,
                self.ttl(),
                self.service.migrations.writes(),
            )
            .await
            {
                Ok(Some(run)) => {
                    let me = self.clone();
                    tokio::spawn(async move {
                        let id = run.id;
                        if let Err(e) = me.drive(run).await {
                            tracing::warn!(run = %id, error = %e, "driving a run failed; its lease will expire");
                        }
                        drop(slot);
                    });
                }
                Ok(None) => {
                    drop(slot);
                    tokio::time::sleep(poll).await;
                }
                Err(e) => {
                    drop(slot);
                    tracing::warn!(error = %e, "claiming a run failed");
                    tokio::time::sleep(poll).await;
                }
            }
        }
    }

    /// Drive a claimed run until it stops (a heartbeat renews its lease meanwhile).
    pub async fn drive(&self, claimed: RunRow) -> Result<Stopped, RunnerError> {
        let (id, generation) = (claimed.id, claimed.generation);
        tracing::info!(run = %id, generation, "run claimed");
        let heartbeat = {
            let (pool, holder, ttl) = (self.service.pool.clone(), self.holder.clone(), self.ttl());
            AbortOnDrop(tokio::spawn(async move {
                let every = Duration::from_millis(u64::try_from(ttl / 3).unwrap_or(1).max(1));
                loop {
                    tokio::time::sleep(every).await;
                    match leases::renew(&pool, id, generation, &holder, ttl).await {
                        Ok(true) => {}
                        Ok(false) => return,
                        Err(e) => tracing::warn!(run = %id, error = %e, "lease heartbeat failed"),
                    }
                }
            }))
        };
        let stopped = self.steps(claimed).await;
        drop(heartbeat);
        match stopped {
            Ok(Stopped::Idle) => {
                leases::release(&self.service.pool, id, generation, &self.holder, 0).await?;
            }
            Ok(Stopped::Waiting(ms)) => {
                let ms = i64::try_from(ms).unwrap_or(i64::MAX);
                leases::release(&self.service.pool, id, generation, &self.holder, ms).await?;
            }
            _ => {}
        }
        if matches!(stopped, Ok(Stopped::Fenced)) {
            tracing::info!(run = %id, generation, "fenced: another runner holds the run; stopped driving it");
        }
        stopped
    }

    async fn steps(&self, claimed: RunRow) -> Result<Stopped, RunnerError> {
        let s = &self.service;
        let mut run = match self.resume(claimed).await? {
            Ok(run) => run,
            Err(stopped) => return Ok(stopped),
        };
        let Ok(workflow) = Workflow::parse(&leases::workflow(&s.pool, run.id).await?) else {
            // Validated at start: a stored document that no longer parses is not driven.
            tracing::error!(run = %run.id, "stored workflow does not parse; not driving it");
            return Ok(Stopped::Idle);
        };
        let budgets = Budgets(run.budgets.map(|b| u64::try_from(b).unwrap_or(0)));
        // A Dispatcher lease granted while waiting, used by the call right after `capability_warm`.
        let mut held: Option<Held> = None;
        loop {
            let p = progress_of_row(&run);
            // The wall-clock budget, before anything else the run would do.
            if progress::wall_exhausted(&budgets, elapsed_ms(&run))
                && s.fsm.next(&run.state, BUDGET_EVENT).is_some()
            {
                return match self.advance(&run, BUDGET_EVENT, &p).await? {
                    Some(_) => Ok(Stopped::Idle),
                    None => Ok(Stopped::Fenced),
                };
            }
            let (event, after, then) =
                match progress::next(&workflow, &budgets, &run.state, &p, run.generation) {
                    Next::Idle => return Ok(Stopped::Idle),
                    Next::Commit { event, progress } => (event, *progress, Then::Go),
                    Next::Probe { index } => match self.lease(&run, &workflow, index, &p).await {
                        Leased::Granted(h) => {
                            held = Some(h);
                            (
                                "capability_warm",
                                progress::warm(&p, run.generation),
                                Then::Go,
                            )
                        }
                        Leased::Cold { wait_ms } => return Ok(Stopped::Waiting(wait_ms)),
                        Leased::Failed(_) => return Ok(Stopped::Waiting(COLD_WAIT_MS)),
                    },
                    Next::Call { index } => {
                        // Never call a step without the run's lease: the generation must still
                        // be ours.
                        if !leases::renew(&s.pool, run.id, run.generation, &self.holder, self.ttl())
                            .await?
                        {
                            self.give_back(&mut held).await;
                            return Ok(Stopped::Fenced);
                        }
                        let step = &workflow.steps[index].id;
                        match self.call(&run, &workflow, index, &p, held.take()).await {
                            Called::Done(answer) => {
                                let tokens = answer.tokens;
                                let (event, q) = progress::after_result(
                                    &budgets,
                                    &p,
                                    step,
                                    answer.digest,
                                    tokens,
                                );
                                if progress::wall_exhausted(&budgets, elapsed_ms(&run)) {
                                    // The wall clock ran out during the call: the result is
                                    // not ingested (its tokens were spent all the same).
                                    let mut spent = p.clone();
                                    spent.used.tokens += tokens;
                                    (BUDGET_EVENT, spent, Then::Go)
                                } else {
                                    (event, q, Then::Go)
                                }
                            }
                            Called::Cold { wait_ms } => {
                                ("capability_cold", p.clone(), Then::Wait(wait_ms))
                            }
                            Called::Failed(Failure::Transient) => {
                                let seed = fresh_seed();
                                let (event, q) =
                                    progress::retry(&budgets, &p, run.generation, seed);
                                let wait =
                                    progress::backoff_ms(q.jitter_seed.unwrap_or(seed), p.attempt);
                                (event, q, Then::Backoff(wait))
                            }
                            Called::Failed(Failure::Permanent) => {
                                ("permanent_failure", p.clone(), Then::Go)
                            }
                        }
                    }
                };
            // At 80 % of a budget, the commit's checkpoint carries the residual-work handoff.
            let after = progress::soft_boundary(
                &workflow,
                &budgets,
                after,
                elapsed_ms(&run),
                run.version + 1,
            );
            let capability = trace::capability(&workflow, event, &p);
            run = match self.advance_on(&run, event, &after, capability).await? {
                Some(after) => after,
                None => match runs::get(&s.pool, run.id, None).await? {
                    Some(now) if now.generation == run.generation => {
                        self.give_back(&mut held).await;
                        now
                    }
                    _ => {
                        self.give_back(&mut held).await;
                        return Ok(Stopped::Fenced);
                    }
                },
            };
            match then {
                Then::Go => {}
                Then::Wait(ms) => return Ok(Stopped::Waiting(ms)),
                Then::Backoff(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            }
        }
    }

    /// Give back a Dispatcher lease this loop holds and will not use.
    async fn give_back(&self, held: &mut Option<Held>) {
        if let Some(h) = held.take() {
            self.models.release(&h).await;
        }
    }

    /// Lease the capability of model step `index` for the attempt in flight.
    async fn lease(&self, run: &RunRow, w: &Workflow, index: usize, p: &Progress) -> Leased {
        let Some((family, model)) = progress::model_of(w, index) else {
            return Leased::Failed(Failure::Permanent);
        };
        let run_id = run.id.hyphenated().to_string();
        // One request id per attempt and generation: a retry of a lost answer gets the same
        // grant, never a second lease.
        let request_id = format!("{run_id}.{index}.{}.{}", p.attempt, run.generation);
        let attempt_id = format!("{}.{}", w.steps[index].id, p.attempt);
        self.models
            .lease(
                family,
                model,
                &self.holder,
                &run_id,
                &attempt_id,
                &request_id,
            )
            .await
    }

    /// Check the run's latest checkpoint before resuming it: its checksum must verify, it must
    /// be of the run's version, and its progress must be the row's. Otherwise the run is
    /// quarantined for recovery review (and not driven).
    async fn resume(&self, run: RunRow) -> Result<Result<RunRow, Stopped>, RunnerError> {
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
    async fn advance(
        &self,
        run: &RunRow,
        event: &str,
        progress: &Progress,
    ) -> Result<Option<RunRow>, RunnerError> {
        self.advance_on(run, event, progress, "").await
    }

    /// [`Self::advance`] naming the capability of the step the transition concerns (a trace
    /// field of the contract).
    async fn advance_on(
        &self,
        run: &RunRow,
        event: &str,
        progress: &Progress,
        capability: &str,
    ) -> Result<Option<RunRow>, RunnerError> {
        let s = &self.service;
        let Some(edge) = s.fsm.next(&run.state, event) else {
            // The rules only issue events the FSM has from the state; never commit another.
            tracing::error!(run = %run.id, state = %run.state, event, "no FSM edge; not committing");
            return Err(RunnerError::Fenced);
        };
        let to = edge.to.clone();
        let actor = if event == "verified_pass" || event == "verified_reject" {
            VERIFIER_STAND_IN
        } else {
            RUNNER_ACTOR
        };
        let checkpoint = s.checkpoint_with(run, run.version + 1, &to, progress);
        let json = progress.to_json().to_string();
        let mut tx = s.pool.begin().await?;
        let after = runs::commit_with(
            &mut tx,
            run,
            &NewTransition {
                source_state: &run.state,
                target_state: &to,
                trigger: event,
                actor,
                capability,
            },
            s.fsm.category(&to),
            &checkpoint,
            Some(&json),
        )
        .await?;
        if let (Some(a), "step_result", false) = (&after, event, capability.is_empty()) {
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
        if let Some(a) = &after {
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
        Ok(after)
    }

    /// Call step `index` of `w` for `run` (a model step under a Dispatcher lease: `held`, or
    /// one leased now, always released after the call).
    async fn call(
        &self,
        run: &RunRow,
        w: &Workflow,
        index: usize,
        p: &Progress,
        held: Option<Held>,
    ) -> Called {
        let step = &w.steps[index];
        if progress::model_of(w, index).is_none() {
            if self.settings.task_step_ms > 0 {
                tokio::time::sleep(Duration::from_millis(self.settings.task_step_ms)).await;
            }
            let run_id = run.id.hyphenated().to_string();
            return Called::Done(Answer {
                digest: progress::task_digest(&run_id, &step.id, &run.input_sha256),
                tokens: 0,
            });
        }
        let held = match held {
            Some(h) => h,
            None => match self.lease(run, w, index, p).await {
                Leased::Granted(h) => h,
                Leased::Cold { wait_ms } => return Called::Cold { wait_ms },
                Leased::Failed(f) => return Called::Failed(f),
            },
        };
        let input = match leases::input(&self.service.pool, run.id).await {
            Ok(input) => input,
            Err(e) => {
                tracing::warn!(run = %run.id, error = %e, "reading the run's input failed");
                self.models.release(&held).await;
                return Called::Failed(Failure::Transient);
            }
        };
        let answer = self.models.chat(&held, &step.id, &input).await;
        self.models.release(&held).await;
        match answer {
            Ok(a) => Called::Done(a),
            Err(f) => Called::Failed(f),
        }
    }
}

/// The FSM event of a spent budget.
const BUDGET_EVENT: &str = "budget_exhausted";

/// Milliseconds since the run's creation (the database's clock at its creation; this host's
/// now).
fn elapsed_ms(run: &RunRow) -> u64 {
    let d = time::OffsetDateTime::now_utc() - run.created_at;
    u64::try_from(d.whole_milliseconds()).unwrap_or(0)
}

/// What a step's call came to.
enum Called {
    Done(Answer),
    Cold { wait_ms: u64 },
    Failed(Failure),
}

/// What the loop does after a commit.
enum Then {
    Go,
    /// Give the run back, not to be claimed before this many ms (a typed wait).
    Wait(u64),
    /// Sleep this many ms before the next attempt (the recorded seed's backoff).
    Backoff(u64),
}

/// A fresh jitter seed (recorded on the run at its first retry).
fn fresh_seed() -> u64 {
    let bits = Uuid::new_v4().as_u128();
    (bits >> 64) as u64 ^ bits as u64
}

/// A task aborted when dropped (the heartbeat of a run no longer driven).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
