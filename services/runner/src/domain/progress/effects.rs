//! The effect path's rules (pure): what a run's progress becomes at each edge of
//! `action_types.ExternalEffect` — `PLAN → PLAN_EFFECTS → WAIT_APPROVAL → COMMIT_INTENT →
//! EXECUTE → RECONCILE → (HONOR_PENDING_INTERRUPT → INGEST | HUMAN_RECONCILIATION)` — and which
//! event an adapter's answer is. The driver asks Ward and the adapter; these functions decide.

use super::{Progress, StepResult};
use crate::domain::effect::{Delivery, EFFECT_RECEIPT, EffectSpec, Pending, Resolution};
use crate::domain::run::sha256;
use crate::domain::workflow::{StepKind, Workflow};

/// The states the driver's effect rules drive (`HUMAN_RECONCILIATION` waits for an operator).
pub const DRIVEN: [&str; 6] = [
    "PLAN_EFFECTS",
    "WAIT_APPROVAL",
    "COMMIT_INTENT",
    "EXECUTE",
    "RECONCILE",
    "HONOR_PENDING_INTERRUPT",
];

/// The progress of `plan_effects` when step `index` of `w` is an effect step (its effect's
/// sequence is the run's next; one step and one tool call are charged), else `None`.
pub fn planned(w: &Workflow, p: &Progress, index: usize) -> Option<Progress> {
    let StepKind::Effect(spec) = &w.steps.get(index)?.kind else {
        return None;
    };
    let mut q = p.clone();
    q.used.steps += 1;
    q.used.tool_calls += 1;
    q.effects += 1;
    q.effect = Some(Pending {
        step: index,
        sequence: q.effects,
        action_digest: spec.action_digest.clone(),
        proposal: 1,
        ..Pending::default()
    });
    Some(q)
}

/// The effect step of the pending effect.
pub fn spec<'a>(w: &'a Workflow, p: &Progress) -> Option<&'a EffectSpec> {
    match &w.steps.get(p.effect.as_ref()?.step)?.kind {
        StepKind::Effect(s) => Some(s),
        _ => None,
    }
}

fn with(p: &Progress, f: impl FnOnce(&mut Pending)) -> Progress {
    let mut q = p.clone();
    if let Some(e) = q.effect.as_mut() {
        f(e);
    }
    q
}

/// `approval_requested` (`PLAN_EFFECTS → WAIT_APPROVAL`): the consent Ward recorded.
pub fn proposed(p: &Progress, consent_id: &str, binding_digest: &str) -> Progress {
    with(p, |e| {
        e.consent_id = consent_id.to_owned();
        e.binding_digest = binding_digest.to_owned();
    })
}

/// The wait in `WAIT_APPROVAL` closed after `waited_ms` (counted as suspended time).
pub fn waited(p: &Progress, waited_ms: u64) -> Progress {
    let mut q = p.clone();
    q.used.suspended_ms = q.used.suspended_ms.saturating_add(waited_ms);
    q
}

/// `approval_stale` (`WAIT_APPROVAL → PLAN_EFFECTS`): the approval was revoked, expired or
/// consumed elsewhere before the intent; the next proposal is a new exact-hash approval (a new
/// nonce).
pub fn stale(p: &Progress) -> Progress {
    with(p, |e| {
        e.proposal += 1;
        e.consent_id.clear();
        e.binding_digest.clear();
    })
}

/// `approval_denied` (`WAIT_APPROVAL → PLAN`): the effect step is done without evidence (it
/// closes nothing; a repair round may propose it again, as a new approval).
pub fn denied(w: &Workflow, p: &Progress) -> Progress {
    let mut q = p.clone();
    if let Some(e) = q.effect.take() {
        q.results.push(StepResult {
            step: w
                .steps
                .get(e.step)
                .map(|s| s.id.clone())
                .unwrap_or_default(),
            digest: sha256(format!("lychd.runner.effect-denied/v1\n{}", e.consent_id).as_bytes()),
            tokens: 0,
            evidence: Vec::new(),
        });
        q.cursor += 1;
        q.attempt = 0;
        q.attempt_generation = 0;
    }
    q
}

