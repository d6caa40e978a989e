//! Graceful shutdown of a real office process: SIGTERM → health NOT_SERVING → the in-flight
//! call completes → exit 0 within the grace period; a second signal exits at once.

use std::time::Duration;

use futures::StreamExt;
use lychd_runtime::Office;
use lychd_testkit::Sandbox;
use nix::sys::signal::Signal;
use tokio::net::TcpListener;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// A peer that accepts TCP connections and never answers: a Describe with peers stays in
/// flight for the peer timeout (2 s).
async fn silent_peer() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
    (listener, endpoint)
}

fn ward_client(
    sandbox: &Sandbox,
) -> lychd_proto::ward::v1::ward_client::WardClient<lychd_runtime::client::PeerChannel> {
    let channel = crate::channel_with(&sandbox.office(Office::Ward).endpoint(), &sandbox.token);
    lychd_proto::ward::v1::ward_client::WardClient::new(channel)
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_drains_in_flight_call_and_exits_zero() {
    let (_silent, endpoint) = silent_peer().await;
    let mut sandbox = Sandbox::builder()
        .office(Office::Ward)
        .peer_endpoint(Office::Ward, Office::Archive, endpoint)
        .shutdown_grace_ms(8_000)
        .start()
        .await;
    let channel = tonic::transport::Endpoint::from_shared(sandbox.office(Office::Ward).endpoint())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut watch = HealthClient::new(channel)
        .watch(HealthCheckRequest {
            service: "lychd.ward.v1.Ward".into(),
        })
        .await
        .expect("watch")
        .into_inner();
    let first = watch.next().await.expect("first status").expect("ok");
    assert_eq!(first.status, 1, "SERVING before the signal");

    let mut client = ward_client(&sandbox);
    let in_flight = tokio::spawn(async move {
        client
            .describe(lychd_proto::ward::v1::DescribeRequest {
                include_peers: true,
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    sandbox.office(Office::Ward).signal(Signal::SIGTERM);

    let next = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("health changes");
    assert_eq!(
        next.expect("status").expect("ok").status,
        2,
        "NOT_SERVING after SIGTERM"
    );

    let answer = in_flight
        .await
        .expect("join")
        .expect("in-flight call completes");
    let office = answer.into_inner().office.expect("office");
    assert_eq!(office.peers.len(), 1);
    assert_eq!(
        office.peers[0].state,
        lychd_proto::common::v1::ServingState::Unreachable as i32
    );

    let status = sandbox
        .office_mut(Office::Ward)
        .wait_exit(Duration::from_secs(8))
        .await
        .expect("exits within grace");
    assert!(status.success(), "exit status {status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn second_signal_exits_at_once() {
    let (_silent, endpoint) = silent_peer().await;
    let mut sandbox = Sandbox::builder()
        .office(Office::Ward)
        .peer_endpoint(Office::Ward, Office::Archive, endpoint)
        .shutdown_grace_ms(30_000)
        .start()
        .await;
    let mut client = ward_client(&sandbox);
    let in_flight = tokio::spawn(async move {
        client
            .describe(lychd_proto::ward::v1::DescribeRequest {
                include_peers: true,
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    sandbox.office(Office::Ward).signal(Signal::SIGTERM);
    tokio::time::sleep(Duration::from_millis(200)).await;
    sandbox.office(Office::Ward).signal(Signal::SIGINT);
    let status = sandbox
        .office_mut(Office::Ward)
        .wait_exit(Duration::from_secs(1))
        .await
        .expect("exits at once");
    assert_eq!(status.code(), Some(130));
    let _ = in_flight.await;
}

/// Ward's own API decides through its verifier, whose records go to a decision log written in
/// batches behind the answers: a call's record is in the audit, and a graceful shutdown under
/// load writes the record of every call answered before the process exits.
#[tokio::test(flavor = "multi_thread")]
async fn ward_api_decisions_are_audited_and_a_graceful_shutdown_loses_none() {
    let mut sandbox = Sandbox::builder()
        .office(Office::Ward)
        .shutdown_grace_ms(8_000)
        .start()
        .await;
    let own_checks = "SELECT count(*) FROM ward.audit
                       WHERE event = 'authorize.allow' AND actor_id IS NULL
                         AND detail->>'action' = 'ward:administer'
                         AND detail->>'object' = 'principal:*'";
    let list = |mut c: lychd_proto::ward::v1::ward_client::WardClient<_>| async move {
        c.list_principals(lychd_proto::ward::v1::ListPrincipalsRequest::default())
            .await
            .map(|_| ())
    };

    // One call: its decision's record is in the audit (listing it writes what is queued).
    // What the sandbox's own start-up asked may still be queued: listing the audit once first
    // writes it, so the count below moves only by this call and the listing after it.
    let mut db = sandbox.db.superuser().await;
    sandbox.admin().audit(1).await.expect("audit listed");
    let before = own_records(&mut db, own_checks).await;
    list(ward_client(&sandbox)).await.expect("listed");
    sandbox.admin().audit(1).await.expect("audit listed");
    // The call's record, and that of the listing's own check (the same action and object).
    assert_eq!(
        own_records(&mut db, own_checks).await,
        before + 2,
        "the call's record"
    );

    // Callers back to back; SIGTERM while they run. Every answered call's record is written
    // by the time the process has exited (records queued within the last moments included).
    let before = own_records(&mut db, own_checks).await;
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let client = ward_client(&sandbox);
            let answered = answered.clone();
            tokio::spawn(async move {
                while list(client.clone()).await.is_ok() {
                    answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    sandbox.office(Office::Ward).signal(Signal::SIGTERM);
    let status = sandbox
        .office_mut(Office::Ward)
        .wait_exit(Duration::from_secs(8))
        .await
        .expect("exits within grace");
    assert!(status.success(), "exit status {status}");
    for c in callers {
        c.await.expect("caller");
    }
    let answered = answered.load(std::sync::atomic::Ordering::Relaxed);
    assert!(answered > 50, "the callers ran: {answered}");
    let written =
        u64::try_from(own_records(&mut db, own_checks).await - before).expect("not fewer");
    // A call whose answer was cut off by the exit may be recorded without being counted here.
    assert!(
        written >= answered,
        "records written {written}, calls answered {answered}"
    );
}

async fn own_records(db: &mut sqlx::PgConnection, query: &str) -> i64 {
    sqlx::query_scalar(query)
        .fetch_one(db)
        .await
        .expect("count")
}
