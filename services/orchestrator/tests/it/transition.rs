//! `RequestTransition`, `WatchTransitions`, containment: the arbiter, the deadlines and the
//! rite against the simulated host, over real processes.

use std::time::{Duration, Instant};

use lychd_proto::dispatcher::v1 as dpb;
use lychd_proto::orchestrator::v1 as pb;
use lychd_runtime::Office;
use lychd_testkit::simllama::UnitFaults;
use nix::sys::signal::Signal;
use tonic::Code;

use crate::common::{Stack, eventually, next, reason, stack, stack_with, three};

fn phase(o: &pb::TransitionOutcome) -> pb::TransitionPhase {
    o.phase()
}

fn slow_start(ms: u64) -> UnitFaults {
    UnitFaults {
        start_latency: Duration::from_millis(ms),
        ..UnitFaults::default()
    }
}

/// Until the next event of `phase` (returning it).
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

#[tokio::test]
async fn a_hard_swap_evicts_the_neighbour_and_streams_every_phase() {
    let s = stack(&three(true)).await;
    let mut events = s.watch().await;
    // Warm and open: NO_OP at once, no transition id, nothing touched.
    let o = s.transition("b:chat:m", 0, None).await.expect("no-op");
    assert_eq!(phase(&o), pb::TransitionPhase::Completed);
    assert_eq!(
        o.plan.as_ref().expect("plan").action(),
        pb::PlanAction::NoOp
    );
    let o = s.transition("a:chat:m", 50, None).await.expect("hard swap");
    assert_eq!(phase(&o), pb::TransitionPhase::Completed, "{o:?}");
    let plan = o.plan.expect("plan");
    assert_eq!(plan.action(), pb::PlanAction::HardSwap);
    assert_eq!(plan.evict, ["b"]);
    assert_eq!(o.transition_id.len(), 32);
    assert!(s.host.ready("a").await && !s.host.running("b").await);
    assert_eq!(
        s.open_closures("a").await + s.open_closures("b").await,
        0,
        "reopened"
    );
    let mut phases = Vec::new();
    while phases.last() != Some(&pb::TransitionPhase::Completed) || phases.len() < 3 {
        let e = next(&mut events).await;
        if e.transition_id == o.transition_id {
            phases.push(e.phase());
        }
    }
    assert_eq!(
        phases,
        [
            pb::TransitionPhase::Requested,
            pb::TransitionPhase::Arbitrating,
            pb::TransitionPhase::Draining,
            pb::TransitionPhase::Actuating,
            pb::TransitionPhase::Verifying,
            pb::TransitionPhase::Completed,
        ]
    );
}

#[tokio::test]
async fn bad_priority_and_timeouts_are_refused_before_anything_is_recorded() {
    let s = stack(&three(true)).await;
    let e = s
        .transition("a:chat:m", 101, None)
        .await
        .expect_err("range");
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (Code::InvalidArgument, "PRIORITY_OUT_OF_RANGE")
    );
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        let e = s
            .transition("a:chat:m", 50, Some(bad))
            .await
            .expect_err("timeout");
        assert_eq!(reason(&e), "ADMISSION_TIMEOUT_INVALID", "{bad}");
    }
    let e = s
        .transition("a:chat:m", 50, Some(0.0))
        .await
        .expect_err("expired");
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (Code::FailedPrecondition, "TRANSITION_ADMISSION_EXPIRED")
    );
    assert!(e.message().contains("transition_admission_expired"));
    assert_eq!(s.host.counts("a").await, (0, 0), "nothing reached the host");
    assert_eq!(s.host.counts("b").await, (0, 0));
    assert_eq!(s.open_closures("b").await, 0);
}

#[tokio::test]
async fn a_hard_swap_below_the_priority_gate_declines_before_effect() {
    let s = stack_with(&three(true), "min_priority_for_hard_swap = 50\n").await;
    let o = s.transition("a:chat:m", 49, None).await.expect("declined");
    assert_eq!(phase(&o), pb::TransitionPhase::DeclinedNoEffect);
    assert_eq!(o.detail, "HARD_SWAP_BELOW_PRIORITY");
    assert!(s.host.ready("b").await && !s.host.running("a").await);
    assert_eq!(s.host.counts("b").await, (0, 0));
    // NO_OP is never gated.
    let o = s.transition("b:chat:m", 0, None).await.expect("no-op");
    assert_eq!(phase(&o), pb::TransitionPhase::Completed);
    let o = s.transition("a:chat:m", 50, None).await.expect("allowed");
    assert_eq!(phase(&o), pb::TransitionPhase::Completed);
}

