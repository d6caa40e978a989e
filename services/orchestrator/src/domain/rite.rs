//! The rite's step table (LychD design rules §23, "The transition rite"): given the step the
//! rite just took and what it observed (the close's answer, the drain, the final invocation
//! check, the actuator's result, the verification, the compensation, a cancellation, a
//! deadline), [`next`] says what follows — the next step (and the phase it records), a
//! reopen that settles the transition, the compensation, or containment.
//!
//! Invariant: every step × outcome pair has exactly one answer — [`next`] is one exhaustive
//! `match` with no catch-all arm, and [`Observed::all`] lists every pair for the tests. Pure:
//! no I/O, no clock; the effectful rite (`service::transition`) performs the steps and
//! follows the answers.

use super::phase::TransitionPhase;

/// What applying an intent (or invoking an activation) did: the actuator port's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Every step was accepted by the host (readiness is verified separately).
    Applied,
    /// Refused before any effect: nothing on the host changed.
    NoEffect,
    /// Something may have changed; what is unknown (a step failed or timed out after the
    /// first was submitted). The transition compensates.
    Uncertain,
    /// The host proved the exact expected pre-world after a failed step (its own bounded
    /// inverse, or nothing changed): nothing is left to compensate.
    Restored,
    /// The host could prove neither world after its one bounded inverse (or cannot classify
    /// claimed work): contain at once, no further attempt.
    Contained,
}

impl Applied {
    pub const ALL: [Applied; 5] = [
        Applied::Applied,
        Applied::NoEffect,
        Applied::Uncertain,
        Applied::Restored,
        Applied::Contained,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Applied::Applied => "APPLIED",
            Applied::NoEffect => "NO_EFFECT",
            Applied::Uncertain => "UNCERTAIN",
            Applied::Restored => "RESTORED",
            Applied::Contained => "CONTAINED",
        }
    }

    /// Whether verification observes the host after it: only an accepted call can converge
    /// (any other answer is verified as not converged without asking).
    pub fn observable(self) -> bool {
        self == Applied::Applied
    }
}

/// The detail of a cancelled transition.
pub const CANCELLED: &str = "CANCELLED";
/// The detail of the actuating phase of a runtime-native activation.
pub const ACTIVATION: &str = "ACTIVATION";

/// A step of the rite the effectful side performs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Await the affected leases' drain (admission closed).
    Drain,
    /// The final invocation check: the cutoff, Ward again, a cancellation.
    Invoke,
    /// Hand the frozen forward intent to the actuator (hard).
    Actuate,
    /// Verify the forward intent under the actuation's deadline (target WARM, evictees cold).
    Verify(Applied),
    /// Observe the prior world the actuator reported restored.
    VerifyRestored,
    /// A soft swap: refresh the target and choose activation or observation only.
    Soft,
    /// Observation only: wait for the target WARM (nothing invoked).
    Observe,
    /// Arm the durable runtime guard of an activation.
    Arm,
    /// Invoke the runtime-native activation.
    Activate,
    /// Verify the activation: the target WARM before the deadline.
    VerifyActivation(Applied),
}

impl Step {
    /// The phase and detail recorded (and announced) when the step begins, if it begins one.
    pub fn enters(self) -> Option<(TransitionPhase, &'static str)> {
        match self {
            Step::Drain | Step::Invoke | Step::Soft | Step::Arm => None,
            Step::Actuate => Some((TransitionPhase::Actuating, "")),
            Step::Activate => Some((TransitionPhase::Actuating, ACTIVATION)),
            Step::Verify(a) | Step::VerifyActivation(a) => {
                Some((TransitionPhase::Verifying, a.as_str()))
            }
            Step::VerifyRestored => Some((TransitionPhase::Verifying, "ACTUATOR_RESTORED")),
            Step::Observe => Some((TransitionPhase::Verifying, "")),
        }
    }
}

/// Why a hard transition compensates (the cause keeps its classification to the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Its owner cancelled after the actuation was submitted.
    Cancelled,
    /// The actuator accepted and the desired world was not observed in time.
    VerificationTimeout,
    /// The actuator could not say what it did.
    ActuatorUncertain,
}

