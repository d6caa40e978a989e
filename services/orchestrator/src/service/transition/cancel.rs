//! Explicit cancellation (LychD design rules §23, "Cancellation"): the owner's caller only
//! may cancel an in-flight transition. Before any effect it settles `cancelled_restored`
//! (admission reopened where it was closed); after a hard actuation was submitted the rite
//! waits for the actuator to settle and applies the exact inverse; a soft activation has no
//! inverse (contained). The rite reads the signal at its decision points
//! ([`crate::domain::rite`]); this module raises it and waits for the settlement.
//!
//! Invariant: cancelling changes nothing but the signal — the owner's task settles the
//! transition whether or not the cancelling caller stays.

use super::cohort::Waiting;
use super::engine::{Settled, Transitions};
use super::request::Held;
use crate::domain::phase::TransitionPhase;
use crate::domain::plan::Plan;
use crate::domain::rite::CANCELLED;

/// What a cancellation request found.
pub enum Cancelled {
    /// No transition with this id is in flight.
    NotRunning,
    /// Another principal's request owns it; nothing changed.
    NotOwned,
    /// The signal is raised; the transition's settlement comes through this.
    Raised(Waiting),
}

impl Transitions {
    /// Cancel the in-flight transition `id` on behalf of `principal_id` (its owner's caller
    /// only): raise the signal and answer at once. The owner's task settles the transition
    /// whether or not anyone waits ([`Waiting::hear`] waits, bounded, for it).
    pub fn cancel(&self, id: &str, principal_id: &str) -> Cancelled {
        let Some(live) = self.lives().get(id).cloned() else {
            return Cancelled::NotRunning;
        };
        if live.requested_by != principal_id {
            return Cancelled::NotOwned;
        }
        live.cancel.send_replace(true);
        Cancelled::Raised(Waiting::on(live.cohort.clone(), None, false))
    }

    /// Settle cancelled before anything was closed or invoked: no effect to restore.
    pub(super) async fn cancelled_before(
        &self,
        id: &str,
        req: &Held,
        plan: Option<&Plan>,
    ) -> Settled {
        self.finish(id, req, TransitionPhase::CancelledRestored, CANCELLED, plan)
            .await
    }
}
