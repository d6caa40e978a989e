//! Database faults between the Dispatcher and PostgreSQL (the test kit's `FaultProxy`; Ward is
//! reached directly). A lease is registered by one self-committing statement: losing the
//! connection after it was sent is `OUTCOME_UNKNOWN` (it may have leased), never "nothing
//! changed"; under a request id the retry answers the lease it made, without one the caller
//! finds it with `ListLeases`. A database unreachable before the write is
//! `DATABASE_UNAVAILABLE` and leases nothing.

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::FaultProxy;
use lychd_testkit::simllama::SimLlama;
use tonic::Code;

use crate::common::*;

async fn one_warm_behind(proxy: &FaultProxy) -> (SimLlama, Stack) {
    let sim = SimLlama::serving("m").await;
    let s = stack_adjusted(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
        "",
        |c| proxy.route(&mut c.database.url),
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

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_whose_answer_is_lost_is_unknown_and_its_retry_by_request_id_is_the_same_lease() {
    let proxy = FaultProxy::start().await;
    let (_sim, mut s) = one_warm_behind(&proxy).await;

    // Under a request id: the statement that registers the lease reaches PostgreSQL, its
    // answer is lost.
    proxy.drop_after_statement("INSERT INTO dispatch_events");
    let lost = s.client.lease(asked("run-1/a1")).await.expect_err("lost");
    assert_eq!(proxy.fired(), 1);
    assert_eq!(
        (lost.code(), reason(&lost).as_str()),
        (Code::Unavailable, "OUTCOME_UNKNOWN"),
        "{lost:?}"
    );
    let live = leases(&mut s.client, false).await;
    assert_eq!(live.len(), 1, "it did lease");
    let retried = granted(lease_req(&mut s.client, asked("run-1/a1")).await);
    assert_eq!(
        retried.lease_id, live[0].lease_id,
        "the retry is the same lease"
    );
    assert_eq!(leases(&mut s.client, false).await.len(), 1);
    assert_eq!(events(&mut s.client).await.len(), 1, "one dispatch event");

    // Without a request id the outcome is just as unknown; the lease is found by its holder.
    proxy.drop_after_statement("INSERT INTO dispatch_events");
    let lost = s
        .client
        .lease(request(exact("gpu0:chat:m")))
        .await
        .expect_err("lost");
    assert_eq!(reason(&lost), "OUTCOME_UNKNOWN");
    let live = leases(&mut s.client, false).await;
    assert_eq!(live.len(), 2);
    assert!(live.iter().all(|l| l.holder == "worker-1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_against_an_unreachable_database_is_unavailable_and_leases_nothing() {
    let proxy = FaultProxy::start().await;
    let (_sim, mut s) = one_warm_behind(&proxy).await;
    proxy.refuse(true);
    let refused = s
        .client
        .lease(asked("run-2/a1"))
        .await
        .expect_err("unreachable");
    assert_eq!(
        (refused.code(), reason(&refused).as_str()),
        (Code::Unavailable, "DATABASE_UNAVAILABLE"),
        "{refused:?}"
    );
    proxy.refuse(false);
    // Connections that broke while idle fail the one statement sent on each (the pool does
    // not ping before use): retried as a caller would, until the database answers.
    let mut tries = 0;
    let live = loop {
        match s.client.list_leases(pb::ListLeasesRequest::default()).await {
            Ok(r) => break r.into_inner().leases,
            Err(e) if reason(&e) == "DATABASE_UNAVAILABLE" && tries < 16 => tries += 1,
            Err(e) => panic!("list after the database came back: {e:?}"),
        }
    };
    assert!(live.is_empty());
    // The retry, with the database back, leases once.
    let mut tries = 0;
    loop {
        match s.client.lease(asked("run-2/a1")).await {
            Ok(r) => {
                granted(r.into_inner().outcome.expect("outcome"));
                break;
            }
            Err(e) if reason(&e) == "DATABASE_UNAVAILABLE" && tries < 16 => tries += 1,
            Err(e) => panic!("lease after the database came back: {e:?}"),
        }
    }
    assert_eq!(leases(&mut s.client, false).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_waits_for_a_held_admission_row_at_most_the_lock_timeout() {
    let sim = SimLlama::serving("m").await;
    let mut s = stack_adjusted(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
        "",
        |c| c.database.lock_timeout_ms = 300,
    )
    .await;
    let mut holder = s.spawned.db.superuser().await;
    sqlx::query("BEGIN")
        .execute(&mut holder)
        .await
        .expect("begin");
    sqlx::query("SELECT 1 FROM dispatcher.admission WHERE animator = 'gpu0' FOR UPDATE")
        .execute(&mut holder)
        .await
        .expect("lock");
    let waited = s
        .client
        .lease(asked("run-3/a1"))
        .await
        .expect_err("the admission row is held");
    assert_eq!(
        (waited.code(), reason(&waited).as_str()),
        (Code::Aborted, "LOCK_TIMEOUT"),
        "{waited:?}"
    );
    sqlx::query("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("release");
    assert!(leases(&mut s.client, false).await.is_empty());
    granted(lease_req(&mut s.client, asked("run-3/a1")).await);
}
