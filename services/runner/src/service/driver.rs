//! The step loop: each runner process claims runnable runs under a lease (a new generation on
//! every claim or takeover, renewed by heartbeat), verifies the latest checkpoint before
//! resuming (a mismatch quarantines the run), and takes the control FSM's edges through the
//! workflow's steps, every state commit fenced by the generation it holds. The rules of what
//! to do next are pure (`domain::progress`); this module only reads, calls and commits.
//!
//! A commit refused by the fence means another runner holds the run (or a caller moved it):
//! the driver re-reads it and stops when the generation is no longer its own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::Service;
use super::checkpoints::{MISMATCH_EVENT, RUNNER_ACTOR};
use super::runs::{RunRow, progress_of_row};
use crate::adapter::HttpAdapter;
use crate::config::Settings;
use crate::consent::Consents;
use crate::domain::budgets::Budgets;
use crate::domain::checkpoint::{progress_of, verifies};
use crate::domain::migration::version_of;
use crate::domain::progress::{self, Next, Progress};
use crate::domain::replay::{Input, Tape};
use crate::domain::trace;
use crate::domain::tree;
use crate::domain::workflow::Workflow;
use crate::error::RunnerError;
use crate::model::{COLD_WAIT_MS, Failure, Held, Leased, Models};
use crate::store::leases;
use crate::store::provenance;
use crate::store::runs::{self, Holder, NewTransition};

/// Who records a repair round (`verified_reject`: an obligation still open at `VERIFY`): the
/// runner's own obligation check. It never records a success: a run succeeds only on the
/// independent verifier's PASS (`verify::HELMLOOP_VERIFIER`).
pub const OBLIGATION_CHECK: &str = "runner-obligation-check";

