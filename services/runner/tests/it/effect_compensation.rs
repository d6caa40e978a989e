//! Compensation (issue 28, Runner II) over real processes (the built `lychd-ward` and
//! `lychd-runner`, the simulated external system, real PostgreSQL): a run whose first effect
//! (declaring a compensating action) was confirmed is cancelled while it waits for its second
//! effect's approval; the step loop then compensates the first — its intent and ledger
//! entries written before the dispatch, Ward's adapter permission asked right before it, its
//! own idempotency key — once. Ward's refusal sends nothing; an outcome nobody can tell is
//! settled `unknown`, never `compensated`. Zero duplicated effects at the external system.

use lychd_proto::ward::v1 as wpb;
use lychd_testkit::simeffect::{Fault, SimEffect};
use uuid::Uuid;

use crate::common::{cancel, eventually};
use crate::effects::{Stack, stack};

/// A task, a high-risk payment declaring its refund as compensation, and a high-risk notice;
/// `verification` declared.
fn workflow(sim: &SimEffect) -> String {
    format!(
        r#"{{"schema":"lychd.runner.workflow/v1","name":"pay-notify","version":"0.1.0",
  "obligations":[{{"id":"paid","evidence":["effect_receipt"]}},{{"id":"told","evidence":["effect_receipt"]}}],
  "steps":[{{"id":"prepare","kind":"task"}},
           {{"id":"pay","kind":"effect","adapter":"http","destination":"{}","risk":"high",
             "action":{{"amount":5,"to":"acct-1"}},"closes":["paid"],
             "compensation":{{"destination":"{}","action":{{"refund":5,"to":"acct-1"}}}}}},
           {{"id":"notify","kind":"effect","adapter":"http","destination":"{}","risk":"high",
             "action":{{"notice":"paid","to":"acct-1"}},"closes":["told"]}}],
  "verification":{{"owner":"owner-alice"}}}}"#,
        sim.url("/orders"),
        sim.url("/refunds"),
        sim.url("/notices")
    )
}

