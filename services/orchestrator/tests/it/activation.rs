//! Runtime-native soft activation: an ACTIVATABLE target (a started router-mode runtime whose
//! model is unloaded) is activated through the actuator after a durable runtime-guard record
//! is armed; only an observed WARM target clears it. A target that does not become WARM ends
//! `FAILED` (contained, guard armed); a restart that finds an armed guard contains; recovery
//! needs the target observed stopped, never mere readiness.

use std::time::{Duration, Instant};

use lychd_proto::orchestrator::v1 as pb;
use lychd_runtime::Office;
use lychd_testkit::simllama::UnitFaults;
use nix::sys::signal::Signal;

use crate::common::{Decl, Stack, eventually, next, reason, stack};

/// One dynamic dedicated animator `a`, running, its model unloaded (ACTIVATABLE).
async fn activatable() -> Stack {
    let s = stack(&[Decl {
        name: "a",
        extra: "dedicated = true\ndynamic = true",
        serving: true,
    }])
    .await;
    s.host.unload("a").await;
    s
}

async fn until(
    events: &mut tonic::Streaming<pb::TransitionEvent>,
    phase: pb::TransitionPhase,
) -> pb::TransitionEvent {
    loop {
        let e = next(events).await;
        if e.phase() == phase {
            return e;
        }
    }
}

async fn recover(s: &Stack, id: i64) -> Result<pb::RecoverContainmentResponse, tonic::Status> {
    s.client
        .clone()
        .recover_containment(pb::RecoverContainmentRequest { containment_id: id })
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn an_activatable_target_is_activated_and_its_guard_cleared_once_warm() {
    let mut s = activatable().await;
    let preview = s
        .client
        .clone()
        .preview_plan(pb::PreviewPlanRequest {
            capability_key: "a:chat:m".into(),
        })
        .await
        .expect("preview")
        .into_inner();
    assert!(
        matches!(preview.outcome, Some(pb::preview_plan_response::Outcome::Plan(ref p)) if p.action() == pb::PlanAction::SoftSwap),
        "{preview:?}"
    );
    s.host
        .set_faults(
            "a",
            UnitFaults {
                activate_latency: Duration::from_millis(200),
                ..UnitFaults::default()
            },
        )
        .await;
    let mut events = s.watch().await;
    let o = s.transition("a:chat:m", 0, None).await.expect("answered");
    assert_eq!(o.phase(), pb::TransitionPhase::Completed, "{o:?}");
    assert_eq!(
        o.plan.as_ref().expect("plan").action(),
        pb::PlanAction::SoftSwap
    );
    assert_eq!(s.host.activations("a").await, 1);
    assert_eq!(s.host.counts("a").await, (0, 0), "no start or stop");
    assert!(s.host.ready("a").await);
    assert_eq!(s.open_closures("a").await, 0, "reopened");
    let actuating = until(&mut events, pb::TransitionPhase::Actuating).await;
    assert_eq!(actuating.detail, "ACTIVATION");
    until(&mut events, pb::TransitionPhase::Verifying).await;
    until(&mut events, pb::TransitionPhase::Completed).await;
    drop(events);
    // The guard was cleared: a restart finds nothing to contain.
    s.sandbox
        .restart(Office::Orchestrator, Signal::SIGTERM)
        .await;
    s.reconnect();
    assert!(s.containments().await.is_empty());
}

#[tokio::test]
async fn a_failed_activation_ends_failed_contained_with_its_guard_armed() {
    let mut s = activatable().await;
    s.host
        .set_faults(
            "a",
            UnitFaults {
                fail_activate: true,
                ..UnitFaults::default()
            },
        )
        .await;
    let mut events = s.watch().await;
    let o = s.transition("a:chat:m", 0, None).await.expect("answered");
    assert_eq!(o.phase(), pb::TransitionPhase::Failed, "{o:?}");
    assert_eq!(o.detail, "ACTIVATION_FAILED");
    let failed = until(&mut events, pb::TransitionPhase::Failed).await;
    assert_eq!(failed.transition_id, o.transition_id, "streamed");
    drop(events);
    let c = s.containments().await;
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].cause, "ACTIVATION_FAILED");
    assert!(c[0].runtime_guard_armed);
    assert!(s.open_closures("a").await > 0, "admission stays closed");
    let e = s.transition("a:chat:m", 0, None).await.expect_err("fenced");
    assert_eq!(reason(&e), "TRANSITION_CONTAINED");
    // A restart keeps the one containment (the failed transition is not contained twice).
    s.sandbox
        .restart(Office::Orchestrator, Signal::SIGTERM)
        .await;
    s.reconnect();
    let after = s.containments().await;
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].cause, "ACTIVATION_FAILED");
    // The operator stops the runtime: that, and only that, proves the guard may be cleared.
    s.host.force("a", false).await;
    let r = recover(&s, c[0].containment_id).await.expect("proved");
    assert_eq!(r.proved, "STOPPED");
    let rec = r.containment.expect("row");
    assert!(rec.recovered_at.is_some() && !rec.runtime_guard_armed);
    assert_eq!(s.open_closures("a").await, 0);
}

