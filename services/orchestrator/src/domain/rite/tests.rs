//! The step table's rows, each written out, and the checks that every step × outcome pair
//! has exactly one row.

use std::collections::BTreeSet;

use super::*;
use crate::domain::phase::TransitionPhase::{
    CancelledRestored, Completed, ContainedUncertain, DeclinedNoEffect, Failed, FailedRestored,
};

fn reopen(phase: TransitionPhase, detail: &'static str) -> Next {
    Next::Settle(Settle::Reopen { phase, detail })
}

fn contain(cause: &'static str) -> Next {
    Next::Settle(Settle::Contain {
        phase: ContainedUncertain,
        cause,
    })
}

fn failed(cause: &'static str) -> Next {
    Next::Settle(Settle::Contain {
        phase: Failed,
        cause,
    })
}

fn unguard(phase: TransitionPhase, detail: &'static str) -> Next {
    Next::Settle(Settle::Unguard { phase, detail })
}

fn returned(applied: Applied, cancelled: bool) -> Observed {
    Observed::Actuate(Actuated { applied, cancelled })
}

/// Every row of the table, spelled out: (what was observed, what follows).
fn rows() -> Vec<(Observed, Next)> {
    use Observed as O;
    vec![
        (O::Close(Close::Closed), Next::Go(Step::Drain)),
        (O::Close(Close::Uncertain), contain("CLOSE_UNCERTAIN")),
        (O::Drain(Drain::Drained), Next::Go(Step::Invoke)),
        (
            O::Drain(Drain::Cancelled),
            reopen(CancelledRestored, CANCELLED),
        ),
        (
            O::Drain(Drain::BudgetSpent),
            reopen(DeclinedNoEffect, "DRAIN_TIMEOUT"),
        ),
        (
            O::Drain(Drain::CutoffPassed),
            Next::Settle(Settle::ReopenExpired),
        ),
        (
            O::Invoke(Invoke::CutoffPassed),
            Next::Settle(Settle::ReopenExpired),
        ),
        (
            O::Invoke(Invoke::AuthorityWithdrawn),
            reopen(DeclinedNoEffect, "AUTHORITY_WITHDRAWN"),
        ),
        (
            O::Invoke(Invoke::Cancelled),
            reopen(CancelledRestored, CANCELLED),
        ),
        (
            O::Invoke(Invoke::NoIntent),
            reopen(DeclinedNoEffect, "NO_INTENT"),
        ),
        (O::Invoke(Invoke::Hard), Next::Go(Step::Actuate)),
        (O::Invoke(Invoke::Soft), Next::Go(Step::Soft)),
        (
            returned(Applied::NoEffect, false),
            reopen(DeclinedNoEffect, "ACTUATOR_NO_EFFECT"),
        ),
        (
            returned(Applied::NoEffect, true),
            reopen(CancelledRestored, CANCELLED),
        ),
        (
            returned(Applied::Restored, false),
            Next::Go(Step::VerifyRestored),
        ),
        (
            returned(Applied::Restored, true),
            Next::Go(Step::VerifyRestored),
        ),
        (
            returned(Applied::Contained, false),
            contain("ACTUATOR_CONTAINED"),
        ),
        (
            returned(Applied::Contained, true),
            contain("ACTUATOR_CONTAINED"),
        ),
        (
            returned(Applied::Applied, false),
            Next::Go(Step::Verify(Applied::Applied)),
        ),
        (
            returned(Applied::Applied, true),
            Next::Go(Step::Verify(Applied::Applied)),
        ),
        (
            returned(Applied::Uncertain, false),
            Next::Go(Step::Verify(Applied::Uncertain)),
        ),
        (
            returned(Applied::Uncertain, true),
            Next::Go(Step::Verify(Applied::Uncertain)),
        ),
        (O::Verify(Verified::Reached), reopen(Completed, "")),
        (
            O::Verify(Verified::Cancelled),
            Next::Compensate(Cause::Cancelled),
        ),
        (
            O::Verify(Verified::TimedOut),
            Next::Compensate(Cause::VerificationTimeout),
        ),
        (
            O::Verify(Verified::Unverifiable),
            Next::Compensate(Cause::ActuatorUncertain),
        ),
        (
            O::Compensate {
                cause: Cause::Cancelled,
                restored: true,
            },
            reopen(CancelledRestored, CANCELLED),
        ),
        (
            O::Compensate {
                cause: Cause::VerificationTimeout,
                restored: true,
            },
            reopen(FailedRestored, "VERIFICATION_TIMEOUT"),
        ),
        (
            O::Compensate {
                cause: Cause::ActuatorUncertain,
                restored: true,
            },
            reopen(FailedRestored, "ACTUATOR_UNCERTAIN"),
        ),
        (
            O::Compensate {
                cause: Cause::Cancelled,
                restored: false,
            },
            contain("CANCELLED_NOT_RESTORED"),
        ),
        (
            O::Compensate {
                cause: Cause::VerificationTimeout,
                restored: false,
            },
            contain("VERIFICATION_AND_COMPENSATION_FAILED"),
        ),
        (
            O::Compensate {
                cause: Cause::ActuatorUncertain,
                restored: false,
            },
            contain("VERIFICATION_AND_COMPENSATION_FAILED"),
        ),
        (
            O::VerifyRestored { observed: true },
            reopen(FailedRestored, "ACTUATOR_RESTORED"),
        ),
        (
            O::VerifyRestored { observed: false },
            contain("RESTORATION_NOT_OBSERVED"),
        ),
        (O::Soft { activatable: true }, Next::Go(Step::Arm)),
        (O::Soft { activatable: false }, Next::Go(Step::Observe)),
        (O::Observe(Converged::Reached), reopen(Completed, "")),
        (
            O::Observe(Converged::TimedOut),
            reopen(DeclinedNoEffect, "VERIFICATION_TIMEOUT"),
        ),
        (
            O::Observe(Converged::Cancelled),
            reopen(CancelledRestored, CANCELLED),
        ),
        (
            O::Arm(Armed::NoIntent),
            reopen(DeclinedNoEffect, "NO_INTENT"),
        ),
        (
            O::Arm(Armed::Unrecorded),
            reopen(DeclinedNoEffect, "GUARD_UNRECORDED"),
        ),
        (
            O::Arm(Armed::Cancelled),
            unguard(CancelledRestored, CANCELLED),
        ),
        (O::Arm(Armed::Armed), Next::Go(Step::Activate)),
        (
            O::Activate(Applied::NoEffect),
            unguard(DeclinedNoEffect, "ACTUATOR_NO_EFFECT"),
        ),
        (
            O::Activate(Applied::Applied),
            Next::Go(Step::VerifyActivation(Applied::Applied)),
        ),
        (
            O::Activate(Applied::Uncertain),
            Next::Go(Step::VerifyActivation(Applied::Uncertain)),
        ),
        (
            O::Activate(Applied::Restored),
            Next::Go(Step::VerifyActivation(Applied::Restored)),
        ),
        (
            O::Activate(Applied::Contained),
            Next::Go(Step::VerifyActivation(Applied::Contained)),
        ),
        (
            O::VerifyActivation(Verified::Reached),
            Next::Settle(Settle::Disarm),
        ),
        (
            O::VerifyActivation(Verified::Cancelled),
            contain("CANCELLED_AFTER_ACTIVATION"),
        ),
        (
            O::VerifyActivation(Verified::TimedOut),
            failed("VERIFICATION_TIMEOUT"),
        ),
        (
            O::VerifyActivation(Verified::Unverifiable),
            failed("ACTIVATION_FAILED"),
        ),
    ]
}