/// `intent_committed` (`COMMIT_INTENT → EXECUTE`): the key the intent was written under.
pub fn intent(p: &Progress, idempotency_key: &str) -> Progress {
    with(p, |e| e.idempotency_key = idempotency_key.to_owned())
}

/// The event an answer in `EXECUTE` is: `response_received` with what it said, or
/// `transport_uncertain` (the outcome is not known: reconcile by status query).
pub fn answered(p: &Progress, d: &Delivery) -> (&'static str, Progress) {
    match d {
        Delivery::Applied { receipt_digest } => (
            "response_received",
            with(p, |e| e.receipt_digest = receipt_digest.clone()),
        ),
        Delivery::Rejected { .. } => ("response_received", with(p, |e| e.rejected = true)),
        Delivery::NotApplied | Delivery::Unknown => ("transport_uncertain", p.clone()),
    }
}

/// The event of `RECONCILE` once the outcome is as known as it gets: confirmed (a receipt),
/// rejected (`FAILED`), or still unknown (`HUMAN_RECONCILIATION`; never retried blind, never
/// success).
pub fn reconciled(p: &Progress, d: Option<&Delivery>) -> (&'static str, Progress) {
    let known = p.effect.as_ref();
    if known.is_some_and(|e| !e.receipt_digest.is_empty()) {
        return ("outcome_confirmed", p.clone());
    }
    if known.is_some_and(|e| e.rejected) {
        return ("outcome_rejected", p.clone());
    }
    match d {
        Some(Delivery::Applied { receipt_digest }) => (
            "outcome_confirmed",
            with(p, |e| e.receipt_digest = receipt_digest.clone()),
        ),
        Some(Delivery::Rejected { .. }) => ("outcome_rejected", with(p, |e| e.rejected = true)),
        _ => ("outcome_unknown", p.clone()),
    }
}

/// The operator's resolution in `HUMAN_RECONCILIATION`.
pub fn resolved(p: &Progress, r: &Resolution) -> Progress {
    match r {
        Resolution::Confirmed { receipt_digest } => {
            with(p, |e| e.receipt_digest = receipt_digest.clone())
        }
        Resolution::NotApplied => with(p, |e| e.rejected = true),
        Resolution::Abandon => p.clone(),
    }
}

