//! A run's progress through its workflow and the step loop's rules (pure): which FSM event
//! the runner issues next from a run's state and progress, and what the progress becomes.
//!
//! The progress is written in the same fenced commit as the state and carried whole in that
//! version's checkpoint (`results`, `retries`, `r_frontier`, `budgets_used`), so a resume reads
//! it back from the verified latest checkpoint.
//!
//! **What is durable before and after a step's call** (the rule that no step runs twice):
//! - *before*: the commit `PLAN → ACT` (`plan_step`) records the step index, its attempt
//!   number and the generation that entered it; only the holder of that generation calls the
//!   step, after that commit;
//! - *after*: the commit `ACT → INGEST` (`step_result`) records the step's result digest (and
//!   its token usage) and moves the cursor past it, in one transaction with its checkpoint;
//! - a step whose result is recorded is never called again (the cursor is past it);
//! - a run found in `ACT` under an older generation (its holder crashed or was fenced between
//!   the two commits) has a call whose outcome is unknown: Runner I steps have no external
//!   effect, so that attempt is recorded as a `transient_failure` (`ACT → ACT`, the next
//!   attempt, bounded by `max_retries_per_transition`; beyond it `RETRY_EXHAUSTED`) and the
//!   step is called again under the new generation. Its result is still recorded once.

use serde::{Deserialize, Serialize};

use super::budgets::Budgets;
use super::effect::Pending;
use super::workflow::{MODEL_ANSWER, StepKind, TASK_RESULT, Workflow};

/// Index of each budget in [`Budgets`] (the order of the contract's `budgets`).
const STEPS: usize = 0;
const TOOL_CALLS: usize = 1;
const RETRIES: usize = 2;
const WALL: usize = 3;
const SUSPENDED: usize = 4;
const TOKENS: usize = 5;
const COST: usize = 6;

/// The contract's soft boundary (`budgets.soft_boundary`): at this percentage of a budget a
/// checkpoint and a typed residual-work handoff are persisted.
pub const SOFT_PERCENT: u64 = 80;

/// The typed residual-work handoff recorded once a budget reaches [`SOFT_PERCENT`]: which
/// budget, how much of it is used, and the work left (steps not yet done, obligations open).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    /// `lychd.runner.handoff/v1`.
    pub schema: String,
    /// The budget's field (`max_steps`, `max_tokens`, `max_wall_seconds`, …), or
    /// `tree.<field>` when the tree's total reached the root's budget first.
    pub budget: String,
    pub used: u64,
    pub limit: u64,
    /// The run's version whose checkpoint first carries it.
    pub at_version: i64,
    pub residual_steps: Vec<String>,
    pub open_obligations: Vec<String>,
}

/// One step's recorded result: digests only, never content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepResult {
    pub step: String,
    /// sha256 (hex) of the step's result.
    pub digest: String,
    pub tokens: u64,
    /// The evidence kinds the result provides (`model_answer`, `task_result`).
    #[serde(default)]
    pub evidence: Vec<String>,
}

/// What a run has consumed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Used {
    /// Steps entered (every `plan_step`).
    pub steps: u64,
    pub tokens: u64,
    /// Tool calls: every `task` step entered is one.
    #[serde(default)]
    pub tool_calls: u64,
    /// Cost of the model steps, in thousandths of the contract's unit.
    #[serde(default)]
    pub cost_milli: u64,
    /// Milliseconds spent in waiting states, closed waits only (from committed timestamps).
    #[serde(default)]
    pub suspended_ms: u64,
}

