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
const TOKENS: usize = 5;

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
        progress: Progress,
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
    let commit = |event, progress| Next::Commit { event, progress };
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
            let (event, progress) = retry(budgets, p, generation);
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

/// After a transient failure of the attempt in flight: the next attempt under `generation`
/// (`transient_failure`, `ACT → ACT`), or `retries_exhausted` when the run's
/// `max_retries_per_transition` attempts are spent.
pub fn retry(budgets: &Budgets, p: &Progress, generation: i64) -> (&'static str, Progress) {
    if u64::from(p.attempt) >= budgets.0[RETRIES] {
        return ("retries_exhausted", p.clone());
    }
    let mut q = p.clone();
    q.attempt += 1;
    q.attempt_generation = generation;
    ("transient_failure", q)
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
mod tests {
    use super::*;

    fn wf() -> Workflow {
        Workflow::parse(
            br#"{"schema":"lychd.runner.workflow/v1","name":"w","version":"0.1.0",
            "obligations":[{"id":"a","evidence":["x"]}],
            "steps":[{"id":"one","kind":"task"},{"id":"two","kind":"task","closes":["a"]}]}"#,
        )
        .expect("valid")
    }

    /// Drive a run to its end, calling every step once under generation `g`.
    fn drive(w: &Workflow, b: &Budgets, g: i64) -> Vec<&'static str> {
        let (mut state, mut p, mut events) = ("CREATED".to_owned(), Progress::default(), vec![]);
        let fsm = crate::domain::fsm::Fsm::bound().expect("fsm");
        loop {
            let (event, q) = match next(w, b, &state, &p, g) {
                Next::Commit { event, progress } => (event, progress),
                Next::Call { index } => {
                    let step = &w.steps[index].id;
                    after_result(b, &p, step, task_digest("r", step, "i"), 0)
                }
                Next::Idle | Next::Probe { .. } => return events,
            };
            state = fsm.next(&state, event).expect("an FSM edge").to.clone();
            p = q;
            events.push(event);
        }
    }

    #[test]
    fn a_run_takes_the_fsm_edges_through_every_step_to_success() {
        let w = wf();
        let events = drive(&w, &Budgets::contract(), 2);
        assert_eq!(
            events,
            [
                "start",
                "plan_step",
                "step_result",
                "ingested",
                "plan_step",
                "step_result",
                "ready_to_verify",
                "verified_pass"
            ]
        );
    }

    #[test]
    fn an_attempt_of_an_older_generation_is_a_transient_failure_then_retries_run_out() {
        let w = wf();
        let b = Budgets::contract();
        let p = Progress {
            attempt: 1,
            attempt_generation: 2,
            ..Progress::default()
        };
        assert_eq!(next(&w, &b, "ACT", &p, 2), Next::Call { index: 0 });
        let Next::Commit { event, progress } = next(&w, &b, "ACT", &p, 3) else {
            panic!("a commit");
        };
        assert_eq!(
            (event, progress.attempt, progress.attempt_generation),
            ("transient_failure", 2, 3)
        );
        let spent = Progress {
            attempt: 3,
            attempt_generation: 2,
            ..Progress::default()
        };
        assert!(matches!(
            next(&w, &b, "ACT", &spent, 3),
            Next::Commit {
                event: "retries_exhausted",
                ..
            }
        ));
    }

    #[test]
    fn a_waiting_step_is_probed_and_entered_again_under_the_new_generation_when_warm() {
        let w = wf();
        let b = Budgets::contract();
        let p = Progress {
            attempt: 1,
            attempt_generation: 2,
            ..Progress::default()
        };
        assert_eq!(
            next(&w, &b, "WAIT_CAPABILITY", &p, 3),
            Next::Probe { index: 0 }
        );
        let q = warm(&p, 3);
        assert_eq!(next(&w, &b, "ACT", &q, 3), Next::Call { index: 0 });
        assert_eq!(q.attempt, 1, "a wait is not an attempt");
    }

    #[test]
    fn steps_and_tokens_beyond_the_budget_end_the_run() {
        let w = wf();
        let mut b = Budgets::contract();
        b.0[STEPS] = 1;
        let p = Progress {
            cursor: 1,
            used: Used {
                steps: 1,
                tokens: 0,
            },
            ..Progress::default()
        };
        assert!(matches!(
            next(&w, &b, "PLAN", &p, 2),
            Next::Commit {
                event: "budget_exhausted",
                ..
            }
        ));
        b.0[TOKENS] = 10;
        let (event, q) = after_result(&b, &Progress::default(), "one", "d".into(), 11);
        assert_eq!(
            (event, q.used.tokens, q.results.len()),
            ("budget_exhausted", 11, 0)
        );
        let (event, q) = after_result(&b, &Progress::default(), "one", "d".into(), 10);
        assert_eq!((event, q.cursor, q.results.len()), ("step_result", 1, 1));
    }

    #[test]
    fn a_checkpoint_carries_the_progress_a_resume_reads_back() {
        use crate::domain::checkpoint::{Envelope, Snapshot, progress_of};
        let p = Progress {
            cursor: 2,
            attempt: 1,
            attempt_generation: 5,
            results: vec![StepResult {
                step: "one".into(),
                digest: "d".into(),
                tokens: 7,
            }],
            used: Used {
                steps: 3,
                tokens: 7,
            },
        };
        let c = Snapshot {
            run_id: "r",
            version: 4,
            generation: 5,
            state: "ACT",
            budgets: Budgets::contract(),
            interrupt_pending: false,
            progress: &p,
            envelope: Envelope {
                workflow_name: "w",
                workflow_version: "0.1.0",
                workflow_sha256: "a",
                state_schema_version: "0.1.0",
                fsm_sha256: "f",
            },
        }
        .checkpoint();
        assert_eq!(progress_of(&c.body), Some(p));
    }

    #[test]
    fn progress_round_trips_through_json_and_an_empty_object_is_fresh() {
        let p = Progress {
            cursor: 1,
            attempt: 2,
            attempt_generation: 3,
            results: vec![StepResult {
                step: "one".into(),
                digest: "d".into(),
                tokens: 4,
            }],
            used: Used {
                steps: 2,
                tokens: 4,
            },
        };
        assert_eq!(Progress::from_json(&p.to_json()).expect("json"), p);
        assert_eq!(
            Progress::from_json(&serde_json::json!({})).expect("json"),
            Progress::default()
        );
    }
}