#[tokio::test]
async fn followers_join_one_cohort_and_a_followers_expiry_never_touches_the_owner() {
    let s = stack(&three(true)).await;
    // c's slow start holds the section, so a's cohort waits unadmitted.
    s.host.set_faults("c", slow_start(1200)).await;
    let mut events = s.watch().await;
    let holder = {
        let s2 = s.client.clone();
        tokio::spawn(async move {
            s2.clone()
                .request_transition(pb::RequestTransitionRequest {
                    request_id: crate::common::rid(),
                    wait_ms: crate::common::WAIT,
                    capability_key: "c:chat:m".into(),
                    priority: 90,
                    admission_timeout_s: None,
                })
                .await
        })
    };
    until(&mut events, pb::TransitionPhase::Actuating).await;
    let call = |timeout: Option<f64>| {
        let c = s.client.clone();
        async move {
            c.clone()
                .request_transition(pb::RequestTransitionRequest {
                    request_id: crate::common::rid(),
                    wait_ms: crate::common::WAIT,
                    capability_key: "a:chat:m".into(),
                    priority: 50,
                    admission_timeout_s: timeout,
                })
                .await
        }
    };
    let owner = tokio::spawn(call(None));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let untimed_follower = tokio::spawn(call(None));
    let e = call(Some(0.3))
        .await
        .expect_err("the follower's own cutoff");
    assert_eq!(reason(&e), "TRANSITION_ADMISSION_WAIT_EXPIRED");
    let owner = owner.await.expect("task").expect("owner").into_inner();
    let follower = untimed_follower
        .await
        .expect("task")
        .expect("follower")
        .into_inner();
    let (o, f) = (owner.outcome.expect("o"), follower.outcome.expect("f"));
    assert_eq!(phase(&o), pb::TransitionPhase::Completed, "{o:?}");
    assert!(!o.joined && f.joined);
    assert_eq!(
        o.transition_id, f.transition_id,
        "one cohort, one transition"
    );
    assert_eq!(s.host.counts("a").await.0, 1, "started once");
    let held = holder.await.expect("task").expect("holder").into_inner();
    assert_eq!(
        phase(&held.outcome.expect("h")),
        pb::TransitionPhase::Completed
    );
}

#[tokio::test]
async fn waiters_go_by_priority_then_first_come_and_an_owner_expires_in_the_queue() {
    let s = stack(&three(true)).await;
    s.host.set_faults("c", slow_start(1200)).await;
    let mut events = s.watch().await;
    let spawn = |key: &'static str, priority: u32, timeout: Option<f64>| {
        let c = s.client.clone();
        tokio::spawn(async move {
            c.clone()
                .request_transition(pb::RequestTransitionRequest {
                    request_id: crate::common::rid(),
                    wait_ms: crate::common::WAIT,
                    capability_key: key.into(),
                    priority,
                    admission_timeout_s: timeout,
                })
                .await
        })
    };
    let holder = spawn("c:chat:m", 90, None);
    until(&mut events, pb::TransitionPhase::Actuating).await;
    let low = spawn("a:chat:m", 10, None);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let high = spawn("b:chat:m", 80, None);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let expiring = spawn("a:chat:m", 60, Some(0.4));
    let e = expiring.await.expect("task").expect_err("owner expiry");
    assert_eq!(reason(&e), "TRANSITION_ADMISSION_EXPIRED");
    let mut drained = Vec::new();
    while drained.len() < 2 {
        let e = next(&mut events).await;
        if e.phase() == pb::TransitionPhase::Draining {
            drained.push(e.capability_key);
        }
    }
    assert_eq!(drained, ["b:chat:m", "a:chat:m"], "higher priority first");
    for t in [holder, high, low] {
        let o = t
            .await
            .expect("task")
            .expect("answer")
            .into_inner()
            .outcome
            .expect("o");
        assert_eq!(phase(&o), pb::TransitionPhase::Completed, "{o:?}");
    }
    assert!(s.host.ready("a").await && !s.host.running("b").await && !s.host.running("c").await);
}

