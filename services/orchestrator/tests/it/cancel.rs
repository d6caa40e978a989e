//! `CancelTransition`: before any effect it restores nothing because nothing happened
//! (`CANCELLED_RESTORED`, admission reopened where it was closed); after the actuator was
//! invoked it waits for settlement and applies the exact inverse (`CANCELLED_RESTORED` only on
//! a proved prior world, else contained); a running compensation is never abandoned; only the
//! owner's caller may cancel.

use std::time::Duration;

use lychd_proto::dispatcher::v1 as dpb;
use lychd_proto::orchestrator::v1 as pb;
use lychd_proto::orchestrator::v1::orchestrator_client::OrchestratorClient;
use lychd_runtime::Office;
use lychd_testkit::simllama::UnitFaults;
use tonic::Code;

use crate::common::{Client, eventually, next, reason, stack, three};

/// Until the next event of `phase` for `key`.
async fn until(
    events: &mut tonic::Streaming<pb::TransitionEvent>,
    key: &str,
    phase: pb::TransitionPhase,
) -> pb::TransitionEvent {
    loop {
        let e = next(events).await;
        if e.phase() == phase && e.capability_key == key {
            return e;
        }
    }
}

/// Every phase of transition `id` until a final one.
async fn phases_of(
    events: &mut tonic::Streaming<pb::TransitionEvent>,
    id: &str,
) -> Vec<pb::TransitionPhase> {
    use pb::TransitionPhase as P;
    let mut phases = Vec::new();
    loop {
        let e = next(events).await;
        if e.transition_id != id {
            continue;
        }
        phases.push(e.phase());
        if matches!(
            e.phase(),
            P::Completed
                | P::DeclinedNoEffect
                | P::FailedRestored
                | P::CancelledRestored
                | P::ContainedUncertain
                | P::Failed
        ) {
            return phases;
        }
    }
}

fn slow_start(ms: u64) -> UnitFaults {
    UnitFaults {
        start_latency: Duration::from_millis(ms),
        ..UnitFaults::default()
    }
}

async fn cancel(c: &Client, id: &str) -> Result<pb::TransitionOutcome, tonic::Status> {
    c.clone()
        .cancel_transition(pb::CancelTransitionRequest {
            wait_ms: crate::common::WAIT,
            transition_id: id.into(),
        })
        .await
        .map(|r| r.into_inner().outcome.expect("an outcome"))
}

fn request(
    c: &Client,
    key: &'static str,
    priority: u32,
) -> tokio::task::JoinHandle<Result<tonic::Response<pb::RequestTransitionResponse>, tonic::Status>>
{
    let c = c.clone();
    tokio::spawn(async move {
        c.clone()
            .request_transition(pb::RequestTransitionRequest {
                request_id: crate::common::rid(),
                wait_ms: crate::common::WAIT,
                capability_key: key.into(),
                priority,
                admission_timeout_s: None,
            })
            .await
    })
}

async fn outcome(
    t: tokio::task::JoinHandle<
        Result<tonic::Response<pb::RequestTransitionResponse>, tonic::Status>,
    >,
) -> pb::TransitionOutcome {
    t.await
        .expect("task")
        .expect("answered")
        .into_inner()
        .outcome
        .expect("outcome")
}

#[tokio::test]
async fn cancelling_a_waiter_in_the_arbiter_settles_cancelled_restored_with_no_effect() {
    let s = stack(&three(true)).await;
    // c's slow start holds the section, so a's transition waits in the arbiter.
    s.host.set_faults("c", slow_start(1000)).await;
    let mut events = s.watch().await;
    let holder = request(&s.client, "c:chat:m", 90);
    until(&mut events, "c:chat:m", pb::TransitionPhase::Actuating).await;
    let waiting = request(&s.client, "a:chat:m", 50);
    let id = until(&mut events, "a:chat:m", pb::TransitionPhase::Arbitrating)
        .await
        .transition_id;
    let o = cancel(&s.client, &id).await.expect("cancelled");
    assert_eq!(o.phase(), pb::TransitionPhase::CancelledRestored, "{o:?}");
    assert_eq!(
        (o.detail.as_str(), o.transition_id.as_str()),
        ("CANCELLED", id.as_str())
    );
    // The requester hears the same outcome.
    let heard = outcome(waiting).await;
    assert_eq!(heard.phase(), pb::TransitionPhase::CancelledRestored);
    assert_eq!(
        outcome(holder).await.phase(),
        pb::TransitionPhase::Completed
    );
    assert_eq!(s.host.counts("a").await, (0, 0), "nothing reached the host");
    assert_eq!(s.open_closures("a").await, 0);
    // Settled: a second cancellation finds nothing in flight.
    let e = cancel(&s.client, &id).await.expect_err("settled");
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (Code::NotFound, "TRANSITION_NOT_RUNNING")
    );
}

