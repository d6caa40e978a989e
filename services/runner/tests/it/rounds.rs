//! No-progress on a frozen labelled set (loop-contract v1 `no_progress`: window 3, epsilon 1,
//! `calibration`: "threshold is frozen per experiment and reported with false-stop and overrun
//! rates"). Every run goes through real processes — Ward, a Dispatcher, a Runner, a simulated
//! llama.cpp runtime whose answers are made empty by markers in the run's input — and each
//! shape is labelled with the outcome it should have and the verification rounds it should
//! take. The test prints the false stops (a run labelled to succeed that stopped
//! `NO_PROGRESS`) and the overruns (a run labelled to stop that did not, or stopped later than
//! the window allows) and requires none of the first and none of the second.

use crate::model::stack;

const TASK_LINEAR: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"linear","version":"0.1.0",
  "obligations":[{"id":"done","evidence":["task_result"]}],
  "steps":[{"id":"s1","kind":"task"},{"id":"s2","kind":"task"},{"id":"s3","kind":"task"},
           {"id":"s4","kind":"task"},{"id":"s5","kind":"task","closes":["done"]}],
  "verification":{"owner":"owner-alice"}}"#;

const ONE_MODEL: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"one","version":"0.1.0",
  "obligations":[{"id":"answer","evidence":["model_answer"]}],
  "steps":[{"id":"gather","kind":"task"},{"id":"draft","kind":"model","family":"chat","closes":["answer"]}],
  "verification":{"owner":"owner-alice"}}"#;

const TASK_AND_MODEL: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"mixed","version":"0.1.0",
  "obligations":[{"id":"gathered","evidence":["task_result"]},{"id":"answer","evidence":["model_answer"]}],
  "steps":[{"id":"gather","kind":"task","closes":["gathered"]},
           {"id":"draft","kind":"model","family":"chat","closes":["answer"]}],
  "verification":{"owner":"owner-alice"}}"#;

const TWO_MODELS: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"two","version":"0.1.0",
  "obligations":[{"id":"first","evidence":["model_answer"]},{"id":"second","evidence":["model_answer"]}],
  "steps":[{"id":"alpha","kind":"model","family":"chat","closes":["first"]},
           {"id":"beta","kind":"model","family":"chat","closes":["second"]}],
  "verification":{"owner":"owner-alice"}}"#;

const ALTERNATES: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"alternates","version":"0.1.0",
  "obligations":[{"id":"answer","evidence":["model_answer"]}],
  "steps":[{"id":"a","kind":"model","family":"chat","closes":["answer"]},
           {"id":"b","kind":"model","family":"chat","closes":["answer"]}],
  "verification":{"owner":"owner-alice"}}"#;

const UNNEEDED_MODEL: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"unneeded","version":"0.1.0",
  "obligations":[{"id":"done","evidence":["task_result"]}],
  "steps":[{"id":"chat","kind":"model","family":"chat"},{"id":"finish","kind":"task","closes":["done"]}],
  "verification":{"owner":"owner-alice"}}"#;

/// A labelled shape: its workflow and input, whether it should succeed, and the verification
/// rounds that end with an obligation open (`verified_reject` or the final `no_progress`) it
/// should take.
struct Shape {
    name: &'static str,
    workflow: &'static str,
    input: &'static str,
    succeed: bool,
    open_rounds: usize,
}

const SET: [Shape; 10] = [
    Shape {
        name: "linear tasks, the first three close nothing",
        workflow: TASK_LINEAR,
        input: "go",
        succeed: true,
        open_rounds: 0,
    },
    Shape {
        name: "one model step that answers",
        workflow: ONE_MODEL,
        input: "go",
        succeed: true,
        open_rounds: 0,
    },
    Shape {
        name: "a model that answers in the first repair round",
        workflow: ONE_MODEL,
        input: "go [simllama:empty-unless:repair round 2]",
        succeed: true,
        open_rounds: 1,
    },
    Shape {
        name: "a model that answers in the second repair round",
        workflow: ONE_MODEL,
        input: "go [simllama:empty-unless:repair round 3]",
        succeed: true,
        open_rounds: 2,
    },
    Shape {
        name: "two models, the second late by one round",
        workflow: TWO_MODELS,
        input: "go [simllama:empty-if:lychd runner step beta]",
        succeed: true,
        open_rounds: 1,
    },
    Shape {
        name: "the first of two alternate closers answers empty",
        workflow: ALTERNATES,
        input: "go [simllama:empty-unless:step b]",
        succeed: true,
        open_rounds: 0,
    },
    Shape {
        name: "an empty answer that closes nothing",
        workflow: UNNEEDED_MODEL,
        input: "go [simllama:empty]",
        succeed: true,
        open_rounds: 0,
    },
    Shape {
        name: "a model that never answers",
        workflow: ONE_MODEL,
        input: "go [simllama:empty]",
        succeed: false,
        open_rounds: 3,
    },
    Shape {
        name: "a task closes one obligation, the model never answers",
        workflow: TASK_AND_MODEL,
        input: "go [simllama:empty]",
        succeed: false,
        open_rounds: 4,
    },
    Shape {
        name: "two models that never answer",
        workflow: TWO_MODELS,
        input: "go [simllama:empty]",
        succeed: false,
        open_rounds: 3,
    },
];