#[tokio::test]
async fn a_drain_timeout_reopens_with_no_effect() {
    let s = stack_with(&three(true), "drain_timeout_ms = 400\n").await;
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
    assert!(
        matches!(
            lease.outcome,
            Some(dpb::lease_response::Outcome::Granted(_))
        ),
        "{lease:?}"
    );
    let o = s.transition("a:chat:m", 50, None).await.expect("declined");
    assert_eq!(phase(&o), pb::TransitionPhase::DeclinedNoEffect);
    assert_eq!(o.detail, "DRAIN_TIMEOUT");
    assert!(s.host.ready("b").await && !s.host.running("a").await);
    assert_eq!(s.host.counts("b").await, (0, 0));
    assert_eq!(
        s.open_closures("a").await + s.open_closures("b").await,
        0,
        "reopened"
    );
}

#[tokio::test]
async fn a_partial_start_fails_verification_and_is_compensated_to_failed_restored() {
    let s = stack(&three(true)).await;
    s.host
        .set_faults(
            "a",
            UnitFaults {
                partial_start: true,
                ..UnitFaults::default()
            },
        )
        .await;
    let mut events = s.watch().await;
    let o = s.transition("a:chat:m", 50, None).await.expect("answered");
    assert_eq!(phase(&o), pb::TransitionPhase::FailedRestored, "{o:?}");
    assert_eq!(o.detail, "VERIFICATION_TIMEOUT");
    until(&mut events, pb::TransitionPhase::Compensating).await;
    assert!(
        s.host.ready("b").await && !s.host.running("a").await,
        "exact prior world"
    );
    assert_eq!(
        s.open_closures("a").await + s.open_closures("b").await,
        0,
        "reopened"
    );
    assert!(s.containments().await.is_empty());
}

#[tokio::test]
async fn a_hung_start_reaches_the_deadline_and_is_compensated() {
    let s = stack(&three(true)).await;
    s.host
        .set_faults(
            "a",
            UnitFaults {
                hang_start: true,
                ..UnitFaults::default()
            },
        )
        .await;
    let started = Instant::now();
    let o = s.transition("a:chat:m", 50, None).await.expect("answered");
    assert_eq!(phase(&o), pb::TransitionPhase::FailedRestored, "{o:?}");
    assert_eq!(o.detail, "ACTUATOR_UNCERTAIN");
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "waited for the deadline"
    );
    assert!(s.host.ready("b").await && !s.host.running("a").await);
    assert_eq!(s.open_closures("b").await, 0);
}

async fn contained(s: &Stack) {
    // a never becomes ready, and b cannot be started again: no way back.
    s.host
        .set_faults(
            "a",
            UnitFaults {
                partial_start: true,
                ..UnitFaults::default()
            },
        )
        .await;
    s.host
        .set_faults(
            "b",
            UnitFaults {
                fail_start: true,
                ..UnitFaults::default()
            },
        )
        .await;
    let o = s.transition("a:chat:m", 50, None).await.expect("answered");
    assert_eq!(phase(&o), pb::TransitionPhase::ContainedUncertain, "{o:?}");
}

#[tokio::test]
async fn a_failed_compensation_is_contained_durably_across_a_restart_until_recovered() {
    let mut s = stack(&three(true)).await;
    contained(&s).await;
    let c = s.containments().await;
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].cause, "VERIFICATION_AND_COMPENSATION_FAILED");
    assert_eq!(c[0].expected_active, ["b"]);
    assert!(
        s.open_closures("a").await > 0 && s.open_closures("b").await > 0,
        "kept closed"
    );
    let e = s
        .transition("c:chat:m", 100, None)
        .await
        .expect_err("fenced");
    assert_eq!(reason(&e), "TRANSITION_CONTAINED");
    // A restart keeps the fence.
    s.sandbox
        .restart(Office::Orchestrator, Signal::SIGTERM)
        .await;
    s.reconnect();
    let e = s
        .transition("c:chat:m", 100, None)
        .await
        .expect_err("still fenced");
    assert_eq!(reason(&e), "TRANSITION_CONTAINED");
    assert_eq!(s.containments().await.len(), 1);
    // Recovery needs a fresh observation that proves a recorded world.
    let recover = |id| {
        let c = s.client.clone();
        async move {
            c.clone()
                .recover_containment(pb::RecoverContainmentRequest { containment_id: id })
                .await
        }
    };
    let e = recover(c[0].containment_id).await.expect_err("not proven");
    assert_eq!(reason(&e), "WORLD_NOT_PROVEN");
    assert!(s.open_closures("b").await > 0, "nothing changed");
    // The operator puts the prior world back by hand.
    s.host.set_faults("a", UnitFaults::default()).await;
    s.host.set_faults("b", UnitFaults::default()).await;
    s.host.force("a", false).await;
    s.host.force("b", true).await;
    let r = recover(c[0].containment_id)
        .await
        .expect("proven")
        .into_inner();
    assert_eq!(r.proved, "PRIOR");
    assert!(r.containment.expect("row").recovered_at.is_some());
    assert_eq!(
        s.open_closures("a").await + s.open_closures("b").await,
        0,
        "reopened"
    );
    let o = s.transition("a:chat:m", 50, None).await.expect("unfenced");
    assert_eq!(phase(&o), pb::TransitionPhase::Completed);
}

