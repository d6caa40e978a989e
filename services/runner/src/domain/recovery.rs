//! Recovery review of a quarantined run (loop-contract v1 `checkpoint.corruption_outcome`:
//! "quarantine the run and require recovery review"): the operator's decision, the rules it
//! must meet, and the recovery point a resume restores. Pure: no I/O, no clock.
//!
//! - The **recovery point** is the newest checkpoint written before the quarantine whose
//!   checksum verifies, whose body is one of ours (its progress parses) and whose state-schema
//!   version this process understands. A resume restores the run's progress from it (steps
//!   recorded only after it are lost and run again: Runner I steps have no external effect).
//! - The operator names the checksum of the recovery point they inspected; another checksum
//!   (the stored bytes changed, or another checkpoint was inspected) is stale and refused,
//!   never applied. When no checkpoint verifies there is no recovery point: the checksum must
//!   be empty and only `fail` or `cancel` may be decided (a resume has nothing to restore).
//! - `reconcile` is for a pending effect; Runner I records none, so it is refused.
//! - A cancellation the run's owner asked for while the run was quarantined (a durable
//!   interrupt) leaves `cancel` or `fail`: a resume is refused.

/// Most characters of a review's rationale (kept, never logged).
pub const MAX_RATIONALE_CHARS: usize = 1024;

/// The operator's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Resume from the recovery point (FSM `recovery_resume` → `INGEST`).
    Resume,
    /// Hand a pending effect to human reconciliation (FSM `recovery_reconcile`).
    Reconcile,
    /// End the run `FAILED` (FSM `recovery_fail`).
    Fail,
    /// End the run `CANCELED` (FSM `recovery_cancel`).
    Cancel,
}

impl Decision {
    /// The FSM event the decision is.
    pub fn event(self) -> &'static str {
        match self {
            Decision::Resume => "recovery_resume",
            Decision::Reconcile => "recovery_reconcile",
            Decision::Fail => "recovery_fail",
            Decision::Cancel => "recovery_cancel",
        }
    }

    /// Its name as recorded.
    pub fn name(self) -> &'static str {
        match self {
            Decision::Resume => "resume",
            Decision::Reconcile => "reconcile",
            Decision::Fail => "fail",
            Decision::Cancel => "cancel",
        }
    }

    pub fn parse(s: &str) -> Option<Decision> {
        [
            Decision::Resume,
            Decision::Reconcile,
            Decision::Fail,
            Decision::Cancel,
        ]
        .into_iter()
        .find(|d| d.name() == s)
    }
}

/// Whether `s` is a rationale: 1 to [`MAX_RATIONALE_CHARS`] characters, not only whitespace,
/// no control character but newline and tab.
pub fn rationale_ok(s: &str) -> bool {
    let n = s.chars().count();
    (1..=MAX_RATIONALE_CHARS).contains(&n)
        && !s.trim().is_empty()
        && s.chars().all(|c| !c.is_control() || c == '\n' || c == '\t')
}

/// Whether `s` is a checksum as named in a review: empty, or 64 lowercase hex digits.
pub fn checksum_ok(s: &str) -> bool {
    s.is_empty() || (s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// A candidate recovery point: a checkpoint written before the quarantine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub version: i64,
    pub checksum: String,
    /// Its checksum verifies, its body is ours and its state-schema version is understood.
    pub sound: bool,
}

/// The recovery point among `candidates` (any order): the newest sound one.
pub fn recovery_point(candidates: &[Candidate]) -> Option<&Candidate> {
    candidates
        .iter()
        .filter(|c| c.sound)
        .max_by_key(|c| c.version)
}

/// Why a review cannot be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `reconcile` without a pending effect (none in Runner I).
    NoPendingEffect,
    /// The named checksum is not the recovery point's (or is not empty when there is none).
    Stale,
    /// `resume` with no checkpoint that verifies.
    NothingToRestore,
    /// `resume` of a run whose owner asked to cancel it.
    CancelPending,
}

/// Check a review of a quarantined run: `decision`, the checksum the operator inspected,
/// the run's recovery point, whether an effect is pending, whether a cancel is pending.
pub fn check(
    decision: Decision,
    inspected: &str,
    point: Option<&Candidate>,
    effect_pending: bool,
    cancel_pending: bool,
) -> Result<(), Refused> {
    if decision == Decision::Reconcile && !effect_pending {
        return Err(Refused::NoPendingEffect);
    }
    let expected = point.map(|p| p.checksum.as_str()).unwrap_or("");
    if inspected != expected {
        return Err(Refused::Stale);
    }
    if decision == Decision::Resume {
        if point.is_none() {
            return Err(Refused::NothingToRestore);
        }
        if cancel_pending {
            return Err(Refused::CancelPending);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(version: i64, sum: char, sound: bool) -> Candidate {
        Candidate {
            version,
            checksum: sum.to_string().repeat(64),
            sound,
        }
    }

    #[test]
    fn decisions_round_trip_and_name_their_fsm_events() {
        for d in [
            Decision::Resume,
            Decision::Reconcile,
            Decision::Fail,
            Decision::Cancel,
        ] {
            assert_eq!(Decision::parse(d.name()), Some(d));
            assert_eq!(d.event(), format!("recovery_{}", d.name()));
        }
        assert_eq!(Decision::parse("RESUME"), None);
    }

    #[test]
    fn rationale_and_checksum_shapes() {
        assert!(rationale_ok("checked the body\nby hand"));
        for bad in ["", "   ", "bell\u{7}", &"x".repeat(MAX_RATIONALE_CHARS + 1)] {
            assert!(!rationale_ok(bad), "{bad:?}");
        }
        assert!(checksum_ok(""));
        assert!(checksum_ok(&"a".repeat(64)));
        assert!(!checksum_ok(&"A".repeat(64)));
        assert!(!checksum_ok("abc"));
    }

    #[test]
    fn the_recovery_point_is_the_newest_sound_checkpoint() {
        let cs = [c(1, 'a', true), c(3, 'c', false), c(2, 'b', true)];
        assert_eq!(recovery_point(&cs).map(|p| p.version), Some(2));
        assert_eq!(recovery_point(&[c(1, 'a', false)]), None);
    }

    #[test]
    fn a_review_is_checked_against_the_recovery_point() {
        let p = c(2, 'b', true);
        let b = p.checksum.clone();
        assert_eq!(check(Decision::Resume, &b, Some(&p), false, false), Ok(()));
        assert_eq!(
            check(Decision::Resume, &"a".repeat(64), Some(&p), false, false),
            Err(Refused::Stale)
        );
        assert_eq!(
            check(Decision::Fail, "", Some(&p), false, false),
            Err(Refused::Stale)
        );
        assert_eq!(
            check(Decision::Reconcile, &b, Some(&p), false, false),
            Err(Refused::NoPendingEffect)
        );
        assert_eq!(
            check(Decision::Reconcile, &b, Some(&p), true, false),
            Ok(())
        );
        assert_eq!(
            check(Decision::Resume, &b, Some(&p), false, true),
            Err(Refused::CancelPending)
        );
        assert_eq!(check(Decision::Cancel, &b, Some(&p), false, true), Ok(()));
        // No checkpoint verifies: only fail or cancel, naming no checksum.
        assert_eq!(
            check(Decision::Resume, "", None, false, false),
            Err(Refused::NothingToRestore)
        );
        assert_eq!(check(Decision::Fail, "", None, false, false), Ok(()));
        assert_eq!(
            check(Decision::Fail, &b, None, false, false),
            Err(Refused::Stale)
        );
    }
}