#[tokio::test]
async fn cancelling_while_draining_reopens_admission_with_no_effect() {
    let s = stack(&three(true)).await;
    // A live lease on b keeps the affected set from draining.
    let lease = s
        .dispatcher
        .clone()
        .lease(dpb::LeaseRequest {
            demand: Some(dpb::Demand {
                capability_key: "b:chat:m".into(),
                ..Default::default()
            }),
            holder: "test".into(),
            ttl_seconds: 60,
            ..Default::default()
        })
        .await
        .expect("lease")
        .into_inner();
    assert!(matches!(
        lease.outcome,
        Some(dpb::lease_response::Outcome::Granted(_))
    ));
    let mut events = s.watch().await;
    let pending = request(&s.client, "a:chat:m", 50);
    let id = until(&mut events, "a:chat:m", pb::TransitionPhase::Draining)
        .await
        .transition_id;
    // The phase is announced as the close is asked for: wait until it landed.
    eventually("admission closed", || async {
        s.open_closures("b").await > 0
    })
    .await;
    let o = cancel(&s.client, &id).await.expect("cancelled");
    assert_eq!(o.phase(), pb::TransitionPhase::CancelledRestored, "{o:?}");
    assert_eq!(
        outcome(pending).await.phase(),
        pb::TransitionPhase::CancelledRestored
    );
    assert_eq!(
        s.open_closures("a").await + s.open_closures("b").await,
        0,
        "reopened"
    );
    assert!(s.host.ready("b").await && !s.host.running("a").await);
    assert_eq!(s.host.counts("b").await, (0, 0), "nothing reached the host");
}

#[tokio::test]
async fn cancelling_after_the_actuator_was_invoked_applies_the_inverse_and_proves_the_prior_world()
{
    let s = stack(&three(true)).await;
    s.host.set_faults("a", slow_start(800)).await;
    let mut events = s.watch().await;
    let pending = request(&s.client, "a:chat:m", 50);
    let id = until(&mut events, "a:chat:m", pb::TransitionPhase::Actuating)
        .await
        .transition_id;
    // Cancelled while the host runs the forward change: it settles, then the inverse runs.
    let o = cancel(&s.client, &id).await.expect("cancelled");
    assert_eq!(o.phase(), pb::TransitionPhase::CancelledRestored, "{o:?}");
    assert_eq!(o.detail, "CANCELLED");
    assert_eq!(
        outcome(pending).await.phase(),
        pb::TransitionPhase::CancelledRestored
    );
    assert!(
        s.host.ready("b").await && !s.host.running("a").await,
        "the exact prior world"
    );
    assert_eq!(
        s.host.counts("a").await,
        (1, 1),
        "started, then stopped by the inverse"
    );
    assert_eq!(
        s.host.counts("b").await,
        (1, 1),
        "stopped, then started by the inverse"
    );
    assert_eq!(s.open_closures("a").await + s.open_closures("b").await, 0);
    assert!(s.containments().await.is_empty());
    let rest = phases_of(&mut events, &id).await;
    assert_eq!(
        rest,
        [
            pb::TransitionPhase::Verifying,
            pb::TransitionPhase::Compensating,
            pb::TransitionPhase::CancelledRestored,
        ]
    );
}

#[tokio::test]
async fn a_cancellation_whose_inverse_cannot_restore_is_contained() {
    let s = stack(&three(true)).await;
    s.host.set_faults("a", slow_start(800)).await;
    // b stops for the forward change but can never start again.
    s.host
        .set_faults(
            "b",
            UnitFaults {
                fail_start: true,
                ..UnitFaults::default()
            },
        )
        .await;
    let mut events = s.watch().await;
    let pending = request(&s.client, "a:chat:m", 50);
    let id = until(&mut events, "a:chat:m", pb::TransitionPhase::Actuating)
        .await
        .transition_id;
    let o = cancel(&s.client, &id).await.expect("answered");
    assert_eq!(o.phase(), pb::TransitionPhase::ContainedUncertain, "{o:?}");
    assert_eq!(o.detail, "CANCELLED_NOT_RESTORED");
    assert_eq!(
        outcome(pending).await.phase(),
        pb::TransitionPhase::ContainedUncertain
    );
    let c = s.containments().await;
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].cause, "CANCELLED_NOT_RESTORED");
    assert!(
        !c[0].runtime_guard_armed,
        "a hard swap arms no runtime guard"
    );
    assert!(s.open_closures("b").await > 0, "admission stays closed");
}