#[tokio::test]
async fn killing_the_orchestrator_mid_transition_contains_it_and_reopens_nothing() {
    let mut s = stack(&three(true)).await;
    s.host.set_faults("a", slow_start(3000)).await;
    let mut events = s.watch().await;
    let c = s.client.clone();
    let pending = tokio::spawn(async move {
        c.clone()
            .request_transition(pb::RequestTransitionRequest {
                request_id: crate::common::rid(),
                wait_ms: crate::common::WAIT,
                capability_key: "a:chat:m".into(),
                priority: 50,
                admission_timeout_s: None,
            })
            .await
    });
    until(&mut events, pb::TransitionPhase::Actuating).await;
    // Killed once the host has b's stop behind it and a's start in hand.
    eventually("a's start reached the host", || async {
        s.host.counts("a").await.0 > 0
    })
    .await;
    s.kill_orchestrator(pending).await;
    let c = s.containments().await;
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].cause, "INTERRUPTED");
    assert!(
        s.open_closures("a").await > 0 && s.open_closures("b").await > 0,
        "no reopen"
    );
    let e = s
        .transition("b:chat:m", 50, None)
        .await
        .expect_err("fenced");
    assert_eq!(reason(&e), "TRANSITION_CONTAINED");
    // The host finishes what it was asked (a up, b down): the desired world, proved.
    eventually("a's start completes", || s.host.ready("a")).await;
    let r = s
        .client
        .clone()
        .recover_containment(pb::RecoverContainmentRequest {
            containment_id: c[0].containment_id,
        })
        .await
        .expect("proven")
        .into_inner();
    assert_eq!(r.proved, "DESIRED");
    assert_eq!(s.open_closures("a").await + s.open_closures("b").await, 0);
}

/// Lease `b:chat:m` as the operator (a live lease keeps b from draining).
async fn lease_b(s: &Stack) {
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
    assert!(
        matches!(
            lease.outcome,
            Some(dpb::lease_response::Outcome::Granted(_))
        ),
        "{lease:?}"
    );
}

#[tokio::test]
async fn an_admission_cutoff_before_the_drain_budget_refuses_and_reopens() {
    let s = stack(&three(true)).await;
    lease_b(&s).await;
    let e = s
        .transition("a:chat:m", 50, Some(0.5))
        .await
        .expect_err("expired while draining");
    assert_eq!(reason(&e), "TRANSITION_ADMISSION_EXPIRED");
    assert!(s.host.ready("b").await && !s.host.running("a").await);
    assert_eq!(
        s.open_closures("a").await + s.open_closures("b").await,
        0,
        "reopened"
    );
}

