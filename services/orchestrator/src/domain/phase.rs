//! Transition phases and the arbiter's order (LychD design rules §23, "Arbitration and
//! planning budget"): contenders by descending priority, then first come.
//!
//! [`TransitionPhase`] is the one definition of the phase names: the store binds
//! [`TransitionPhase::as_str`], the gRPC layer maps each to the proto's enum, and tests keep
//! the migrations' CHECK constraint and the proto's `TransitionPhase` equal to
//! [`TransitionPhase::ALL`].

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
    /// Every phase, in the order of the proto's enum values.
    pub const ALL: [TransitionPhase; 12] = [
        TransitionPhase::Requested,
        TransitionPhase::Arbitrating,
        TransitionPhase::Draining,
        TransitionPhase::Actuating,
        TransitionPhase::Verifying,
        TransitionPhase::Compensating,
        TransitionPhase::Completed,
        TransitionPhase::DeclinedNoEffect,
        TransitionPhase::FailedRestored,
        TransitionPhase::ContainedUncertain,
        TransitionPhase::CancelledRestored,
        TransitionPhase::Failed,
    ];

    /// The phase named `s` ([`TransitionPhase::as_str`]'s inverse).
    pub fn parse(s: &str) -> Option<TransitionPhase> {
        TransitionPhase::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// Whether a transition row can record it: a row is written when the rite begins
    /// (`draining`), so `requested` and `arbitrating` are only ever events.
    pub fn is_recorded(self) -> bool {
        !matches!(
            self,
            TransitionPhase::Requested | TransitionPhase::Arbitrating
        )
    }

    /// The recorded phases a transition is still in while its owner runs (a row left in one
    /// by a process that is gone was interrupted).
    pub fn open() -> Vec<&'static str> {
        TransitionPhase::ALL
            .into_iter()
            .filter(|p| p.is_recorded() && !p.is_final())
            .map(TransitionPhase::as_str)
            .collect()
    }

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
    fn every_phase_parses_from_its_name_and_names_are_distinct() {
        let names: BTreeSet<&str> = TransitionPhase::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(names.len(), TransitionPhase::ALL.len());
        for p in TransitionPhase::ALL {
            assert_eq!(TransitionPhase::parse(p.as_str()), Some(p));
        }
        assert_eq!(TransitionPhase::parse("warm"), None);
        assert_eq!(
            TransitionPhase::open(),
            ["draining", "actuating", "verifying", "compensating"]
        );
    }

    #[test]
    fn final_phases() {
        assert!(TransitionPhase::ContainedUncertain.is_final());
        assert!(TransitionPhase::CancelledRestored.is_final());
        assert!(TransitionPhase::Failed.is_final());
        assert!(!TransitionPhase::Compensating.is_final());
    }
}
