//! Authority that holds at the effect: a lease whose caller lost its authority while the probe
//! ran is not written, and an open event stream ends soon after its caller's authority goes.

use std::time::{Duration, Instant};

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::simllama::SimLlama;
use tokio_stream::StreamExt;
use tonic::Code;

use crate::common::*;

const WORKER: &[(&str, &str)] = &[
    ("dispatcher:lease", "capability:*"),
    ("dispatcher:lease", "lease:*"),
];

/// A runtime whose every answer takes `delay` (a probe is two GETs), and a stack on it whose
/// tester sees every principal's leases.
async fn slow(delay: Duration) -> (SimLlama, Stack) {
    let sim = SimLlama::serving("m").await;
    sim.set_delay(delay);
    let s = stack(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
    )
    .await;
    s.spawned.allow("dispatcher:read_all", "lease:*").await;
    (sim, s)
}

/// Lease as `worker` in the background; `change` runs once the probe is under way.
async fn lease_while<F, Fut>(
    worker: &Client,
    sim: &SimLlama,
    change: F,
) -> (Result<Outcome, tonic::Status>, Duration)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut c = worker.clone();
    let started = Instant::now();
    let call = tokio::spawn(async move {
        c.lease(request(exact("gpu0:chat:m")))
            .await
            .map(|r| r.into_inner().outcome.expect("an outcome"))
    });
    // The probe has reached the runtime (its first GET is being answered, slowly).
    let deadline = Instant::now() + Duration::from_secs(5);
    while sim.requests() == 0 {
        assert!(Instant::now() < deadline, "the probe never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    change().await;
    let answer = call.await.expect("join");
    (answer, started.elapsed())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_whose_session_is_revoked_during_a_slow_probe_is_not_registered() {
    let (sim, mut s) = slow(Duration::from_millis(400)).await;
    let mut warden = warden(&s).await;
    let (_, token, worker) = principal(&s, "worker", WORKER).await;

    // Unchanged authority: the slow probe ends in a grant (what the refusal below is not).
    let (answer, took) = lease_while(&worker, &sim, || async {}).await;
    let g = granted(answer.expect("granted"));
    assert!(
        took >= Duration::from_millis(800),
        "the probe was slow: {took:?}"
    );
    worker
        .clone()
        .release_lease(pb::ReleaseLeaseRequest {
            lease_id: g.lease_id,
            holder: "worker-1".into(),
        })
        .await
        .expect("release");
    let before = sim.requests();

    let (answer, _) = lease_while(&worker, &sim, || revoke_session(&mut warden, &token)).await;
    let refused = answer.expect_err("revoked during the probe");
    assert_eq!(refused.code(), Code::Unauthenticated);
    assert_eq!(reason(&refused), "SESSION_REVOKED");
    assert!(sim.requests() > before, "the probe ran");
    assert_eq!(
        leases(&mut s.client, true).await.len(),
        1,
        "only the first lease"
    );
    assert_eq!(
        events(&mut s.client).await.len(),
        1,
        "no event for the refused issue"
    );
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_whose_assignment_is_withdrawn_during_a_slow_probe_is_not_registered() {
    let (sim, mut s) = slow(Duration::from_millis(400)).await;
    let mut warden = warden(&s).await;
    let (id, _, worker) = principal(&s, "worker", WORKER).await;

    let (answer, _) = lease_while(&worker, &sim, || {
        unassign(&mut warden, &id, "dispatcher:lease", "capability:*")
    })
    .await;
    let refused = answer.expect_err("withdrawn during the probe");
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert!(
        ["NO_ASSIGNMENT", "POLICY_GENERATION_STALE"].contains(&reason(&refused).as_str()),
        "{refused:?}"
    );
    assert!(leases(&mut s.client, true).await.is_empty(), "no lease");
    assert!(events(&mut s.client).await.is_empty(), "no event");
    s.spawned.stop().await;
}

/// The principal itself revoked between the request-time decision (taken when the call
/// arrived: the probe ran) and the effect-time one: refused, nothing of the caller's written.
#[tokio::test(flavor = "multi_thread")]
async fn a_lease_whose_principal_is_revoked_between_its_two_decisions_is_not_registered() {
    let (sim, mut s) = slow(Duration::from_millis(300)).await;
    let mut warden = warden(&s).await;
    let (id, _, worker) = principal(&s, "worker", WORKER).await;

    let (answer, _) = lease_while(&worker, &sim, || async {
        warden
            .revoke(lychd_proto::ward::v1::RevokeRequest {
                target: Some(lychd_proto::ward::v1::revoke_request::Target::PrincipalId(
                    id.clone(),
                )),
            })
            .await
            .expect("revoke principal");
    })
    .await;
    let refused = answer.expect_err("revoked between the decisions");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(
        ["PRINCIPAL_REVOKED", "CREDENTIAL_REVOKED", "SESSION_REVOKED"]
            .contains(&reason(&refused).as_str()),
        "{refused:?}"
    );
    assert!(
        sim.requests() >= 1,
        "the probe ran: the first decision allowed"
    );
    assert!(leases(&mut s.client, true).await.is_empty(), "no lease");
    assert!(events(&mut s.client).await.is_empty(), "no event");
    s.spawned.stop().await;
}

/// A stack that asks again for a stream's authority every 300 ms, a reader allowed to watch
/// events, and its follow stream with the first event delivered.
async fn watching() -> (
    SimLlama,
    Stack,
    String,
    String,
    tonic::Streaming<pb::DispatchEvent>,
) {
    let sim = SimLlama::serving("m").await;
    let mut s = stack_with(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
        "stream_recheck_interval_ms = 300",
    )
    .await;
    // It sees every principal's events (the tester's lease is not its own).
    let (id, token, mut reader) = principal(
        &s,
        "reader",
        &[
            ("dispatcher:read", "event:*"),
            ("dispatcher:read_all", "lease:*"),
        ],
    )
    .await;
    let mut stream = reader
        .watch_dispatch_events(pb::WatchDispatchEventsRequest {
            after_sequence: 0,
            follow: true,
        })
        .await
        .expect("watch")
        .into_inner();
    let g = granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    let first = next_event(&mut stream).await;
    assert_eq!(first.lease_id, g.lease_id);
    (sim, s, id, token, stream)
}

/// The stream's next item, within `within`: it must be the end, with a refusal.
async fn ends_refused(
    stream: &mut tonic::Streaming<pb::DispatchEvent>,
    within: Duration,
) -> tonic::Status {
    let next = tokio::time::timeout(within, stream.next())
        .await
        .expect("the stream ended within the re-check interval");
    match next {
        Some(Err(status)) => status,
        other => panic!("expected the stream to end refused, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follow_stream_ends_once_its_session_is_revoked() {
    let (_sim, mut s, _, token, mut stream) = watching().await;
    let mut warden = warden(&s).await;
    revoke_session(&mut warden, &token).await;
    // Asked again every 300 ms: ended well within 2 s (slack for a busy machine).
    let status = ends_refused(&mut stream, Duration::from_secs(2)).await;
    assert_eq!(status.code(), Code::Unauthenticated);
    assert_eq!(reason(&status), "SESSION_REVOKED");
    // An event admitted now is not delivered: the stream is over.
    granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    let after = tokio::time::timeout(Duration::from_secs(1), stream.next())
        .await
        .expect("ended");
    assert!(after.is_none(), "{after:?}");
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follow_stream_ends_once_its_assignment_is_withdrawn() {
    let (_sim, s, id, _, mut stream) = watching().await;
    let mut warden = warden(&s).await;
    unassign(&mut warden, &id, "dispatcher:read", "event:*").await;
    let status = ends_refused(&mut stream, Duration::from_secs(2)).await;
    assert_eq!(status.code(), Code::PermissionDenied);
    assert_eq!(reason(&status), "NO_ASSIGNMENT");
    s.spawned.stop().await;
}
