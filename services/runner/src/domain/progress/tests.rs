//! The step loop's rules: the edges through a workflow, retries, waits, budgets and the
//! soft boundary's handoff.

use super::*;

fn wf() -> Workflow {
    Workflow::parse(
        br#"{"schema":"lychd.runner.workflow/v1","name":"w","version":"0.1.0",
        "obligations":[{"id":"a","evidence":["task_result"]}],
        "steps":[{"id":"one","kind":"task"},{"id":"two","kind":"task","closes":["a"]}],"verification":{"owner":"o"}}"#,
    )
    .expect("valid")
}

/// Drive a run to its end, calling every step once under generation `g`.
fn drive(w: &Workflow, b: &Budgets, g: i64) -> Vec<&'static str> {
    let (mut state, mut p, mut events) = ("CREATED".to_owned(), Progress::default(), vec![]);
    let fsm = crate::domain::fsm::Fsm::bound().expect("fsm");
    loop {
        let (event, q) = match next(w, b, &state, &p, g) {
            Next::Commit { event, progress } => (event, *progress),
            Next::Call { index } => {
                let step = &w.steps[index].id;
                after_result(b, &p, step, Outcome::task(task_digest("r", step, "i")))
            }
            Next::Idle | Next::Probe { .. } | Next::Verify | Next::Effect => return events,
        };
        state = fsm.next(&state, event).expect("an FSM edge").to.clone();
        p = q;
        events.push(event);
    }
}

#[test]
fn a_run_takes_the_fsm_edges_through_every_step_to_the_verifier() {
    let w = wf();
    // The rules end at `VERIFY` asking the independent verifier: they never commit a PASS.
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
            "ready_to_verify"
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
            ..Used::default()
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
    let (event, q) = after_result(
        &b,
        &Progress::default(),
        "one",
        Outcome::model("d".into(), 11, 0, false),
    );
    assert_eq!(
        (event, q.used.tokens, q.results.len()),
        ("budget_exhausted", 11, 0)
    );
    let (event, q) = after_result(
        &b,
        &Progress::default(),
        "one",
        Outcome::model("d".into(), 10, 0, false),
    );
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
            evidence: vec!["model_answer".into()],
        }],
        used: Used {
            steps: 3,
            tokens: 7,
            tool_calls: 2,
            cost_milli: 9,
            suspended_ms: 1_234,
        },
        handoff: Some(Handoff {
            schema: "lychd.runner.handoff/v1".into(),
            budget: "max_steps".into(),
            used: 3,
            limit: 3,
            at_version: 4,
            residual_steps: vec!["two".into()],
            open_obligations: vec!["a".into()],
        }),
        jitter_seed: Some(u64::MAX),
        plan: vec![1],
        rounds: vec![Round {
            fingerprint: "sha256:ab".into(),
            gain: 0,
            closed: vec![],
        }],
        verification: Some(crate::domain::verification::Verification {
            at_ms: 1_780_000_000_000,
            disposition: "HOLD".into(),
            reasons: vec!["PROMOTION_NOT_REQUESTED".into()],
            axes: [("promotion".to_owned(), "NOT_REQUESTED".to_owned())].into(),
            input_digest: "sha256:cd".into(),
            asked: 1,
            predicate: crate::domain::verification::Predicate {
                obligations_closed: true,
                ..Default::default()
            },
        }),
        effects: 2,
        effect: Some(crate::domain::effect::Pending {
            step: 1,
            sequence: 2,
            action_digest: "sha256:aa".into(),
            proposal: 3,
            consent_id: "c".into(),
            binding_digest: "sha256:bb".into(),
            idempotency_key: "sha256:cc".into(),
            receipt_digest: String::new(),
            rejected: false,
        }),
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
fn the_soft_boundary_records_one_typed_handoff_at_80_percent() {
    let w = wf();
    let mut b = Budgets::contract();
    b.0[TOKENS] = 100;
    let mut p = Progress {
        cursor: 1,
        results: vec![StepResult {
            step: "one".into(),
            digest: "d".into(),
            tokens: 79,
            evidence: vec![],
        }],
        used: Used {
            steps: 1,
            tokens: 79,
            ..Used::default()
        },
        ..Progress::default()
    };
    assert_eq!(
        soft_boundary(&w, &b, p.clone(), Clocks::default(), 5).handoff,
        None,
        "79 %"
    );
    p.used.tokens = 80;
    let q = soft_boundary(&w, &b, p.clone(), Clocks::default(), 5);
    let h = q.handoff.clone().expect("a handoff at 80 %");
    assert_eq!(
        (h.budget.as_str(), h.used, h.limit, h.at_version),
        ("max_tokens", 80, 100, 5)
    );
    assert_eq!(h.residual_steps, ["two"]);
    assert_eq!(h.open_obligations, ["a"]);
    p.used.tokens = 95;
    let again = soft_boundary(&w, &b, q.clone(), Clocks::default(), 6);
    assert_eq!(again.handoff, q.handoff, "recorded once");
    let mut wall = Budgets::contract();
    wall.0[WALL] = 10;
    let at = |elapsed_ms, suspended_ms| Clocks {
        elapsed_ms,
        suspended_ms,
    };
    let by_wall = soft_boundary(&w, &wall, Progress::default(), at(8_000, 0), 2);
    assert_eq!(by_wall.handoff.expect("wall").budget, "max_wall_seconds");
    assert!(!wall_exhausted(&wall, 9_999));
    assert!(wall_exhausted(&wall, 10_000));
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
            evidence: vec!["task_result".into()],
        }],
        used: Used {
            steps: 2,
            tokens: 4,
            ..Used::default()
        },
        handoff: None,
        jitter_seed: Some(7),
        plan: vec![0, 1],
        rounds: Vec::new(),
        verification: None,
        effects: 0,
        effect: None,
    };
    assert_eq!(Progress::from_json(&p.to_json()).expect("json"), p);
    assert_eq!(
        Progress::from_json(&serde_json::json!({})).expect("json"),
        Progress::default()
    );
}

