//! The transition engine's state and its shared primitives: the requests and answers, the
//! cohorts and in-flight transitions, the phase events, the containment latch, recording a
//! phase, reopening admission, containing, and waiting for a world to converge.
//!
//! Invariant: a containment is latched in this process before it is written, and stays
//! latched until it is durably recorded — while any is latched, nothing actuates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lychd_runtime::refusal::DbFailure;
use sqlx::PgPool;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::arbiter::Arbiter;
use super::request::{Held, LeaseLost};
use crate::actuator::Actuator;
use crate::config::Settings;
use crate::domain::memory::FootprintKey;
use crate::domain::phase::TransitionPhase;
use crate::domain::plan::{Action, Plan, World};
use crate::domain::rite::Converged;
use crate::error::OrchestratorError;
use crate::observe::Dispatcher;
use crate::service::lease::{Fence, HostLease};
use crate::service::memory::MemoryBook;
use crate::store;

/// A final outcome.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub transition_id: String,
    pub phase: TransitionPhase,
    pub plan: Option<Plan>,
    pub detail: String,
}

/// How a cohort settled: an outcome, or a refusal every member receives.
#[derive(Debug, Clone)]
pub enum Settled {
    Outcome(Box<Outcome>),
    /// The owner's admission cutoff passed before admission (`TRANSITION_ADMISSION_EXPIRED`).
    AdmissionExpired,
    /// A containment fences transitions (`TRANSITION_CONTAINED`).
    Contained,
    /// The database failed before anything was closed, classified by the shared refusal
    /// vocabulary (`DbFailure`: a conflict, a lock or statement timeout, an outage, or a bug).
    Database(DbFailure),
    /// This process lost the host lease (`HOST_LEASE_NOT_HELD`): the outcome is the holder's
    /// to record — never a success heard from here.
    LeaseLost,
}

/// What one caller hears.
#[derive(Debug, Clone)]
pub enum Heard {
    Settled {
        settled: Settled,
        joined: bool,
    },
    /// A follower's own cutoff passed before the cohort was admitted
    /// (`TRANSITION_ADMISSION_WAIT_EXPIRED`).
    WaitExpired,
}

/// One phase change, for `WatchTransitions`.
#[derive(Debug, Clone)]
pub struct Event {
    pub transition_id: String,
    pub capability_key: String,
    pub priority: u8,
    pub phase: TransitionPhase,
    pub detail: String,
    pub plan: Option<Plan>,
}

pub(super) struct Cohort {
    /// The owner's transition id: every member's.
    pub(super) id: String,
    pub(super) settled: watch::Sender<Option<Settled>>,
    /// When the owner was admitted (actuator invoked or readiness confirmed).
    pub(super) admitted: watch::Sender<Option<Instant>>,
}

/// An in-flight transition (its cohort owner's task runs), for `cancel`.
pub(super) struct Live {
    /// Ward's principal id of the owner's caller: the only one who may cancel it.
    pub(super) requested_by: String,
    pub(super) cancel: watch::Sender<bool>,
    pub(super) cohort: Arc<Cohort>,
}

