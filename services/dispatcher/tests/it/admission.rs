//! Admission and drain: counted closures, replay by request id, drain by the database clock,
//! replicas sharing admission state, and the Orchestrator's authority.

use std::time::Duration;

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::simllama::SimLlama;
use tonic::Code;

use crate::common::*;

async fn one_warm() -> (SimLlama, Stack) {
    let sim = SimLlama::serving("m").await;
    let reg = animator("gpu0", &sim.endpoint(), "dedicated = true")
        + &capability("gpu0", "chat", "m", "")
        + &animator("gpu1", &sim.endpoint(), "dedicated = true")
        + &capability("gpu1", "chat", "m", "");
    let s = stack(&reg).await;
    (sim, s)
}

async fn drain(
    c: &mut Client,
    animators: &[&str],
    wait_ms: u32,
) -> Result<pb::AwaitDrainResponse, tonic::Status> {
    c.await_drain(pb::AwaitDrainRequest {
        animators: animators.iter().map(|a| (*a).to_owned()).collect(),
        wait_ms,
    })
    .await
    .map(|r| r.into_inner())
}

#[tokio::test(flavor = "multi_thread")]
async fn overlapping_closures_need_two_reopens() {
    let (_sim, mut s) = one_warm().await;
    let first = close(&mut s.orchestrator, "t1", &["gpu0"]).await;
    assert_eq!(first.admission[0].open_closures, 1);
    let g1 = first.admission[0].generation;
    let second = close(&mut s.orchestrator, "t2", &["gpu0", "gpu1"]).await;
    assert_ne!(first.closure_token, second.closure_token);
    let gpu0 = second
        .admission
        .iter()
        .find(|a| a.animator == "gpu0")
        .expect("gpu0");
    assert_eq!(gpu0.open_closures, 2);
    assert!(gpu0.generation > g1, "every close moves the generation");
    transition(lease(&mut s.client, exact("gpu0:chat:m")).await);

    let r = reopen(&mut s.orchestrator, &first.closure_token).await;
    assert!(!r.already_reopened);
    assert_eq!(r.admission[0].open_closures, 1);
    transition(lease(&mut s.client, exact("gpu0:chat:m")).await);
    // Reopening the same closure again changes nothing.
    let again = reopen(&mut s.orchestrator, &first.closure_token).await;
    assert!(again.already_reopened);
    assert_eq!(again.admission[0].open_closures, 1);
    transition(lease(&mut s.client, exact("gpu0:chat:m")).await);

    let r = reopen(&mut s.orchestrator, &second.closure_token).await;
    assert!(r.admission.iter().all(|a| a.open_closures == 0));
    granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    granted(lease(&mut s.client, exact("gpu1:chat:m")).await);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn close_replays_by_request_id_and_refuses_a_different_set() {
    let (_sim, mut s) = one_warm().await;
    let a = close(&mut s.orchestrator, "transition-7", &["gpu0"]).await;
    let b = close(&mut s.orchestrator, "transition-7", &["gpu0"]).await;
    assert_eq!(a.closure_token, b.closure_token);
    assert!(b.replayed);
    assert_eq!(
        b.admission[0].open_closures, 1,
        "a replay does not count twice"
    );
    let err = s
        .orchestrator
        .close_admission(pb::CloseAdmissionRequest {
            request_id: "transition-7".into(),
            animators: vec!["gpu0".into(), "gpu1".into()],
            reason: "other".into(),
        })
        .await
        .expect_err("conflict");
    assert_eq!(err.code(), Code::AlreadyExists);
    assert_eq!(reason(&err), "CLOSURE_REQUEST_CONFLICT");
    let err = s
        .orchestrator
        .reopen_admission(pb::ReopenAdmissionRequest {
            closure_token: uuid::Uuid::new_v4().to_string(),
        })
        .await
        .expect_err("unknown closure");
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(reason(&err), "CLOSURE_NOT_FOUND");
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn drain_waits_for_live_leases_and_ignores_expired_ones() {
    let (_sim, mut s) = one_warm().await;
    // Drain needs admission closed first.
    let err = drain(&mut s.orchestrator, &["gpu0"], 0)
        .await
        .expect_err("open");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(reason(&err), "ADMISSION_OPEN");

    let long = granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    let mut short_req = request(exact("gpu0:chat:m"));
    short_req.ttl_seconds = 1;
    let short = granted(lease_req(&mut s.client, short_req).await);
    let closed = close(&mut s.orchestrator, "drain-1", &["gpu0"]).await;
    assert_eq!(closed.admission[0].live_leases, 2);
    let d = drain(&mut s.orchestrator, &["gpu0"], 100)
        .await
        .expect("drain");
    assert!(!d.drained);
    assert_eq!(d.admission[0].live_leases, 2);

    // The short lease expires by the database clock; it no longer counts and cannot be renewed.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let d = drain(&mut s.orchestrator, &["gpu0"], 0)
        .await
        .expect("drain");
    assert_eq!(
        d.admission[0].live_leases, 1,
        "expired lease ignored by drain"
    );
    let err = s
        .client
        .renew_lease(pb::RenewLeaseRequest {
            lease_id: short.lease_id.clone(),
            holder: "worker-1".into(),
            ttl_seconds: 60,
        })
        .await
        .expect_err("expired");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(reason(&err), "LEASE_EXPIRED");
    // Renewing the live one on a draining animator is refused too (drains terminate).
    let err = s
        .client
        .renew_lease(pb::RenewLeaseRequest {
            lease_id: long.lease_id.clone(),
            holder: "worker-1".into(),
            ttl_seconds: 60,
        })
        .await
        .expect_err("closed");
    assert_eq!(reason(&err), "ADMISSION_CLOSED");

    // Releasing the live lease while AwaitDrain waits ends the wait drained.
    let mut orch = s.orchestrator.clone();
    let waiting = tokio::spawn(async move { drain(&mut orch, &["gpu0"], 5000).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.client
        .release_lease(pb::ReleaseLeaseRequest {
            lease_id: long.lease_id.clone(),
            holder: "worker-1".into(),
        })
        .await
        .expect("release");
    let d = waiting.await.expect("join").expect("drain");
    assert!(d.drained);
    assert_eq!(d.admission[0].live_leases, 0);
    reopen(&mut s.orchestrator, &closed.closure_token).await;
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn replicas_share_admission_state() {
    let (_sim, mut s) = one_warm().await;
    let (replica, mut tester_b, mut orch_b) = s.replica().await;
    // Closed on replica B, refused on replica A.
    let closed = close(&mut orch_b, "r-1", &["gpu0"]).await;
    transition(lease(&mut s.client, exact("gpu0:chat:m")).await);
    // Reopened on A, granted on B; the lease taken on B is seen by A's drain.
    reopen(&mut s.orchestrator, &closed.closure_token).await;
    let g = granted(lease(&mut tester_b, exact("gpu0:chat:m")).await);
    close(&mut s.orchestrator, "r-2", &["gpu0"]).await;
    let d = drain(&mut s.orchestrator, &["gpu0"], 0)
        .await
        .expect("drain");
    assert!(!d.drained);
    assert_eq!(leases(&mut s.client, false).await[0].lease_id, g.lease_id);
    replica.stop().await.expect("replica stops");
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn admission_is_refused_to_principals_without_the_orchestrators_authority() {
    let (_sim, mut s) = one_warm().await;
    // The tester may lease and read, but holds no `dispatcher:admission`.
    let err = s
        .client
        .close_admission(pb::CloseAdmissionRequest {
            request_id: "x".into(),
            animators: vec!["gpu0".into()],
            reason: "r".into(),
        })
        .await
        .expect_err("tester cannot close");
    assert_eq!(err.code(), Code::PermissionDenied);
    let err = drain(&mut s.client, &["gpu0"], 0)
        .await
        .expect_err("tester cannot drain");
    assert_eq!(err.code(), Code::PermissionDenied);
    let closed = close(&mut s.orchestrator, "t", &["gpu0"]).await;
    let err = s
        .client
        .reopen_admission(pb::ReopenAdmissionRequest {
            closure_token: closed.closure_token.clone(),
        })
        .await
        .expect_err("tester cannot reopen");
    assert_eq!(err.code(), Code::PermissionDenied);
    // Nothing changed: still one closure.
    transition(lease(&mut s.client, exact("gpu0:chat:m")).await);
    let r = reopen(&mut s.orchestrator, &closed.closure_token).await;
    assert_eq!(r.admission[0].open_closures, 0);
    s.spawned.stop().await;
}