#[test]
fn retry_backoff_is_bounded_exponential_with_a_recorded_seed() {
    let b = Budgets::contract();
    let p = Progress {
        attempt: 1,
        attempt_generation: 2,
        ..Progress::default()
    };
    let (event, q) = retry(&b, &p, 2, 42);
    assert_eq!((event, q.jitter_seed), ("transient_failure", Some(42)));
    let (_, r) = retry(&b, &q, 2, 99);
    assert_eq!(r.jitter_seed, Some(42), "the recorded seed stays");
    for attempt in 1..12 {
        let exp = (BACKOFF_BASE_MS << (attempt - 1).min(10)).min(BACKOFF_CAP_MS);
        let wait = backoff_ms(42, attempt);
        assert!((exp / 2..=exp).contains(&wait), "{attempt}: {wait}");
        assert_eq!(wait, backoff_ms(42, attempt), "deterministic");
    }
    assert!(backoff_ms(42, 30) <= BACKOFF_CAP_MS);
    assert!(
        (1..6).any(|a| backoff_ms(1, a) != backoff_ms(2, a)),
        "the seed matters"
    );
}

#[test]
fn tool_calls_and_cost_have_budgets() {
    let w = wf();
    let mut b = Budgets::contract();
    b.0[TOOL_CALLS] = 1;
    let mut p = Progress::default();
    let Next::Commit { event, progress } = next(&w, &b, "PLAN", &p, 2) else {
        panic!("a commit");
    };
    assert_eq!((event, progress.used.tool_calls), ("plan_step", 1));
    p.cursor = 1;
    p.used.tool_calls = 1;
    assert!(matches!(
        next(&w, &b, "PLAN", &p, 2),
        Next::Commit {
            event: "budget_exhausted",
            ..
        }
    ));
    assert_eq!(cost_milli(0, 5), 0);
    assert_eq!(cost_milli(1, 5), 1, "rounded up");
    assert_eq!(cost_milli(2_000, 5), 10);
    assert_eq!(cost_milli(u64::MAX, 20_000), u64::MAX / 1000 + 1);
    b.0[COST] = 10;
    let o = |cost| Outcome::model("d".into(), 1, cost, false);
    assert_eq!(
        after_result(&b, &Progress::default(), "m", o(10)).0,
        "step_result"
    );
    let (event, q) = after_result(&b, &Progress::default(), "m", o(11));
    assert_eq!((event, q.used.cost_milli), ("budget_exhausted", 11));
    let h = soft_boundary(
        &w,
        &b,
        charged(&Progress::default(), &o(8)),
        Clocks::default(),
        2,
    );
    assert_eq!(h.handoff.expect("cost").budget, "max_cost_milli");
    let mut t = Budgets::contract();
    t.0[TOOL_CALLS] = 5;
    let four = Progress {
        used: Used {
            tool_calls: 4,
            ..Used::default()
        },
        ..Progress::default()
    };
    let h = soft_boundary(&w, &t, four, Clocks::default(), 2);
    assert_eq!(h.handoff.expect("tool calls").budget, "max_tool_calls");
}

#[test]
fn suspended_time_is_charged_when_a_wait_closes_and_has_a_budget() {
    let w = wf();
    let mut b = Budgets::contract();
    b.0[SUSPENDED] = 10;
    let p = resumed(&Progress::default(), 3_000, 4);
    assert_eq!((p.used.suspended_ms, p.attempt_generation), (3_000, 4));
    let p = resumed(&p, 4_000, 5);
    assert_eq!(p.used.suspended_ms, 7_000);
    assert!(!suspended_exhausted(&b, 9_999));
    assert!(suspended_exhausted(&b, 10_000));
    let clocks = Clocks {
        elapsed_ms: 0,
        suspended_ms: 8_000,
    };
    let h = soft_boundary(&w, &b, p, clocks, 3);
    assert_eq!(
        h.handoff.expect("suspended").budget,
        "max_suspended_seconds"
    );
}
