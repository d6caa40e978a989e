//! The re-execution of a finished run from its record (pure: a computation over loaded rows,
//! no call, no clock, no write). Each transition the step loop's rules decided is decided
//! again by [`decide`] — the driver's decision, in the driver's order, over the same domain
//! rules (`progress::next`, `after_result`, `retry`, `soft_boundary`, `tree::gated`), with every
//! nondeterministic read answered from the transition's recorded tape — and its target state
//! and checkpoint recomputed (`Snapshot::checkpoint`, under the run's frozen version envelope)
//! and compared with the recorded ones. The first transition where they differ is the
//! divergence.
//!
//! Transitions the rules did not decide are the run's external inputs and are taken as
//! recorded (their FSM edge and their checkpoint are still checked): the creation, a caller's
//! `cancel`, the operator's `recovery_*` reviews, and `checksum_mismatch` (an observation of a
//! corrupt checkpoint, not a decision over inputs). So are the transitions decided on another
//! office's or a person's answer ([`answered_elsewhere`]): an effect's path (Ward's consent,
//! the adapter's response, an operator's resolution of an unknown outcome — kept by the effect
//! ledger) and the independent verifier's verdicts (HelmLoop's, kept in the checkpoint's
//! `evaluator_state.verification`).

use super::{Input, Kind};
use crate::domain::answer;
use crate::domain::budgets::Budgets;
use crate::domain::checkpoint::{Envelope, Snapshot, progress_of};
use crate::domain::fsm::Fsm;
use crate::domain::progress::{self, Clocks, Next, Outcome, Progress, WAITING};
use crate::domain::tree;
use crate::domain::workflow::Workflow;

/// What a replay holds fixed: the versions and facts of the run that no transition changes.
pub struct Frozen<'a> {
    pub fsm: &'a Fsm,
    pub workflow: &'a Workflow,
    pub budgets: Budgets,
    pub run_id: &'a str,
    /// The run's creation and deadline (unix nanoseconds; the database's clock).
    pub created_ns: i128,
    pub deadline_ns: Option<i128>,
    pub envelope: Envelope<'a>,
}

/// One recorded transition with its checkpoint and the inputs its commit recorded.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub version: i64,
    pub generation: i64,
    pub trigger: String,
    pub actor: String,
    pub target_state: String,
    pub checksum: String,
    pub body: Vec<u8>,
    pub inputs: Vec<Input>,
}

/// The first transition whose replay differs from its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Index in the run's transitions (0: the creation).
    pub index: usize,
    pub version: i64,
    pub expected_trigger: String,
    pub replayed_trigger: String,
    pub expected_target_state: String,
    pub replayed_target_state: String,
    pub expected_checkpoint_sha256: String,
    pub replayed_checkpoint_sha256: String,
    /// What differed, in words (never a value of the input or an answer).
    pub reason: String,
}

/// What a replay found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Transitions replayed identically (all of them when there is no divergence).
    pub replayed: usize,
    pub total: usize,
    /// Recorded inputs read back.
    pub inputs_read: usize,
    pub divergence: Option<Divergence>,
}

/// Triggers the rules do not decide (taken as recorded).
const EXTERNAL: [&str; 3] = ["created", "cancel", "checksum_mismatch"];
/// The FSM event of a spent budget, and of a passed deadline (as the driver's).
const BUDGET_EVENT: &str = "budget_exhausted";
const DEADLINE_EVENT: &str = "deadline_passed";

/// Whether the transition out of `state` is decided on an answer the record does not replay:
/// the effect path's (Ward, the adapter, an operator reconciling) and the verifier's.
fn answered_elsewhere(f: &Frozen<'_>, state: &str, p: &Progress, generation: i64) -> bool {
    state == "HUMAN_RECONCILIATION"
        || matches!(
            progress::next(f.workflow, &f.budgets, state, p, generation),
            Next::Verify | Next::Effect
        )
}

