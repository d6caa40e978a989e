//! Transitions (LychD design rules §23): the arbiter (one physical transition at a time;
//! waiters by descending priority then first come; one cohort per capability and priority),
//! the deadlines (planning, drain and warm-up budgets; the optional admission cutoff and its
//! precedence) and the rite — close admission on the affected set through the Dispatcher,
//! await drain, freeze the intent, actuate, verify under one deadline, reopen only after
//! success, proved no effect or exact restoration; compensate; contain.
//!
//! The cohort owner runs in its own task: a caller that goes away (or cancels repeatedly)
//! never interrupts the rite, its compensation or its cleanup; it only stops hearing of it.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use sqlx::PgPool;
use tokio::sync::{Notify, broadcast, watch};
use tokio::time::Instant;

use crate::actuator::{Actuator, Applied};
use crate::config::Settings;
use crate::domain::intent::{TransitionIntent, desired_reached, prior_restored};
use crate::domain::phase::{Place, TransitionPhase, place};
use crate::domain::plan::{Action, Plan};
use crate::error::OrchestratorError;
use crate::observe::Dispatcher;
use crate::store;

/// Ward asked again for the caller (with its first decision's policy generation) right
/// before an effect; `Err` is Ward's refusal.
pub type Recheck = Arc<dyn Fn() -> BoxFuture<'static, Result<(), tonic::Status>> + Send + Sync>;

/// A decoded, authorized request.
pub struct TransitionRequest {
    pub capability_key: String,
    pub priority: u8,
    /// Absolute admission cutoff (monotonic clock), if the caller gave one.
    pub cutoff: Option<Instant>,
    pub principal_id: String,
    pub recheck: Recheck,
}

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
    /// The database failed before anything was closed.
    Database,
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

struct Cohort {
    settled: watch::Sender<Option<Settled>>,
    /// When the owner was admitted (actuator invoked or readiness confirmed).
    admitted: watch::Sender<Option<Instant>>,
}

#[derive(Default)]
struct Section {
    busy: bool,
    ticket: u64,
    queue: BTreeSet<Place>,
}

/// The arbiter's physical-transition section.
#[derive(Default)]
struct Arbiter {
    section: Mutex<Section>,
    wake: Notify,
}

struct Permit<'a>(&'a Arbiter);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.0.lock().busy = false;
        self.0.wake.notify_waiters();
    }
}

