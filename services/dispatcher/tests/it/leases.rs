//! Durable leases: renew, idempotent release, listing, dispatch events, and restart.

use std::time::Duration;

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::simllama::SimLlama;
use tokio_stream::StreamExt;
use tonic::Code;

use crate::common::*;

async fn one_warm() -> (SimLlama, Stack) {
    let sim = SimLlama::serving("m").await;
    let reg = animator("gpu0", &sim.endpoint(), "dedicated = true")
        + &capability("gpu0", "chat", "m", "");
    let s = stack(&reg).await;
    (sim, s)
}

fn release(id: &str, holder: &str) -> pb::ReleaseLeaseRequest {
    pb::ReleaseLeaseRequest {
        lease_id: id.into(),
        holder: holder.into(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn release_is_idempotent_and_checks_the_holder() {
    let (_sim, mut s) = one_warm().await;
    let g = granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    let err = s
        .client
        .release_lease(release(&g.lease_id, "someone-else"))
        .await
        .expect_err("holder");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(reason(&err), "LEASE_HOLDER_MISMATCH");
    let first = s
        .client
        .release_lease(release(&g.lease_id, "worker-1"))
        .await
        .expect("release")
        .into_inner();
    assert!(!first.already_over);
    let lease = first.lease.expect("lease");
    assert_eq!(lease.state, pb::LeaseState::Released as i32);
    assert!(lease.released_at.is_some());
    let second = s
        .client
        .release_lease(release(&g.lease_id, "worker-1"))
        .await
        .expect("again")
        .into_inner();
    assert!(second.already_over);
    assert_eq!(
        second.lease.expect("lease").released_at,
        lease.released_at,
        "unchanged"
    );
    let err = s
        .client
        .release_lease(release(&uuid::Uuid::new_v4().to_string(), "worker-1"))
        .await
        .expect_err("unknown");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(reason(&err), "LEASE_NOT_FOUND");
    // A released lease cannot be renewed.
    let err = s
        .client
        .renew_lease(pb::RenewLeaseRequest {
            lease_id: g.lease_id.clone(),
            holder: "worker-1".into(),
            ttl_seconds: 10,
        })
        .await
        .expect_err("released");
    assert_eq!(reason(&err), "LEASE_RELEASED");
    assert!(leases(&mut s.client, false).await.is_empty());
    assert_eq!(leases(&mut s.client, true).await.len(), 1);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn renew_extends_from_the_database_clock_and_release_of_an_expired_lease_is_over() {
    let (_sim, mut s) = one_warm().await;
    let mut req = request(exact("gpu0:chat:m"));
    req.ttl_seconds = 2;
    let g = granted(lease_req(&mut s.client, req).await);
    let renewed = s
        .client
        .renew_lease(pb::RenewLeaseRequest {
            lease_id: g.lease_id.clone(),
            holder: "worker-1".into(),
            ttl_seconds: 1,
        })
        .await
        .expect("renew")
        .into_inner()
        .lease
        .expect("lease");
    assert_eq!(renewed.state, pb::LeaseState::Active as i32);
    assert!(renewed.expires_at.expect("expiry").seconds <= g.expires_at.expect("expiry").seconds);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let over = s
        .client
        .release_lease(release(&g.lease_id, "worker-1"))
        .await
        .expect("release")
        .into_inner();
    assert!(over.already_over);
    let l = over.lease.expect("lease");
    assert_eq!(l.state, pb::LeaseState::Expired as i32);
    assert!(l.released_at.is_none());
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn list_leases_pages_newest_first() {
    let (_sim, mut s) = one_warm().await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(granted(lease(&mut s.client, exact("gpu0:chat:m")).await).lease_id);
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = s
            .client
            .list_leases(pb::ListLeasesRequest {
                animators: vec!["gpu0".into()],
                include_inactive: false,
                page: Some(lychd_proto::common::v1::PageRequest {
                    page_size: 2,
                    page_token: token.clone(),
                }),
                ..Default::default()
            })
            .await
            .expect("page")
            .into_inner();
        assert!(page.leases.len() <= 2);
        seen.extend(page.leases.into_iter().map(|l| l.lease_id));
        token = page.page.expect("paging").next_page_token;
        if token.is_empty() {
            break;
        }
    }
    ids.reverse();
    assert_eq!(seen, ids);
    let err = s
        .client
        .list_leases(pb::ListLeasesRequest {
            animators: vec![],
            include_inactive: true,
            page: Some(lychd_proto::common::v1::PageRequest {
                page_size: 2,
                page_token: "garbage".into(),
            }),
            ..Default::default()
        })
        .await
        .expect_err("bad token");
    assert_eq!(reason(&err), "PAGE_TOKEN_INVALID");
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dispatch_events_follow_admitted_leases_only() {
    let (sim, mut s) = one_warm().await;
    let mut stream = s
        .client
        .watch_dispatch_events(pb::WatchDispatchEventsRequest {
            after_sequence: 0,
            follow: true,
        })
        .await
        .expect("watch")
        .into_inner();
    let g1 = granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    let e1 = next_event(&mut stream).await;
    assert_eq!(e1.lease_id, g1.lease_id);
    // Refused issues emit nothing.
    let closed = close(&mut s.orchestrator, "t", &["gpu0"]).await;
    transition(lease(&mut s.client, exact("gpu0:chat:m")).await);
    reopen(&mut s.orchestrator, &closed.closure_token).await;
    sim.set_models(vec![]);
    transition(lease(&mut s.client, exact("gpu0:chat:m")).await);
    sim.set_models(vec![lychd_testkit::simllama::SimModel::served("m")]);
    let g2 = granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    let e2 = next_event(&mut stream).await;
    assert_eq!(e2.lease_id, g2.lease_id);
    assert!(e2.sequence > e1.sequence);
    drop(stream);
    // Resuming after the first event gives exactly the second.
    let rest: Vec<_> = s
        .client
        .watch_dispatch_events(pb::WatchDispatchEventsRequest {
            after_sequence: e1.sequence,
            follow: false,
        })
        .await
        .expect("watch")
        .into_inner()
        .collect::<Vec<_>>()
        .await;
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].as_ref().expect("ok").lease_id, g2.lease_id);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_keeps_leases_and_closures() {
    let (_sim, mut s) = one_warm().await;
    let g = granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    let mut req = request(exact("gpu0:chat:m"));
    req.holder = "worker-2".into();
    let g2 = granted(lease_req(&mut s.client, req).await);
    let first = close(&mut s.orchestrator, "t1", &["gpu0"]).await;
    let second = close(&mut s.orchestrator, "t2", &["gpu0"]).await;

    // Stop the office, then serve the same database again with a fresh pool.
    let Stack {
        spawned,
        orchestrator_token,
        ..
    } = s;
    let lychd_testkit::Spawned {
        server,
        ward,
        ctx,
        token,
        ..
    } = spawned;
    server.stop().await.expect("office stops");
    let (restarted, mut client, mut orch) = serve_again(&ctx, &token, &orchestrator_token).await;

    let live = leases(&mut client, false).await;
    let ids: Vec<_> = live.iter().map(|l| l.lease_id.clone()).collect();
    assert!(
        ids.contains(&g.lease_id) && ids.contains(&g2.lease_id),
        "{ids:?}"
    );
    // Both closures survived: two reopens are still needed.
    transition(lease(&mut client, exact("gpu0:chat:m")).await);
    let d = orch
        .await_drain(pb::AwaitDrainRequest {
            animators: vec!["gpu0".into()],
            wait_ms: 0,
        })
        .await
        .expect("drain")
        .into_inner();
    assert_eq!(d.admission[0].open_closures, 2);
    assert_eq!(d.admission[0].live_leases, 2);
    reopen(&mut orch, &first.closure_token).await;
    transition(lease(&mut client, exact("gpu0:chat:m")).await);
    reopen(&mut orch, &second.closure_token).await;
    granted(lease(&mut client, exact("gpu0:chat:m")).await);
    // Release still works on a lease issued before the restart.
    client
        .release_lease(release(&g.lease_id, "worker-1"))
        .await
        .expect("release");
    restarted.stop().await.expect("stops");
    if let Some(ward) = ward {
        ward.stop().await.expect("ward stops");
    }
}
