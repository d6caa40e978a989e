//! Verification rounds: evidence-checked closure, repair rounds, the fingerprint and the
//! no-progress window.

use super::super::*;
use super::*;
use crate::domain::budgets::Budgets;
use crate::domain::workflow::StepKind;

fn model_wf() -> Workflow {
    Workflow::parse(
        br#"{"schema":"lychd.runner.workflow/v1","name":"w","version":"0.1.0",
        "obligations":[{"id":"a","evidence":["task_result"]},{"id":"b","evidence":["model_answer"]}],
        "steps":[{"id":"one","kind":"task","closes":["a"]},{"id":"m","kind":"model","family":"chat","closes":["b"]},
                 {"id":"two","kind":"task"}],"verification":{"owner":"o"}}"#,
    )
    .expect("valid")
}

/// Drive a run of `w` to its end, every model step answering `empty(round)`; the events.
fn drive_model(w: &Workflow, empty: impl Fn(usize) -> bool) -> Vec<&'static str> {
    let b = Budgets::contract();
    let fsm = crate::domain::fsm::Fsm::bound().expect("fsm");
    let (mut state, mut p, mut events) = ("CREATED".to_owned(), Progress::default(), vec![]);
    loop {
        let (event, q) = match next(w, &b, &state, &p, 2) {
            Next::Commit { event, progress } => (event, *progress),
            Next::Call { index } => {
                let step = &w.steps[index].id;
                let o = match &w.steps[index].kind {
                    StepKind::Task | StepKind::Effect(_) => {
                        Outcome::task(task_digest("r", step, "i"))
                    }
                    StepKind::Model { .. } => {
                        let e = empty(p.round());
                        Outcome::model(format!("answer-{e}"), 1, 0, e)
                    }
                };
                after_result(&b, &p, step, o)
            }
            Next::Idle | Next::Probe { .. } | Next::Verify | Next::Effect => return events,
        };
        state = fsm.next(&state, event).expect("an FSM edge").to.clone();
        p = q;
        events.push(event);
        assert!(events.len() < 200, "a run ends");
    }
}

#[test]
fn an_empty_answer_is_no_model_answer_and_leaves_its_obligation_open() {
    let w = model_wf();
    let (_, p) = after_result(
        &Budgets::contract(),
        &Progress {
            cursor: 1,
            ..Progress::default()
        },
        "m",
        Outcome::model("d".into(), 3, 0, true),
    );
    assert!(!p.closed(&w, "b"), "an empty answer closes nothing");
    let (_, p) = after_result(
        &Budgets::contract(),
        &p,
        "m",
        Outcome::model("e".into(), 3, 0, false),
    );
    assert!(p.closed(&w, "b"));
    assert!(!p.closed(&w, "a"), "a task result is its own step's");
}

#[test]
fn a_round_with_an_open_obligation_repairs_only_the_steps_that_can_close_it() {
    let w = model_wf();
    // Round 1: the model answers empty; round 2 (a repair round) it answers.
    let events = drive_model(&w, |round| round == 1);
    let verify: Vec<&str> = events
        .iter()
        .copied()
        .filter(|e| e.starts_with("verified") || *e == "no_progress")
        .collect();
    // The repair round closes it: the independent verifier is asked (never the rules' PASS).
    assert_eq!(verify, ["verified_reject"]);
    assert_eq!(events.last(), Some(&"ready_to_verify"));
    // The repair round plans only the model step: 3 steps, then 1.
    assert_eq!(events.iter().filter(|e| **e == "plan_step").count(), 4);
}

#[test]
fn three_rounds_without_gain_end_no_progress_and_a_linear_workflow_is_no_false_stop() {
    let w = model_wf();
    let events = drive_model(&w, |_| true);
    // Round 1 closes `a` (gain 1); rounds 2, 3 and 4 close nothing: the window is spent.
    assert_eq!(
        events.iter().filter(|e| **e == "verified_reject").count(),
        3
    );
    assert_eq!(events.last(), Some(&"no_progress"));
    // A linear workflow whose first steps close nothing is not stopped (rounds end at VERIFY).
    let long = Workflow::parse(
        br#"{"schema":"lychd.runner.workflow/v1","name":"w","version":"0.1.0",
        "obligations":[{"id":"a","evidence":["task_result"]}],
        "steps":[{"id":"s1","kind":"task"},{"id":"s2","kind":"task"},{"id":"s3","kind":"task"},
                 {"id":"s4","kind":"task"},{"id":"s5","kind":"task","closes":["a"]}],"verification":{"owner":"o"}}"#,
    )
    .expect("valid");
    let events = drive_model(&long, |_| false);
    assert_eq!(events.last(), Some(&"ready_to_verify"));
    assert!(!events.contains(&"verified_reject"), "{events:?}");
}

#[test]
fn a_round_whose_fingerprint_repeats_gains_nothing() {
    let w = model_wf();
    let mut p = Progress {
        results: vec![StepResult {
            step: "m".into(),
            digest: "same".into(),
            tokens: 1,
            evidence: vec!["model_answer".into()],
        }],
        ..Progress::default()
    };
    let first = fingerprint(&w, &p);
    assert!(first.starts_with("sha256:"), "{first}");
    assert_eq!(fingerprint(&w, &p), first, "deterministic");
    // The same state again after a round: a cycle, gain 0 though `b` is closed.
    p.rounds.push(Round {
        fingerprint: first.clone(),
        gain: 1,
        closed: vec![],
    });
    let (_, q) = verify_open(&w, &p);
    assert_eq!(q.rounds.last().map(|r| r.gain), Some(0));
    // Another result digest is another fingerprint.
    p.results[0].digest = "other".into();
    assert_ne!(fingerprint(&w, &p), first);
}
