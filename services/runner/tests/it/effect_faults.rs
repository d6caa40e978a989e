//! The contract's effect fault tests (`verification.fault_tests`) with real processes: the
//! Runner ends itself as kill -9 would at an injected point (`[office] fault_points`, test
//! only) and is started again without it; a revoked approval; a split-brain runner during an
//! effect. Each asserts zero duplicated effects at the simulated external system and that the
//! run succeeds only with its receipt.

use lychd_proto::ward::v1 as wpb;
use lychd_runtime::Office;
use nix::sys::signal::Signal;

use crate::common::eventually;
use crate::effects::stack;

async fn crash_at(point: &str) -> (crate::effects::Stack, uuid::Uuid) {
    let mut s = stack(&format!("fault_points = [\"{point}\"]")).await;
    let id = s.approved(&format!("crash-{point}")).await;
    s.restart_without_faults().await;
    let run = s.until(id, "SUCCEEDED").await;
    assert_eq!(run.terminal_category, "success");
    assert_eq!(s.sim.applied(), 1, "applied exactly once");
    s.no_duplicates();
    (s, id)
}

#[tokio::test]
async fn a_crash_after_consuming_the_approval_neither_loses_nor_repeats_it() {
    let (mut s, id) = crash_at("after_consume").await;
    assert_eq!(s.sim.deliveries(), 1);
    let kinds = s.ledger(id).await;
    assert_eq!(
        kinds
            .iter()
            .filter(|k| *k == "approval_consumption")
            .count(),
        1,
        "{kinds:?}"
    );
}

#[tokio::test]
async fn a_crash_before_the_intent_sends_nothing_until_the_intent_is_committed() {
    let (mut s, id) = crash_at("before_intent").await;
    assert_eq!(s.sim.deliveries(), 1);
    assert_eq!(
        s.ledger(id).await.iter().filter(|k| *k == "intent").count(),
        1
    );
}

#[tokio::test]
async fn a_crash_after_the_intent_delivers_once_after_resume() {
    let (s, _) = crash_at("after_intent").await;
    assert_eq!(s.sim.deliveries(), 1);
    assert_eq!(
        s.sim.status_queries(),
        0,
        "the outbox was never claimed: sent once"
    );
}

#[tokio::test]
async fn a_crash_after_the_external_response_is_reconciled_never_delivered_blind() {
    let (mut s, id) = crash_at("after_response").await;
    assert_eq!(s.sim.deliveries(), 1, "no blind redelivery");
    assert!(s.sim.status_queries() >= 1, "reconciled by a status query");
    assert!(s.ledger(id).await.iter().any(|k| k == "reconciliation"));
}

#[tokio::test]
async fn a_revoked_approval_is_never_consumed_and_a_new_exact_hash_approval_is_asked() {
    let mut s = stack("").await;
    let id = s.start("revoke-1", "high").await;
    s.until(id, "WAIT_APPROVAL").await;
    let first = s.consent(id).await;
    // The runner is stopped while the operator approves and then revokes.
    let runner = s.sandbox.office(Office::Runner);
    runner.signal(Signal::SIGSTOP);
    s.approve(&first).await;
    s.ward
        .revoke_consent(wpb::RevokeConsentRequest {
            consent_id: first.consent_id.clone(),
        })
        .await
        .expect("revoke");
    s.sandbox.office(Office::Runner).signal(Signal::SIGCONT);
    // Back to PLAN_EFFECTS and proposed again: a new consent (a new nonce).
    let client = s.client.clone();
    let old = first.consent_id.clone();
    eventually("a new approval is asked", || {
        let mut c = client.clone();
        let old = old.clone();
        async move {
            c.inspect_effect(lychd_proto::runner::v1::InspectEffectRequest {
                run_id: id.to_string(),
            })
            .await
            .map(|r| {
                let r = r.into_inner();
                r.state == "WAIT_APPROVAL" && !r.consent_id.is_empty() && r.consent_id != old
            })
            .unwrap_or(false)
        }
    })
    .await;
    assert_eq!(
        s.sim.deliveries(),
        0,
        "nothing delivered on a revoked approval"
    );
    let second = s.consent(id).await;
    assert_ne!(second.binding_digest, first.binding_digest);
    assert_eq!(
        second.binding.as_ref().map(|b| &b.action_hash),
        first.binding.as_ref().map(|b| &b.action_hash),
        "the same exact action"
    );
    s.approve(&second).await;
    s.until(id, "SUCCEEDED").await;
    let first = s
        .ward
        .get_consent(wpb::GetConsentRequest {
            consent_id: first.consent_id,
        })
        .await
        .expect("get")
        .into_inner()
        .consent
        .expect("consent");
    assert!(first.consumed_at.is_none() && first.revoked_at.is_some());
    assert_eq!(s.sim.applied(), 1);
    s.no_duplicates();
}

#[tokio::test]
async fn a_split_brain_runner_during_an_effect_applies_it_once() {
    let mut s = stack("").await;
    let other = s.sandbox.start_another(Office::Runner).await;
    let id = s.start("split-1", "high").await;
    s.until(id, "WAIT_APPROVAL").await;
    let c = s.consent(id).await;
    // One runner freezes (it may hold the run); the other takes over once its lease expires.
    s.sandbox.office(Office::Runner).signal(Signal::SIGSTOP);
    s.approve(&c).await;
    let mut via_other = lychd_proto::runner::v1::runner_client::RunnerClient::new(
        lychd_testkit::channel_with(&other.endpoint(), &s.sandbox.token),
    );
    eventually("the other runner finishes the run", || {
        let mut c = via_other.clone();
        async move {
            c.get_run(lychd_proto::runner::v1::GetRunRequest {
                run_id: id.to_string(),
            })
            .await
            .map(|r| r.into_inner().run.expect("run").state == "SUCCEEDED")
            .unwrap_or(false)
        }
    })
    .await;
    // The frozen runner wakes with a stale generation: fenced, it sends nothing.
    s.sandbox.office(Office::Runner).signal(Signal::SIGCONT);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let run = via_other
        .get_run(lychd_proto::runner::v1::GetRunRequest {
            run_id: id.to_string(),
        })
        .await
        .expect("get")
        .into_inner()
        .run
        .expect("run");
    assert_eq!(run.state, "SUCCEEDED");
    assert_eq!((s.sim.applied(), s.sim.deliveries()), (1, 1));
    s.no_duplicates();
    drop(other);
}