impl Cause {
    pub const ALL: [Cause; 3] = [
        Cause::Cancelled,
        Cause::VerificationTimeout,
        Cause::ActuatorUncertain,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Cancelled => CANCELLED,
            Cause::VerificationTimeout => "VERIFICATION_TIMEOUT",
            Cause::ActuatorUncertain => "ACTUATOR_UNCERTAIN",
        }
    }
}

/// What the rite says next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Perform this step (recording [`Step::enters`] first).
    Go(Step),
    /// Apply the exact typed inverse under a fresh deadline, then observe the prior world.
    Compensate(Cause),
    /// Settle the transition.
    Settle(Settle),
}

/// How the rite settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Reopen admission, then settle in `phase` with `detail` (a failed reopen contains,
    /// `REOPEN_FAILED`).
    Reopen {
        phase: TransitionPhase,
        detail: &'static str,
    },
    /// [`Settle::Reopen`] as `declined_no_effect` (`ADMISSION_EXPIRED`): the caller hears the
    /// admission cutoff's refusal when the decline settles.
    ReopenExpired,
    /// Clear the runtime guard of an activation never invoked (`NOT_INVOKED`), then
    /// [`Settle::Reopen`] (a failed clear contains, `RUNTIME_GUARD_ARMED`).
    Unguard {
        phase: TransitionPhase,
        detail: &'static str,
    },
    /// The activation's target was observed WARM: clear its guard (`WARM_OBSERVED`; a failed
    /// clear leaves it armed for the next start to contain), then reopen `completed`.
    Disarm,
    /// Contain: admission stays closed; settle in `phase` (`contained_uncertain`, or `failed`
    /// for an activation with no inverse) with `cause`.
    Contain {
        phase: TransitionPhase,
        cause: &'static str,
    },
}

/// The close of admission on the affected set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    Closed,
    /// The Dispatcher did not answer: whether admission closed is unknown.
    Uncertain,
}

/// The drain wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    Drained,
    Cancelled,
    /// The drain budget passed first.
    BudgetSpent,
    /// The admission cutoff (earlier than the drain budget) passed first.
    CutoffPassed,
}

/// The final invocation check, in its order: the cutoff, Ward again, a cancellation; then
/// the plan's kind (a hard plan's forward intent frozen).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invoke {
    CutoffPassed,
    AuthorityWithdrawn,
    Cancelled,
    /// A hard plan that yields no forward intent: nothing submitted.
    NoIntent,
    Hard,
    Soft,
}

impl Invoke {
    pub const ALL: [Invoke; 6] = [
        Invoke::CutoffPassed,
        Invoke::AuthorityWithdrawn,
        Invoke::Cancelled,
        Invoke::NoIntent,
        Invoke::Hard,
        Invoke::Soft,
    ];
}

/// The hard actuation: the actuator's answer, and whether the owner cancelled meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actuated {
    pub applied: Applied,
    pub cancelled: bool,
}

/// How a convergence wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Converged {
    Reached,
    TimedOut,
    Cancelled,
}

impl Converged {
    pub const ALL: [Converged; 3] = [
        Converged::Reached,
        Converged::TimedOut,
        Converged::Cancelled,
    ];
}

/// A verification after an actuator's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verified {
    Reached,
    TimedOut,
    Cancelled,
    /// The answer was not [`Applied::observable`]: nothing could converge.
    Unverifiable,
}

impl Verified {
    pub const ALL: [Verified; 4] = [
        Verified::Reached,
        Verified::TimedOut,
        Verified::Cancelled,
        Verified::Unverifiable,
    ];
}

impl From<Converged> for Verified {
    fn from(c: Converged) -> Verified {
        match c {
            Converged::Reached => Verified::Reached,
            Converged::TimedOut => Verified::TimedOut,
            Converged::Cancelled => Verified::Cancelled,
        }
    }
}