#[tokio::test]
async fn killing_the_orchestrator_mid_activation_leaves_an_armed_guard_that_fences_until_stopped() {
    let mut s = activatable().await;
    s.host
        .set_faults(
            "a",
            UnitFaults {
                activate_latency: Duration::from_millis(1500),
                ..UnitFaults::default()
            },
        )
        .await;
    let mut events = s.watch().await;
    let c = s.client.clone();
    let pending = tokio::spawn(async move {
        c.clone()
            .request_transition(pb::RequestTransitionRequest {
                request_id: crate::common::rid(),
                wait_ms: crate::common::WAIT,
                capability_key: "a:chat:m".into(),
                priority: 0,
                admission_timeout_s: None,
            })
            .await
    });
    until(&mut events, pb::TransitionPhase::Actuating).await;
    eventually("the activation reached the host", || async {
        s.host.activations("a").await > 0
    })
    .await;
    s.kill_orchestrator(pending).await;
    let c = s.containments().await;
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].cause, "RUNTIME_GUARD_ARMED");
    assert!(c[0].runtime_guard_armed);
    assert!(s.open_closures("a").await > 0, "no reopen");
    // The host finishes the load: the model is WARM, yet readiness alone proves nothing.
    eventually("the activation completes", || s.host.ready("a")).await;
    let e = recover(&s, c[0].containment_id)
        .await
        .expect_err("not proved");
    assert_eq!(reason(&e), "WORLD_NOT_PROVEN");
    assert!(s.open_closures("a").await > 0, "nothing changed");
    s.host.force("a", false).await;
    let r = recover(&s, c[0].containment_id).await.expect("proved");
    assert_eq!(r.proved, "STOPPED");
    assert_eq!(s.open_closures("a").await, 0);
    // Unfenced: a is down now, so the next request is a hard swap that starts it.
    let o = s.transition("a:chat:m", 0, None).await.expect("answered");
    assert_eq!(o.phase(), pb::TransitionPhase::Completed, "{o:?}");
    assert_eq!(o.plan.expect("plan").action(), pb::PlanAction::HardSwap);
}

#[tokio::test]
async fn cancelling_after_the_activation_was_invoked_contains_with_the_guard_armed() {
    let s = activatable().await;
    s.host
        .set_faults(
            "a",
            UnitFaults {
                activate_latency: Duration::from_millis(800),
                ..UnitFaults::default()
            },
        )
        .await;
    let mut events = s.watch().await;
    let c = s.client.clone();
    let pending = tokio::spawn(async move {
        c.clone()
            .request_transition(pb::RequestTransitionRequest {
                request_id: crate::common::rid(),
                wait_ms: crate::common::WAIT,
                capability_key: "a:chat:m".into(),
                priority: 0,
                admission_timeout_s: None,
            })
            .await
    });
    let id = until(&mut events, pb::TransitionPhase::Actuating)
        .await
        .transition_id;
    // Invoked: there is no inverse, so a cancellation cannot restore anything.
    let o = s
        .client
        .clone()
        .cancel_transition(pb::CancelTransitionRequest {
            transition_id: id,
            wait_ms: crate::common::WAIT,
        })
        .await
        .expect("answered")
        .into_inner()
        .outcome
        .expect("outcome");
    assert_eq!(o.phase(), pb::TransitionPhase::ContainedUncertain, "{o:?}");
    assert_eq!(o.detail, "CANCELLED_AFTER_ACTIVATION");
    pending.await.expect("task").expect("answered");
    let c = s.containments().await;
    assert_eq!(c.len(), 1);
    assert!(c[0].runtime_guard_armed);
    assert!(s.open_closures("a").await > 0);
}

#[tokio::test]
async fn a_hung_activation_reaches_the_warm_up_deadline_and_ends_failed() {
    let s = activatable().await;
    s.host
        .set_faults(
            "a",
            UnitFaults {
                hang_activate: true,
                ..UnitFaults::default()
            },
        )
        .await;
    let started = Instant::now();
    let o = s.transition("a:chat:m", 0, None).await.expect("answered");
    assert_eq!(o.phase(), pb::TransitionPhase::Failed, "{o:?}");
    assert_eq!(o.detail, "ACTIVATION_FAILED");
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "waited for the warm-up deadline"
    );
    let c = s.containments().await;
    assert_eq!(c.len(), 1);
    assert!(c[0].runtime_guard_armed);
    assert!(s.open_closures("a").await > 0);
}
