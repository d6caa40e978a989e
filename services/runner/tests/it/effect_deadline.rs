//! Budgets and the caller's deadline while a run waits for a person (issue 28, Runner II),
//! over real processes (the built `lychd-ward` and `lychd-runner`, the simulated external
//! system, real PostgreSQL): a run whose effect outcome is unknown waits in
//! `HUMAN_RECONCILIATION`; when its deadline passes, or its suspended budget runs out (the wait
//! for a person is suspended time), the budget governor ends it `EFFECT_OUTCOME_UNKNOWN`
//! (category `unknown_external_outcome`) — unknown stays unknown: never success, never a plain
//! failure or timeout, never a second delivery — and the ending's transaction writes the
//! effect's `reconciliation` ledger entry (the governor, the event, the outcome still unknown).

use lychd_proto::runner::v1 as pb;
use lychd_runner::service::driver::BUDGET_GOVERNOR;
use lychd_testkit::simeffect::Fault;
use uuid::Uuid;

use crate::common::{refused, replays_clean, transitions};
use crate::effects::{Stack, stack, workflow};

/// Start a high-risk run with `timeout_seconds` and `budgets`, approve its effect, and let its
/// outcome be unknown (a response slower than the adapter waits, no status answer): the run,
/// waiting in `HUMAN_RECONCILIATION` after one delivery.
async fn unknown(
    s: &mut Stack,
    request_id: &str,
    timeout_seconds: i64,
    budgets: Option<pb::Budgets>,
) -> Uuid {
    s.sim
        .fault(Fault::Slow(std::time::Duration::from_millis(1500)));
    s.sim.break_status();
    let run = s
        .client
        .start_run(pb::StartRunRequest {
            request_id: request_id.into(),
            workflow: workflow(&s.sim, "high").into_bytes(),
            input: b"pay the invoice".to_vec(),
            budgets,
            timeout_seconds,
            parent_run_id: String::new(),
        })
        .await
        .expect("start")
        .into_inner()
        .run
        .expect("a run");
    let id = Uuid::parse_str(&run.run_id).expect("uuid");
    s.until(id, "WAIT_APPROVAL").await;
    let c = s.consent(id).await;
    s.approve(&c).await;
    s.until(id, "HUMAN_RECONCILIATION").await;
    assert_eq!(s.sim.deliveries(), 1);
    id
}

/// Run `id` ended by the budget governor's `event` out of `HUMAN_RECONCILIATION`, unknown:
/// nothing delivered again, the operator can no longer settle it, and it replays clean.
async fn ended_unknown(s: &mut Stack, id: Uuid, event: &str) {
    let run = s.until(id, "EFFECT_OUTCOME_UNKNOWN").await;
    assert_eq!(run.terminal_category, "unknown_external_outcome");
    let t = transitions(&mut s.client, &id.to_string())
        .await
        .expect("transitions");
    let last = t.last().expect("a transition");
    assert_eq!(
        (
            last.source_state.as_str(),
            last.trigger.as_str(),
            last.actor.as_str()
        ),
        ("HUMAN_RECONCILIATION", event, BUDGET_GOVERNOR)
    );
    assert!(
        t.iter().all(|t| t.target_state != "SUCCEEDED"),
        "never success"
    );
    // Never a blind retry: the one delivery made, nothing applied twice.
    assert_eq!(s.sim.deliveries(), 1);
    s.no_duplicates();
    // The operator can still inspect the effect; it can no longer be settled. Its ledger
    // ends with the governor's `reconciliation` entry: who ended it, why, still unknown.
    let i = s.inspect(id).await;
    let entry = i.ledger.last().expect("a ledger entry");
    assert_eq!(
        (entry.kind.as_str(), entry.actor.as_str()),
        ("reconciliation", BUDGET_GOVERNOR)
    );
    let detail: serde_json::Value = serde_json::from_str(&entry.detail_json).expect("json");
    assert_eq!(detail["resolution"], "unresolved");
    assert_eq!(detail["outcome"], "unknown");
    assert_eq!(detail["ended_by"], event);
    assert_eq!(detail["terminal_state"], "EFFECT_OUTCOME_UNKNOWN");
    assert_eq!(detail["version"], run.version);
    assert_eq!(
        i.ledger
            .iter()
            .filter(|e| e.kind == "reconciliation" && e.actor == BUDGET_GOVERNOR)
            .count(),
        1,
        "written once, with the ending"
    );
    refused(
        s.client
            .resolve_unknown_outcome(pb::ResolveUnknownOutcomeRequest {
                run_id: id.to_string(),
                resolution: pb::EffectResolution::Abandon as i32,
                receipt_digest: String::new(),
                evidence_digest: i.ledger_digest.clone(),
            })
            .await,
        tonic::Code::FailedPrecondition,
        "RUN_NOT_RECONCILING",
    );
    replays_clean(&mut s.client, &id.to_string()).await;
}

#[tokio::test]
async fn the_deadline_ends_a_run_waiting_for_reconciliation_unknown_not_timed_out() {
    let mut s = stack("").await;
    let id = unknown(&mut s, "deadline-unknown-1", 6, None).await;
    // Waiting for a person before the deadline: nothing ends it.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.run(id).await.state, "HUMAN_RECONCILIATION");
    ended_unknown(&mut s, id, "deadline_passed").await;
}

#[tokio::test]
async fn the_suspended_budget_ends_a_run_waiting_for_reconciliation_unknown() {
    let mut s = stack("").await;
    // Wall time is the contract's; the wait for a person is suspended time, 4 s of it.
    let budgets = pb::Budgets {
        max_suspended_seconds: 4,
        ..Default::default()
    };
    let id = unknown(&mut s, "suspended-unknown-1", 0, Some(budgets)).await;
    ended_unknown(&mut s, id, "budget_exhausted").await;
}