/// One runner process's step loop.
pub struct Driver {
    service: Arc<Service>,
    models: Models,
    /// Ward's consent and the effect permission (effects wait without it).
    consents: Consents,
    /// The effect adapter (it alone holds the effect credential).
    adapter: HttpAdapter,
    settings: Settings,
    /// The independent verifier's peers (HelmLoop and Ward; none by default).
    verifier: crate::verifier::Verifier,
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
        let adapter = HttpAdapter::new(
            settings.effects.credential.clone(),
            Duration::from_millis(settings.effects.timeout_ms),
        );
        Driver {
            service,
            models,
            consents: Consents::none(),
            adapter,
            settings,
            verifier: crate::verifier::Verifier::none(),
            holder,
        }
    }

    /// This driver asking `verifier` at `VERIFY` (workflows with `verification`).
    pub fn with_verifier(mut self, verifier: crate::verifier::Verifier) -> Driver {
        self.verifier = verifier;
        self
    }

    /// This driver asking Ward's consent (and the effect permission) through `consents`.
    pub fn with_consents(mut self, consents: Consents) -> Driver {
        self.consents = consents;
        self
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    fn ttl(&self) -> i64 {
        i64::try_from(self.settings.lease_ttl_ms).unwrap_or(i64::MAX)
    }

    fn half_ttl(&self) -> Duration {
        Duration::from_millis(self.settings.lease_ttl_ms / 2)
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
                    // Idle: release an ended run's consents whose ask is still due…
                    while let Ok(true) = self.service.release_due(&self.consents).await {}
                    // …and compensate an ended run's confirmed effects still due.
                    while let Ok(true) = self
                        .service
                        .compensate_due(&self.consents, &self.adapter)
                        .await
                    {}
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
        // Until when this loop knows the run's lease is still its own without asking: half a
        // TTL after the send of the last commit or renewal that extended it (the database
        // extends it from its own later `now()`, so this errs early). Past it, a step is called
        // only after a renewal.
        let mut known_until: Option<Instant> = None;
        loop {
            let p = progress_of_row(&run);
            let now = time::OffsetDateTime::now_utc();
            // Every nondeterministic input this commit's rules read, in order (recorded by the
            // commit's own statement: `domain::replay`).
            let mut tape: Tape = vec![Input::clock_loop(
                now.unix_timestamp_nanos(),
                run.updated_at.unix_timestamp_nanos(),
            )];
            // A wait in progress counts as suspended from its committed start (the run row's
            // `updated_at`, written by the fenced commit that entered the waiting state).
            let open_wait = if WAITING.contains(&run.state.as_str()) {
                ms_between(run.updated_at, now)
            } else {
                0
            };
            let clocks = progress::Clocks {
                elapsed_ms: ms_between(run.created_at, now),
                suspended_ms: p.used.suspended_ms.saturating_add(open_wait),
            };
            // The caller's deadline, then the budgets of time, before anything else the run
            // would do (the open wait is charged to the progress the terminal commit records).
            let deadline = run.deadline_at.is_some_and(|d| now >= d);
            let timed = if deadline {
                Some(DEADLINE_EVENT)
            } else if progress::wall_exhausted(&budgets, clocks.elapsed_ms)
                || progress::suspended_exhausted(&budgets, clocks.suspended_ms)
            {
                Some(BUDGET_EVENT)
            } else {
                None
            };
            if let Some(event) = timed.filter(|e| s.fsm.next(&run.state, e).is_some()) {
                let mut spent = p.clone();
                spent.used.suspended_ms = clocks.suspended_ms;
                let spent =
                    progress::soft_boundary(&workflow, &budgets, spent, clocks, run.version + 1);
                return match self
                    .advance(&workflow, &run, event, &spent, &mut tape)
                    .await?
                {
                    Some(_) => {
                        // An ending of a wait for a consent marked its release: asked at once
                        // (a failed ask stays due for the idle loop).
                        s.release(&self.consents, run.id).await?;
                        Ok(Stopped::Idle)
                    }
                    None => Ok(Stopped::Fenced),
                };
            }
            // How long a wait may last before a deadline or a time budget needs the run again.
            let cap = |ms: u64| ms.min(time_left_ms(&run, &budgets, clocks, now)).max(10);
            if run.state == RECONCILING {
                // A person settles the unknown outcome (`ResolveUnknownOutcome`); the run is
                // looked at again only when a budget or its deadline would end it (above).
                return Ok(Stopped::Waiting(cap(u64::MAX)));
            }
            let (event, after, then) =
                match progress::next(&workflow, &budgets, &run.state, &p, run.generation) {
                    Next::Idle => return Ok(Stopped::Idle),
                    Next::Verify => match self.verify(&run, &workflow, &p, open_wait).await {
                        Verified::Commit(event, q, None) => (event, *q, Then::Go),
                        Verified::Commit(event, q, Some(ms)) => (event, *q, Then::Wait(cap(ms))),
                        Verified::Wait(ms) => return Ok(Stopped::Waiting(cap(ms))),
                    },
                    Next::Effect => match self.effect_step(&workflow, &run, &p, open_wait).await? {
                        Effected::Committed(Some(after)) => {
                            known_until = None;
                            run = *after;
                            continue;
                        }
                        Effected::Committed(None) => {
                            match runs::get(&s.pool, run.id, None).await? {
                                Some(now) if now.generation == run.generation => {
                                    run = now;
                                    continue;
                                }
                                _ => return Ok(Stopped::Fenced),
                            }
                        }
                        Effected::Wait(ms) => return Ok(Stopped::Waiting(cap(ms))),
                    },
                    Next::Commit { event, progress } => (event, *progress, Then::Go),
                    Next::Probe { index } => match self.lease(&run, &workflow, index, &p).await {
                        Leased::Granted(h) => {
                            tape.push(Input::granted(&h.lease_id));
                            held = Some(h);
                            (
                                "capability_warm",
                                progress::resumed(&p, open_wait, run.generation),
                                Then::Go,
                            )
                        }
                        Leased::Cold { wait_ms } => return Ok(Stopped::Waiting(cap(wait_ms))),
                        Leased::Failed(_) => return Ok(Stopped::Waiting(cap(COLD_WAIT_MS))),
                    },
                    Next::Call { index } => {
                        // Never call a step without the run's lease: the generation must still
                        // be ours.
                        if known_until.is_none_or(|t| Instant::now() >= t) {
                            let sent = Instant::now();
                            if !leases::renew(
                                &s.pool,
                                run.id,
                                run.generation,
                                &self.holder,
                                self.ttl(),
                            )
                            .await?
                            {
                                self.give_back(&mut held).await;
                                return Ok(Stopped::Fenced);
                            }
                            known_until = Some(sent + self.half_ttl());
                        }
                        let step = &workflow.steps[index].id;
                        match self.call(&run, &workflow, index, &p, held.take()).await {
                            Called::Done(outcome, input) => {
                                tape.push(input);
                                let now = time::OffsetDateTime::now_utc();
                                tape.push(Input::clock("after_call", now.unix_timestamp_nanos()));
                                if run.deadline_at.is_some_and(|d| now >= d) {
                                    // The deadline passed during the call: the result is not
                                    // ingested (its tokens and cost were spent all the same).
                                    (DEADLINE_EVENT, progress::charged(&p, &outcome), Then::Go)
                                } else if progress::wall_exhausted(
                                    &budgets,
                                    ms_between(run.created_at, now),
                                ) {
                                    // The wall clock ran out during the call: likewise.
                                    (BUDGET_EVENT, progress::charged(&p, &outcome), Then::Go)
                                } else {
                                    let (event, q) =
                                        progress::after_result(&budgets, &p, step, outcome);
                                    (event, q, Then::Go)
                                }
                            }
                            Called::Cold { wait_ms } => {
                                tape.push(Input::cold(wait_ms));
                                ("capability_cold", p.clone(), Then::Wait(cap(wait_ms)))
                            }
                            Called::Failed(Failure::Transient) => {
                                let seed = fresh_seed();
                                tape.push(Input::failed(false));
                                tape.push(Input::random(seed));
                                let (event, q) =
                                    progress::retry(&budgets, &p, run.generation, seed);
                                let wait =
                                    progress::backoff_ms(q.jitter_seed.unwrap_or(seed), p.attempt);
                                (event, q, Then::Backoff(wait))
                            }
                            Called::Failed(Failure::Permanent) => {
                                tape.push(Input::failed(true));
                                ("permanent_failure", p.clone(), Then::Go)
                            }
                        }
                    }
                };
            // At 80 % of a budget, the commit's checkpoint carries the residual-work handoff.
            let now = time::OffsetDateTime::now_utc();
            tape.push(Input::clock("boundary", now.unix_timestamp_nanos()));
            let clocks = progress::Clocks {
                elapsed_ms: ms_between(run.created_at, now),
                suspended_ms: after.used.suspended_ms,
            };
            let after =
                progress::soft_boundary(&workflow, &budgets, after, clocks, run.version + 1);
            let sent = Instant::now();
            let capability = trace::capability(&workflow, event, &p);
            run = match self
                .advance_on(&workflow, &run, event, &after, capability, &mut tape)
                .await?
            {
                Some(after) => {
                    known_until = Some(sent + self.half_ttl());
                    after
                }
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
}

/// The state in which an unknown effect outcome waits for a person (a waiting state).
const RECONCILING: &str = super::effects::HUMAN_RECONCILIATION;
/// The FSM event of a spent budget.
const BUDGET_EVENT: &str = "budget_exhausted";
/// The FSM event of a passed deadline (`StartRun.timeout_seconds`).
const DEADLINE_EVENT: &str = "deadline_passed";
/// The actor of a budget's or a deadline's terminal: the FSM's issuer of those events (the
/// contract's `hard_boundary_owner`, "external budget governor"); in Runner I the runner's
/// own check of the durable counts stands in for it.
pub const BUDGET_GOVERNOR: &str = "runner-budget-check";
/// What the loop does after a commit.
enum Then {
    Go,
    /// Give the run back, not to be claimed before this many ms (a typed wait).
    Wait(u64),
    /// Sleep this many ms before the next attempt (the recorded seed's backoff).
    Backoff(u64),
}

mod clocks;
mod commit;
mod effects;
mod steps;
mod verify;
use clocks::{AbortOnDrop, WAITING, fresh_seed, gate, gate_root, ms_between, time_left_ms};
use effects::Effected;
use steps::Called;
pub use verify::HELMLOOP_VERIFIER;
use verify::Verified;