/// Start the run, approve its payment, and wait until the notice's approval is pending (the
/// payment confirmed, applied once): the run.
async fn paid_then_waiting(s: &mut Stack, request_id: &str) -> Uuid {
    let run = s
        .client
        .start_run(lychd_proto::runner::v1::StartRunRequest {
            request_id: request_id.into(),
            workflow: workflow(&s.sim).into_bytes(),
            input: b"pay and notify".to_vec(),
            budgets: None,
            timeout_seconds: 0,
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
    let client = s.client.clone();
    eventually("the notice waits for its approval", || {
        let mut c = client.clone();
        async move {
            c.inspect_effect(lychd_proto::runner::v1::InspectEffectRequest {
                run_id: id.to_string(),
            })
            .await
            .map(|r| {
                let r = r.into_inner();
                r.state == "WAIT_APPROVAL" && r.effect_sequence == 2 && !r.consent_id.is_empty()
            })
            .unwrap_or(false)
        }
    })
    .await;
    assert_eq!(s.sim.applied(), 1, "the payment applied once");
    id
}

/// Run `id`'s compensation of its first effect once settled: (outcome, attempts, key).
async fn settled(s: &Stack, id: Uuid) -> (String, i32, String) {
    let db = &s.sandbox.db;
    let mut out = None;
    let t = std::time::Instant::now();
    while out.is_none() {
        let mut conn = db.superuser().await;
        out = sqlx::query_as::<_, (String, i32, String)>(
            "SELECT outcome, attempts, idempotency_key FROM runner.effect_compensations \
              WHERE run_id = $1 AND effect_sequence = 1 AND outcome <> 'pending'",
        )
        .bind(id)
        .fetch_optional(&mut conn)
        .await
        .expect("read");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "the compensation settles"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    out.expect("settled")
}

/// The `compensation` ledger entries of run `id`'s first effect: (phase, outcome) each.
async fn entries(s: &Stack, id: Uuid) -> Vec<(String, String)> {
    let mut conn = s.sandbox.db.superuser().await;
    sqlx::query_as::<_, (String, String)>(
        "SELECT detail->>'phase', coalesce(detail->>'outcome', '') FROM runner.effect_ledger \
          WHERE run_id = $1 AND effect_sequence = 1 AND kind = 'compensation' ORDER BY seq",
    )
    .bind(id)
    .fetch_all(&mut conn)
    .await
    .expect("ledger")
}

fn phases(e: &[(String, String)]) -> Vec<(&str, &str)> {
    e.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect()
}

#[tokio::test]
async fn a_cancel_after_a_confirmed_effect_compensates_it_once_through_the_outbox_path() {
    let mut s = stack("").await;
    let id = paid_then_waiting(&mut s, "compensate-1").await;
    let run = cancel(&mut s.client, &id.to_string())
        .await
        .expect("cancel");
    assert_eq!(run.state, "CANCELED");
    let (outcome, attempts, key) = settled(&s, id).await;
    assert_eq!((outcome.as_str(), attempts), ("compensated", 1));
    assert!(s.sim.receipt(&key).is_some(), "applied under its own key");
    assert_eq!(
        phases(&entries(&s, id).await),
        [("intent", ""), ("attempt", ""), ("outcome", "compensated")]
    );
    // The payment and its refund, each once; the notice never; nothing applied twice.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(s.sim.applied(), 2);
    assert_eq!(s.sim.deliveries(), 2);
    s.no_duplicates();
    // The notice's consent was released with the cancel; the run stays canceled.
    assert_eq!(
        s.consent(id).await.state,
        wpb::ConsentState::Cancelled as i32
    );
    assert_eq!(s.run(id).await.state, "CANCELED");
}

#[tokio::test]
async fn a_compensation_ward_no_longer_permits_is_denied_and_sends_nothing() {
    let mut s = stack("").await;
    let id = paid_then_waiting(&mut s, "compensate-2").await;
    // Ward withdraws the Runner's adapter permission before the compensation.
    let runner = s
        .sandbox
        .admin()
        .ensure_office_principal("runner")
        .await
        .expect("runner principal");
    let live = s
        .ward
        .list_assignments(wpb::ListAssignmentsRequest {
            principal_id: runner,
            page: None,
        })
        .await
        .expect("assignments")
        .into_inner()
        .assignments;
    for a in live.iter().filter(|a| a.action == "runner:effect_http") {
        s.ward
            .unassign(wpb::UnassignRequest {
                assignment_id: a.id.clone(),
            })
            .await
            .expect("unassign");
    }
    cancel(&mut s.client, &id.to_string())
        .await
        .expect("cancel");
    let (outcome, attempts, _) = settled(&s, id).await;
    assert_eq!((outcome.as_str(), attempts), ("denied", 0));
    assert_eq!(
        phases(&entries(&s, id).await),
        [("intent", ""), ("outcome", "denied")]
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.sim.deliveries(), 1, "only the payment was ever sent");
    s.no_duplicates();
}

#[tokio::test]
async fn a_compensation_whose_outcome_nobody_can_tell_is_unknown_never_compensated() {
    let mut s = stack("").await;
    let id = paid_then_waiting(&mut s, "compensate-3").await;
    // The refund is applied but answered too late, and no status can be had.
    s.sim
        .fault(Fault::Slow(std::time::Duration::from_millis(1500)));
    s.sim.break_status();
    cancel(&mut s.client, &id.to_string())
        .await
        .expect("cancel");
    let (outcome, attempts, _) = settled(&s, id).await;
    assert_eq!((outcome.as_str(), attempts), ("unknown", 1));
    let e = entries(&s, id).await;
    assert_eq!(
        phases(&e),
        [("intent", ""), ("attempt", ""), ("outcome", "unknown")]
    );
    assert!(e.iter().all(|(_, o)| o != "compensated"));
    // Settled unknown: never delivered again.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(s.sim.deliveries(), 2);
    s.no_duplicates();
    assert_eq!(settled(&s, id).await.0, "unknown");
}

#[tokio::test]
async fn a_recovery_review_that_fails_a_run_after_a_confirmed_effect_compensates_it() {
    use lychd_proto::runner::v1 as pb;
    let mut s = stack("").await;
    let id = paid_then_waiting(&mut s, "compensate-4").await;
    // The latest checkpoint is corrupted while the notice waits: the run is quarantined.
    let version = i64::try_from(s.run(id).await.version).expect("version");
    crate::common::corrupt_checkpoint(&mut s.sandbox.db.superuser().await, id, version).await;
    s.until(id, "QUARANTINED").await;
    s.sandbox
        .admin()
        .ensure_assignment(
            &s.sandbox.operator_id,
            "runner:review",
            "run:*",
            "runner",
            "review",
        )
        .await
        .expect("grant");
    let point = s
        .client
        .inspect_checkpoint(pb::InspectCheckpointRequest {
            run_id: id.to_string(),
            version: 0,
        })
        .await
        .expect("inspect")
        .into_inner();
    s.client
        .review_quarantine(pb::ReviewQuarantineRequest {
            run_id: id.to_string(),
            decision: pb::ReviewDecision::Fail as i32,
            recovery_checksum: point.recovery_checksum,
            rationale: "the run cannot be trusted any more".into(),
        })
        .await
        .expect("review");
    assert_eq!(s.run(id).await.state, "FAILED");
    let (outcome, attempts, _) = settled(&s, id).await;
    assert_eq!((outcome.as_str(), attempts), ("compensated", 1));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.sim.applied(), 2);
    s.no_duplicates();
    // The notice's consent, pending when the run was quarantined, is released too.
    let consent_id = s.inspect(id).await.consent_id;
    crate::effect_endings::until_cancelled(&s.ward, &consent_id).await;
}