/// Arming the runtime guard of an activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Armed {
    /// The plan yields no activation intent: nothing armed.
    NoIntent,
    /// The guard could not be written: nothing may be invoked.
    Unrecorded,
    /// Armed; the owner had cancelled by the final check.
    Cancelled,
    Armed,
}

/// What one step of the rite observed: the step (outer) and its outcome (inner).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    Close(Close),
    Drain(Drain),
    Invoke(Invoke),
    Actuate(Actuated),
    Verify(Verified),
    Compensate {
        cause: Cause,
        restored: bool,
    },
    /// The prior world the actuator reported restored, observed (or not) in time.
    VerifyRestored {
        observed: bool,
    },
    /// A soft swap's refreshed target: activatable by this actuator, or observation only.
    Soft {
        activatable: bool,
    },
    Observe(Converged),
    Arm(Armed),
    Activate(Applied),
    VerifyActivation(Verified),
}

/// The step table: what follows `observed`.
pub fn next(observed: Observed) -> Next {
    use TransitionPhase::{CancelledRestored, Completed, ContainedUncertain, DeclinedNoEffect};
    let contain = |cause| {
        Next::Settle(Settle::Contain {
            phase: ContainedUncertain,
            cause,
        })
    };
    let reopen = |phase, detail| Next::Settle(Settle::Reopen { phase, detail });
    let failed = |cause| {
        Next::Settle(Settle::Contain {
            phase: TransitionPhase::Failed,
            cause,
        })
    };
    let unguard = |phase, detail| Next::Settle(Settle::Unguard { phase, detail });
    match observed {
        Observed::Close(Close::Closed) => Next::Go(Step::Drain),
        Observed::Close(Close::Uncertain) => contain("CLOSE_UNCERTAIN"),

        Observed::Drain(Drain::Drained) => Next::Go(Step::Invoke),
        Observed::Drain(Drain::Cancelled) => reopen(CancelledRestored, CANCELLED),
        Observed::Drain(Drain::BudgetSpent) => reopen(DeclinedNoEffect, "DRAIN_TIMEOUT"),
        Observed::Drain(Drain::CutoffPassed) => Next::Settle(Settle::ReopenExpired),

        Observed::Invoke(Invoke::CutoffPassed) => Next::Settle(Settle::ReopenExpired),
        Observed::Invoke(Invoke::AuthorityWithdrawn) => {
            reopen(DeclinedNoEffect, "AUTHORITY_WITHDRAWN")
        }
        Observed::Invoke(Invoke::Cancelled) => reopen(CancelledRestored, CANCELLED),
        Observed::Invoke(Invoke::NoIntent) => reopen(DeclinedNoEffect, "NO_INTENT"),
        Observed::Invoke(Invoke::Hard) => Next::Go(Step::Actuate),
        Observed::Invoke(Invoke::Soft) => Next::Go(Step::Soft),

        Observed::Actuate(Actuated { applied, cancelled }) => match applied {
            // Nothing was submitted: a verified no-effect, cancelled or declined.
            Applied::NoEffect if cancelled => reopen(CancelledRestored, CANCELLED),
            Applied::NoEffect => reopen(DeclinedNoEffect, "ACTUATOR_NO_EFFECT"),
            // The host proved the exact pre-world itself: observe it, no inverse.
            Applied::Restored => Next::Go(Step::VerifyRestored),
            // The host's own bounded inverse failed (or its work is unresolved): no retry.
            Applied::Contained => contain("ACTUATOR_CONTAINED"),
            Applied::Applied | Applied::Uncertain => Next::Go(Step::Verify(applied)),
        },

        Observed::Verify(Verified::Reached) => reopen(Completed, ""),
        Observed::Verify(Verified::Cancelled) => Next::Compensate(Cause::Cancelled),
        Observed::Verify(Verified::TimedOut) => Next::Compensate(Cause::VerificationTimeout),
        Observed::Verify(Verified::Unverifiable) => Next::Compensate(Cause::ActuatorUncertain),

        Observed::Compensate {
            cause: Cause::Cancelled,
            restored: true,
        } => reopen(CancelledRestored, CANCELLED),
        Observed::Compensate {
            cause: cause @ (Cause::VerificationTimeout | Cause::ActuatorUncertain),
            restored: true,
        } => reopen(TransitionPhase::FailedRestored, cause.as_str()),
        Observed::Compensate {
            cause: Cause::Cancelled,
            restored: false,
        } => contain("CANCELLED_NOT_RESTORED"),
        Observed::Compensate {
            cause: Cause::VerificationTimeout | Cause::ActuatorUncertain,
            restored: false,
        } => contain("VERIFICATION_AND_COMPENSATION_FAILED"),

        Observed::VerifyRestored { observed: true } => {
            reopen(TransitionPhase::FailedRestored, "ACTUATOR_RESTORED")
        }
        Observed::VerifyRestored { observed: false } => contain("RESTORATION_NOT_OBSERVED"),

        Observed::Soft { activatable: true } => Next::Go(Step::Arm),
        Observed::Soft { activatable: false } => Next::Go(Step::Observe),

        Observed::Observe(Converged::Reached) => reopen(Completed, ""),
        Observed::Observe(Converged::TimedOut) => reopen(DeclinedNoEffect, "VERIFICATION_TIMEOUT"),
        Observed::Observe(Converged::Cancelled) => reopen(CancelledRestored, CANCELLED),

        Observed::Arm(Armed::NoIntent) => reopen(DeclinedNoEffect, "NO_INTENT"),
        Observed::Arm(Armed::Unrecorded) => reopen(DeclinedNoEffect, "GUARD_UNRECORDED"),
        Observed::Arm(Armed::Cancelled) => unguard(CancelledRestored, CANCELLED),
        Observed::Arm(Armed::Armed) => Next::Go(Step::Activate),

        // Refused before the call began: nothing was invoked.
        Observed::Activate(Applied::NoEffect) => unguard(DeclinedNoEffect, "ACTUATOR_NO_EFFECT"),
        // Once the call began, nothing it answers is a no-effect receipt: verify.
        Observed::Activate(
            a @ (Applied::Applied | Applied::Uncertain | Applied::Restored | Applied::Contained),
        ) => Next::Go(Step::VerifyActivation(a)),

        // No inverse exists for an activation: anything but WARM is contained.
        Observed::VerifyActivation(Verified::Reached) => Next::Settle(Settle::Disarm),
        Observed::VerifyActivation(Verified::Cancelled) => contain("CANCELLED_AFTER_ACTIVATION"),
        Observed::VerifyActivation(Verified::TimedOut) => failed("VERIFICATION_TIMEOUT"),
        Observed::VerifyActivation(Verified::Unverifiable) => failed("ACTIVATION_FAILED"),
    }
}