/// A run's progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Progress {
    /// The index of the next step to run (the step in flight while in `ACT`).
    #[serde(default)]
    pub cursor: usize,
    /// The attempt of the step in flight (1 on entering it).
    #[serde(default)]
    pub attempt: u32,
    /// The lease generation that entered the attempt in flight (only it calls the step).
    #[serde(default)]
    pub attempt_generation: i64,
    #[serde(default)]
    pub results: Vec<StepResult>,
    #[serde(default)]
    pub used: Used,
    /// The residual-work handoff, once a budget reached the soft boundary.
    #[serde(default)]
    pub handoff: Option<Handoff>,
    /// The jitter seed of the run's retry backoff, recorded at its first retry (a replay
    /// waits as the run waited).
    #[serde(default)]
    pub jitter_seed: Option<u64>,
    /// The steps (workflow indices) planned for the current round; empty: every step (the
    /// first round). A repair round plans only the steps that can close an open obligation.
    #[serde(default)]
    pub plan: Vec<usize>,
    /// Every verification round that ended with an obligation open, in order.
    #[serde(default)]
    pub rounds: Vec<Round>,
    /// The independent verification, once it began (Runner II: `VERIFY` with every
    /// obligation closed, a workflow with `verification`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<super::verdict::Verification>,
    /// How many effects the run has planned (the last one's `effect_sequence`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub effects: u32,
    /// The effect in flight, from `PLAN_EFFECTS` until its outcome is ingested (the contract's
    /// pending effect and approval, carried by every checkpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<Pending>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Progress {
    /// Read from the run row's (or a checkpoint's) JSON; an empty object is a fresh run.
    pub fn from_json(v: &serde_json::Value) -> Result<Progress, serde_json::Error> {
        Progress::deserialize(v)
    }

    pub fn to_json(&self) -> serde_json::Value {
        // A struct of strings, integers and arrays always serializes.
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The results that close obligation `o` of `w`: of a step naming it in `closes`, each
    /// providing every evidence it requires.
    pub(crate) fn supports<'a>(
        &'a self,
        w: &'a Workflow,
        o: &'a str,
    ) -> impl Iterator<Item = &'a StepResult> {
        let required = w
            .obligations
            .iter()
            .find(|x| x.id == o)
            .map(|x| x.evidence.as_slice())
            .unwrap_or_default();
        self.results.iter().filter(move |r| {
            w.steps
                .iter()
                .any(|s| s.id == r.step && s.closes.iter().any(|c| c == o))
                && required.iter().all(|e| r.evidence.contains(e))
        })
    }

    /// Whether obligation `o` is closed.
    pub fn closed(&self, w: &Workflow, o: &str) -> bool {
        self.supports(w, o).next().is_some()
    }

    /// The ids of the closed obligations, in the workflow's order.
    pub fn closed_obligations(&self, w: &Workflow) -> Vec<String> {
        w.obligations
            .iter()
            .filter(|o| self.closed(w, &o.id))
            .map(|o| o.id.clone())
            .collect()
    }

    /// Whether every obligation of `w` is closed (a step naming it in `closes` recorded a
    /// result that provides every evidence it requires).
    pub fn obligations_closed(&self, w: &Workflow) -> bool {
        w.obligations.iter().all(|o| self.closed(w, &o.id))
    }

    /// The workflow indices of the current round's steps.
    pub fn planned(&self, w: &Workflow) -> Vec<usize> {
        if self.plan.is_empty() {
            (0..w.steps.len()).collect()
        } else {
            self.plan.clone()
        }
    }

    /// The workflow index of the step at the cursor, if the round has one left.
    pub fn step_index(&self, w: &Workflow) -> Option<usize> {
        self.planned(w).get(self.cursor).copied()
    }

    /// The ids of the round's steps not yet done (the R frontier).
    pub fn frontier<'a>(&self, w: &'a Workflow) -> Vec<&'a str> {
        self.planned(w)
            .into_iter()
            .skip(self.cursor)
            .filter_map(|i| w.steps.get(i).map(|s| s.id.as_str()))
            .collect()
    }

    /// The round in progress (1: the first pass through the workflow).
    pub fn round(&self) -> usize {
        self.rounds.len() + 1
    }
}

/// The waiting states: the run is released from its lease and its time there counts against
/// `max_suspended_seconds` (the driver's clocks and a replay's read the same list). A run
/// waiting for a person to settle an unknown effect outcome (`HUMAN_RECONCILIATION`) is
/// suspended too: its budgets and its caller's deadline still end it (issue 28).
pub const WAITING: [&str; 4] = [
    "WAIT_CAPABILITY",
    "WAIT_APPROVAL",
    "WAIT_VERIFICATION",
    "HUMAN_RECONCILIATION",
];

/// What the runner does next with a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Commit FSM `event` with the new progress (no call).
    Commit {
        event: &'static str,
        progress: Box<Progress>,
    },
    /// Call step `index` (this generation entered its attempt), then commit `step_result`.
    Call { index: usize },
    /// The run waits for step `index`'s capability: ask for it again; when it is granted,
    /// commit `capability_warm` and call the step.
    Probe { index: usize },
    /// Ask the independent verifier (HelmLoop) about the run's records and commit its verdict.
    Verify,
    /// The run is on its effect's path (`PLAN_EFFECTS` to `HONOR_PENDING_INTERRUPT`): the
    /// driver's effect rules decide (they ask Ward or the adapter first).
    Effect,
    /// Nothing the runner may do: a state it does not drive (terminal, quarantined, waiting for
    /// a human's reconciliation).
    Idle,
}

