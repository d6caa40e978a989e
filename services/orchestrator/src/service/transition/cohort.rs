//! Cohorts and their owners (LychD design rules §23, "Arbitration and planning budget"): one
//! cohort per capability and priority; the first request owns it, later ones join and hear
//! its settlement (a follower also its own cutoff). The owner plans under the planning
//! budget (a warm/open NO_OP bypasses the section), waits in the [`super::arbiter`], plans
//! again inside the section, checks the containment fence, the cutoff, a cancellation and
//! Ward, records the transition, and hands it to the rite.
//!
//! Invariant: the owner runs in its own task — a caller that goes away (or cancels
//! repeatedly) never interrupts the rite, its compensation or its cleanup; nothing is
//! recorded or closed before the fence, the cutoff and Ward were checked inside the section.

use std::sync::Arc;

use lychd_runtime::refusal::DbFailure;
use tokio::sync::watch;
use tokio::time::Instant;

use super::arbiter::Left;
use super::engine::{Cohort, Heard, Live, Settled, Transitions, cancelled, expired};
use super::request::{Held, LeaseLost, TransitionRequest};
use crate::domain::phase::TransitionPhase;
use crate::domain::plan::{Action, Plan};
use crate::error::OrchestratorError;
use crate::store;
use crate::store::resources::RequestRow;

/// A plan or why the owner stops before any effect.
enum Planned {
    Plan(Box<Plan>),
    Stop(Settled),
}

fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Where a request stands once recorded.
pub enum Submitted {
    /// A new request: it owns a new cohort or joined an in-flight one; recorded.
    Recorded(Waiting),
    /// The caller's request id was seen before: this is its transition.
    Replayed(RequestRow),
}

/// A caller's wait for a cohort's settlement (a follower also for its own cutoff).
pub struct Waiting {
    pub transition_id: String,
    pub joined: bool,
    cohort: Arc<Cohort>,
    cutoff: Option<Instant>,
}

impl Waiting {
    pub(super) fn on(cohort: Arc<Cohort>, cutoff: Option<Instant>, joined: bool) -> Waiting {
        Waiting {
            transition_id: cohort.id.clone(),
            joined,
            cohort,
            cutoff,
        }
    }

    /// The settlement, if it came before `until` (`None`: not yet — follow the transition).
    pub async fn hear(&self, until: Instant) -> Option<Heard> {
        let mut settled = self.cohort.settled.subscribe();
        let admitted = self.cohort.admitted.subscribe();
        let mut cutoff = self.cutoff;
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
                    let settled = r.ok().and_then(|v| v.clone()).unwrap_or(Settled::Database(DbFailure::Unavailable));
                    return Some(Heard::Settled { settled, joined: self.joined });
                }
                () = timer => {
                    let c = cutoff.expect("invariant: the timer runs only with a cutoff");
                    // Admitted before the follower's cutoff: it joins the settlement.
                    if admitted.borrow().is_some_and(|t| t < c) {
                        cutoff = None;
                        continue;
                    }
                    return Some(Heard::WaitExpired);
                }
                () = tokio::time::sleep_until(until) => return None,
            }
        }
    }
}

/// A cohort refusal as the final phase the feed records (no effect: nothing was closed).
fn refusal_detail(s: &Settled) -> Option<&'static str> {
    match s {
        Settled::Outcome(_) => None,
        Settled::AdmissionExpired => Some("TRANSITION_ADMISSION_EXPIRED"),
        Settled::Contained => Some("TRANSITION_CONTAINED"),
        Settled::Database(_) => Some("DATABASE_FAILED"),
        // Not this process's to record: the holder settles it when it takes the host over.
        Settled::LeaseLost => None,
    }
}

impl Transitions {
    /// The transition of a request `request_id` of `principal_id` already made, if any.
    pub async fn replay(
        &self,
        principal_id: &str,
        request_id: &str,
    ) -> Result<Option<RequestRow>, OrchestratorError> {
        Ok(store::resources::request(&self.pool, principal_id, request_id).await?)
    }

    /// A transition in flight in this process, to wait for.
    pub fn live(&self, id: &str, joined: bool) -> Option<Waiting> {
        self.lives()
            .get(id)
            .map(|l| Waiting::on(l.cohort.clone(), None, joined))
    }

