//! Leases and closures belong to the principal that obtained them: another principal — even one
//! allowed to lease, read and hold admission — neither touches nor sees them (they are "not
//! found"), unless Ward allows it the administrative action. Request ids are their principal's.

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::simllama::SimLlama;
use tonic::Code;

use crate::common::*;

async fn two_animators() -> (SimLlama, Stack) {
    let sim = SimLlama::serving("m").await;
    let s = stack(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")
            + &animator("gpu1", &sim.endpoint(), "dedicated = true")
            + &capability("gpu1", "chat", "m", "")),
    )
    .await;
    (sim, s)
}

fn renew(id: &str, holder: &str) -> pb::RenewLeaseRequest {
    pb::RenewLeaseRequest {
        lease_id: id.into(),
        holder: holder.into(),
        ttl_seconds: 60,
    }
}

fn release(id: &str, holder: &str) -> pb::ReleaseLeaseRequest {
    pb::ReleaseLeaseRequest {
        lease_id: id.into(),
        holder: holder.into(),
    }
}

fn get(id: &str) -> pb::GetLeaseRequest {
    pb::GetLeaseRequest {
        lookup: Some(pb::get_lease_request::Lookup::LeaseId(id.into())),
    }
}

fn not_found(status: &tonic::Status, want: &str, secret: &str) {
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert_eq!(reason(status), want);
    assert!(
        !status.message().contains(secret),
        "the refusal echoes nothing: {}",
        status.message()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn another_principals_lease_is_not_found_until_it_administers_leases() {
    let (_sim, mut s) = two_animators().await;
    let mut req = request(exact("gpu0:chat:m"));
    req.ttl_seconds = 600;
    let a = granted(lease_req(&mut s.client, req).await);
    let (b_id, _, mut b) = principal(
        &s,
        "b",
        &[
            ("dispatcher:lease", "capability:*"),
            ("dispatcher:lease", "lease:*"),
            ("dispatcher:read", "lease:*"),
        ],
    )
    .await;

    // B names A's lease and A's holder: nothing of A's is touched or shown.
    let err = b
        .renew_lease(renew(&a.lease_id, "worker-1"))
        .await
        .expect_err("renew");
    not_found(&err, "LEASE_NOT_FOUND", &a.lease_id);
    let err = b
        .release_lease(release(&a.lease_id, "worker-1"))
        .await
        .expect_err("release");
    not_found(&err, "LEASE_NOT_FOUND", &a.lease_id);
    let err = b.get_lease(get(&a.lease_id)).await.expect_err("get");
    not_found(&err, "LEASE_NOT_FOUND", &a.lease_id);
    assert!(
        leases(&mut b, true).await.is_empty(),
        "B sees none of A's leases"
    );
    let mine = leases(&mut s.client, false).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].expires_at, a.expires_at, "A's lease is unchanged");
    // B's own lease is B's: listed, found, released.
    let own = granted(lease(&mut b, exact("gpu1:chat:m")).await);
    let listed = leases(&mut b, true).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].lease_id, own.lease_id);
    assert_eq!(listed[0].principal_id, b_id);
    b.get_lease(get(&own.lease_id)).await.expect("own lease");
    assert_eq!(
        leases(&mut s.client, false).await.len(),
        1,
        "A sees only its own"
    );

    // The administrative actions: B sees every lease, then renews and releases A's.
    grant(&s, &b_id, "dispatcher:read_all", "lease:*").await;
    assert_eq!(leases(&mut b, true).await.len(), 2);
    let seen = b
        .get_lease(get(&a.lease_id))
        .await
        .expect("read_all")
        .into_inner();
    assert_eq!(seen.lease.expect("lease").lease_id, a.lease_id);
    let err = b
        .renew_lease(renew(&a.lease_id, "worker-1"))
        .await
        .expect_err("no lease_admin");
    not_found(&err, "LEASE_NOT_FOUND", &a.lease_id);
    grant(&s, &b_id, "dispatcher:lease_admin", "lease:*").await;
    let renewed = b
        .renew_lease(renew(&a.lease_id, "worker-1"))
        .await
        .expect("lease admin renews")
        .into_inner()
        .lease
        .expect("lease");
    assert!(renewed.expires_at.expect("expiry").seconds < a.expires_at.expect("expiry").seconds);
    let err = b
        .release_lease(release(&a.lease_id, "other"))
        .await
        .expect_err("holder");
    assert_eq!(reason(&err), "LEASE_HOLDER_MISMATCH");
    let released = b
        .release_lease(release(&a.lease_id, "worker-1"))
        .await
        .expect("lease admin releases")
        .into_inner();
    assert!(!released.already_over);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_principals_closure_is_not_found_and_its_request_id_is_not_theirs() {
    let (_sim, mut s) = two_animators().await;
    let closed = close(&mut s.orchestrator, "transition-1", &["gpu0"]).await;
    let (other_id, _, mut other) = principal(
        &s,
        "second-orchestrator",
        &[("dispatcher:admission", "animator:*")],
    )
    .await;

    let err = other
        .reopen_admission(pb::ReopenAdmissionRequest {
            closure_token: closed.closure_token.clone(),
        })
        .await
        .expect_err("not its closure");
    not_found(&err, "CLOSURE_NOT_FOUND", &closed.closure_token);
    // Its own request id of the same text is its own closure (not a replay of the first, and
    // not a conflict with it).
    let own = close(&mut other, "transition-1", &["gpu0", "gpu1"]).await;
    assert!(!own.replayed);
    assert_ne!(own.closure_token, closed.closure_token);
    let again = close(&mut other, "transition-1", &["gpu0", "gpu1"]).await;
    assert!(again.replayed);
    assert_eq!(again.closure_token, own.closure_token);
    // Its own closure it reopens; the first stays closed.
    reopen(&mut other, &own.closure_token).await;
    transition(lease(&mut s.client, exact("gpu0:chat:m")).await);

    grant(&s, &other_id, "dispatcher:admission_admin", "closure:*").await;
    let r = reopen(&mut other, &closed.closure_token).await;
    assert!(!r.already_reopened);
    assert_eq!(r.admission[0].open_closures, 0);
    granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn reopening_needs_admission_on_the_closures_animators() {
    let (_sim, mut s) = two_animators().await;
    let closed = close(&mut s.orchestrator, "t", &["gpu0", "gpu1"]).await;
    // The closer itself, holding admission on one of the two animators only.
    let (_, _, mut partial) =
        principal(&s, "partial", &[("dispatcher:admission", "animator:gpu0")]).await;
    let mine = close(&mut partial, "p", &["gpu0"]).await;
    reopen(&mut partial, &mine.closure_token).await;
    let err = partial
        .reopen_admission(pb::ReopenAdmissionRequest {
            closure_token: closed.closure_token.clone(),
        })
        .await
        .expect_err("not allowed on gpu1");
    assert_eq!(err.code(), Code::PermissionDenied);
    assert!(
        !err.message().contains(&closed.closure_token),
        "{}",
        err.message()
    );
    // An unknown token tells a caller without admission on every animator nothing.
    let err = partial
        .reopen_admission(pb::ReopenAdmissionRequest {
            closure_token: uuid::Uuid::new_v4().to_string(),
        })
        .await
        .expect_err("unknown");
    assert_eq!(err.code(), Code::PermissionDenied);
    let err = s
        .orchestrator
        .reopen_admission(pb::ReopenAdmissionRequest {
            closure_token: uuid::Uuid::new_v4().to_string(),
        })
        .await
        .expect_err("unknown");
    assert_eq!(reason(&err), "CLOSURE_NOT_FOUND");
    reopen(&mut s.orchestrator, &closed.closure_token).await;
    s.spawned.stop().await;
}

/// Dispatch events name lease ids: a reader sees the events of its own leases only, in a
/// listing and while following, unless Ward allows it `dispatcher:read_all` on `lease:*`
/// (every principal's leases; the operator holds it in `lychd dev`).
#[tokio::test(flavor = "multi_thread")]
async fn dispatch_events_show_only_the_callers_own_leases_without_read_all() {
    let (_sim, mut s) = two_animators().await;
    let (b_id, _, mut b) = principal(
        &s,
        "b",
        &[
            ("dispatcher:lease", "capability:*"),
            ("dispatcher:read", "event:*"),
        ],
    )
    .await;
    let mut b_follows = b
        .watch_dispatch_events(pb::WatchDispatchEventsRequest {
            after_sequence: 0,
            follow: true,
        })
        .await
        .expect("watch")
        .into_inner();
    let a1 = granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    let b1 = granted(lease(&mut b, exact("gpu1:chat:m")).await);
    let a2 = granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    let b2 = granted(lease(&mut b, exact("gpu1:chat:m")).await);
    let ids = |events: Vec<pb::DispatchEvent>| -> Vec<String> {
        events.into_iter().map(|e| e.lease_id).collect()
    };
    assert_eq!(
        ids(events(&mut b).await),
        [b1.lease_id.as_str(), &b2.lease_id]
    );
    assert_eq!(
        ids(events(&mut s.client).await),
        [a1.lease_id.as_str(), &a2.lease_id]
    );
    // Following: A's events are skipped, B's arrive in order.
    assert_eq!(next_event(&mut b_follows).await.lease_id, b1.lease_id);
    assert_eq!(next_event(&mut b_follows).await.lease_id, b2.lease_id);
    let a3 = granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    let b3 = granted(lease(&mut b, exact("gpu1:chat:m")).await);
    assert_eq!(next_event(&mut b_follows).await.lease_id, b3.lease_id);
    drop(b_follows);
    // With the broader grant, every principal's events.
    grant(&s, &b_id, "dispatcher:read_all", "lease:*").await;
    assert_eq!(
        ids(events(&mut b).await),
        [
            a1.lease_id.as_str(),
            &b1.lease_id,
            &a2.lease_id,
            &b2.lease_id,
            &a3.lease_id,
            &b3.lease_id
        ]
    );
    s.spawned.stop().await;
}