/// Replay `record` (the run's transitions in version order) under `f`.
pub fn replay(f: &Frozen<'_>, record: &[Recorded]) -> Report {
    let mut state = String::new();
    let mut p = Progress::default();
    let mut inputs_read = 0;
    for (index, t) in record.iter().enumerate() {
        let elsewhere = answered_elsewhere(f, &state, &p, t.generation);
        let external = index == 0
            || EXTERNAL.contains(&t.trigger.as_str())
            || t.trigger.starts_with("recovery_")
            || elsewhere;
        let mut tape = Tape::new(&t.inputs);
        if elsewhere {
            // The clock reads of a decision taken as recorded were the driver's, not a rule's
            // over the answer: read past them.
            tape.at = t.inputs.len();
        }
        let decided = if external {
            progress_of(&t.body)
                .map(|q| (t.trigger.clone(), q))
                .ok_or_else(|| "the recorded checkpoint of an external event does not parse".into())
        } else {
            decide(f, &state, &p, t, &mut tape).map(|(e, q)| (e.to_owned(), q))
        };
        inputs_read += tape.at;
        let diverged = |replayed_trigger: &str, target: &str, sum: &str, reason: String| {
            Some(Divergence {
                index,
                version: t.version,
                expected_trigger: t.trigger.clone(),
                replayed_trigger: replayed_trigger.to_owned(),
                expected_target_state: t.target_state.clone(),
                replayed_target_state: target.to_owned(),
                expected_checkpoint_sha256: t.checksum.clone(),
                replayed_checkpoint_sha256: sum.to_owned(),
                reason,
            })
        };
        let stop = |divergence| Report {
            replayed: index,
            total: record.len(),
            inputs_read,
            divergence,
        };
        let (event, q) = match decided {
            Ok(d) => d,
            Err(why) => return stop(diverged("", "", "", why)),
        };
        let to = if index == 0 {
            Some("CREATED".to_owned())
        } else {
            f.fsm.next(&state, &event).map(|e| e.to.clone())
        };
        let Some(to) = to else {
            return stop(diverged(
                &event,
                "",
                "",
                format!("the FSM has no edge {event} from {state}"),
            ));
        };
        // A caller's pending interrupt is an external input the checkpoint itself records
        // (`pending_interrupts`): the checkpoint without one, else with one, whichever the
        // record holds (no parse of the recorded body on the common path).
        let snapshot = |interrupt_pending| {
            Snapshot {
                run_id: f.run_id,
                version: t.version,
                generation: t.generation,
                state: &to,
                budgets: f.budgets,
                interrupt_pending,
                progress: &q,
                envelope: f.envelope,
            }
            .checkpoint()
        };
        let mut replayed = snapshot(false);
        if replayed.checksum != t.checksum {
            let interrupted = snapshot(true);
            if interrupted.checksum == t.checksum {
                replayed = interrupted;
            }
        }
        let sum = replayed.checksum;
        let reason = if event != t.trigger {
            Some("another event".to_owned())
        } else if to != t.target_state {
            Some("another target state".to_owned())
        } else if sum != t.checksum {
            Some("another checkpoint".to_owned())
        } else if replayed.body != t.body {
            Some(
                "the recorded checkpoint's body is not the one its checksum was computed over"
                    .to_owned(),
            )
        } else if tape.at < t.inputs.len() {
            Some(format!(
                "{} recorded input(s) not read",
                t.inputs.len() - tape.at
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            return stop(diverged(&event, &to, &sum, reason));
        }
        state = to;
        p = q;
    }
    Report {
        replayed: record.len(),
        total: record.len(),
        inputs_read,
        divergence: None,
    }
}

/// The recorded inputs of one transition, read in order.
struct Tape<'a> {
    inputs: &'a [Input],
    at: usize,
}

impl<'a> Tape<'a> {
    fn new(inputs: &'a [Input]) -> Tape<'a> {
        Tape { inputs, at: 0 }
    }

    /// The next input, which must be of `kind`.
    fn take(&mut self, kind: Kind) -> Result<&'a Input, String> {
        match self.inputs.get(self.at) {
            Some(i) if i.kind == kind => {
                self.at += 1;
                Ok(i)
            }
            Some(i) => Err(format!(
                "read a {} input where {} was recorded",
                kind.name(),
                i.kind.name()
            )),
            None => Err(format!(
                "read a {} input that was not recorded",
                kind.name()
            )),
        }
    }

    /// The next input when it is of `kind` (else nothing is read).
    fn take_if(&mut self, kind: Kind) -> Option<&'a Input> {
        self.take(kind).ok()
    }

    /// The next clock read, which must be `read`'s: its `now_ns`.
    fn clock(&mut self, read: &str) -> Result<(i128, &'a Input), String> {
        let i = self.take(Kind::Clock)?;
        match (i.str("read"), i.i64("now_ns")) {
            (Some(r), Some(now)) if r == read => Ok((i128::from(now), i)),
            _ => Err(format!("the recorded clock read is not the {read} read")),
        }
    }
}

/// Milliseconds from `from` to `to` (nanoseconds), truncated; 0 when `to` is earlier (as the
/// driver's `ms_between`).
fn ms(from: i128, to: i128) -> u64 {
    u64::try_from((to - from) / 1_000_000).unwrap_or(0)
}