/// `HONOR_PENDING_INTERRUPT`: the interrupt recorded meanwhile (`interrupt`: its event), or
/// `no_interrupt` with the confirmed receipt re-ingested as the step's result (evidence
/// `effect_receipt`; the cursor moves past the step) — the contract's `confirmed_resume_state`.
pub fn honored(
    w: &Workflow,
    p: &Progress,
    interrupt: Option<&'static str>,
) -> (&'static str, Progress) {
    if let Some(event) = interrupt {
        return (event, p.clone());
    }
    let mut q = p.clone();
    if let Some(e) = q.effect.take() {
        q.results.push(StepResult {
            step: w
                .steps
                .get(e.step)
                .map(|s| s.id.clone())
                .unwrap_or_default(),
            digest: e.receipt_digest.trim_start_matches("sha256:").to_owned(),
            tokens: 0,
            evidence: vec![EFFECT_RECEIPT.to_owned()],
        });
        q.cursor += 1;
        q.attempt = 0;
        q.attempt_generation = 0;
    }
    ("no_interrupt", q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::budgets::Budgets;
    use crate::domain::fsm::Fsm;
    use crate::domain::progress::{Next, next};

    const DOC: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"pay","version":"0.1.0",
        "obligations":[{"id":"paid","evidence":["effect_receipt"]}],
        "steps":[{"id":"pay","kind":"effect","adapter":"http",
                  "destination":"http://127.0.0.1:9/orders","risk":"high",
                  "action":{"amount":5},"closes":["paid"]}],"verification":{"owner":"o"}}"#;

    /// Walk the FSM from `CREATED` with `answers` standing for Ward's and the adapter's.
    fn walk(
        delivery: Delivery,
        status: Option<Delivery>,
        interrupt: Option<&'static str>,
    ) -> (Vec<&'static str>, String) {
        let w = Workflow::parse(DOC.as_bytes()).expect("valid");
        let (b, fsm) = (Budgets::contract(), Fsm::bound().expect("fsm"));
        let (mut state, mut p, mut events) = ("CREATED".to_owned(), Progress::default(), vec![]);
        for _ in 0..40 {
            let (event, q) = match next(&w, &b, &state, &p, 1) {
                Next::Commit { event, progress } => (event, *progress),
                Next::Effect => match state.as_str() {
                    "PLAN_EFFECTS" => ("approval_requested", proposed(&p, "c", "sha256:b")),
                    "WAIT_APPROVAL" => ("approval_consumed", p.clone()),
                    "COMMIT_INTENT" => ("intent_committed", intent(&p, "sha256:k")),
                    "EXECUTE" => answered(&p, &delivery),
                    "RECONCILE" => reconciled(&p, status.as_ref()),
                    _ => honored(&w, &p, interrupt),
                },
                _ => break,
            };
            state = fsm.next(&state, event).expect("an FSM edge").to.clone();
            p = q;
            events.push(event);
        }
        (events, state)
    }

    #[test]
    fn a_confirmed_effect_is_reingested_before_verification() {
        let applied = Delivery::Applied {
            receipt_digest: format!("sha256:{}", "a".repeat(64)),
        };
        let (events, end) = walk(applied, None, None);
        assert_eq!(
            events,
            [
                "start",
                "plan_effects",
                "approval_requested",
                "approval_consumed",
                "intent_committed",
                "response_received",
                "outcome_confirmed",
                "no_interrupt",
                "ready_to_verify"
            ]
        );
        // The receipt is evidence for the independent verifier, never success by itself.
        assert_eq!(end, "VERIFY");
    }

    #[test]
    fn an_unknown_outcome_waits_for_a_human_and_is_never_success() {
        let (events, end) = walk(Delivery::Unknown, Some(Delivery::Unknown), None);
        assert_eq!(events.last(), Some(&"outcome_unknown"));
        assert_eq!(end, "HUMAN_RECONCILIATION");
        let (_, end) = walk(
            Delivery::Unknown,
            Some(Delivery::Applied {
                receipt_digest: "sha256:x".into(),
            }),
            None,
        );
        assert_eq!(
            end, "VERIFY",
            "a status query that finds the receipt confirms (then the verifier decides)"
        );
        let (_, end) = walk(Delivery::Rejected { status: 422 }, None, None);
        assert_eq!(end, "FAILED");
    }

    #[test]
    fn an_interrupt_recorded_meanwhile_is_honoured_after_the_outcome() {
        let applied = Delivery::Applied {
            receipt_digest: "sha256:x".into(),
        };
        let (events, end) = walk(applied, None, Some("interrupt_cancel"));
        assert_eq!(events.last(), Some(&"interrupt_cancel"));
        assert_eq!(end, "CANCELED");
    }

    #[test]
    fn a_stale_approval_is_proposed_again_as_a_new_one_and_a_denied_effect_closes_nothing() {
        let w = Workflow::parse(DOC.as_bytes()).expect("valid");
        let p = planned(&w, &Progress::default(), 0).expect("an effect step");
        let p = proposed(&p, "c1", "sha256:b");
        let s = stale(&p);
        let e = s.effect.as_ref().expect("pending");
        assert_eq!((e.proposal, e.consent_id.as_str()), (2, ""));
        let d = denied(&w, &p);
        assert!(d.effect.is_none());
        assert_eq!(d.cursor, 1);
        assert_eq!(d.results[0].step, "pay");
        assert!(d.results[0].evidence.is_empty());
        assert!(!d.obligations_closed(&w));
    }
}
