//! A lost answer is recoverable, never duplicated: `Lease` under a request id returns the first
//! answer to every retry of the same request (also when calls race), refuses a different
//! request under the same id, and `GetLease`/`ListLeases` find the lease by its request id.

use std::time::Duration;

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::simllama::{SimLlama, SimModel};
use tonic::Code;

use crate::common::*;

async fn one_warm() -> (SimLlama, Stack) {
    let sim = SimLlama::serving("m").await;
    let s = stack(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
    )
    .await;
    (sim, s)
}

fn asked(request_id: &str) -> pb::LeaseRequest {
    pb::LeaseRequest {
        request_id: request_id.into(),
        ..request(exact("gpu0:chat:m"))
    }
}

fn by_request(request_id: &str) -> pb::GetLeaseRequest {
    pb::GetLeaseRequest {
        lookup: Some(pb::get_lease_request::Lookup::RequestId(request_id.into())),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retry_after_a_lost_answer_gets_the_same_grant_and_finds_the_lease() {
    let (sim, mut s) = one_warm().await;
    s.spawned.allow("dispatcher:read_all", "lease:*").await;
    // The first answer is lost: the caller gives up while the probe is slow; the office
    // finishes the issue anyway.
    sim.set_delay(Duration::from_millis(300));
    let mut lost = tonic::Request::new(asked("run-7/attempt-1"));
    lost.set_timeout(Duration::from_millis(100));
    let err = s
        .client
        .lease(lost)
        .await
        .expect_err("the caller stopped waiting");
    assert!(
        matches!(err.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{err:?}"
    );
    // Found by its request id (once the office has written it).
    let mut found = None;
    for _ in 0..50 {
        match s.client.get_lease(by_request("run-7/attempt-1")).await {
            Ok(r) => {
                found = r.into_inner().lease;
                break;
            }
            Err(e) => {
                assert_eq!(reason(&e), "LEASE_NOT_FOUND");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let found = found.expect("the lease of the lost answer is found by its request id");
    assert_eq!(found.request_id, "run-7/attempt-1");
    sim.set_delay(Duration::ZERO);

    // The retry gets the same grant, and writes nothing new.
    let retried = granted(lease_req(&mut s.client, asked("run-7/attempt-1")).await);
    assert_eq!(retried.lease_id, found.lease_id);
    assert_eq!(retried.capability_key, "gpu0:chat:m");
    assert!(retried.route.is_some());
    let listed = s
        .client
        .list_leases(pb::ListLeasesRequest {
            request_id: "run-7/attempt-1".into(),
            include_inactive: true,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .leases;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].lease_id, found.lease_id);
    assert_eq!(leases(&mut s.client, true).await.len(), 1, "one lease");
    assert_eq!(events(&mut s.client).await.len(), 1, "one event");
    // Recovered: released by the caller.
    s.client
        .release_lease(pb::ReleaseLeaseRequest {
            lease_id: found.lease_id.clone(),
            holder: "worker-1".into(),
        })
        .await
        .expect("release");
    // Another request id is another lease.
    let other = granted(lease_req(&mut s.client, asked("run-7/attempt-2")).await);
    assert_ne!(other.lease_id, found.lease_id);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_leases_with_one_request_id_make_one_lease() {
    let (sim, mut s) = one_warm().await;
    // Slow enough that the calls overlap at registration.
    sim.set_delay(Duration::from_millis(50));
    let calls = (0..6).map(|_| {
        let mut c = s.client.clone();
        tokio::spawn(async move { granted(lease_req(&mut c, asked("once")).await) })
    });
    let grants = futures::future::join_all(calls).await;
    let ids: std::collections::BTreeSet<String> = grants
        .into_iter()
        .map(|g| g.expect("join").lease_id)
        .collect();
    assert_eq!(ids.len(), 1, "every call got the same lease: {ids:?}");
    assert_eq!(leases(&mut s.client, true).await.len(), 1);
    assert_eq!(events(&mut s.client).await.len(), 1);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_different_request_under_the_same_id_is_refused() {
    let (_sim, mut s) = one_warm().await;
    let first = granted(lease_req(&mut s.client, asked("r-1")).await);
    for changed in [
        pb::LeaseRequest {
            priority: 60,
            ..asked("r-1")
        },
        pb::LeaseRequest {
            holder: "worker-2".into(),
            ..asked("r-1")
        },
        pb::LeaseRequest {
            demand: Some(chat_model("m")),
            ..asked("r-1")
        },
    ] {
        let err = s.client.lease(changed).await.expect_err("another request");
        assert_eq!(err.code(), Code::AlreadyExists);
        assert_eq!(reason(&err), "LEASE_REQUEST_CONFLICT");
    }
    // The same request still gets its answer.
    let again = granted(lease_req(&mut s.client, asked("r-1")).await);
    assert_eq!(again.lease_id, first.lease_id);
    assert_eq!(leases(&mut s.client, true).await.len(), 1);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_that_is_not_a_grant_is_kept_too() {
    let (sim, mut s) = one_warm().await;
    sim.set_models(vec![]);
    let t = transition(lease_req(&mut s.client, asked("cold-1")).await);
    assert_eq!(t.capability_key, "gpu0:chat:m");
    sim.set_models(vec![SimModel::served("m")]);
    // The runtime is WARM now, but this request was answered: the same answer.
    transition(lease_req(&mut s.client, asked("cold-1")).await);
    let err = s
        .client
        .get_lease(by_request("cold-1"))
        .await
        .expect_err("no lease was issued under it");
    assert_eq!(reason(&err), "LEASE_NOT_FOUND");
    granted(lease_req(&mut s.client, asked("cold-2")).await);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn request_ids_are_their_principals_own() {
    let (_sim, mut s) = one_warm().await;
    let (_, _, mut b) = principal(
        &s,
        "b",
        &[
            ("dispatcher:lease", "capability:*"),
            ("dispatcher:read", "lease:*"),
        ],
    )
    .await;
    let a = granted(lease_req(&mut s.client, asked("shared-id")).await);
    // B's request of the same id — even a different request — is B's own first request.
    let mut req = asked("shared-id");
    req.priority = 10;
    let b_lease = granted(lease_req(&mut b, req).await);
    assert_ne!(b_lease.lease_id, a.lease_id);
    let found = b
        .get_lease(by_request("shared-id"))
        .await
        .expect("own")
        .into_inner()
        .lease
        .expect("lease");
    assert_eq!(found.lease_id, b_lease.lease_id);
    s.spawned.stop().await;
}