#[tokio::test]
async fn the_frozen_labelled_set_has_no_false_stop_and_no_overrun() {
    let mut s = stack().await;
    let mut ids = Vec::new();
    for (i, shape) in SET.iter().enumerate() {
        ids.push(
            s.start_doc(&format!("shape-{i}"), shape.workflow, shape.input, None)
                .await,
        );
    }
    let (mut false_stops, mut overruns, mut mismatches) = (0, 0, Vec::new());
    println!("no-progress labelled set (window 3, epsilon 1):");
    for (shape, id) in SET.iter().zip(ids) {
        let run = s.ended(id).await;
        let t = s.triggers(id).await;
        let open_rounds = t
            .iter()
            .filter(|x| *x == "verified_reject" || *x == "no_progress")
            .count();
        let stopped = run.state == "NO_PROGRESS";
        let false_stop = shape.succeed && stopped;
        // An overrun: labelled to stop, but it did not stop, or took more rounds to.
        let overrun = !shape.succeed && (!stopped || open_rounds > shape.open_rounds);
        false_stops += usize::from(false_stop);
        overruns += usize::from(overrun);
        let expected = if shape.succeed {
            "SUCCEEDED"
        } else {
            "NO_PROGRESS"
        };
        println!(
            "  {:<55} label {:<11} got {:<11} open rounds {} (labelled {})",
            shape.name, expected, run.state, open_rounds, shape.open_rounds
        );
        if run.state != expected || open_rounds != shape.open_rounds {
            mismatches.push((shape.name, run.state.clone(), t));
        }
    }
    println!(
        "false stops: {false_stops} of {}; overruns: {overruns} of {}",
        SET.iter().filter(|x| x.succeed).count(),
        SET.iter().filter(|x| !x.succeed).count()
    );
    assert_eq!(false_stops, 0, "false stops");
    assert_eq!(overruns, 0, "overruns");
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}

#[tokio::test]
async fn a_repair_round_calls_only_the_step_that_can_close_the_open_obligation() {
    let mut s = stack().await;
    let id = s
        .start_doc(
            "repair-1",
            TWO_MODELS,
            "go [simllama:empty-if:lychd runner step beta]",
            None,
        )
        .await;
    assert_eq!(s.ended(id).await.state, "SUCCEEDED");
    // Round 1 calls alpha and beta; the repair round only beta.
    assert_eq!(s.sim.chats(), 3);
    let body = s.latest(id).await;
    let steps: Vec<&str> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["step"].as_str().expect("step"))
        .collect();
    assert_eq!(steps, ["alpha", "beta", "beta"]);
    assert_eq!(body["results"][1]["evidence"], serde_json::json!([]));
    assert_eq!(
        body["results"][2]["evidence"],
        serde_json::json!(["model_answer"])
    );
    let rounds = body["evaluator_state"]["rounds"]
        .as_array()
        .expect("rounds");
    assert_eq!(rounds.len(), 1);
    assert_eq!(rounds[0]["gain"], 1, "alpha closed `first` in round 1");
    assert!(
        rounds[0]["fingerprint"]
            .as_str()
            .is_some_and(|f| f.starts_with("sha256:"))
    );
}

#[tokio::test]
async fn a_run_that_never_closes_its_obligation_stops_no_progress_after_three_rounds() {
    let mut s = stack().await;
    let id = s
        .start_doc("stuck-1", ONE_MODEL, "go [simllama:empty]", None)
        .await;
    let run = s.ended(id).await;
    assert_eq!(
        (run.state.as_str(), run.terminal_category.as_str()),
        ("NO_PROGRESS", "pathology")
    );
    let t = s.triggers(id).await;
    assert_eq!(t.last().map(String::as_str), Some("no_progress"));
    assert_eq!(t.iter().filter(|x| *x == "verified_reject").count(), 2);
    let body = s.latest(id).await;
    let rounds = body["evaluator_state"]["rounds"]
        .as_array()
        .expect("rounds");
    assert!(rounds.iter().all(|r| r["gain"] == 0), "{rounds:?}");
    // Rounds 2 and 3 repeat round 1's state: the same fingerprint (a cycle).
    assert_eq!(rounds[1]["fingerprint"], rounds[0]["fingerprint"]);
    assert_eq!(
        s.sim.chats(),
        3,
        "one call per round, only the model step re-planned"
    );
}