/// The runner's next move on a run in `state` with `p`, held under `generation`.
pub fn next(w: &Workflow, budgets: &Budgets, state: &str, p: &Progress, generation: i64) -> Next {
    let commit = |event, progress| Next::Commit {
        event,
        progress: Box::new(progress),
    };
    match state {
        "CREATED" => commit("start", p.clone()),
        "PLAN" | "INGEST" => match p.step_index(w) {
            Some(_) if state == "INGEST" => commit("ingested", p.clone()),
            Some(index) => {
                // A task step and an effect step are each one tool call.
                let task = !matches!(w.steps[index].kind, StepKind::Model { .. });
                if p.used.steps >= budgets.0[STEPS]
                    || (task && p.used.tool_calls >= budgets.0[TOOL_CALLS])
                {
                    return commit("budget_exhausted", p.clone());
                }
                if let Some(q) = effects::planned(w, p, index) {
                    return commit("plan_effects", q);
                }
                let mut q = p.clone();
                q.attempt = 1;
                q.attempt_generation = generation;
                q.used.steps += 1;
                if task {
                    q.used.tool_calls += 1;
                }
                commit("plan_step", q)
            }
            // The round's steps are done: the verifier decides (obligations may be open).
            None => commit("ready_to_verify", p.clone()),
        },
        "ACT" if p.attempt_generation == generation => match p.step_index(w) {
            Some(index) => Next::Call { index },
            None => Next::Idle,
        },
        "ACT" => {
            // The attempt in flight was entered under an older generation: its outcome is
            // unknown (no effect in Runner I), so it counts as a transient failure.
            // The seed of a retry on resume: from the generation (the run's recorded one wins).
            let (event, progress) = retry(budgets, p, generation, generation.unsigned_abs());
            commit(event, progress)
        }
        "WAIT_CAPABILITY" => match p.step_index(w) {
            Some(index) => Next::Probe { index },
            None => Next::Idle,
        },
        // A run succeeds only on an independent HelmLoop PASS (issue 28 item 3): with every
        // obligation closed the verifier is asked (the obligation check is recorded as the
        // success predicate, never a verdict); held for review in `WAIT_VERIFICATION` and
        // asked again there.
        "VERIFY" | "WAIT_VERIFICATION"
            if state == "WAIT_VERIFICATION" || p.obligations_closed(w) =>
        {
            Next::Verify
        }
        "VERIFY" => {
            let (event, q) = verify_open(w, p);
            commit(event, q)
        }
        // The effect path: the driver asks Ward and the adapter (`service/driver/effects.rs`).
        s if effects::DRIVEN.contains(&s) => Next::Effect,
        _ => Next::Idle,
    }
}

/// Whether the run's wall-clock budget is spent after `elapsed_ms` since its creation.
pub fn wall_exhausted(budgets: &Budgets, elapsed_ms: u64) -> bool {
    elapsed_ms >= budgets.0[WALL].saturating_mul(1000)
}

/// Whether the run's suspended budget is spent after `suspended_ms` in waiting states (the
/// closed waits recorded in its progress plus the open one).
pub fn suspended_exhausted(budgets: &Budgets, suspended_ms: u64) -> bool {
    suspended_ms >= budgets.0[SUSPENDED].saturating_mul(1000)
}

/// `p` after a wait of `waited_ms` closed (`capability_warm`): the suspended time it adds.
pub fn resumed(p: &Progress, waited_ms: u64, generation: i64) -> Progress {
    let mut q = warm(p, generation);
    q.used.suspended_ms = q.used.suspended_ms.saturating_add(waited_ms);
    q
}

/// The clocks the soft boundary reads: milliseconds since the run's creation, and
/// milliseconds suspended (closed waits plus an open one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clocks {
    pub elapsed_ms: u64,
    pub suspended_ms: u64,
}

/// The cost (thousandths of the contract's unit) of `tokens` at `price_milli_per_1k`
/// thousandths per 1 000 tokens, rounded up (a started thousand is charged in part, never
/// free); integers only.
pub fn cost_milli(tokens: u64, price_milli_per_1k: u64) -> u64 {
    tokens.saturating_mul(price_milli_per_1k).div_ceil(1000)
}

/// After a transient failure of the attempt in flight: the next attempt under `generation`
/// (`transient_failure`, `ACT → ACT`), or `retries_exhausted` when the run's
/// `max_retries_per_transition` attempts are spent. The run's jitter seed is `seed` unless one
/// is recorded already.
pub fn retry(
    budgets: &Budgets,
    p: &Progress,
    generation: i64,
    seed: u64,
) -> (&'static str, Progress) {
    if u64::from(p.attempt) >= budgets.0[RETRIES] {
        return ("retries_exhausted", p.clone());
    }
    let mut q = p.clone();
    q.attempt += 1;
    q.attempt_generation = generation;
    q.jitter_seed.get_or_insert(seed);
    ("transient_failure", q)
}

