//! The rite (LychD design rules §23, "The transition rite"): close admission on the affected
//! set through the Dispatcher, await drain, the final invocation check, freeze the intent,
//! actuate, verify under one deadline, reopen only after success, proved no effect or exact
//! restoration; compensate with the exact typed inverse; contain.
//!
//! This module performs the steps; what follows each observed outcome is the pure step table
//! [`crate::domain::rite::next`], which the loop in [`Transitions::rite`] follows until an
//! answer settles the transition. Invariant: every settlement passes through
//! [`Transitions::conclude`]; a cancellation after a hard actuation was submitted waits for
//! the actuator to settle and compensates — it never abandons the call.

use tokio::sync::watch;
use tokio::time::Instant;

use super::engine::{Cohort, Settled, Transitions, cancelled, expired};
use super::request::{Held, LeaseLost};
use crate::domain::intent::{ActivationIntent, TransitionIntent, desired_reached, prior_restored};
use crate::domain::phase::TransitionPhase;
use crate::domain::plan::{Action, Plan};
use crate::domain::rite::{
    Actuated, Applied, Cause, Close, Drain, Invoke, Next, Observed, Settle, Step, Verified, next,
};
use crate::store;

/// One run of the rite: what its steps share.
pub(super) struct Run<'a> {
    pub(super) id: &'a str,
    pub(super) req: &'a Held,
    pub(super) cohort: &'a Cohort,
    pub(super) plan: &'a Plan,
    /// The Dispatcher's closure token (empty only when the close itself was uncertain).
    pub(super) token: String,
    pub(super) cancel: &'a watch::Receiver<bool>,
    /// The forward intent, frozen at the final invocation check of a hard plan.
    pub(super) intent: Option<TransitionIntent>,
    /// The activation intent, frozen when a soft activation arms its guard.
    pub(super) activation: Option<ActivationIntent>,
    /// The deadline of the actuation (or the soft wait) and its verification.
    pub(super) deadline: Instant,
}

impl Run<'_> {
    pub(super) fn cancelled(&self) -> bool {
        *self.cancel.borrow()
    }
}

impl Transitions {
    /// The rite of a recorded transition: the close, then the step table's answers.
    pub(super) async fn rite(
        &self,
        id: &str,
        req: &Held,
        cohort: &Cohort,
        plan: Plan,
        cancel: &watch::Receiver<bool>,
    ) -> Settled {
        let affected = plan.affected();
        if self
            .emit(id, req, TransitionPhase::Draining, "", Some(&plan))
            .await
            .is_err()
        {
            return Settled::LeaseLost;
        }
        let mut run = Run {
            id,
            req,
            cohort,
            plan: &plan,
            token: String::new(),
            cancel,
            intent: None,
            activation: None,
            deadline: Instant::now(),
        };
        // No effect without the lease at this transition's generation.
        if self.check(&req.fence).is_err() {
            return Settled::LeaseLost;
        }
        let closed = match self
            .dispatcher
            .close(id, &affected, "orchestrator transition")
            .await
        {
            Ok(token) => {
                let r = store::set_closure(&self.pool, &req.fence, id, &token).await;
                match self.judge(&req.fence, r) {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::error!(error = %e, "recording the closure failed"),
                    Err(LeaseLost) => return Settled::LeaseLost,
                }
                run.token = token;
                Close::Closed
            }
            // Whether the close happened is unknown: contained until recovered.
            Err(_) => Close::Uncertain,
        };
        let mut answer = next(Observed::Close(closed));
        loop {
            answer = match answer {
                Next::Go(step) => {
                    if let Some(entered) = step.enters()
                        && self.enter(id, req, entered, &plan).await.is_err()
                    {
                        return Settled::LeaseLost;
                    }
                    // An effect (the actuator, an activation) only under the lease.
                    if matches!(step, Step::Actuate | Step::Activate)
                        && self.check(&req.fence).is_err()
                    {
                        return Settled::LeaseLost;
                    }
                    next(self.perform(step, &mut run).await)
                }
                Next::Compensate(cause) => match self.compensate(cause, &run).await {
                    Ok(observed) => next(observed),
                    Err(LeaseLost) => return Settled::LeaseLost,
                },
                Next::Settle(settle) => return self.conclude(&run, settle).await,
            };
        }
    }

    async fn perform(&self, step: Step, run: &mut Run<'_>) -> Observed {
        match step {
            Step::Drain => Observed::Drain(self.drain(run).await),
            Step::Invoke => Observed::Invoke(self.invoke(run).await),
            Step::Actuate => Observed::Actuate(self.actuate(run).await),
            Step::Verify(applied) => Observed::Verify(self.verify(applied, run).await),
            Step::VerifyRestored => Observed::VerifyRestored {
                observed: self.verify_restored(run).await,
            },
            Step::Soft => Observed::Soft {
                activatable: self.refresh_soft(run).await,
            },
            Step::Observe => Observed::Observe(self.observe_soft(run).await),
            Step::Arm => Observed::Arm(self.arm(run).await),
            Step::Activate => Observed::Activate(self.activate(run).await),
            Step::VerifyActivation(applied) => {
                Observed::VerifyActivation(self.verify_activation(applied, run).await)
            }
        }
    }