impl Arbiter {
    fn lock(&self) -> std::sync::MutexGuard<'_, Section> {
        self.section
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wait for the section in `priority` order; `None` when `cutoff` passes first (the
    /// place is given up).
    async fn acquire(&self, priority: u8, cutoff: Option<Instant>) -> Option<Permit<'_>> {
        let me = {
            let mut s = self.lock();
            s.ticket += 1;
            let me = place(priority, s.ticket);
            s.queue.insert(me);
            me
        };
        loop {
            let notified = self.wake.notified();
            {
                let mut s = self.lock();
                if !s.busy && s.queue.first() == Some(&me) {
                    s.queue.remove(&me);
                    s.busy = true;
                    return Some(Permit(self));
                }
            }
            let expired = async {
                match cutoff {
                    Some(c) => tokio::time::sleep_until(c).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = notified => {}
                () = expired => {
                    self.lock().queue.remove(&me);
                    self.wake.notify_waiters();
                    return None;
                }
            }
        }
    }
}

/// The transition engine of one office process.
pub struct Transitions {
    settings: Arc<Settings>,
    dispatcher: Dispatcher,
    actuator: Arc<dyn Actuator>,
    pool: PgPool,
    arbiter: Arbiter,
    cohorts: Mutex<HashMap<(String, u8), Arc<Cohort>>>,
    events: broadcast::Sender<Event>,
}

/// A plan or why the owner stops before any effect.
enum Planned {
    Plan(Plan),
    Stop(Settled),
}

fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn expired(cutoff: Option<Instant>) -> bool {
    cutoff.is_some_and(|c| Instant::now() >= c)
}

impl Transitions {
    pub fn new(
        settings: Arc<Settings>,
        dispatcher: Dispatcher,
        actuator: Arc<dyn Actuator>,
        pool: PgPool,
    ) -> Arc<Transitions> {
        Arc::new(Transitions {
            settings,
            dispatcher,
            actuator,
            pool,
            arbiter: Arbiter::default(),
            cohorts: Mutex::new(HashMap::new()),
            events: broadcast::channel(1024).0,
        })
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Whether a containment fences transitions now.
    pub async fn fenced(&self) -> Result<bool, OrchestratorError> {
        Ok(store::fenced(&self.pool).await?)
    }

    /// Submit a request: join the cohort of its capability and priority, or own a new one;
    /// wait for the cohort's outcome (a follower also for its own cutoff).
    pub async fn request(self: &Arc<Self>, req: TransitionRequest) -> Heard {
        let key = (req.capability_key.clone(), req.priority);
        let (cohort, owner) = {
            let mut map = self
                .cohorts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match map.get(&key) {
                Some(c) => (c.clone(), false),
                None => {
                    let c = Arc::new(Cohort {
                        settled: watch::channel(None).0,
                        admitted: watch::channel(None).0,
                    });
                    map.insert(key.clone(), c.clone());
                    (c, true)
                }
            }
        };
        let mut settled = cohort.settled.subscribe();
        let follower_cutoff = if owner { None } else { req.cutoff };
        if owner {
            let this = self.clone();
            let c = cohort.clone();
            tokio::spawn(async move {
                let result = this.own(&req, &c).await;
                this.cohorts
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&key);
                c.settled.send_replace(Some(result));
            });
        }
        let admitted = cohort.admitted.subscribe();
        let mut cutoff = follower_cutoff;
        loop {
            let timer = async {
                match cutoff {
                    Some(c) => tokio::time::sleep_until(c).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                r = settled.wait_for(Option::is_some) => {
                    let settled = r.ok().and_then(|v| v.clone()).unwrap_or(Settled::Database);
                    return Heard::Settled { settled, joined: !owner };
                }
                () = timer => {
                    let c = cutoff.expect("invariant: the timer runs only with a cutoff");
                    // Admitted before the follower's cutoff: it joins the settlement.
                    if admitted.borrow().is_some_and(|t| t < c) {
                        cutoff = None;
                        continue;
                    }
                    return Heard::WaitExpired;
                }
            }
        }
    }

    fn emit(
        &self,
        id: &str,
        req: &TransitionRequest,
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

    fn finish(
        &self,
        id: &str,
        req: &TransitionRequest,
        phase: TransitionPhase,
        detail: &str,
        plan: Option<&Plan>,
    ) -> Settled {
        self.emit(id, req, phase, detail, plan);
        Settled::Outcome(Box::new(Outcome {
            transition_id: id.to_owned(),
            phase,
            plan: plan.cloned(),
            detail: detail.to_owned(),
        }))
    }

    /// Observe and plan under the planning budget; the gate on hard swaps.
    async fn plan(&self, id: &str, req: &TransitionRequest) -> Planned {
        let budget = self.settings.planning_timeout;
        let decided = tokio::time::timeout(
            budget,
            crate::service::preview(&self.settings, &self.dispatcher, &req.capability_key),
        )
        .await;
        let stop = |detail: &str| {
            Planned::Stop(self.finish(id, req, TransitionPhase::DeclinedNoEffect, detail, None))
        };
        match decided {
            Err(_) => stop("PLANNING_TIMEOUT"),
            Ok(Err(_)) => stop("OBSERVATION_UNAVAILABLE"),
            Ok(Ok(Err(decline))) => stop(decline.code()),
            Ok(Ok(Ok(plan))) => {
                if plan.action == Action::HardSwap
                    && req.priority < self.settings.min_priority_for_hard_swap
                {
                    return Planned::Stop(self.finish(
                        id,
                        req,
                        TransitionPhase::DeclinedNoEffect,
                        "HARD_SWAP_BELOW_PRIORITY",
                        Some(&plan),
                    ));
                }
                Planned::Plan(plan)
            }
        }
    }

    /// A NO_OP confirms readiness: admitted unless the cutoff passed first.
    fn no_op(&self, id: &str, req: &TransitionRequest, plan: &Plan, cohort: &Cohort) -> Settled {
        if expired(req.cutoff) {
            return Settled::AdmissionExpired;
        }
        cohort.admitted.send_replace(Some(Instant::now()));
        self.finish(id, req, TransitionPhase::Completed, "", Some(plan))
    }

    /// The cohort owner's whole transition.
    async fn own(&self, req: &TransitionRequest, cohort: &Cohort) -> Settled {
        let id = new_id();
        self.emit(&id, req, TransitionPhase::Requested, "", None);
        // Preflight: a warm/open NO_OP bypasses the physical section.
        let plan = match self.plan(&id, req).await {
            Planned::Stop(s) => return s,
            Planned::Plan(p) => p,
        };
        if plan.action == Action::NoOp {
            return self.no_op(&id, req, &plan, cohort);
        }
        self.emit(&id, req, TransitionPhase::Arbitrating, "", Some(&plan));
        let Some(_permit) = self.arbiter.acquire(req.priority, req.cutoff).await else {
            return Settled::AdmissionExpired;
        };
        // Every other plan is recomputed inside the section, after its predecessor settled.
        let plan = match self.plan(&id, req).await {
            Planned::Stop(s) => return s,
            Planned::Plan(p) => p,
        };
        if plan.action == Action::NoOp {
            // The caller waited in the arbiter: a caller whose authority went meanwhile gets
            // no outcome but the refusal, NO_OP or not.
            if (req.recheck)().await.is_err() {
                return self.finish(
                    &id,
                    req,
                    TransitionPhase::DeclinedNoEffect,
                    "AUTHORITY_WITHDRAWN",
                    Some(&plan),
                );
            }
            return self.no_op(&id, req, &plan, cohort);
        }
        match store::fenced(&self.pool).await {
            Ok(false) => {}
            Ok(true) => return Settled::Contained,
            Err(e) => {
                tracing::error!(error = %e, "reading containment failed");
                return Settled::Database;
            }
        }
        if expired(req.cutoff) {
            return Settled::AdmissionExpired;
        }
        // Ward again, with the first decision's generation, before the first effect.
        if (req.recheck)().await.is_err() {
            return self.finish(
                &id,
                req,
                TransitionPhase::DeclinedNoEffect,
                "AUTHORITY_WITHDRAWN",
                Some(&plan),
            );
        }
        if let Err(e) = store::insert(
            &self.pool,
            &store::NewTransition {
                id: &id,
                priority: req.priority,
                requested_by: &req.principal_id,
                plan: &plan,
            },
        )
        .await
        {
            tracing::error!(error = %e, "recording the transition failed");
            return Settled::Database;
        }
        self.rite(&id, req, cohort, plan).await
    }

    async fn record(&self, id: &str, phase: TransitionPhase, detail: &str) {
        if let Err(e) = store::set_phase(&self.pool, id, phase.as_str(), detail).await {
            tracing::error!(error = %e, phase = phase.as_str(), "recording a phase failed");
        }
    }

    /// Reopen (a few tries); on failure the transition is contained instead (admission stays
    /// closed, recovery reopens it).
    async fn reopen_or_contain(&self, id: &str, token: &str) -> bool {
        for attempt in 0..5u32 {
            if self.dispatcher.reopen(token).await.is_ok() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt + 1))).await;
        }
        if let Err(e) = store::contain(&self.pool, id, "REOPEN_FAILED").await {
            tracing::error!(error = %e, "recording containment failed");
        }
        false
    }

