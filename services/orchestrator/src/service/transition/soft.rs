//! Soft activation (LychD design rules §23, "Runtime-Started Convergence"): a `SOFT_SWAP`
//! converges under one warm-up deadline. An ACTIVATABLE target (with an actuator that
//! activates) is activated: the durable runtime guard is armed first (a failed write
//! prevents the activation), the runtime-native activation is invoked, and the target must
//! become WARM before the deadline. Otherwise the wait is observation-only — nothing is
//! invoked, so a target that does not become WARM within the budget (or a cancellation) is
//! a verified no-effect decline.
//!
//! Invariant: an activation has no inverse — only an observed WARM target clears its guard
//! and reopens; a target that does not become WARM ends `failed`, a cancellation after the
//! invocation `contained_uncertain`, both contained with the guard armed (recovery needs the
//! target observed stopped).

use tokio::time::Instant;

use super::engine::{Settled, Transitions};
use super::request::LeaseLost;
use super::rite::Run;
use crate::domain::intent::{ActivationIntent, desired_reached, needs_activation};
use crate::domain::phase::TransitionPhase;
use crate::domain::rite::{Applied, Armed, Converged, Verified};
use crate::store;

impl Transitions {
    /// The soft wait's deadline starts here; an initial refresh tells whether the target is
    /// to be activated. The cohort is admitted either way (the activation is invoked after
    /// its guard is armed, or the observation-only wait begins).
    pub(super) async fn refresh_soft(&self, run: &mut Run<'_>) -> bool {
        run.deadline = Instant::now() + self.settings.warmup_timeout;
        let mut activatable = false;
        if self.actuator.activates() {
            let scope = [run.plan.target.clone()];
            let refreshed =
                tokio::time::timeout_at(run.deadline, self.dispatcher.observe(&scope)).await;
            activatable = matches!(refreshed, Ok(Ok(world))
                if needs_activation(&run.plan.capability_key, &world));
        }
        run.cohort.admitted.send_replace(Some(Instant::now()));
        activatable
    }

    /// Observation only: the target WARM before the deadline, unless cancelled first.
    pub(super) async fn observe_soft(&self, run: &Run<'_>) -> Converged {
        let scope = [run.plan.target.clone()];
        let key = &run.plan.capability_key;
        self.converge_or_cancel(
            &scope,
            run.deadline,
            |w| desired_reached(key, &[], w),
            run.cancel,
        )
        .await
    }

    /// Freeze the activation intent and arm its durable runtime guard; then the final check
    /// (the uncertainty boundary is crossed before the call begins).
    pub(super) async fn arm(&self, run: &mut Run<'_>) -> Armed {
        let Some(intent) = ActivationIntent::of(run.id, run.plan) else {
            return Armed::NoIntent;
        };
        if self.check(&run.req.fence).is_err() {
            return Armed::Unrecorded;
        }
        let armed = store::arm_guard(
            &self.pool,
            &run.req.fence,
            run.id,
            &intent.target_animator,
            &intent.capability_key,
        )
        .await;
        // Not armed (a lost lease included): nothing is invoked.
        if let Err(e) = armed {
            tracing::error!(error = %e, "arming the runtime guard failed");
            if store::lease::not_held(&e) {
                self.lease.refused(&run.req.fence);
            }
            return Armed::Unrecorded;
        }
        run.activation = Some(intent);
        if run.cancelled() {
            Armed::Cancelled
        } else {
            Armed::Armed
        }
    }

    /// Invoke the runtime-native activation.
    pub(super) async fn activate(&self, run: &Run<'_>) -> Applied {
        match &run.activation {
            Some(intent) => self.actuator.activate(intent, run.deadline).await,
            None => Applied::NoEffect,
        }
    }

    /// The activated target WARM before the deadline, unless cancelled first.
    pub(super) async fn verify_activation(&self, applied: Applied, run: &Run<'_>) -> Verified {
        let Some(intent) = &run.activation else {
            return Verified::Unverifiable;
        };
        if run.cancelled() {
            return Verified::Cancelled;
        }
        if !applied.observable() {
            return Verified::Unverifiable;
        }
        let scope = [run.plan.target.clone()];
        let key = &intent.capability_key;
        self.converge_or_cancel(
            &scope,
            run.deadline,
            |w| desired_reached(key, &[], w),
            run.cancel,
        )
        .await
        .into()
    }

    /// Clear a guard whose activation was never invoked, then reopen and settle.
    pub(super) async fn unguard_and_reopen(
        &self,
        run: &Run<'_>,
        phase: TransitionPhase,
        detail: &str,
    ) -> Settled {
        let (id, req, plan) = (run.id, run.req, run.plan);
        let cleared = store::clear_guard(&self.pool, &req.fence, id, "NOT_INVOKED").await;
        let Ok(cleared) = self.judge(&req.fence, cleared) else {
            return Settled::LeaseLost;
        };
        if let Err(e) = cleared {
            tracing::error!(error = %e, "clearing the runtime guard failed");
            return self
                .contain(
                    id,
                    req,
                    TransitionPhase::ContainedUncertain,
                    "RUNTIME_GUARD_ARMED",
                    plan,
                )
                .await;
        }
        self.reopen_and_finish(id, req, &run.token, phase, detail, plan)
            .await
    }

    /// The target was observed WARM: clear the guard, then reopen `completed`.
    pub(super) async fn disarm_and_reopen(&self, run: &Run<'_>) -> Settled {
        let cleared = store::clear_guard(&self.pool, &run.req.fence, run.id, "WARM_OBSERVED").await;
        match self.judge(&run.req.fence, cleared) {
            Ok(Ok(_)) => {}
            // The guard stays armed: the next start (or holder) contains this transition.
            Ok(Err(e)) => tracing::error!(error = %e, "clearing the runtime guard failed"),
            Err(LeaseLost) => return Settled::LeaseLost,
        }
        self.reopen_and_finish(
            run.id,
            run.req,
            &run.token,
            TransitionPhase::Completed,
            "",
            run.plan,
        )
        .await
    }
}
