//! Deterministic replay (pure): the registry of the nondeterministic inputs the step loop's rules
//! read, the tape a commit records them on, and the re-execution of a finished run's
//! transitions from that record (`rerun`).
//!
//! Loop-contract v1 `replay.deterministic_replay_requirements`: "frozen versions", "captured
//! time, random, and identifier inputs", "recorded model and tool responses", "read-only
//! sandbox". What the rules read that is not a pure function of the run's record is an
//! [`Input`] of one [`Kind`]; the driver appends each to its [`Tape`] in the order it reads it,
//! and the tape is written by the statement of the commit that consumed it (so what is recorded
//! is exactly what was used: a fenced commit records nothing). A replay reads the tape back in
//! the same order: a read of another kind than recorded is a divergence.
//!
//! **The extension point**: a new nondeterministic input (an effect's response, a verifier's
//! verdict) is one more [`Kind`] variant with its name in [`Kind::ALL`], pushed by the code that
//! reads it and taken by the replay's mirror of that code (`rerun::decide`).

use serde_json::{Value, json};

/// The version of the step loop's rules whose reads this registry records and whose decisions
/// `rerun` re-executes. A rule change that makes another decision from the same inputs raises
/// it; a replay refuses a run recorded under another.
pub const RULES_VERSION: &str = "lychd.runner.rules/1";

/// The kinds of recorded input (the registry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A read of the clock (`now`) by a rule: `{"read": "loop"|"after_call"|"boundary",
    /// "now_ns": n}` (unix nanoseconds); the loop's read also carries `wait_from_ns`, the
    /// committed start of an open wait it compared with.
    Clock,
    /// A random draw: `{"seed": n}` (the jitter seed drawn at a transient failure).
    Random,
    /// A task step's result: `{"digest": hex}`.
    TaskResult,
    /// A model step's answer: the runtime's HTTP body (in `body`), with `{"lease_id",
    /// "price_milli_per_1k"}` (the Dispatcher lease it was called under — an identifier minted
    /// elsewhere — and the price the configuration gave the family).
    ModelResponse,
    /// The Dispatcher's answer to a capability lease that decided a transition:
    /// `{"outcome": "granted", "lease_id"}`, `{"outcome": "cold", "wait_ms"}` or
    /// `{"outcome": "failed", "failure": "transient"|"permanent"}`.
    Capability,
    /// The tree totals a consuming commit's gate read: `{"budgets": [9], "tree_before": [4]}`
    /// (the root's budgets, and the tree's consumption before the commit — other runs' work).
    Tree,
}

impl Kind {
    /// Every kind, as stored (`run_inputs.kind`).
    pub const ALL: [Kind; 6] = [
        Kind::Clock,
        Kind::Random,
        Kind::TaskResult,
        Kind::ModelResponse,
        Kind::Capability,
        Kind::Tree,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Clock => "clock",
            Kind::Random => "random",
            Kind::TaskResult => "task_result",
            Kind::ModelResponse => "model_response",
            Kind::Capability => "capability",
            Kind::Tree => "tree",
        }
    }

    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// One recorded input.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub kind: Kind,
    pub meta: Value,
    /// A response's bytes (empty for other kinds).
    pub body: Vec<u8>,
}

impl Input {
    fn of(kind: Kind, meta: Value) -> Input {
        Input {
            kind,
            meta,
            body: Vec::new(),
        }
    }

    /// The loop's clock read, with the committed start of an open wait.
    pub fn clock_loop(now_ns: i128, wait_from_ns: i128) -> Input {
        Input::of(
            Kind::Clock,
            json!({"read": "loop", "now_ns": now_ns as i64, "wait_from_ns": wait_from_ns as i64}),
        )
    }

    /// Another clock read (`after_call`, `boundary`).
    pub fn clock(read: &str, now_ns: i128) -> Input {
        Input::of(Kind::Clock, json!({"read": read, "now_ns": now_ns as i64}))
    }

    pub fn random(seed: u64) -> Input {
        Input::of(Kind::Random, json!({"seed": seed}))
    }

    pub fn task_result(digest: &str) -> Input {
        Input::of(Kind::TaskResult, json!({"digest": digest}))
    }

    pub fn model_response(body: Vec<u8>, lease_id: &str, price_milli_per_1k: u64) -> Input {
        Input {
            kind: Kind::ModelResponse,
            meta: json!({"lease_id": lease_id, "price_milli_per_1k": price_milli_per_1k}),
            body,
        }
    }

    pub fn granted(lease_id: &str) -> Input {
        Input::of(
            Kind::Capability,
            json!({"outcome": "granted", "lease_id": lease_id}),
        )
    }

    pub fn cold(wait_ms: u64) -> Input {
        Input::of(
            Kind::Capability,
            json!({"outcome": "cold", "wait_ms": wait_ms}),
        )
    }

    pub fn failed(permanent: bool) -> Input {
        let failure = if permanent { "permanent" } else { "transient" };
        Input::of(
            Kind::Capability,
            json!({"outcome": "failed", "failure": failure}),
        )
    }

    pub fn tree(budgets: [u64; 9], tree_before: [u64; 4]) -> Input {
        Input::of(
            Kind::Tree,
            json!({"budgets": budgets, "tree_before": tree_before}),
        )
    }

    /// The meta's string field `k`.
    pub fn str(&self, k: &str) -> Option<&str> {
        self.meta.get(k).and_then(Value::as_str)
    }

    /// The meta's unsigned field `k`.
    pub fn u64(&self, k: &str) -> Option<u64> {
        self.meta.get(k).and_then(Value::as_u64)
    }

    /// The meta's signed field `k`.
    pub fn i64(&self, k: &str) -> Option<i64> {
        self.meta.get(k).and_then(Value::as_i64)
    }
}

/// The inputs one commit's rules read, in order.
pub type Tape = Vec<Input>;

/// What a replay may find different without it being a divergence (the declared
/// nondeterminism: none of it is an input of a rule, and none of it is in a checkpoint).
pub const DECLARED_NONDETERMINISM: [&str; 7] = [
    "run_transitions.transition_id (a random identifier of the row; no rule reads it)",
    "run_transitions.trace_id, span_id (of the writing span)",
    "run_transitions.recorded_at, run_checkpoints.created_at, run_inputs.recorded_at (wall time of the commit itself)",
    "runs.lease_holder, lease_expires_at, not_before (which process held the run, and until when)",
    "the Dispatcher lease ids (recorded, not compared: they name, they do not decide)",
    "how long a wait or backoff actually slept (its end is a recorded clock read)",
    "a cold capability's wait_ms (sets when the run is looked at again, not its state)",
];

pub mod rerun;
pub use rerun::{Divergence, Frozen, Recorded, Report, replay};

#[cfg(test)]
mod tests;