/// The driver's decision of transition `t` from `state` with `p`, every read from `tape`.
fn decide(
    f: &Frozen<'_>,
    state: &str,
    p: &Progress,
    t: &Recorded,
    tape: &mut Tape<'_>,
) -> Result<(&'static str, Progress), String> {
    let (w, budgets, generation) = (f.workflow, &f.budgets, t.generation);
    let (now, read) = tape.clock("loop")?;
    let open_wait = if WAITING.contains(&state) {
        let from = read
            .i64("wait_from_ns")
            .ok_or("the loop's clock read has no wait start")?;
        ms(i128::from(from), now)
    } else {
        0
    };
    let clocks = Clocks {
        elapsed_ms: ms(f.created_ns, now),
        suspended_ms: p.used.suspended_ms.saturating_add(open_wait),
    };
    let timed = if f.deadline_ns.is_some_and(|d| now >= d) {
        Some(DEADLINE_EVENT)
    } else if progress::wall_exhausted(budgets, clocks.elapsed_ms)
        || progress::suspended_exhausted(budgets, clocks.suspended_ms)
    {
        Some(BUDGET_EVENT)
    } else {
        None
    };
    if let Some(event) = timed.filter(|e| f.fsm.next(state, e).is_some()) {
        let mut spent = p.clone();
        spent.used.suspended_ms = clocks.suspended_ms;
        let spent = progress::soft_boundary(w, budgets, spent, clocks, t.version);
        return Ok((event, spent));
    }
    let (event, after) = match progress::next(w, budgets, state, p, generation) {
        Next::Idle => return Err(format!("the rules take no step from {state}")),
        Next::Verify | Next::Effect => {
            return Err(format!("{state} is decided on an answer taken as recorded"));
        }
        Next::Commit { event, progress } => (event, *progress),
        Next::Probe { .. } => {
            let i = tape.take(Kind::Capability)?;
            if i.str("outcome") != Some("granted") {
                return Err("a wait ended without a recorded grant".into());
            }
            (
                "capability_warm",
                progress::resumed(p, open_wait, generation),
            )
        }
        Next::Call { index } => called(f, p, t, tape, index)?,
    };
    let (now, _) = tape.clock("boundary")?;
    let clocks = Clocks {
        elapsed_ms: ms(f.created_ns, now),
        suspended_ms: after.used.suspended_ms,
    };
    let after = progress::soft_boundary(w, budgets, after, clocks, t.version);
    if tree::delta(&p.used, &after.used) == [0; 4] {
        return Ok((event, after));
    }
    // A consuming commit passed its tree's gate when it found a root (recorded as it read it).
    let Some(read) = tape.take_if(Kind::Tree) else {
        return Ok((event, after));
    };
    let root: Vec<u64> = serde_json::from_value(read.meta["budgets"].clone())
        .map_err(|_| "the recorded tree read does not parse")?;
    let before: [u64; 4] = serde_json::from_value(read.meta["tree_before"].clone())
        .map_err(|_| "the recorded tree read does not parse")?;
    let root = Budgets(
        root.try_into()
            .map_err(|_| "the recorded root budgets are not nine")?,
    );
    Ok(tree::gated(w, t.version, &root, before, p, event, after))
}

/// The driver's decision after calling step `index`, its outcome from `tape`.
fn called(
    f: &Frozen<'_>,
    p: &Progress,
    t: &Recorded,
    tape: &mut Tape<'_>,
    index: usize,
) -> Result<(&'static str, Progress), String> {
    let (w, budgets) = (f.workflow, &f.budgets);
    let outcome = match tape.inputs.get(tape.at).map(|i| i.kind) {
        Some(Kind::TaskResult) => {
            let i = tape.take(Kind::TaskResult)?;
            let digest = i
                .str("digest")
                .ok_or("the recorded task result has no digest")?;
            Outcome::task(digest.to_owned())
        }
        Some(Kind::ModelResponse) => {
            let i = tape.take(Kind::ModelResponse)?;
            let price = i
                .u64("price_milli_per_1k")
                .ok_or("the recorded answer has no price")?;
            let a = answer::read(&i.body)
                .ok_or("the recorded model answer does not parse as a chat completion")?;
            Outcome::model(
                a.digest,
                a.tokens,
                progress::cost_milli(a.tokens, price),
                a.empty,
            )
        }
        _ => {
            let i = tape.take(Kind::Capability)?;
            return match (i.str("outcome"), i.str("failure")) {
                (Some("cold"), _) => Ok(("capability_cold", p.clone())),
                (Some("failed"), Some("permanent")) => Ok(("permanent_failure", p.clone())),
                (Some("failed"), Some("transient")) => {
                    let seed = tape
                        .take(Kind::Random)?
                        .u64("seed")
                        .ok_or("the recorded random draw has no seed")?;
                    Ok(progress::retry(budgets, p, t.generation, seed))
                }
                _ => Err("the recorded capability answer is not a call's".into()),
            };
        }
    };
    let (now, _) = tape.clock("after_call")?;
    if f.deadline_ns.is_some_and(|d| now >= d) {
        return Ok((DEADLINE_EVENT, progress::charged(p, &outcome)));
    }
    if progress::wall_exhausted(budgets, ms(f.created_ns, now)) {
        return Ok((BUDGET_EVENT, progress::charged(p, &outcome)));
    }
    let step = &w.steps[index].id;
    Ok(progress::after_result(budgets, p, step, outcome))
}
