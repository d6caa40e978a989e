//! The in-process test helpers and the server's layer stack: typed clients, request ids,
//! per-request timeout, peers over real sockets.

use lychd_proto::common::v1::ServingState;
use lychd_runtime::Office;
use lychd_testkit::{spawn_dispatcher, spawn_office_with, spawn_ward};

#[tokio::test(flavor = "multi_thread")]
async fn spawned_offices_answer_typed_clients_and_echo_request_ids() {
    let (ward, mut ward_client) = spawn_ward().await;
    let (dispatcher, mut dispatcher_client) = spawn_dispatcher().await;

    let answer = ward_client
        .describe(lychd_proto::ward::v1::DescribeRequest {
            include_peers: false,
        })
        .await
        .expect("ward describe");
    let generated = answer
        .metadata()
        .get("x-request-id")
        .expect("request id generated")
        .to_str()
        .expect("ascii");
    assert_eq!(generated.len(), 36, "a UUID: {generated}");
    assert_eq!(
        answer.into_inner().office.expect("office").schema_version,
        1
    );

    let mut request = tonic::Request::new(lychd_proto::dispatcher::v1::DescribeRequest {
        include_peers: false,
    });
    request
        .metadata_mut()
        .insert("x-request-id", "op-1234".parse().expect("ascii"));
    let answer = dispatcher_client
        .describe(request)
        .await
        .expect("dispatcher describe");
    assert_eq!(
        answer.metadata().get("x-request-id").expect("echoed"),
        "op-1234"
    );

    ward.server.stop().await.expect("ward stops");
    dispatcher.server.stop().await.expect("dispatcher stops");
}

#[tokio::test(flavor = "multi_thread")]
async fn request_timeout_cuts_a_slow_call() {
    // A peer that accepts and never answers keeps Describe busy for the 2 s peer timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let endpoint = format!("http://{}", silent.local_addr().expect("addr"));
    let spawned = spawn_office_with(Office::Archive, |cfg| {
        cfg.server.request_timeout_ms = 300;
        cfg.peers.insert(
            "ward".into(),
            lychd_runtime::config::PeerConfig { endpoint },
        );
    })
    .await;
    let mut client =
        lychd_proto::archive::v1::archive_client::ArchiveClient::new(spawned.channel());
    let started = std::time::Instant::now();
    let status = client
        .describe(lychd_proto::archive::v1::DescribeRequest {
            include_peers: true,
        })
        .await
        .expect_err("the server's request timeout ends the call");
    assert!(
        started.elapsed() < std::time::Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            status.code(),
            tonic::Code::Cancelled | tonic::Code::DeadlineExceeded
        ),
        "{status:?}"
    );
    // Without peers the call is fast and succeeds.
    let ok = client
        .describe(lychd_proto::archive::v1::DescribeRequest {
            include_peers: false,
        })
        .await
        .expect("fast call");
    assert_eq!(ok.into_inner().office.expect("office").office, "archive");
    spawned.server.stop().await.expect("stops");
}

#[tokio::test(flavor = "multi_thread")]
async fn peers_report_refusal_and_unreachable() {
    let (ward, _) = spawn_ward().await;
    let closed = lychd_pg::free_port().expect("port");
    let spawned = spawn_office_with(Office::HelmLoop, |cfg| {
        cfg.peers.insert(
            "ward".into(),
            lychd_runtime::config::PeerConfig {
                endpoint: ward.endpoint(),
            },
        );
        cfg.peers.insert(
            "archive".into(),
            lychd_runtime::config::PeerConfig {
                endpoint: format!("http://127.0.0.1:{closed}"),
            },
        );
    })
    .await;
    // The HelmLoop office presents its own credential, which the ward spawned here does not
    // accept: the peer answers, but refuses — not SERVING, and the reason is the status code.
    let mut client =
        lychd_proto::helmloop::v1::helm_loop_client::HelmLoopClient::new(spawned.channel());
    let office = client
        .describe(lychd_proto::helmloop::v1::DescribeRequest {
            include_peers: true,
        })
        .await
        .expect("describe")
        .into_inner()
        .office
        .expect("office");
    let by_name: std::collections::BTreeMap<_, _> = office
        .peers
        .iter()
        .map(|p| (p.office.as_str(), p))
        .collect();
    assert_eq!(by_name["archive"].state, ServingState::Unreachable as i32);
    assert_eq!(by_name["ward"].state, ServingState::NotServing as i32);
    assert_eq!(by_name["ward"].detail, "Unauthenticated");
    spawned.server.stop().await.expect("stops");
    ward.server.stop().await.expect("stops");
}
