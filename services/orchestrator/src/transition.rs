//! Transitions (LychD design rules §23): the arbiter (one physical transition at a time;
//! waiters by descending priority then first come; one cohort per capability and priority),
//! the deadlines (planning, drain and warm-up budgets; the optional admission cutoff and its
//! precedence) and the rite — close admission on the affected set through the Dispatcher,
//! await drain, freeze the intent, actuate, verify under one deadline, reopen only after
//! success, proved no effect or exact restoration; compensate; contain.
//!
//! The cohort owner runs in its own task: a caller that goes away (or cancels repeatedly)
//! never interrupts the rite, its compensation or its cleanup; it only stops hearing of it.
//! Explicit cancellation (`cancel`, the owner's only) stops a transition before any effect
//! (`cancelled_restored`, admission reopened where it was closed); after a hard actuation was
//! submitted it waits for settlement and applies the exact inverse (`cancelled_restored` only
//! on a proved prior world, else contained); a soft activation has no inverse (contained).
//!
//! A `SOFT_SWAP` whose target is ACTIVATABLE invokes the actuator's runtime-native activation
//! after durably arming a runtime-guard record; only an observed WARM target clears it, and a
//! target that does not become WARM ends `failed` (contained, the guard armed).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use sqlx::PgPool;
use tokio::sync::{Notify, broadcast, watch};
use tokio::time::Instant;

use crate::actuator::{Actuator, Applied};
use crate::config::Settings;
use crate::domain::intent::{
    ActivationIntent, TransitionIntent, desired_reached, needs_activation, prior_restored,
};
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

/// An in-flight transition (its cohort owner's task runs), for `cancel`.
struct Live {
    /// Ward's principal id of the owner's caller: the only one who may cancel it.
    requested_by: String,
    cancel: watch::Sender<bool>,
    cohort: Arc<Cohort>,
}

/// What a cancellation request found.
pub enum Cancelled {
    /// No transition with this id is in flight.
    NotRunning,
    /// Another principal's request owns it; nothing changed.
    NotOwned,
    /// Its cohort's settlement (cancelled or not: it may have settled otherwise first).
    Settled(Settled),
}

/// Why a waiter left the arbiter's queue.
enum Left {
    Expired,
    Cancelled,
}

/// Resolves once `rx` reads `true` (never when its sender is gone).
async fn cancelled(mut rx: watch::Receiver<bool>) {
    if rx.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// How a convergence wait ended.
#[derive(PartialEq, Eq)]
enum Converged {
    Reached,
    TimedOut,
    Cancelled,
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

    /// Wait for the section in `priority` order; `Err` when `cutoff` passes or the
    /// transition is cancelled first (the place is given up).
    async fn acquire(
        &self,
        priority: u8,
        cutoff: Option<Instant>,
        cancel: &watch::Receiver<bool>,
    ) -> Result<Permit<'_>, Left> {
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
                    return Ok(Permit(self));
                }
            }
            let expired = async {
                match cutoff {
                    Some(c) => tokio::time::sleep_until(c).await,
                    None => std::future::pending().await,
                }
            };
            let left = tokio::select! {
                () = notified => continue,
                () = expired => Left::Expired,
                () = cancelled(cancel.clone()) => Left::Cancelled,
            };
            self.lock().queue.remove(&me);
            self.wake.notify_waiters();
            return Err(left);
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
    live: Mutex<HashMap<String, Arc<Live>>>,
    events: broadcast::Sender<Event>,
}

/// A plan or why the owner stops before any effect.
enum Planned {
    Plan(Plan),
    Stop(Settled),
}

