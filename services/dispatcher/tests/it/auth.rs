//! Every RPC is refused without a credential, and without the authority it declares.

use lychd_proto::dispatcher::v1 as pb;
use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
use lychd_testkit::simllama::SimLlama;
use tokio_stream::StreamExt;
use tonic::Code;

use crate::common::*;

/// Call every RPC with `c`; return the status code of each (OK when it succeeded).
async fn every_rpc(c: &mut Client) -> Vec<(&'static str, Code)> {
    fn code<T>(r: Result<T, tonic::Status>) -> Code {
        r.map(|_| Code::Ok).unwrap_or_else(|s| s.code())
    }
    let id = uuid::Uuid::new_v4().to_string();
    let mut out = vec![
        (
            "Describe",
            code(
                c.describe(pb::DescribeRequest {
                    include_peers: false,
                })
                .await,
            ),
        ),
        (
            "ListCapabilities",
            code(c.list_capabilities(pb::ListCapabilitiesRequest {}).await),
        ),
        ("Lease", code(c.lease(request(exact("gpu0:chat:m"))).await)),
        (
            "RenewLease",
            code(
                c.renew_lease(pb::RenewLeaseRequest {
                    lease_id: id.clone(),
                    holder: "h".into(),
                    ttl_seconds: 0,
                })
                .await,
            ),
        ),
        (
            "ReleaseLease",
            code(
                c.release_lease(pb::ReleaseLeaseRequest {
                    lease_id: id.clone(),
                    holder: "h".into(),
                })
                .await,
            ),
        ),
        (
            "GetLease",
            code(
                c.get_lease(pb::GetLeaseRequest {
                    lookup: Some(pb::get_lease_request::Lookup::LeaseId(id.clone())),
                })
                .await,
            ),
        ),
        (
            "ListLeases",
            code(c.list_leases(pb::ListLeasesRequest::default()).await),
        ),
        (
            "ObserveAnimators",
            code(
                c.observe_animators(pb::ObserveAnimatorsRequest {
                    animators: vec!["gpu0".into()],
                })
                .await,
            ),
        ),
        (
            "CloseAdmission",
            code(
                c.close_admission(pb::CloseAdmissionRequest {
                    request_id: "r".into(),
                    animators: vec!["gpu0".into()],
                    reason: "r".into(),
                })
                .await,
            ),
        ),
        (
            "AwaitDrain",
            code(
                c.await_drain(pb::AwaitDrainRequest {
                    animators: vec!["gpu0".into()],
                    wait_ms: 0,
                })
                .await,
            ),
        ),
        (
            "ReopenAdmission",
            code(
                c.reopen_admission(pb::ReopenAdmissionRequest {
                    closure_token: id.clone(),
                })
                .await,
            ),
        ),
    ];
    let watch = match c
        .watch_dispatch_events(pb::WatchDispatchEventsRequest {
            after_sequence: 0,
            follow: false,
        })
        .await
    {
        Ok(s) => s
            .into_inner()
            .next()
            .await
            .map(|r| r.map(|_| ()))
            .unwrap_or(Ok(())),
        Err(e) => Err(e),
    };
    out.push(("WatchDispatchEvents", code(watch)));
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn every_rpc_is_refused_without_a_credential_or_the_authority() {
    let sim = SimLlama::serving("m").await;
    let s = stack(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
    )
    .await;

    // No credential at all: a channel whose outgoing interceptor has no session.
    let bare = lychd_runtime::client::peer_channel(
        &s.spawned.endpoint(),
        lychd_runtime::client::Outgoing::default(),
    )
    .expect("channel");
    let mut anonymous = DispatcherClient::new(bare);
    let mut checked = 0;
    for (rpc, code) in every_rpc(&mut anonymous).await {
        assert_eq!(code, Code::Unauthenticated, "{rpc} without a credential");
        checked += 1;
    }
    assert_eq!(checked, 12, "every RPC of the service");

    // A bearer Ward does not know (well-formed or not): refused as unauthenticated, whether
    // the layer or the handler's own authorization asks Ward.
    for bearer in [format!("lws_{}", "0".repeat(64)), "forged".to_owned()] {
        let mut stranger = DispatcherClient::new(s.spawned.channel_with(&bearer));
        for (rpc, code) in every_rpc(&mut stranger).await {
            assert_eq!(code, Code::Unauthenticated, "{rpc} with an unknown session");
        }
    }

    // A principal Ward knows but that holds no dispatcher authority.
    let (_, nobody) = s
        .spawned
        .principal(lychd_proto::ward::v1::PrincipalKind::Human, "nobody")
        .await;
    let mut powerless = DispatcherClient::new(s.spawned.channel_with(&nobody));
    for (rpc, code) in every_rpc(&mut powerless).await {
        assert_eq!(code, Code::PermissionDenied, "{rpc} without authority");
    }
    assert_eq!(sim.requests(), 0, "nothing was probed for a refused caller");
    s.spawned.stop().await;
}
