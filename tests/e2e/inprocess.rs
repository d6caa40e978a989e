//! The in-process test helpers and the server's layer stack: typed clients, request ids,
//! per-request timeout, peers over real sockets.

use lychd_proto::common::v1::ServingState;
use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::Office;
use lychd_testkit::{spawn_office, spawn_office_with};

#[tokio::test(flavor = "multi_thread")]
async fn spawned_offices_answer_typed_clients_and_echo_request_ids() {
    let ward = spawn_office(lychd_ward::spec()).await;
    let mut ward_client = WardClient::new(ward.channel());
    let dispatcher = spawn_office(lychd_dispatcher::spec()).await;
    let mut dispatcher_client = DispatcherClient::new(dispatcher.channel());

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
        crate::latest_migration(Office::Ward)
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

    ward.stop().await;
    dispatcher.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn request_timeout_cuts_a_slow_call() {
    // A peer that accepts and never answers keeps Describe busy for the 2 s peer timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let endpoint = format!("http://{}", silent.local_addr().expect("addr"));
    let spawned = spawn_office_with(lychd_archive::spec(), |cfg| {
        cfg.server.request_timeout_ms = 300;
        cfg.peers.insert(
            "ward".into(),
            lychd_runtime::config::PeerConfig { endpoint },
        );
    })
    .await;
    let mut client =
        lychd_proto::archive::v1::archive_client::ArchiveClient::new(spawned.channel());
    let status = client
        .describe(lychd_proto::archive::v1::DescribeRequest {
            include_peers: true,
        })
        .await
        .expect_err("the server's request timeout ends the call");
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
    spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn peers_need_authority_and_unreachable_peers_are_reported() {
    let closed = lychd_pg::free_port().expect("port");
    // Spawning configures `peers.ward`; add an archive nobody listens for.
    let spawned = spawn_office_with(lychd_helmloop_service::spec(), |cfg| {
        cfg.peers.insert(
            "archive".into(),
            lychd_runtime::config::PeerConfig {
                endpoint: format!("http://127.0.0.1:{closed}"),
            },
        );
    })
    .await;
    let mut client =
        lychd_proto::helmloop::v1::helm_loop_client::HelmLoopClient::new(spawned.channel());
    let describe = |client: &mut lychd_proto::helmloop::v1::helm_loop_client::HelmLoopClient<_>| {
        let mut client = client.clone();
        async move {
            let office = client
                .describe(lychd_proto::helmloop::v1::DescribeRequest {
                    include_peers: true,
                })
                .await
                .expect("describe")
                .into_inner()
                .office
                .expect("office");
            office
                .peers
                .into_iter()
                .map(|p| (p.office.clone(), p))
                .collect::<std::collections::BTreeMap<_, _>>()
        }
    };
    // The office's service principal starts with no power over Ward's Describe.
    let peers = describe(&mut client).await;
    assert_eq!(peers["archive"].state, ServingState::Unreachable as i32);
    assert_eq!(peers["ward"].state, ServingState::NotServing as i32);
    assert_eq!(peers["ward"].detail, "PermissionDenied");

    // Granting it takes effect on the next call.
    let mut admin = spawned.admin.clone();
    let service = admin
        .ensure_principal(lychd_proto::ward::v1::PrincipalKind::Service, "helmloop")
        .await
        .expect("service principal");
    admin.allow_describe(&service, "ward").await.expect("grant");
    let peers = describe(&mut client).await;
    assert_eq!(
        peers["ward"].state,
        ServingState::Serving as i32,
        "{:?}",
        peers["ward"]
    );
    spawned.stop().await;
}