#[tokio::test]
async fn authority_withdrawn_before_the_effect_declines_with_nothing_closed() {
    let s = stack(&three(true)).await;
    // A requester of its own, to revoke while its transition waits for the section.
    let mut admin = s.sandbox.admin();
    let id = admin
        .ensure_principal(lychd_proto::ward::v1::PrincipalKind::Human, "requester")
        .await
        .expect("enroll");
    admin
        .ensure_assignment(
            &id,
            "orchestrator:transition",
            "capability:*",
            "orchestrator",
            "transition",
        )
        .await
        .expect("assign");
    let credential = admin.issue_standing(&id).await.expect("credential");
    let ward = s.sandbox.office(Office::Ward).endpoint();
    let session = lychd_auth::admin::exchange(
        lychd_runtime::client::channel(&ward).expect("channel"),
        &credential,
        0,
        &["orchestrator"],
    )
    .await
    .expect("session");
    let requester = pb::orchestrator_client::OrchestratorClient::new(lychd_testkit::channel_with(
        &s.sandbox.office(Office::Orchestrator).endpoint(),
        &session.token,
    ));
    s.host.set_faults("c", slow_start(1000)).await;
    let mut events = s.watch().await;
    let c = s.client.clone();
    let holder = tokio::spawn(async move {
        c.clone()
            .request_transition(pb::RequestTransitionRequest {
                request_id: crate::common::rid(),
                wait_ms: crate::common::WAIT,
                capability_key: "c:chat:m".into(),
                priority: 90,
                admission_timeout_s: None,
            })
            .await
    });
    until(&mut events, pb::TransitionPhase::Actuating).await;
    let waiting = tokio::spawn(async move {
        requester
            .clone()
            .request_transition(pb::RequestTransitionRequest {
                request_id: crate::common::rid(),
                wait_ms: crate::common::WAIT,
                capability_key: "a:chat:m".into(),
                priority: 50,
                admission_timeout_s: None,
            })
            .await
    });
    until(&mut events, pb::TransitionPhase::Arbitrating).await;
    lychd_proto::ward::v1::ward_client::WardClient::new(lychd_testkit::channel_with(
        &ward,
        &s.sandbox.token,
    ))
    .revoke(lychd_proto::ward::v1::RevokeRequest {
        target: Some(lychd_proto::ward::v1::revoke_request::Target::PrincipalId(
            id,
        )),
    })
    .await
    .expect("revoke");
    let o = waiting
        .await
        .expect("task")
        .expect("answered")
        .into_inner()
        .outcome
        .expect("outcome");
    assert_eq!(o.phase(), pb::TransitionPhase::DeclinedNoEffect, "{o:?}");
    assert_eq!(o.detail, "AUTHORITY_WITHDRAWN");
    holder.await.expect("task").expect("holder");
    assert!(s.host.ready("c").await && !s.host.running("a").await);
    assert_eq!(s.host.counts("a").await, (0, 0), "no effect");
    assert_eq!(s.open_closures("a").await + s.open_closures("c").await, 0);
}

#[tokio::test]
async fn an_untimed_follower_inherits_the_owners_expiry_and_an_admitted_cohort_outlives_a_follower_cutoff()
 {
    let s = stack(&three(true)).await;
    s.host.set_faults("c", slow_start(1000)).await;
    let mut events = s.watch().await;
    let call = |key: &'static str, priority: u32, timeout: Option<f64>| {
        let c = s.client.clone();
        tokio::spawn(async move {
            c.clone()
                .request_transition(pb::RequestTransitionRequest {
                    request_id: crate::common::rid(),
                    wait_ms: crate::common::WAIT,
                    capability_key: key.into(),
                    priority,
                    admission_timeout_s: timeout,
                })
                .await
        })
    };
    let holder = call("c:chat:m", 90, None);
    until(&mut events, pb::TransitionPhase::Actuating).await;
    // The owner's cutoff passes in the queue; its untimed follower gets the same refusal.
    let owner = call("a:chat:m", 50, Some(0.3));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let follower = call("a:chat:m", 50, None);
    for t in [owner, follower] {
        let e = t.await.expect("task").expect_err("the cohort's refusal");
        assert_eq!(reason(&e), "TRANSITION_ADMISSION_EXPIRED");
    }
    holder.await.expect("task").expect("holder");
    // Now a's start is slow: the cohort is admitted (actuator invoked) at once, so a follower
    // whose cutoff passes during the actuation receives the settlement.
    s.host.set_faults("a", slow_start(800)).await;
    let owner = call("a:chat:m", 50, None);
    until(&mut events, pb::TransitionPhase::Actuating).await;
    let late = call("a:chat:m", 50, Some(0.2));
    let o = late
        .await
        .expect("task")
        .expect("joined the settlement")
        .into_inner()
        .outcome
        .expect("outcome");
    assert!(o.joined);
    assert_eq!(o.phase(), pb::TransitionPhase::Completed, "{o:?}");
    owner.await.expect("task").expect("owner");
}