    /// Submit request `request_id`: join the cohort of its capability and priority, or own a
    /// new one (its task runs the transition, never tied to this call); recorded (the request
    /// and, for a new transition, its `requested` phase) before this answers. A request id seen
    /// before answers its transition instead.
    pub async fn submit(
        self: &Arc<Self>,
        req: TransitionRequest,
        request_id: &str,
    ) -> Result<Submitted, OrchestratorError> {
        let _admitting = self.admitting.lock().await;
        if let Some(seen) = self.replay(&req.principal_id, request_id).await? {
            return Ok(Submitted::Replayed(seen));
        }
        // Recorded and run under the generation of the host lease held now, or not at all.
        let fence = self
            .lease
            .fence()
            .ok_or(OrchestratorError::HostLeaseNotHeld)?;
        let req = Held { req, fence };
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
                        id: new_id(),
                        settled: watch::channel(None).0,
                        admitted: watch::channel(None).0,
                    });
                    map.insert(key.clone(), c.clone());
                    (c, true)
                }
            }
        };
        let id = cohort.id.clone();
        let requested = store::resources::NewEvent {
            transition_id: &id,
            capability_key: &req.capability_key,
            priority: req.priority,
            phase: TransitionPhase::Requested,
            detail: "",
            plan: None,
        };
        let recorded = store::resources::record_request(
            &self.pool,
            &req.fence,
            &req.principal_id,
            request_id,
            !owner,
            &requested,
        )
        .await;
        let recorded = self.judge(&req.fence, recorded);
        if !matches!(recorded, Ok(Ok(true))) && owner {
            // Nothing runs under an unrecorded transition (no one else joined: submissions
            // are serialized).
            self.cohorts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&key);
        }
        let Ok(recorded) = recorded else {
            return Err(OrchestratorError::HostLeaseNotHeld);
        };
        if !recorded? {
            // Unreachable while submissions are serialized; answered as a replay all the same.
            return match self.replay(&req.principal_id, request_id).await? {
                Some(seen) => Ok(Submitted::Replayed(seen)),
                None => Err(OrchestratorError::Interrupted),
            };
        }
        let follower_cutoff = if owner { None } else { req.cutoff };
        if owner {
            let this = self.clone();
            let c = cohort.clone();
            let (cancel, cancel_rx) = watch::channel(false);
            self.lives().insert(
                id.clone(),
                Arc::new(Live {
                    requested_by: req.principal_id.clone(),
                    cancel,
                    cohort: cohort.clone(),
                }),
            );
            self.poke_requested(&id, &req);
            tokio::spawn(async move {
                let id = c.id.clone();
                let result = this.own(&id, &req, &c, &cancel_rx).await;
                if let Some(detail) = refusal_detail(&result) {
                    let _ = this
                        .emit(&id, &req, TransitionPhase::DeclinedNoEffect, detail, None)
                        .await;
                }
                this.cohorts
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&key);
                this.lives().remove(&id);
                c.settled.send_replace(Some(result));
            });
        }
        Ok(Submitted::Recorded(Waiting::on(
            cohort,
            follower_cutoff,
            !owner,
        )))
    }

    /// Submit and wait for the settlement, however long it takes (benchmarks, tests).
    pub async fn request(self: &Arc<Self>, req: TransitionRequest) -> Heard {
        match self.submit(req, &new_id()).await {
            Ok(Submitted::Recorded(w)) => loop {
                if let Some(h) = w
                    .hear(Instant::now() + std::time::Duration::from_secs(3600))
                    .await
                {
                    return h;
                }
            },
            Ok(Submitted::Replayed(_)) | Err(_) => Heard::Settled {
                settled: Settled::Database(DbFailure::Unavailable),
                joined: false,
            },
        }
    }

    /// Observe and plan under the planning budget; the gate on hard swaps.
    async fn plan(&self, id: &str, req: &Held) -> Planned {
        let budget = self.settings.planning_timeout;
        if let Some(cap) = self.settings.registry.capability(&req.capability_key) {
            self.memory.touch(cap.animator(), req.priority);
        }
        let memory = self.memory.snapshot();
        let decided = tokio::time::timeout(
            budget,
            crate::service::preview::preview(
                &self.settings,
                &self.dispatcher,
                &memory,
                &req.capability_key,
            ),
        )
        .await;
        let detail = match decided {
            Err(_) => "PLANNING_TIMEOUT",
            Ok(Err(_)) => "OBSERVATION_UNAVAILABLE",
            Ok(Ok(Err(decline))) => decline.code(),
            Ok(Ok(Ok(plan))) => {
                if plan.action == Action::HardSwap
                    && req.priority < self.settings.min_priority_for_hard_swap
                {
                    return Planned::Stop(
                        self.finish(
                            id,
                            req,
                            TransitionPhase::DeclinedNoEffect,
                            "HARD_SWAP_BELOW_PRIORITY",
                            Some(&plan),
                        )
                        .await,
                    );
                }
                return Planned::Plan(Box::new(plan));
            }
        };
        Planned::Stop(
            self.finish(id, req, TransitionPhase::DeclinedNoEffect, detail, None)
                .await,
        )
    }

    /// A NO_OP confirms readiness: admitted unless the cutoff passed first.
    async fn no_op(&self, id: &str, req: &Held, plan: &Plan, cohort: &Cohort) -> Settled {
        if expired(req.cutoff) {
            return Settled::AdmissionExpired;
        }
        cohort.admitted.send_replace(Some(Instant::now()));
        self.finish(id, req, TransitionPhase::Completed, "", Some(plan))
            .await
    }

    /// [`Transitions::plan`], unless the transition is cancelled first.
    async fn plan_or_cancel(
        &self,
        id: &str,
        req: &Held,
        cancel: &watch::Receiver<bool>,
        prior: Option<&Plan>,
    ) -> Planned {
        tokio::select! {
            biased;
            () = cancelled(cancel.clone()) => Planned::Stop(self.cancelled_before(id, req, prior).await),
            p = self.plan(id, req) => p,
        }
    }

    /// The cohort owner's whole transition.
    async fn own(
        &self,
        id: &str,
        req: &Held,
        cohort: &Cohort,
        cancel: &watch::Receiver<bool>,
    ) -> Settled {
        let id = id.to_owned();
        // Preflight: a warm/open NO_OP bypasses the physical section.
        let plan = match self.plan_or_cancel(&id, req, cancel, None).await {
            Planned::Stop(s) => return s,
            Planned::Plan(p) => *p,
        };
        if plan.action == Action::NoOp {
            return self.no_op(&id, req, &plan, cohort).await;
        }
        if self
            .emit(&id, req, TransitionPhase::Arbitrating, "", Some(&plan))
            .await
            .is_err()
        {
            return Settled::LeaseLost;
        }
        let _permit = match self
            .arbiter
            .acquire(req.priority, req.cutoff, cancelled(cancel.clone()))
            .await
        {
            Ok(p) => p,
            Err(Left::Expired) => return Settled::AdmissionExpired,
            Err(Left::Cancelled) => return self.cancelled_before(&id, req, Some(&plan)).await,
        };
        // Every other plan is recomputed inside the section, after its predecessor settled.
        let plan = match self.plan_or_cancel(&id, req, cancel, Some(&plan)).await {
            Planned::Stop(s) => return s,
            Planned::Plan(p) => *p,
        };
        if plan.action == Action::NoOp {
            // The caller waited in the arbiter: a caller whose authority went meanwhile gets
            // no outcome but the refusal, NO_OP or not.
            if !(req.recheck)().await {
                return self
                    .finish(
                        &id,
                        req,
                        TransitionPhase::DeclinedNoEffect,
                        "AUTHORITY_WITHDRAWN",
                        Some(&plan),
                    )
                    .await;
            }
            return self.no_op(&id, req, &plan, cohort).await;
        }
        if self.latched() {
            return Settled::Contained;
        }
        match store::fenced(&self.pool).await {
            Ok(false) => {}
            Ok(true) => return Settled::Contained,
            Err(e) => {
                tracing::error!(error = %e, "reading containment failed");
                return Settled::Database(DbFailure::classify(&e));
            }
        }
        if expired(req.cutoff) {
            return Settled::AdmissionExpired;
        }
        if *cancel.borrow() {
            return self.cancelled_before(&id, req, Some(&plan)).await;
        }
        // Ward again, with the first decision's generation, before the first effect.
        if !(req.recheck)().await {
            return self
                .finish(
                    &id,
                    req,
                    TransitionPhase::DeclinedNoEffect,
                    "AUTHORITY_WITHDRAWN",
                    Some(&plan),
                )
                .await;
        }
        if self.check(&req.fence).is_err() {
            return Settled::LeaseLost;
        }
        let inserted = store::insert(
            &self.pool,
            &req.fence,
            &store::NewTransition {
                id: &id,
                priority: req.priority,
                requested_by: &req.principal_id,
                plan: &plan,
            },
        )
        .await;
        match self.judge(&req.fence, inserted) {
            Err(LeaseLost) => return Settled::LeaseLost,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "recording the transition failed");
                return Settled::Database(DbFailure::classify(&e));
            }
            Ok(Ok(())) => {}
        }
        self.rite(&id, req, cohort, plan, cancel).await
    }
}
