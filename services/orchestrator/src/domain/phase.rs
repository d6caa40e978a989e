//! Transition phases and the arbiter's order (LychD design rules §23, "Arbitration and
//! planning budget"): contenders by descending priority, then first come.

use std::cmp::Reverse;

/// Phase of a transition; the last six are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransitionPhase {
    Requested,
    Arbitrating,
    Draining,
    Actuating,
    Verifying,
    Compensating,
    Completed,
    DeclinedNoEffect,
    FailedRestored,
    /// Cancelled by its owner: nothing invoked, or the exact inverse proved the prior world.
    CancelledRestored,
    ContainedUncertain,
    /// A soft activation was invoked and the target did not become WARM (no inverse exists:
    /// admission stays closed, contained).
    Failed,
}

impl TransitionPhase {
    /// The name recorded in `orchestrator.transitions.phase`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransitionPhase::Requested => "requested",
            TransitionPhase::Arbitrating => "arbitrating",
            TransitionPhase::Draining => "draining",
            TransitionPhase::Actuating => "actuating",
            TransitionPhase::Verifying => "verifying",
            TransitionPhase::Compensating => "compensating",
            TransitionPhase::Completed => "completed",
            TransitionPhase::DeclinedNoEffect => "declined_no_effect",
            TransitionPhase::FailedRestored => "failed_restored",
            TransitionPhase::CancelledRestored => "cancelled_restored",
            TransitionPhase::ContainedUncertain => "contained_uncertain",
            TransitionPhase::Failed => "failed",
        }
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            TransitionPhase::Completed
                | TransitionPhase::DeclinedNoEffect
                | TransitionPhase::FailedRestored
                | TransitionPhase::CancelledRestored
                | TransitionPhase::ContainedUncertain
                | TransitionPhase::Failed
        )
    }
}

/// A waiter's place in the arbiter: higher priority first, then the earlier ticket.
pub type Place = (Reverse<u8>, u64);

pub fn place(priority: u8, ticket: u64) -> Place {
    (Reverse(priority), ticket)
}

/// The highest accepted priority.
pub const PRIORITY_MAX: u32 = 100;

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn waiters_go_by_descending_priority_then_first_come() {
        let q: BTreeSet<Place> = [place(10, 1), place(90, 3), place(90, 2), place(50, 0)]
            .into_iter()
            .collect();
        let order: Vec<(u8, u64)> = q.into_iter().map(|(Reverse(p), t)| (p, t)).collect();
        assert_eq!(order, [(90, 2), (90, 3), (50, 0), (10, 1)]);
    }

    #[test]
    fn final_phases() {
        assert!(TransitionPhase::ContainedUncertain.is_final());
        assert!(TransitionPhase::CancelledRestored.is_final());
        assert!(TransitionPhase::Failed.is_final());
        assert!(!TransitionPhase::Compensating.is_final());
    }
}