/// Base of the retry backoff, and its deterministic cap (ms).
pub const BACKOFF_BASE_MS: u64 = 100;
pub const BACKOFF_CAP_MS: u64 = 3_200;

/// The wait before the attempt after `attempt` failed: bounded exponential backoff (the
/// base doubling per attempt, never above [`BACKOFF_CAP_MS`]) with "equal jitter" — half of it
/// fixed, half drawn from `seed` and the attempt (splitmix64), so the same seed waits the same.
pub fn backoff_ms(seed: u64, attempt: u32) -> u64 {
    let exp = BACKOFF_BASE_MS
        .saturating_mul(1 << attempt.saturating_sub(1).min(10))
        .min(BACKOFF_CAP_MS);
    let mut z = seed ^ u64::from(attempt).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    exp / 2 + z % (exp / 2 + 1)
}

/// The progress when a waiting step's capability is granted: its attempt is entered again
/// under `generation` (`capability_warm`, `WAIT_CAPABILITY → ACT`).
pub fn warm(p: &Progress, generation: i64) -> Progress {
    let mut q = p.clone();
    q.attempt_generation = generation;
    q
}

/// What a step's call produced: its result digest, the tokens and cost it used, and the
/// evidence it provides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub digest: String,
    pub tokens: u64,
    pub cost_milli: u64,
    pub evidence: Vec<String>,
}

impl Outcome {
    /// A `task` step's outcome (its deterministic digest; a task result, no tokens).
    pub fn task(digest: String) -> Outcome {
        Outcome {
            digest,
            tokens: 0,
            cost_milli: 0,
            evidence: vec![TASK_RESULT.to_owned()],
        }
    }

    /// A model step's outcome: a non-empty answer is a model answer.
    pub fn model(digest: String, tokens: u64, cost_milli: u64, empty: bool) -> Outcome {
        Outcome {
            digest,
            tokens,
            cost_milli,
            evidence: if empty {
                Vec::new()
            } else {
                vec![MODEL_ANSWER.to_owned()]
            },
        }
    }
}

/// `p` with `o`'s tokens and cost charged (and nothing else: a result not ingested).
pub fn charged(p: &Progress, o: &Outcome) -> Progress {
    let mut spent = p.clone();
    spent.used.tokens = spent.used.tokens.saturating_add(o.tokens);
    spent.used.cost_milli = spent.used.cost_milli.saturating_add(o.cost_milli);
    spent
}

/// The progress after step `step`'s outcome is recorded, or the budget event when its tokens
/// or cost exceed the run's `max_tokens` or `max_cost_milli`.
pub fn after_result(
    budgets: &Budgets,
    p: &Progress,
    step: &str,
    o: Outcome,
) -> (&'static str, Progress) {
    let spent = charged(p, &o);
    if spent.used.tokens > budgets.0[TOKENS] || spent.used.cost_milli > budgets.0[COST] {
        // Spent all the same: the hard boundary ends the run (its result is not ingested).
        return ("budget_exhausted", spent);
    }
    let mut q = spent;
    q.results.push(StepResult {
        step: step.to_owned(),
        digest: o.digest,
        tokens: o.tokens,
        evidence: o.evidence,
    });
    q.cursor += 1;
    q.attempt = 0;
    q.attempt_generation = 0;
    ("step_result", q)
}

/// A `task` step's deterministic result: a digest over the run, the step and the input's
/// digest (Runner I's task steps are a no-op that records what they would have done).
pub fn task_digest(run_id: &str, step: &str, input_sha256: &str) -> String {
    super::run::sha256(format!("lychd.runner.task/v1\n{run_id}\n{step}\n{input_sha256}").as_bytes())
}

/// Whether `w`'s step `index` is a model step: its family and the model it names, if any.
pub fn model_of(w: &Workflow, index: usize) -> Option<(&str, Option<&str>)> {
    match &w.steps.get(index)?.kind {
        StepKind::Model { family, model } => Some((family, model.as_deref())),
        StepKind::Task | StepKind::Effect(_) => None,
    }
}

mod boundary;
pub mod effects;
pub use boundary::{soft_boundary, tree_boundary};
pub mod rounds;
pub use rounds::{Round, fingerprint, repair_plan, verify_open};

#[cfg(test)]
mod tests;