/// A database failure on the transition path (recording the transition, before anything is
/// closed) is classified by the shared refusal vocabulary, as every office's are: a
/// serialization failure is `ABORTED CONCURRENT_CHANGE`, a cancelled statement
/// `DEADLINE_EXCEEDED DATABASE_TIMEOUT`, a lost connection `UNAVAILABLE DATABASE_UNAVAILABLE`
/// and anything else `INTERNAL` — not all of them `DATABASE_UNAVAILABLE`. Nothing is closed.
#[tokio::test]
async fn database_failures_on_the_transition_path_are_classified() {
    let s = stack(&three(true)).await;
    let mut su = s.sandbox.db.superuser().await;
    let fail_with = |sqlstate: &str| {
        format!(
            "CREATE OR REPLACE FUNCTION orchestrator.test_fail() RETURNS trigger \
             LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '{sqlstate}'; END $$"
        )
    };
    sqlx::query(&fail_with("40001"))
        .execute(&mut su)
        .await
        .expect("function");
    sqlx::query(
        "CREATE TRIGGER test_fail BEFORE INSERT ON orchestrator.transitions \
         FOR EACH ROW EXECUTE FUNCTION orchestrator.test_fail()",
    )
    .execute(&mut su)
    .await
    .expect("trigger");
    for (sqlstate, code, want) in [
        ("40001", Code::Aborted, "CONCURRENT_CHANGE"),
        ("57014", Code::DeadlineExceeded, "DATABASE_TIMEOUT"),
        ("08006", Code::Unavailable, "DATABASE_UNAVAILABLE"),
        ("XX000", Code::Internal, "INTERNAL"),
    ] {
        sqlx::query(&fail_with(sqlstate))
            .execute(&mut su)
            .await
            .expect("function");
        let refused = s
            .transition("a:chat:m", 50, None)
            .await
            .expect_err("the transition is not recorded");
        assert_eq!(
            (refused.code(), reason(&refused).as_str()),
            (code, want),
            "{sqlstate}: {refused:?}"
        );
        assert!(!refused.message().contains("injected"), "{refused:?}");
        assert_eq!(
            s.open_closures("a").await + s.open_closures("b").await,
            0,
            "nothing was closed"
        );
        assert!(s.host.ready("b").await, "b still runs");
    }
    sqlx::query("DROP TRIGGER test_fail ON orchestrator.transitions")
        .execute(&mut su)
        .await
        .expect("drop");
    let o = s.transition("a:chat:m", 50, None).await.expect("hard swap");
    assert_eq!(phase(&o), pb::TransitionPhase::Completed, "{o:?}");
}

/// Issue 23.3: a containment whose row cannot be written still fences. The database becomes
/// unreachable exactly at the containment's write: the Orchestrator latches it in process,
/// refuses the next transition, and records it once the database is back.
#[tokio::test]
async fn a_containment_that_cannot_be_written_still_fences_and_is_recorded_later() {
    let proxy = lychd_testkit::FaultProxy::start().await;
    let s = crate::common::stack_routed(
        &three(true),
        "",
        |host, _| {
            format!(
                "[office.actuator]\nkind = \"simulated\"\nendpoint = \"{}\"\n",
                host.control_endpoint()
            )
        },
        Some(&proxy),
    )
    .await;
    proxy.refuse_at_statement("INSERT INTO orchestrator.containments");
    contained(&s).await;
    assert_eq!(proxy.fired(), 1, "the containment's write was cut");
    // The database is unreachable and holds no containment; the fence holds anyway.
    let e = s
        .transition("c:chat:m", 100, None)
        .await
        .expect_err("fenced by the latch");
    assert_eq!(reason(&e), "TRANSITION_CONTAINED", "{e:?}");
    assert!(s.open_closures("a").await > 0 && s.open_closures("b").await > 0);
    let mut db = s.sandbox.db.superuser().await;
    let recorded: i64 = sqlx::query_scalar("SELECT count(*) FROM orchestrator.containments")
        .fetch_one(&mut db)
        .await
        .expect("count");
    assert_eq!(recorded, 0, "not written while unreachable");
    // The database is back: the latched containment is written, and it keeps fencing.
    proxy.refuse(false);
    let started = Instant::now();
    let cause: String = loop {
        let cause: Option<String> =
            sqlx::query_scalar("SELECT cause FROM orchestrator.containments")
                .fetch_optional(&mut db)
                .await
                .expect("read");
        if let Some(cause) = cause {
            break cause;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the latched containment was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(cause, "VERIFICATION_AND_COMPENSATION_FAILED");
    // (Pooled connections that broke while the database was unreachable each fail the one
    // statement sent on them: retried as a caller would.)
    let mut tries = 0;
    let e = loop {
        let e = s
            .transition("c:chat:m", 100, None)
            .await
            .expect_err("fenced by the row");
        if reason(&e) == "DATABASE_UNAVAILABLE" && tries < 16 {
            tries += 1;
            continue;
        }
        break e;
    };
    assert_eq!(reason(&e), "TRANSITION_CONTAINED", "{e:?}");
    // The transition's phase is the containment's, never overwritten by a later one.
    let phase: String = sqlx::query_scalar("SELECT phase FROM orchestrator.transitions t JOIN orchestrator.containments c ON c.transition_id = t.id")
        .fetch_one(&mut db)
        .await
        .expect("phase");
    assert_eq!(phase, "contained_uncertain");
}
