//! Which endings release a run's pending consents at Ward (issue 28, Runner II): a run that
//! ends leaves nobody to answer a consent it proposed, so a terminal commit out of a state in
//! which a consent of the run may be pending marks the release (`store::releases`; Ward's
//! `CancelForRun` settles what is still pending, once asked). Pure.
//!
//! A consent may be pending in:
//! - `PLAN_EFFECTS`: the proposal is made before the commit that records it (`approval_requested`),
//!   and a stale approval returns here with its consent still recorded at Ward;
//! - `WAIT_APPROVAL`: the effect's exact-hash approval waited for;
//! - `VERIFY` and `WAIT_VERIFICATION`: the owner records and the promotion the verifier
//!   proposed (`OWNER_RECORDS_PENDING`, `PROMOTION_PENDING`), a changed proposal leaving the
//!   earlier one pending;
//! - `QUARANTINED`: a run quarantined in any of the above.
//!
//! From every other state the run's consents are settled: an effect's approval is consumed
//! before `COMMIT_INTENT`, and no state after it proposes one. Every terminal category counts,
//! success included (a verifier's superseded proposal may still be pending).

/// The states a run may leave with a consent of its pending at Ward.
pub const MAY_HOLD_CONSENT: [&str; 5] = [
    "PLAN_EFFECTS",
    "WAIT_APPROVAL",
    "VERIFY",
    "WAIT_VERIFICATION",
    "QUARANTINED",
];

/// Whether a commit from `source` that ends the run (`terminal_category` is `Some`) marks the
/// run's pending consents to be released.
pub fn releases(source: &str, terminal_category: Option<&str>) -> bool {
    terminal_category.is_some() && MAY_HOLD_CONSENT.contains(&source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::fsm::Fsm;

    #[test]
    fn the_budget_deadline_and_cancel_endings_of_both_waits_release() {
        let fsm = Fsm::bound().expect("the shipped FSM loads");
        for from in ["WAIT_APPROVAL", "WAIT_VERIFICATION"] {
            for event in ["budget_exhausted", "deadline_passed", "cancel"] {
                let edge = fsm.next(from, event).expect("the FSM has the ending");
                assert!(releases(from, fsm.category(&edge.to)), "{from} {event}");
            }
        }
        // Every state named is the FSM's and has an ending (the list is not stale).
        for s in MAY_HOLD_CONSENT {
            assert!(
                fsm.edges()
                    .any(|e| e.from == s && fsm.category(&e.to).is_some()),
                "{s}"
            );
        }
    }

    #[test]
    fn an_ending_after_the_approval_was_consumed_releases_nothing() {
        for s in [
            "COMMIT_INTENT",
            "EXECUTE",
            "RECONCILE",
            "HUMAN_RECONCILIATION",
        ] {
            assert!(!releases(s, Some("unknown_external_outcome")), "{s}");
        }
        assert!(!releases("ACT", Some("budget_exhausted")));
        assert!(releases("WAIT_APPROVAL", Some("budget_exhausted")));
        assert!(releases("WAIT_VERIFICATION", Some("timeout")));
        assert!(!releases("WAIT_APPROVAL", None), "not an ending");
    }
}