impl Observed {
    /// Every step × outcome pair.
    pub fn all() -> Vec<Observed> {
        let mut all = vec![
            Observed::Close(Close::Closed),
            Observed::Close(Close::Uncertain),
        ];
        all.extend(
            [
                Drain::Drained,
                Drain::Cancelled,
                Drain::BudgetSpent,
                Drain::CutoffPassed,
            ]
            .map(Observed::Drain),
        );
        all.extend(Invoke::ALL.map(Observed::Invoke));
        for applied in Applied::ALL {
            for cancelled in [false, true] {
                all.push(Observed::Actuate(Actuated { applied, cancelled }));
            }
        }
        all.extend(Verified::ALL.map(Observed::Verify));
        for cause in Cause::ALL {
            for restored in [false, true] {
                all.push(Observed::Compensate { cause, restored });
            }
        }
        for b in [false, true] {
            all.push(Observed::VerifyRestored { observed: b });
            all.push(Observed::Soft { activatable: b });
        }
        all.extend(Converged::ALL.map(Observed::Observe));
        all.extend(
            [
                Armed::NoIntent,
                Armed::Unrecorded,
                Armed::Cancelled,
                Armed::Armed,
            ]
            .map(Observed::Arm),
        );
        all.extend(Applied::ALL.map(Observed::Activate));
        all.extend(Verified::ALL.map(Observed::VerifyActivation));
        all
    }
}

#[cfg(test)]
mod tests;
