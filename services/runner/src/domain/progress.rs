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
use super::workflow::{StepKind, Workflow};

/// Index of `max_steps`, `max_retries_per_transition` and `max_tokens` in [`Budgets`].
const STEPS: usize = 0;
const RETRIES: usize = 2;
const WALL: usize = 3;
const TOKENS: usize = 5;

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
    /// The budget's field (`max_steps`, `max_tokens`, `max_wall_seconds`).
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
}

/// What a run has consumed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Used {
    /// Steps entered (every `plan_step`).
    pub steps: u64,
    pub tokens: u64,
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

    /// Whether every obligation of `w` is closed by a recorded step result (Runner I: a
    /// step's result is the evidence of the obligations it names in `closes`).
    pub fn obligations_closed(&self, w: &Workflow) -> bool {
        w.obligations.iter().all(|o| {
            w.steps
                .iter()
                .any(|s| s.closes.contains(&o.id) && self.results.iter().any(|r| r.step == s.id))
        })
    }

    /// The ids of the steps not yet done (the R frontier).
    pub fn frontier<'a>(&self, w: &'a Workflow) -> Vec<&'a str> {
        w.steps
            .iter()
            .skip(self.cursor)
            .map(|s| s.id.as_str())
            .collect()
    }
}

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
    /// Nothing the runner may do: a state it does not drive (terminal, quarantined, effects).
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
        "PLAN" | "INGEST" if p.cursor < w.steps.len() => {
            if state == "INGEST" {
                return commit("ingested", p.clone());
            }
            if p.used.steps >= budgets.0[STEPS] {
                return commit("budget_exhausted", p.clone());
            }
            let mut q = p.clone();
            q.attempt = 1;
            q.attempt_generation = generation;
            q.used.steps += 1;
            commit("plan_step", q)
        }
        "PLAN" | "INGEST" if p.obligations_closed(w) => commit("ready_to_verify", p.clone()),
        // Every step ran and an obligation is open: cannot happen for a valid workflow (each
        // obligation is closable by some step, and every step runs); nothing to drive.
        "PLAN" | "INGEST" => Next::Idle,
        "ACT" if p.attempt_generation == generation => Next::Call { index: p.cursor },
        "ACT" => {
            // The attempt in flight was entered under an older generation: its outcome is
            // unknown (no effect in Runner I), so it counts as a transient failure.
            // The seed of a retry on resume: from the generation (the run's recorded one wins).
            let (event, progress) = retry(budgets, p, generation, generation.unsigned_abs());
            commit(event, progress)
        }
        "WAIT_CAPABILITY" => Next::Probe { index: p.cursor },
        // Runner I: the runner's own obligation check stands in for the independent verifier
        // (Runner II asks HelmLoop): obligations closed and no effect at all, so none unknown.
        "VERIFY" if p.obligations_closed(w) => commit("verified_pass", p.clone()),
        "VERIFY" => commit("verified_reject", p.clone()),
        _ => Next::Idle,
    }
}

/// Whether the run's wall-clock budget is spent after `elapsed_ms` since its creation.
pub fn wall_exhausted(budgets: &Budgets, elapsed_ms: u64) -> bool {
    elapsed_ms >= budgets.0[WALL].saturating_mul(1000)
}

/// `p` with the residual-work handoff recorded when a budget (steps, tokens, wall seconds) has
/// reached [`SOFT_PERCENT`] and none is recorded yet; `version` is the version the commit
/// makes (its checkpoint carries the handoff).
pub fn soft_boundary(
    w: &Workflow,
    budgets: &Budgets,
    mut p: Progress,
    elapsed_ms: u64,
    version: i64,
) -> Progress {
    if p.handoff.is_some() {
        return p;
    }
    let reached = [
        ("max_steps", p.used.steps, budgets.0[STEPS]),
        ("max_tokens", p.used.tokens, budgets.0[TOKENS]),
        ("max_wall_seconds", elapsed_ms / 1000, budgets.0[WALL]),
    ]
    .into_iter()
    .find(|(_, used, limit)| used.saturating_mul(100) >= limit.saturating_mul(SOFT_PERCENT));
    if let Some((budget, used, limit)) = reached {
        let closed = |o: &str| {
            w.steps.iter().any(|s| {
                s.closes.iter().any(|c| c == o) && p.results.iter().any(|r| r.step == s.id)
            })
        };
        p.handoff = Some(Handoff {
            schema: "lychd.runner.handoff/v1".into(),
            budget: budget.into(),
            used,
            limit,
            at_version: version,
            residual_steps: p.frontier(w).into_iter().map(str::to_owned).collect(),
            open_obligations: w
                .obligations
                .iter()
                .filter(|o| !closed(&o.id))
                .map(|o| o.id.clone())
                .collect(),
        });
    }
    p
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

/// The progress after step `index`'s result `digest` (with `tokens` used) is recorded, or the
/// budget event when the tokens exceed the run's `max_tokens`.
pub fn after_result(
    budgets: &Budgets,
    p: &Progress,
    step: &str,
    digest: String,
    tokens: u64,
) -> (&'static str, Progress) {
    let mut q = p.clone();
    q.used.tokens += tokens;
    q.results.push(StepResult {
        step: step.to_owned(),
        digest,
        tokens,
    });
    q.cursor += 1;
    q.attempt = 0;
    q.attempt_generation = 0;
    if q.used.tokens > budgets.0[TOKENS] {
        // The tokens were spent: the hard boundary ends the run (its result is not ingested).
        let mut spent = p.clone();
        spent.used.tokens += tokens;
        return ("budget_exhausted", spent);
    }
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
        StepKind::Task => None,
    }
}

#[cfg(test)]
mod tests;
