//! The contract's trace fields of a transition (loop-contract v1 `trace.transition_fields`)
//! that follow from the run's progress before and after it: the loop cycle, the evidence it
//! recorded and what it consumed of the budgets. Digests and counts only: payloads and
//! secrets never enter a trace field (`trace.redaction`).

use serde_json::{Value, json};

use super::progress::{self, Progress};
use super::workflow::Workflow;

/// The fields of a transition derived from the progress it commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    /// The loop cycle: the number of steps the run had entered after it (0 before the first).
    pub cycle_id: i64,
    /// sha256 digests of the step results it recorded.
    pub evidence_hashes: Vec<String>,
    /// What it consumed: `{"steps": n, "tokens": n, "tool_calls": n, "cost_milli": n,
    /// "suspended_ms": n}` (zeros when nothing).
    pub budget_delta: Value,
}

/// The derived trace fields of a transition from `before` to `after`.
pub fn derive(before: &Progress, after: &Progress) -> Derived {
    let evidence_hashes = after
        .results
        .iter()
        .filter(|r| !before.results.contains(r))
        .map(|r| r.digest.clone())
        .collect();
    Derived {
        cycle_id: i64::try_from(after.used.steps).unwrap_or(i64::MAX),
        evidence_hashes,
        budget_delta: json!({
            "steps": after.used.steps.saturating_sub(before.used.steps),
            "tokens": after.used.tokens.saturating_sub(before.used.tokens),
            "tool_calls": after.used.tool_calls.saturating_sub(before.used.tool_calls),
            "cost_milli": after.used.cost_milli.saturating_sub(before.used.cost_milli),
            "suspended_ms": after.used.suspended_ms.saturating_sub(before.used.suspended_ms),
        }),
    }
}

/// The capability of the transition `event` takes from a run in `state` with progress `p`
/// (before it): the capability family of the step in flight or being entered when that step
/// is a model step, else ''.
pub fn capability<'w>(w: &'w Workflow, event: &str, p: &Progress) -> &'w str {
    match event {
        "plan_step" | "step_result" | "capability_cold" | "capability_warm"
        | "transient_failure" | "retry_exhausted" => {
            progress::model_of(w, p.cursor).map_or("", |(family, _)| family)
        }
        _ => "",
    }
}

/// The contract's field names, in its order (what a transition row and its span carry).
pub const TRANSITION_FIELDS: [&str; 16] = [
    "run_id",
    "cycle_id",
    "workflow_version",
    "state_schema_version",
    "transition_id",
    "source_state",
    "target_state",
    "trigger",
    "actor",
    "capability",
    "evidence_hashes",
    "budget_delta",
    "timestamp",
    "trace_id",
    "span_id",
    "checkpoint_id",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::progress::StepResult;

    #[test]
    fn a_step_result_is_evidence_and_its_tokens_the_delta() {
        let before = Progress {
            used: crate::domain::progress::Used {
                steps: 2,
                tokens: 10,
                ..Default::default()
            },
            ..Progress::default()
        };
        let mut after = before.clone();
        after.results.push(StepResult {
            step: "a".into(),
            digest: "d".repeat(64),
            tokens: 5,
            evidence: vec!["model_answer".into()],
        });
        after.used.tokens += 5;
        let d = derive(&before, &after);
        assert_eq!(d.cycle_id, 2);
        assert_eq!(d.evidence_hashes, vec!["d".repeat(64)]);
        assert_eq!(
            d.budget_delta,
            json!({"steps": 0, "tokens": 5, "tool_calls": 0, "cost_milli": 0, "suspended_ms": 0})
        );
        let none = derive(&after, &after);
        assert!(none.evidence_hashes.is_empty());
        assert_eq!(
            none.budget_delta,
            json!({"steps": 0, "tokens": 0, "tool_calls": 0, "cost_milli": 0, "suspended_ms": 0})
        );
        assert_eq!(TRANSITION_FIELDS.len(), 16);
    }
}
