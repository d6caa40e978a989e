//! Calibration of the independent verifier (loop-contract v1 `verification.calibration`:
//! "freeze held-out labeled cases and report false accepts, false rejects, and uncertainty"):
//! a frozen labelled set of run shapes through real processes (Ward, HelmLoop, Dispatcher,
//! Runner, the simulated runtime), each decided by what its owner and its observer do. A run
//! labelled to succeed that ends `FAILED` is a false reject; one labelled to reject or
//! ambiguous that ends `SUCCEEDED` a false accept (none may: asserted); a run still held for
//! review when the set settles is uncertain.

use std::time::Duration;

use uuid::Uuid;

use crate::verification::{OWNER, vstack, workflow};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Succeed,
    Reject,
    Ambiguous,
}

/// What happens to a run of the shape once it is held.
#[derive(Debug, Clone, Copy)]
enum Act {
    /// The owner approves the records and the promotion; then the observer's evidence, if any
    /// (`(status, conclusion)` per record).
    Approve(&'static [(&'static str, &'static str)]),
    /// The owner approves the records and denies the promotion.
    DenyPromotion,
    /// The owner denies the records.
    DenyRecords,
    /// The owner approves the records and never decides the promotion.
    PromotionSilent,
    /// Nobody decides anything.
    Silent,
}

/// The frozen set: (name, label, observed, task-only workflow, what happens).
const SHAPES: [(&str, Label, bool, bool, Act); 10] = [
    (
        "plain-approved",
        Label::Succeed,
        false,
        false,
        Act::Approve(&[]),
    ),
    (
        "task-only-approved",
        Label::Succeed,
        false,
        true,
        Act::Approve(&[]),
    ),
    (
        "observed-met",
        Label::Succeed,
        true,
        false,
        Act::Approve(&[("supports", "MET")]),
    ),
    (
        "observed-not-met",
        Label::Reject,
        true,
        false,
        Act::Approve(&[("contradicts", "NOT_MET")]),
    ),
    (
        "promotion-denied",
        Label::Reject,
        false,
        false,
        Act::DenyPromotion,
    ),
    (
        "records-denied",
        Label::Reject,
        false,
        false,
        Act::DenyRecords,
    ),
    (
        "observed-mixed",
        Label::Ambiguous,
        true,
        false,
        Act::Approve(&[("supports", "MET"), ("contradicts", "NOT_MET")]),
    ),
    (
        "observed-unknown",
        Label::Ambiguous,
        true,
        false,
        Act::Approve(&[("unknown", "UNKNOWN")]),
    ),
    ("owner-silent", Label::Ambiguous, false, false, Act::Silent),
    (
        "promotion-silent",
        Label::Ambiguous,
        false,
        false,
        Act::PromotionSilent,
    ),
];

fn task_only() -> String {
    format!(
        r#"{{"schema":"lychd.runner.workflow/v1","name":"tally","version":"0.1.0",
  "obligations":[{{"id":"done","evidence":["task_result"]}}],
  "steps":[{{"id":"count","kind":"task","closes":["done"]}}],
  "verification":{{"owner":"{OWNER}"}}}}"#
    )
}

#[tokio::test]
async fn the_frozen_labelled_set_has_no_false_accept() {
    let mut s = vstack().await;
    let mut runs: Vec<(Uuid, Label, &str)> = Vec::new();
    for (name, label, observed, task, _) in SHAPES {
        let doc = if task {
            task_only()
        } else {
            workflow(observed)
        };
        let id = s.start(&format!("calibration-{name}"), &doc).await;
        runs.push((id, label, name));
    }
    for ((id, _, _), (_, _, _, _, act)) in runs.iter().zip(SHAPES) {
        let id = *id;
        match act {
            Act::Approve(observations) => {
                s.approve(id).await;
                for (i, (status, conclusion)) in observations.iter().enumerate() {
                    s.observe(id, &format!("observed-{id}.{i}"), status, conclusion)
                        .await;
                }
            }
            Act::DenyPromotion => {
                s.decide(id, "helmloop.issue", true).await;
                s.decide(id, "helmloop.promote", false).await;
            }
            Act::DenyRecords => s.decide(id, "helmloop.issue", false).await,
            Act::PromotionSilent => {
                s.decide(id, "helmloop.issue", true).await;
                s.pending(id, "helmloop.promote").await;
            }
            Act::Silent => {
                s.pending(id, "helmloop.issue").await;
            }
        }
    }
    // Settle: every run ends, or is still held for review 20 s after the last act (more than
    // a hundred rechecks at 150 ms).
    let settle = std::time::Instant::now();
    let mut outcomes = Vec::new();
    loop {
        outcomes.clear();
        for (id, _, _) in &runs {
            outcomes.push(s.run(*id).await);
        }
        let ended = outcomes.iter().all(|r| !r.terminal_category.is_empty());
        if ended || settle.elapsed() > Duration::from_secs(20) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (mut false_accepts, mut false_rejects) = (0, 0);
    let mut uncertain = Vec::new();
    println!("{:<20} {:<10} {:<18} reasons", "shape", "label", "outcome");
    for ((_, label, name), r) in runs.iter().zip(&outcomes) {
        let reasons = r
            .verification
            .as_ref()
            .map(|v| format!("{} {:?}", v.disposition, v.reasons))
            .unwrap_or_default();
        println!(
            "{name:<20} {:<10} {:<18} {reasons}",
            format!("{label:?}"),
            r.state
        );
        match (label, r.state.as_str()) {
            (Label::Reject | Label::Ambiguous, "SUCCEEDED") => false_accepts += 1,
            (Label::Succeed, "FAILED") => false_rejects += 1,
            (_, "WAIT_VERIFICATION" | "VERIFY") => uncertain.push(*name),
            _ => {}
        }
    }
    let count = |l: Label| runs.iter().filter(|(_, x, _)| *x == l).count();
    println!(
        "false accepts: {false_accepts} of {} (labelled reject or ambiguous); false rejects: {false_rejects} of {} (labelled succeed); uncertain (held for review): {} of {} {uncertain:?}",
        count(Label::Reject) + count(Label::Ambiguous),
        count(Label::Succeed),
        uncertain.len(),
        runs.len()
    );
    assert_eq!(false_accepts, 0, "no run succeeds without its PASS");
    let ids: Vec<Uuid> = runs.iter().map(|(id, _, _)| *id).collect();
    let succeeded = s.success_only_on_pass(&ids).await;
    println!("succeeded: {succeeded}, each on a stored HelmLoop PASS");
    s.sandbox.stop().await;
}