#[test]
fn every_row_answers_as_written() {
    for (observed, answer) in rows() {
        assert_eq!(next(observed), answer, "{observed:?}");
    }
}

#[test]
fn the_rows_are_every_step_and_outcome_pair_once() {
    let all = Observed::all();
    let listed: Vec<Observed> = rows().into_iter().map(|(o, _)| o).collect();
    let key = |o: &Observed| format!("{o:?}");
    let all_keys: BTreeSet<String> = all.iter().map(key).collect();
    let listed_keys: BTreeSet<String> = listed.iter().map(key).collect();
    assert_eq!(
        all_keys.len(),
        all.len(),
        "Observed::all lists a pair twice"
    );
    assert_eq!(listed_keys.len(), listed.len(), "a row is written twice");
    assert_eq!(all_keys, listed_keys);
}

#[test]
fn every_settling_answer_ends_in_a_final_phase() {
    for observed in Observed::all() {
        match next(observed) {
            Next::Settle(
                Settle::Reopen { phase, .. }
                | Settle::Unguard { phase, .. }
                | Settle::Contain { phase, .. },
            ) => {
                assert!(phase.is_final(), "{observed:?}");
            }
            Next::Settle(Settle::ReopenExpired | Settle::Disarm)
            | Next::Go(_)
            | Next::Compensate(_) => {}
        }
    }
}

#[test]
fn a_contained_answer_is_contained_uncertain_or_an_activations_failure() {
    for observed in Observed::all() {
        if let Next::Settle(Settle::Contain { phase, .. }) = next(observed) {
            let activation = matches!(observed, Observed::VerifyActivation(_));
            assert!(
                phase == ContainedUncertain || (activation && phase == Failed),
                "{observed:?}"
            );
        }
    }
}

#[test]
fn each_step_records_its_phase() {
    assert_eq!(
        Step::Actuate.enters(),
        Some((TransitionPhase::Actuating, ""))
    );
    assert_eq!(
        Step::Activate.enters(),
        Some((TransitionPhase::Actuating, ACTIVATION))
    );
    assert_eq!(
        Step::Verify(Applied::Uncertain).enters(),
        Some((TransitionPhase::Verifying, "UNCERTAIN"))
    );
    assert_eq!(
        Step::VerifyActivation(Applied::Applied).enters(),
        Some((TransitionPhase::Verifying, "APPLIED"))
    );
    assert_eq!(
        Step::VerifyRestored.enters(),
        Some((TransitionPhase::Verifying, "ACTUATOR_RESTORED"))
    );
    assert_eq!(
        Step::Observe.enters(),
        Some((TransitionPhase::Verifying, ""))
    );
    for s in [Step::Drain, Step::Invoke, Step::Soft, Step::Arm] {
        assert_eq!(s.enters(), None);
    }
    assert!(Applied::Applied.observable());
    assert!(!Applied::Uncertain.observable());
}