    /// Settle with `phase` after reopening; a failed reopen contains instead.
    async fn reopen_and_finish(
        &self,
        id: &str,
        req: &TransitionRequest,
        token: &str,
        phase: TransitionPhase,
        detail: &str,
        plan: &Plan,
    ) -> Settled {
        if !self.reopen_or_contain(id, token).await {
            return self.finish(
                id,
                req,
                TransitionPhase::ContainedUncertain,
                "REOPEN_FAILED",
                Some(plan),
            );
        }
        self.record(id, phase, detail).await;
        self.finish(id, req, phase, detail, Some(plan))
    }

    async fn contain(
        &self,
        id: &str,
        req: &TransitionRequest,
        cause: &str,
        plan: &Plan,
    ) -> Settled {
        if let Err(e) = store::contain(&self.pool, id, cause).await {
            // Admission stays closed whatever the record says.
            tracing::error!(error = %e, "recording containment failed");
        }
        self.finish(
            id,
            req,
            TransitionPhase::ContainedUncertain,
            cause,
            Some(plan),
        )
    }

    /// Poll fresh observations of `scope` until `done` or `deadline`.
    async fn converge(
        &self,
        scope: &[String],
        deadline: Instant,
        done: impl Fn(&crate::domain::plan::World) -> bool,
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

    async fn rite(
        &self,
        id: &str,
        req: &TransitionRequest,
        cohort: &Cohort,
        plan: Plan,
    ) -> Settled {
        let affected = plan.affected();
        self.emit(id, req, TransitionPhase::Draining, "", Some(&plan));
        let token = match self
            .dispatcher
            .close(id, &affected, "orchestrator transition")
            .await
        {
            Ok(t) => t,
            // Whether the close happened is unknown: contained until recovered.
            Err(_) => return self.contain(id, req, "CLOSE_UNCERTAIN", &plan).await,
        };
        if let Err(e) = store::set_closure(&self.pool, id, &token).await {
            tracing::error!(error = %e, "recording the closure failed");
        }
        // Drain: the drain budget, cut short by an earlier admission cutoff (a local budget
        // wins an exact tie).
        let drain_deadline = Instant::now() + self.settings.drain_timeout;
        let until = match req.cutoff {
            Some(c) if c < drain_deadline => c,
            _ => drain_deadline,
        };
        let mut drained = false;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let wait_ms = u32::try_from(left.as_millis())
                .unwrap_or(u32::MAX)
                .min(self.settings.drain_wait_step_ms);
            match self.dispatcher.await_drain(&affected, wait_ms).await {
                Ok(true) => {
                    drained = Instant::now() < until;
                    break;
                }
                Ok(false) if Instant::now() < until => {}
                Ok(false) => break,
                Err(_) if Instant::now() < until => {
                    tokio::time::sleep(self.settings.poll_interval).await;
                }
                Err(_) => break,
            }
        }
        if !drained {
            let by_cutoff = req.cutoff.is_some_and(|c| c < drain_deadline);
            let detail = if by_cutoff {
                "ADMISSION_EXPIRED"
            } else {
                "DRAIN_TIMEOUT"
            };
            let s = self
                .reopen_and_finish(
                    id,
                    req,
                    &token,
                    TransitionPhase::DeclinedNoEffect,
                    detail,
                    &plan,
                )
                .await;
            return if by_cutoff
                && matches!(&s, Settled::Outcome(o) if o.phase == TransitionPhase::DeclinedNoEffect)
            {
                Settled::AdmissionExpired
            } else {
                s
            };
        }
        // The final invocation check, then Ward again before the effect.
        if expired(req.cutoff) {
            let s = self
                .reopen_and_finish(
                    id,
                    req,
                    &token,
                    TransitionPhase::DeclinedNoEffect,
                    "ADMISSION_EXPIRED",
                    &plan,
                )
                .await;
            return match s {
                Settled::Outcome(o) if o.phase == TransitionPhase::DeclinedNoEffect => {
                    Settled::AdmissionExpired
                }
                other => other,
            };
        }
        if (req.recheck)().await.is_err() {
            return self
                .reopen_and_finish(
                    id,
                    req,
                    &token,
                    TransitionPhase::DeclinedNoEffect,
                    "AUTHORITY_WITHDRAWN",
                    &plan,
                )
                .await;
        }
        cohort.admitted.send_replace(Some(Instant::now()));
        match plan.action {
            Action::SoftSwap => self.soft(id, req, &token, &plan).await,
            _ => self.hard(id, req, &token, &plan).await,
        }
    }