    /// Drain: the drain budget, cut short by an earlier admission cutoff (a local budget
    /// wins an exact tie).
    async fn drain(&self, run: &Run<'_>) -> Drain {
        if run.cancelled() {
            return Drain::Cancelled;
        }
        let affected = run.plan.affected();
        let drain_deadline = Instant::now() + self.settings.drain_timeout;
        let until = match run.req.cutoff {
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
                () = cancelled(run.cancel.clone()) => None,
                w = self.dispatcher.await_drain(&affected, wait_ms) => Some(w),
            };
            let Some(waited) = waited else {
                return Drain::Cancelled;
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
        if drained {
            Drain::Drained
        } else if run.req.cutoff.is_some_and(|c| c < drain_deadline) {
            Drain::CutoffPassed
        } else {
            Drain::BudgetSpent
        }
    }

    /// The final invocation check, then Ward again before the effect; a hard plan is
    /// admitted here (the actuator is about to be invoked) and its intent frozen.
    async fn invoke(&self, run: &mut Run<'_>) -> Invoke {
        if expired(run.req.cutoff) {
            return Invoke::CutoffPassed;
        }
        if !(run.req.recheck)().await {
            return Invoke::AuthorityWithdrawn;
        }
        if run.cancelled() {
            return Invoke::Cancelled;
        }
        if run.plan.action == Action::SoftSwap {
            return Invoke::Soft;
        }
        run.cohort.admitted.send_replace(Some(Instant::now()));
        run.intent = TransitionIntent::forward(run.id, run.plan);
        if run.intent.is_some() {
            Invoke::Hard
        } else {
            Invoke::NoIntent
        }
    }

    /// One deadline for the actuation and the verification (target WARM, evictees cold).
    /// Submitted: a cancellation waits for the actuator to settle, never abandons it.
    async fn actuate(&self, run: &mut Run<'_>) -> Actuated {
        let Some(intent) = &run.intent else {
            return Actuated {
                applied: Applied::NoEffect,
                cancelled: run.cancelled(),
            };
        };
        run.deadline = Instant::now() + self.settings.warmup_timeout;
        let applied = self.actuator.apply(intent, run.deadline).await;
        Actuated {
            applied,
            cancelled: run.cancelled(),
        }
    }

    async fn verify(&self, applied: Applied, run: &Run<'_>) -> Verified {
        let Some(intent) = &run.intent else {
            return Verified::Unverifiable;
        };
        if run.cancelled() {
            return Verified::Cancelled;
        }
        if !applied.observable() {
            return Verified::Unverifiable;
        }
        self.converge_or_cancel(
            &intent.scope(),
            run.deadline,
            |w| desired_reached(&intent.capability_key, &intent.evict, w),
            run.cancel,
        )
        .await
        .into()
    }

    /// The exact typed inverse, under its own deadline; nobody's cancellation stops it — only
    /// a lost lease does (the holder contains the transition).
    async fn compensate(&self, cause: Cause, run: &Run<'_>) -> Result<Observed, LeaseLost> {
        let restored = match &run.intent {
            None => false,
            Some(intent) => {
                let entered = (TransitionPhase::Compensating, cause.as_str());
                self.enter(run.id, run.req, entered, run.plan).await?;
                self.check(&run.req.fence)?;
                let inverse = intent.compensation();
                let deadline = Instant::now() + self.settings.warmup_timeout;
                let undone = self.actuator.apply(&inverse, deadline).await;
                matches!(undone, Applied::Applied | Applied::NoEffect)
                    && self
                        .converge(&intent.scope(), deadline, |w| prior_restored(intent, w))
                        .await
            }
        };
        Ok(Observed::Compensate { cause, restored })
    }

    /// The actuator reported the exact prior world (a failed step it restored itself): the
    /// prior world must also be observed (each expected animator WARM again) under a fresh
    /// deadline before admission reopens.
    async fn verify_restored(&self, run: &Run<'_>) -> bool {
        let Some(intent) = &run.intent else {
            return false;
        };
        let deadline = Instant::now() + self.settings.warmup_timeout;
        self.converge(&intent.scope(), deadline, |w| prior_restored(intent, w))
            .await
    }

    /// Do what a settling answer of the step table says.
    async fn conclude(&self, run: &Run<'_>, settle: Settle) -> Settled {
        let (id, req, token, plan) = (run.id, run.req, run.token.as_str(), run.plan);
        match settle {
            Settle::Reopen { phase, detail } => {
                self.reopen_and_finish(id, req, token, phase, detail, plan)
                    .await
            }
            Settle::ReopenExpired => {
                let s = self
                    .reopen_and_finish(
                        id,
                        req,
                        token,
                        TransitionPhase::DeclinedNoEffect,
                        "ADMISSION_EXPIRED",
                        plan,
                    )
                    .await;
                match s {
                    Settled::Outcome(o) if o.phase == TransitionPhase::DeclinedNoEffect => {
                        Settled::AdmissionExpired
                    }
                    other => other,
                }
            }
            Settle::Unguard { phase, detail } => self.unguard_and_reopen(run, phase, detail).await,
            Settle::Disarm => self.disarm_and_reopen(run).await,
            Settle::Contain { phase, cause } => self.contain(id, req, phase, cause, plan).await,
        }
    }
}
