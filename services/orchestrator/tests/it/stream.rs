//! `WatchTransitions`' stream limit and standing authority, and the observation-only
//! `SOFT_SWAP`.

use std::time::Duration;

use lychd_proto::orchestrator::v1 as pb;
use lychd_proto::orchestrator::v1::orchestrator_client::OrchestratorClient;
use lychd_proto::ward::v1 as wpb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::Office;
use lychd_testkit::channel_with;
use lychd_testkit::simllama::SimHealth;
use tonic::Code;

use crate::common::{reason, stack, stack_with, three};

#[tokio::test]
async fn streams_beyond_the_limit_are_refused_and_a_revoked_watcher_is_cut_off() {
    let s = stack_with(&three(true), "stream_limit = 1\n").await;
    // A watcher of its own, to revoke.
    let mut admin = s.sandbox.admin();
    let id = admin
        .ensure_principal(wpb::PrincipalKind::Human, "watcher")
        .await
        .expect("enroll");
    admin
        .ensure_assignment(
            &id,
            "orchestrator:read",
            "transition:*",
            "orchestrator",
            "read",
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
    let mut watcher = OrchestratorClient::new(channel_with(
        &s.sandbox.office(Office::Orchestrator).endpoint(),
        &session.token,
    ));
    let mut stream = watcher
        .watch_transitions(pb::WatchTransitionsRequest::default())
        .await
        .expect("first stream")
        .into_inner();
    let e = s
        .client
        .clone()
        .watch_transitions(pb::WatchTransitionsRequest::default())
        .await
        .expect_err("beyond the limit");
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (Code::ResourceExhausted, "STREAM_LIMIT_REACHED")
    );
    WardClient::new(channel_with(&ward, &s.sandbox.token))
        .revoke(wpb::RevokeRequest {
            target: Some(wpb::revoke_request::Target::PrincipalId(id)),
        })
        .await
        .expect("revoke");
    let ended = tokio::time::timeout(Duration::from_secs(5), stream.message())
        .await
        .expect("ends within the re-check interval")
        .expect_err("refused");
    assert_eq!(ended.code(), Code::Unauthenticated);
    // Its place is free again.
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.client
        .clone()
        .watch_transitions(pb::WatchTransitionsRequest::default())
        .await
        .expect("a place again");
}

#[tokio::test]
async fn a_soft_swap_waits_for_honest_warmth_and_is_never_gated() {
    let s = stack_with(&three(false), "min_priority_for_hard_swap = 90\n").await;
    s.host.force("a", true).await;
    s.host.set_health("a", SimHealth::Loading).await;
    let warm_later = {
        let s = &s;
        async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            s.host.set_health("a", SimHealth::Ok).await;
        }
    };
    let (o, ()) = tokio::join!(s.transition("a:chat:m", 0, None), warm_later);
    let o = o.expect("answered");
    assert_eq!(o.phase(), pb::TransitionPhase::Completed, "{o:?}");
    assert_eq!(o.plan.expect("plan").action(), pb::PlanAction::SoftSwap);
    assert_eq!(s.host.counts("a").await, (0, 0), "no actuation");
    assert_eq!(
        s.host.activations("a").await,
        0,
        "a WARMING target is awaited, never activated"
    );
    assert_eq!(s.open_closures("a").await, 0);
}

#[tokio::test]
async fn a_soft_swap_that_never_warms_declines_with_no_effect() {
    let s = stack(&three(false)).await;
    s.host.force("a", true).await;
    s.host.set_health("a", SimHealth::Loading).await;
    let o = s.transition("a:chat:m", 50, None).await.expect("answered");
    assert_eq!(o.phase(), pb::TransitionPhase::DeclinedNoEffect, "{o:?}");
    assert_eq!(o.detail, "VERIFICATION_TIMEOUT");
    assert_eq!(s.open_closures("a").await, 0, "reopened");
    // Observation-only convergence arms no runtime guard: nothing is contained.
    assert!(s.containments().await.is_empty());
    assert_eq!(s.host.activations("a").await, 0);
}

/// One principal opening `WatchTransitions` streams fills its share (`stream_share`) and is
/// refused beyond it, `RESOURCE_EXHAUSTED STREAM_SHARE_REACHED`, while the operator still opens
/// one: no principal can hold every place of the office.
#[tokio::test]
async fn one_watcher_fills_only_its_share_and_the_operator_still_watches() {
    let s = stack_with(&three(true), "stream_limit = 4\nstream_share = 2\n").await;
    let mut admin = s.sandbox.admin();
    let id = admin
        .ensure_principal(wpb::PrincipalKind::Service, "hog")
        .await
        .expect("enroll");
    admin
        .ensure_assignment(
            &id,
            "orchestrator:read",
            "transition:*",
            "orchestrator",
            "read",
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
    let hog = OrchestratorClient::new(channel_with(
        &s.sandbox.office(Office::Orchestrator).endpoint(),
        &session.token,
    ));
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(
            hog.clone()
                .watch_transitions(pb::WatchTransitionsRequest::default())
                .await
                .expect("within its share"),
        );
    }
    let e = hog
        .clone()
        .watch_transitions(pb::WatchTransitionsRequest::default())
        .await
        .expect_err("beyond its share");
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (Code::ResourceExhausted, "STREAM_SHARE_REACHED")
    );
    let mut mine = s.watch().await;
    s.transition("a:chat:m", 50, None).await.expect("hard swap");
    let first = tokio::time::timeout(Duration::from_secs(10), mine.message())
        .await
        .expect("an event")
        .expect("ok")
        .expect("open");
    assert_eq!(first.capability_key, "a:chat:m");
    drop((held, mine));
}