    /// Observation-only convergence: no activation is invoked, so a target that does not
    /// become WARM within the warm-up budget is a verified no-effect decline.
    async fn soft(&self, id: &str, req: &TransitionRequest, token: &str, plan: &Plan) -> Settled {
        self.emit(id, req, TransitionPhase::Verifying, "", Some(plan));
        self.record(id, TransitionPhase::Verifying, "").await;
        let deadline = Instant::now() + self.settings.warmup_timeout;
        let scope = vec![plan.target.clone()];
        let key = plan.capability_key.clone();
        let warm = self
            .converge(&scope, deadline, |w| desired_reached(&key, &[], w))
            .await;
        let (phase, detail) = if warm {
            (TransitionPhase::Completed, "")
        } else {
            (TransitionPhase::DeclinedNoEffect, "VERIFICATION_TIMEOUT")
        };
        self.reopen_and_finish(id, req, token, phase, detail, plan)
            .await
    }

    async fn hard(&self, id: &str, req: &TransitionRequest, token: &str, plan: &Plan) -> Settled {
        let Some(intent) = TransitionIntent::forward(id, plan) else {
            return self
                .reopen_and_finish(
                    id,
                    req,
                    token,
                    TransitionPhase::DeclinedNoEffect,
                    "NO_INTENT",
                    plan,
                )
                .await;
        };
        self.emit(id, req, TransitionPhase::Actuating, "", Some(plan));
        self.record(id, TransitionPhase::Actuating, "").await;
        // One deadline for the actuation and the verification (target WARM, evictees cold).
        let deadline = Instant::now() + self.settings.warmup_timeout;
        let applied = self.actuator.apply(&intent, deadline).await;
        if applied == Applied::NoEffect {
            return self
                .reopen_and_finish(
                    id,
                    req,
                    token,
                    TransitionPhase::DeclinedNoEffect,
                    "ACTUATOR_NO_EFFECT",
                    plan,
                )
                .await;
        }
        match applied {
            // The host proved the exact pre-world itself: verify it and reopen, no inverse.
            Applied::Restored => return self.host_restored(id, req, token, &intent, plan).await,
            // The host's own bounded inverse failed (or its work is unresolved): no retry.
            Applied::Contained => return self.contain(id, req, "ACTUATOR_CONTAINED", plan).await,
            _ => {}
        }
        self.emit(
            id,
            req,
            TransitionPhase::Verifying,
            applied.as_str(),
            Some(plan),
        );
        self.record(id, TransitionPhase::Verifying, applied.as_str())
            .await;
        let scope = intent.scope();
        let reached = applied == Applied::Applied
            && self
                .converge(&scope, deadline, |w| {
                    desired_reached(&intent.capability_key, &intent.evict, w)
                })
                .await;
        if reached {
            return self
                .reopen_and_finish(id, req, token, TransitionPhase::Completed, "", plan)
                .await;
        }
        let cause = if applied == Applied::Applied {
            "VERIFICATION_TIMEOUT"
        } else {
            "ACTUATOR_UNCERTAIN"
        };
        // The exact typed inverse, under its own deadline; nobody's cancellation stops it.
        self.emit(id, req, TransitionPhase::Compensating, cause, Some(plan));
        self.record(id, TransitionPhase::Compensating, cause).await;
        let inverse = intent.compensation();
        let deadline = Instant::now() + self.settings.warmup_timeout;
        let undone = self.actuator.apply(&inverse, deadline).await;
        let restored = matches!(undone, Applied::Applied | Applied::NoEffect)
            && self
                .converge(&scope, deadline, |w| prior_restored(&intent, w))
                .await;
        if restored {
            return self
                .reopen_and_finish(id, req, token, TransitionPhase::FailedRestored, cause, plan)
                .await;
        }
        self.contain(id, req, "VERIFICATION_AND_COMPENSATION_FAILED", plan)
            .await
    }

    /// The actuator reported the exact prior world (a failed step it restored itself): the
    /// prior world must also be observed (each expected animator WARM again) under a fresh
    /// deadline before admission reopens (`failed_restored`, `ACTUATOR_RESTORED`); otherwise
    /// contained.
    async fn host_restored(
        &self,
        id: &str,
        req: &TransitionRequest,
        token: &str,
        intent: &TransitionIntent,
        plan: &Plan,
    ) -> Settled {
        let cause = "ACTUATOR_RESTORED";
        self.emit(id, req, TransitionPhase::Verifying, cause, Some(plan));
        self.record(id, TransitionPhase::Verifying, cause).await;
        let deadline = Instant::now() + self.settings.warmup_timeout;
        let scope = intent.scope();
        if self
            .converge(&scope, deadline, |w| prior_restored(intent, w))
            .await
        {
            return self
                .reopen_and_finish(id, req, token, TransitionPhase::FailedRestored, cause, plan)
                .await;
        }
        self.contain(id, req, "RESTORATION_NOT_OBSERVED", plan)
            .await
    }
}