/// Resolves once `rx` reads `true` (never when its sender is gone).
pub(super) async fn cancelled(mut rx: watch::Receiver<bool>) {
    if rx.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

pub(super) fn expired(cutoff: Option<Instant>) -> bool {
    cutoff.is_some_and(|c| Instant::now() >= c)
}

/// Containments latched in this process: transition id → phase and cause.
pub(super) type Latch = Mutex<HashMap<String, (TransitionPhase, String)>>;

/// The transition engine of one office process.
pub struct Transitions {
    pub(super) settings: Arc<Settings>,
    pub(super) dispatcher: Dispatcher,
    pub(super) actuator: Arc<dyn Actuator>,
    pub(super) pool: PgPool,
    pub(super) lease: Arc<HostLease>,
    pub(super) arbiter: Arbiter,
    pub(super) cohorts: Mutex<HashMap<(String, u8), Arc<Cohort>>>,
    pub(super) live: Mutex<HashMap<String, Arc<Live>>>,
    events: broadcast::Sender<Event>,
    /// Held while a request is looked up, joined or owned and recorded: one request id, one
    /// transition.
    pub(super) admitting: tokio::sync::Mutex<()>,
    /// Containments decided but not yet durably recorded (transition id → phase and cause):
    /// while any is here nothing actuates, whatever the database says or cannot say. Each is
    /// written again until it is recorded, then leaves the latch.
    pub(super) latch: Arc<Latch>,
    /// Footprints and usage placement plans from.
    pub(super) memory: Arc<MemoryBook>,
}

impl Transitions {
    pub fn new(
        settings: Arc<Settings>,
        dispatcher: Dispatcher,
        actuator: Arc<dyn Actuator>,
        pool: PgPool,
        lease: Arc<HostLease>,
        memory: Arc<MemoryBook>,
    ) -> Arc<Transitions> {
        Arc::new(Transitions {
            memory,
            settings,
            dispatcher,
            actuator,
            pool,
            lease,
            arbiter: Arbiter::default(),
            cohorts: Mutex::new(HashMap::new()),
            live: Mutex::new(HashMap::new()),
            events: broadcast::channel(1024).0,
            admitting: tokio::sync::Mutex::new(()),
            latch: Arc::default(),
        })
    }

    /// The footprints and usage placement plans from.
    pub fn memory(&self) -> &MemoryBook {
        &self.memory
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Whether a containment fences transitions now: one latched in this process (not yet
    /// recorded), or one recorded.
    pub async fn fenced(&self) -> Result<bool, OrchestratorError> {
        if self.latched() {
            return Ok(true);
        }
        Ok(store::fenced(&self.pool).await?)
    }

    /// Whether a containment of this process is still waiting to be recorded.
    pub fn latched(&self) -> bool {
        !self
            .latch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty()
    }

    pub(super) fn lives(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Live>>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The feed row of a phase of `id`.
    fn new_event<'a>(
        id: &'a str,
        req: &'a Held,
        phase: TransitionPhase,
        detail: &'a str,
        plan: Option<&Plan>,
    ) -> store::resources::NewEvent<'a> {
        store::resources::NewEvent {
            transition_id: id,
            capability_key: &req.capability_key,
            priority: req.priority,
            phase,
            detail,
            plan: plan.map(crate::service::resources::plan_json),
        }
    }

    /// Tell open streams a transition was requested (its phase is recorded with the request).
    pub(super) fn poke_requested(&self, id: &str, req: &Held) {
        self.poke(id, req, TransitionPhase::Requested, "", None);
    }

    /// Tell open streams that the feed moved (they read it from the database).
    fn poke(
        &self,
        id: &str,
        req: &Held,
        phase: TransitionPhase,
        detail: &str,
        plan: Option<&Plan>,
    ) {
        let _ = self.events.send(Event {
            transition_id: id.to_owned(),
            capability_key: req.capability_key.clone(),
            priority: req.priority,
            phase,
            detail: detail.to_owned(),
            plan: plan.cloned(),
        });
    }

    /// Record `phase` in the transition feed (a database failure is logged: the phase's effect
    /// stands, and the settlement still reaches every caller waiting in this process; a lost
    /// lease is [`LeaseLost`]).
    pub(super) async fn emit(
        &self,
        id: &str,
        req: &Held,
        phase: TransitionPhase,
        detail: &str,
        plan: Option<&Plan>,
    ) -> Result<(), LeaseLost> {
        self.check(&req.fence)?;
        let e = Self::new_event(id, req, phase, detail, plan);
        let r = store::resources::append(&self.pool, &req.fence, &e).await;
        if let Err(e) = self.judge(&req.fence, r)? {
            tracing::error!(error = %e, phase = phase.as_str(), "recording a phase in the feed failed");
        }
        self.poke(id, req, phase, detail, plan);
        Ok(())
    }

    pub(super) async fn finish(
        &self,
        id: &str,
        req: &Held,
        phase: TransitionPhase,
        detail: &str,
        plan: Option<&Plan>,
    ) -> Settled {
        match self.emit(id, req, phase, detail, plan).await {
            Ok(()) => self.settled(id, phase, detail, plan),
            Err(LeaseLost) => Settled::LeaseLost,
        }
    }

    /// The outcome of a settled transition; a completed one has its target measured.
    fn settled(
        &self,
        id: &str,
        phase: TransitionPhase,
        detail: &str,
        plan: Option<&Plan>,
    ) -> Settled {
        if let (TransitionPhase::Completed, Some(p)) = (phase, plan) {
            self.measure_after_warm(p);
        }
        Self::outcome(id, phase, detail, plan)
    }

    /// The target is WARM: measure its footprint in the background — after every hard or soft
    /// swap, and after a `NO_OP` while the model has no measurement yet.
    fn measure_after_warm(&self, plan: &Plan) {
        let Some(key) = FootprintKey::of(&self.settings.registry, &plan.capability_key) else {
            return;
        };
        let placed = self
            .settings
            .registry
            .animator(&key.animator)
            .is_some_and(|a| a.device.is_some());
        if !placed || (plan.action == Action::NoOp && self.memory.measured(&key)) {
            return;
        }
        let memory = self.memory.clone();
        tokio::spawn(async move { memory.measure(key).await });
    }

    fn outcome(id: &str, phase: TransitionPhase, detail: &str, plan: Option<&Plan>) -> Settled {
        Settled::Outcome(Box::new(Outcome {
            transition_id: id.to_owned(),
            phase,
            plan: plan.cloned(),
            detail: detail.to_owned(),
        }))
    }

    /// Record `phase` on the rite's row and in the feed, in one fenced transaction.
    async fn record(
        &self,
        id: &str,
        req: &Held,
        phase: TransitionPhase,
        detail: &str,
        plan: Option<&Plan>,
    ) -> Result<(), LeaseLost> {
        self.check(&req.fence)?;
        let e = Self::new_event(id, req, phase, detail, plan);
        let r = store::resources::set_phase_and_append(&self.pool, &req.fence, &e).await;
        if let Err(e) = self.judge(&req.fence, r)? {
            tracing::error!(error = %e, phase = phase.as_str(), "recording a phase failed");
        }
        self.poke(id, req, phase, detail, plan);
        Ok(())
    }

    /// Announce and record `phase` (with `detail`).
    pub(super) async fn enter(
        &self,
        id: &str,
        req: &Held,
        (phase, detail): (TransitionPhase, &str),
        plan: &Plan,
    ) -> Result<(), LeaseLost> {
        self.record(id, req, phase, detail, Some(plan)).await
    }

    /// Reopen (a few tries); on failure the transition is contained instead (admission stays
    /// closed, recovery reopens it).
    async fn reopen_or_contain(
        &self,
        id: &str,
        fence: &Fence,
        token: &str,
    ) -> Result<bool, LeaseLost> {
        for attempt in 0..5u32 {
            self.check(fence)?;
            if self.dispatcher.reopen(token).await.is_ok() {
                return Ok(true);
            }
            tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt + 1))).await;
        }
        self.record_containment(
            id,
            fence,
            TransitionPhase::ContainedUncertain,
            "REOPEN_FAILED",
        )
        .await;
        Ok(false)
    }

    /// Settle with `phase` after reopening; a failed reopen contains instead.
    pub(super) async fn reopen_and_finish(
        &self,
        id: &str,
        req: &Held,
        token: &str,
        phase: TransitionPhase,
        detail: &str,
        plan: &Plan,
    ) -> Settled {
        let Ok(reopened) = self.reopen_or_contain(id, &req.fence, token).await else {
            return Settled::LeaseLost;
        };
        if !reopened {
            return self
                .finish(
                    id,
                    req,
                    TransitionPhase::ContainedUncertain,
                    "REOPEN_FAILED",
                    Some(plan),
                )
                .await;
        }
        match self.record(id, req, phase, detail, Some(plan)).await {
            Ok(()) => self.settled(id, phase, detail, Some(plan)),
            Err(LeaseLost) => Settled::LeaseLost,
        }
    }

    /// Contain (admission stays closed whatever the record says; the latch holds until it is
    /// written) and settle in `phase` with `cause`.
    pub(super) async fn contain(
        &self,
        id: &str,
        req: &Held,
        phase: TransitionPhase,
        cause: &str,
        plan: &Plan,
    ) -> Settled {
        self.record_containment(id, &req.fence, phase, cause).await;
        self.finish(id, req, phase, cause, Some(plan)).await
    }

    /// Poll fresh observations of `scope` until `done` or `deadline`.
    pub(super) async fn converge(
        &self,
        scope: &[String],
        deadline: Instant,
        done: impl Fn(&World) -> bool,
    ) -> bool {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            if let Ok(Ok(world)) = tokio::time::timeout(left, self.dispatcher.observe(scope)).await
                && done(&world)
            {
                // Success is accepted only when it arrived before the deadline.
                return Instant::now() < deadline;
            }
            tokio::time::sleep(self.settings.poll_interval.min(left)).await;
        }
    }

    /// [`Transitions::converge`], unless the transition is cancelled first.
    pub(super) async fn converge_or_cancel(
        &self,
        scope: &[String],
        deadline: Instant,
        done: impl Fn(&World) -> bool,
        cancel: &watch::Receiver<bool>,
    ) -> Converged {
        tokio::select! {
            biased;
            r = self.converge(scope, deadline, done) => {
                if r { Converged::Reached } else { Converged::TimedOut }
            }
            () = cancelled(cancel.clone()) => Converged::Cancelled,
        }
    }
}