/// The detail of a cancelled transition.
const CANCELLED: &str = "CANCELLED";
/// The detail of the actuating phase of a runtime-native activation.
const ACTIVATION: &str = "ACTIVATION";

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
            live: Mutex::new(HashMap::new()),
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
            let id = new_id();
            let (cancel, cancel_rx) = watch::channel(false);
            self.lives().insert(
                id.clone(),
                Arc::new(Live {
                    requested_by: req.principal_id.clone(),
                    cancel,
                    cohort: cohort.clone(),
                }),
            );
            tokio::spawn(async move {
                let result = this.own(&id, &req, &c, &cancel_rx).await;
                this.cohorts
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&key);
                this.lives().remove(&id);
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

    fn lives(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Live>>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Cancel the in-flight transition `id` on behalf of `principal_id` (its owner's caller
    /// only) and wait for its cohort's settlement. Waiting here changes nothing: the owner's
    /// task settles it whether or not this caller stays.
    pub async fn cancel(&self, id: &str, principal_id: &str) -> Cancelled {
        let Some(live) = self.lives().get(id).cloned() else {
            return Cancelled::NotRunning;
        };
        if live.requested_by != principal_id {
            return Cancelled::NotOwned;
        }
        live.cancel.send_replace(true);
        let mut settled = live.cohort.settled.subscribe();
        let s = settled
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|v| v.clone())
            .unwrap_or(Settled::Database);
        Cancelled::Settled(s)
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

    /// Settle cancelled before anything was closed or invoked: no effect to restore.
    fn cancelled_before(&self, id: &str, req: &TransitionRequest, plan: Option<&Plan>) -> Settled {
        self.finish(id, req, TransitionPhase::CancelledRestored, CANCELLED, plan)
    }

    /// [`Transitions::plan`], unless the transition is cancelled first.
    async fn plan_or_cancel(
        &self,
        id: &str,
        req: &TransitionRequest,
        cancel: &watch::Receiver<bool>,
        prior: Option<&Plan>,
    ) -> Planned {
        tokio::select! {
            biased;
            () = cancelled(cancel.clone()) => Planned::Stop(self.cancelled_before(id, req, prior)),
            p = self.plan(id, req) => p,
        }
    }

    /// The cohort owner's whole transition.
    async fn own(
        &self,
        id: &str,
        req: &TransitionRequest,
        cohort: &Cohort,
        cancel: &watch::Receiver<bool>,
    ) -> Settled {
        let id = id.to_owned();
        self.emit(&id, req, TransitionPhase::Requested, "", None);
        // Preflight: a warm/open NO_OP bypasses the physical section.
        let plan = match self.plan_or_cancel(&id, req, cancel, None).await {
            Planned::Stop(s) => return s,
            Planned::Plan(p) => p,
        };
        if plan.action == Action::NoOp {
            return self.no_op(&id, req, &plan, cohort);
        }
        self.emit(&id, req, TransitionPhase::Arbitrating, "", Some(&plan));
        let _permit = match self.arbiter.acquire(req.priority, req.cutoff, cancel).await {
            Ok(p) => p,
            Err(Left::Expired) => return Settled::AdmissionExpired,
            Err(Left::Cancelled) => return self.cancelled_before(&id, req, Some(&plan)),
        };
        // Every other plan is recomputed inside the section, after its predecessor settled.
        let plan = match self.plan_or_cancel(&id, req, cancel, Some(&plan)).await {
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
        if *cancel.borrow() {
            return self.cancelled_before(&id, req, Some(&plan));
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
        self.rite(&id, req, cohort, plan, cancel).await
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

    /// [`Transitions::converge`], unless the transition is cancelled first.
    async fn converge_or_cancel(
        &self,
        scope: &[String],
        deadline: Instant,
        done: impl Fn(&crate::domain::plan::World) -> bool,
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

    async fn rite(
        &self,
        id: &str,
        req: &TransitionRequest,
        cohort: &Cohort,
        plan: Plan,
        cancel: &watch::Receiver<bool>,
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
        let reopen_cancelled = || {
            self.reopen_and_finish(
                id,
                req,
                &token,
                TransitionPhase::CancelledRestored,
                CANCELLED,
                &plan,
            )
        };
        if *cancel.borrow() {
            return reopen_cancelled().await;
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
            let waited = tokio::select! {
                biased;
                () = cancelled(cancel.clone()) => None,
                w = self.dispatcher.await_drain(&affected, wait_ms) => Some(w),
            };
            let Some(waited) = waited else {
                return reopen_cancelled().await;
            };
            match waited {
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
        if *cancel.borrow() {
            return reopen_cancelled().await;
        }
        match plan.action {
            Action::SoftSwap => self.soft(id, req, cohort, &token, &plan, cancel).await,
            _ => {
                cohort.admitted.send_replace(Some(Instant::now()));
                self.hard(id, req, &token, &plan, cancel).await
            }
        }
    }

    /// Runtime-started convergence under one warm-up deadline: an initial refresh; an
    /// ACTIVATABLE target (with an actuator that activates) is activated
    /// ([`Transitions::activate`]); otherwise the wait is observation-only — no activation is
    /// invoked, so a target that does not become WARM within the budget (or a cancellation) is
    /// a verified no-effect decline.
    async fn soft(
        &self,
        id: &str,
        req: &TransitionRequest,
        cohort: &Cohort,
        token: &str,
        plan: &Plan,
        cancel: &watch::Receiver<bool>,
    ) -> Settled {
        let deadline = Instant::now() + self.settings.warmup_timeout;
        let scope = vec![plan.target.clone()];
        let key = plan.capability_key.clone();
        if self.actuator.activates() {
            let refreshed =
                tokio::time::timeout_at(deadline, self.dispatcher.observe(&scope)).await;
            if let Ok(Ok(world)) = refreshed
                && needs_activation(&key, &world)
            {
                // Admission: the activation is invoked (after its guard is armed).
                cohort.admitted.send_replace(Some(Instant::now()));
                return self.activate(id, req, token, plan, deadline, cancel).await;
            }
        }
        // Admission: the observation-only wait begins.
        cohort.admitted.send_replace(Some(Instant::now()));
        self.emit(id, req, TransitionPhase::Verifying, "", Some(plan));
        self.record(id, TransitionPhase::Verifying, "").await;
        let (phase, detail) = match self
            .converge_or_cancel(&scope, deadline, |w| desired_reached(&key, &[], w), cancel)
            .await
        {
            Converged::Reached => (TransitionPhase::Completed, ""),
            Converged::TimedOut => (TransitionPhase::DeclinedNoEffect, "VERIFICATION_TIMEOUT"),
            Converged::Cancelled => (TransitionPhase::CancelledRestored, CANCELLED),
        };
        self.reopen_and_finish(id, req, token, phase, detail, plan)
            .await
    }

    /// A runtime-native activation: arm the durable runtime guard first (a failed write
    /// prevents the activation), invoke, and require the target WARM before the deadline;
    /// only then clear the guard and reopen. There is no inverse: a target that does not
    /// become WARM ends `failed`, a cancellation after the invocation `contained_uncertain`,
    /// both contained with the guard armed (recovery needs the target observed stopped).
    async fn activate(
        &self,
        id: &str,
        req: &TransitionRequest,
        token: &str,
        plan: &Plan,
        deadline: Instant,
        cancel: &watch::Receiver<bool>,
    ) -> Settled {
        let Some(intent) = ActivationIntent::of(id, plan) else {
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
        if let Err(e) = store::arm_guard(
            &self.pool,
            id,
            &intent.target_animator,
            &intent.capability_key,
        )
        .await
        {
            tracing::error!(error = %e, "arming the runtime guard failed");
            return self
                .reopen_and_finish(
                    id,
                    req,
                    token,
                    TransitionPhase::DeclinedNoEffect,
                    "GUARD_UNRECORDED",
                    plan,
                )
                .await;
        }
        // The final check, then the uncertainty boundary: crossed before the call begins.
        if *cancel.borrow() {
            return self
                .unguard_and_reopen(
                    id,
                    req,
                    token,
                    plan,
                    TransitionPhase::CancelledRestored,
                    CANCELLED,
                )
                .await;
        }
        self.emit(id, req, TransitionPhase::Actuating, ACTIVATION, Some(plan));
        self.record(id, TransitionPhase::Actuating, ACTIVATION)
            .await;
        let applied = self.actuator.activate(&intent, deadline).await;
        if applied == Applied::NoEffect {
            // Refused before the call began: nothing was invoked.
            return self
                .unguard_and_reopen(
                    id,
                    req,
                    token,
                    plan,
                    TransitionPhase::DeclinedNoEffect,
                    "ACTUATOR_NO_EFFECT",
                )
                .await;
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
        let converged = if *cancel.borrow() {
            Converged::Cancelled
        } else if applied == Applied::Applied {
            let scope = vec![plan.target.clone()];
            let key = &intent.capability_key;
            self.converge_or_cancel(&scope, deadline, |w| desired_reached(key, &[], w), cancel)
                .await
        } else {
            Converged::TimedOut
        };
        match converged {
            Converged::Reached => {
                if let Err(e) = store::clear_guard(&self.pool, id, "WARM_OBSERVED").await {
                    // The guard stays armed: the next start contains this transition.
                    tracing::error!(error = %e, "clearing the runtime guard failed");
                }
                self.reopen_and_finish(id, req, token, TransitionPhase::Completed, "", plan)
                    .await
            }
            Converged::Cancelled => {
                self.contain(id, req, "CANCELLED_AFTER_ACTIVATION", plan)
                    .await
            }
            Converged::TimedOut => {
                let cause = if applied == Applied::Applied {
                    "VERIFICATION_TIMEOUT"
                } else {
                    "ACTIVATION_FAILED"
                };
                if let Err(e) =
                    store::contain_as(&self.pool, id, TransitionPhase::Failed.as_str(), cause).await
                {
                    tracing::error!(error = %e, "recording containment failed");
                }
                self.finish(id, req, TransitionPhase::Failed, cause, Some(plan))
            }
        }
    }

    /// Clear a guard whose activation was never invoked, then reopen and settle.
    async fn unguard_and_reopen(
        &self,
        id: &str,
        req: &TransitionRequest,
        token: &str,
        plan: &Plan,
        phase: TransitionPhase,
        detail: &str,
    ) -> Settled {
        if let Err(e) = store::clear_guard(&self.pool, id, "NOT_INVOKED").await {
            tracing::error!(error = %e, "clearing the runtime guard failed");
            return self.contain(id, req, "RUNTIME_GUARD_ARMED", plan).await;
        }
        self.reopen_and_finish(id, req, token, phase, detail, plan)
            .await
    }

    async fn hard(
        &self,
        id: &str,
        req: &TransitionRequest,
        token: &str,
        plan: &Plan,
        cancel: &watch::Receiver<bool>,
    ) -> Settled {
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
        // Submitted: a cancellation waits for the actuator to settle, never abandons it.
        let applied = self.actuator.apply(&intent, deadline).await;
        if applied == Applied::NoEffect {
            let (phase, detail) = if *cancel.borrow() {
                (TransitionPhase::CancelledRestored, CANCELLED)
            } else {
                (TransitionPhase::DeclinedNoEffect, "ACTUATOR_NO_EFFECT")
            };
            return self
                .reopen_and_finish(id, req, token, phase, detail, plan)
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
        let converged = if *cancel.borrow() {
            Converged::Cancelled
        } else if applied == Applied::Applied {
            self.converge_or_cancel(
                &scope,
                deadline,
                |w| desired_reached(&intent.capability_key, &intent.evict, w),
                cancel,
            )
            .await
        } else {
            Converged::TimedOut
        };
        let cause = match converged {
            Converged::Reached => {
                return self
                    .reopen_and_finish(id, req, token, TransitionPhase::Completed, "", plan)
                    .await;
            }
            Converged::Cancelled => CANCELLED,
            Converged::TimedOut if applied == Applied::Applied => "VERIFICATION_TIMEOUT",
            Converged::TimedOut => "ACTUATOR_UNCERTAIN",
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
        // The cause that started the compensation keeps its classification.
        let cancelled = cause == CANCELLED;
        if restored {
            let phase = if cancelled {
                TransitionPhase::CancelledRestored
            } else {
                TransitionPhase::FailedRestored
            };
            return self
                .reopen_and_finish(id, req, token, phase, cause, plan)
                .await;
        }
        let cause = if cancelled {
            "CANCELLED_NOT_RESTORED"
        } else {
            "VERIFICATION_AND_COMPENSATION_FAILED"
        };
        self.contain(id, req, cause, plan).await
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