#[tokio::test]
async fn a_running_compensation_is_never_abandoned_and_keeps_its_classification() {
    let s = stack(&three(true)).await;
    // a never becomes ready: verification fails at the deadline, compensation follows.
    s.host
        .set_faults(
            "a",
            UnitFaults {
                partial_start: true,
                ..UnitFaults::default()
            },
        )
        .await;
    // b's restart is slow, so the compensation is still running when cancelled.
    s.host.set_faults("b", slow_start(600)).await;
    let mut events = s.watch().await;
    let pending = request(&s.client, "a:chat:m", 50);
    let id = until(&mut events, "a:chat:m", pb::TransitionPhase::Compensating)
        .await
        .transition_id;
    let (first, second) = tokio::join!(cancel(&s.client, &id), cancel(&s.client, &id));
    for o in [first.expect("answered"), second.expect("answered")] {
        assert_eq!(o.phase(), pb::TransitionPhase::FailedRestored, "{o:?}");
        assert_eq!(
            o.detail, "VERIFICATION_TIMEOUT",
            "the failure that started it"
        );
    }
    assert_eq!(
        outcome(pending).await.phase(),
        pb::TransitionPhase::FailedRestored
    );
    assert!(s.host.ready("b").await && !s.host.running("a").await);
    assert_eq!(s.open_closures("a").await + s.open_closures("b").await, 0);
}

#[tokio::test]
async fn only_the_owner_cancels_and_a_followers_cancellation_never_touches_the_owner() {
    let s = stack(&three(true)).await;
    // A second requester, allowed to transition and to cancel.
    let mut admin = s.sandbox.admin();
    let other = admin
        .ensure_principal(lychd_proto::ward::v1::PrincipalKind::Human, "follower")
        .await
        .expect("enroll");
    for (action, object, purpose) in [
        ("orchestrator:transition", "capability:*", "transition"),
        ("orchestrator:cancel", "transition:*", "cancel"),
    ] {
        admin
            .ensure_assignment(&other, action, object, "orchestrator", purpose)
            .await
            .expect("assign");
    }
    let credential = admin.issue_standing(&other).await.expect("credential");
    let ward = s.sandbox.office(Office::Ward).endpoint();
    let session = lychd_auth::admin::exchange(
        lychd_runtime::client::channel(&ward).expect("channel"),
        &credential,
        0,
        &["orchestrator"],
    )
    .await
    .expect("session");
    let follower_client: Client = OrchestratorClient::new(lychd_testkit::channel_with(
        &s.sandbox.office(Office::Orchestrator).endpoint(),
        &session.token,
    ));
    s.host.set_faults("c", slow_start(1200)).await;
    let mut events = s.watch().await;
    let holder = request(&s.client, "c:chat:m", 90);
    until(&mut events, "c:chat:m", pb::TransitionPhase::Actuating).await;
    let owner = request(&s.client, "a:chat:m", 50);
    let id = until(&mut events, "a:chat:m", pb::TransitionPhase::Arbitrating)
        .await
        .transition_id;
    // The follower joins the owner's cohort, then cancels: refused, and it hangs up.
    let follower = request(&follower_client, "a:chat:m", 50);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let e = cancel(&follower_client, &id)
        .await
        .expect_err("not its own");
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (Code::PermissionDenied, "TRANSITION_NOT_OWNED")
    );
    follower.abort();
    let o = outcome(owner).await;
    assert_eq!(o.phase(), pb::TransitionPhase::Completed, "{o:?}");
    assert_eq!(o.transition_id, id);
    assert!(s.host.ready("a").await);
    holder.await.expect("task").expect("holder");
    // Bad and unknown ids.
    let e = cancel(&s.client, "not-an-id").await.expect_err("malformed");
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (Code::InvalidArgument, "TRANSITION_ID_MALFORMED")
    );
    let e = cancel(&s.client, &"0".repeat(32))
        .await
        .expect_err("unknown");
    assert_eq!(reason(&e), "TRANSITION_NOT_RUNNING");
}
