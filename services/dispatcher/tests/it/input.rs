//! Bad input of every kind: INVALID_ARGUMENT with a stable reason and the fields named, and
//! nothing changed.

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::simllama::SimLlama;
use tonic::Code;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn bad_lease_requests_are_refused_and_change_nothing() {
    let sim = SimLlama::serving("m").await;
    let mut s = stack(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
    )
    .await;
    let cases: Vec<(pb::LeaseRequest, &str, &str)> = vec![
        (
            request(exact("gpu0:chat")),
            "CAPABILITY_KEY_MALFORMED",
            "demand.capability_key",
        ),
        (
            request(exact("gpu0:chat:models/m")),
            "CAPABILITY_KEY_MALFORMED",
            "demand.capability_key",
        ),
        (
            request(exact("gpu0:audio:m")),
            "CAPABILITY_KEY_MALFORMED",
            "demand.capability_key",
        ),
        (
            request(exact("gpu0:chat:m-latest")),
            "CAPABILITY_KEY_MALFORMED",
            "demand.capability_key",
        ),
        (
            request(exact("gpu0:model.chat@1:m@r1")),
            "CAPABILITY_KEY_MALFORMED",
            "demand.capability_key",
        ),
        (
            request(pb::Demand {
                family: 42,
                ..Default::default()
            }),
            "FAMILY_UNKNOWN",
            "demand.family",
        ),
        (
            request(pb::Demand::default()),
            "DEMAND_UNDERSPECIFIED",
            "demand.family",
        ),
        (
            request(pb::Demand {
                input_modalities: vec![9],
                ..chat_model("m")
            }),
            "MODALITY_UNKNOWN",
            "demand.input_modalities[0]",
        ),
        (
            request(chat_model("has space")),
            "MODEL_ID_INVALID",
            "demand.model_id",
        ),
        (
            pb::LeaseRequest {
                priority: 101,
                ..request(chat_model("m"))
            },
            "PRIORITY_OUT_OF_RANGE",
            "priority",
        ),
        (
            pb::LeaseRequest {
                ttl_seconds: 3601,
                ..request(chat_model("m"))
            },
            "TTL_OUT_OF_BOUNDS",
            "ttl_seconds",
        ),
        (
            pb::LeaseRequest {
                holder: String::new(),
                ..request(chat_model("m"))
            },
            "HOLDER_INVALID",
            "holder",
        ),
        (
            pb::LeaseRequest {
                holder: "a\u{7}".into(),
                ..request(chat_model("m"))
            },
            "HOLDER_INVALID",
            "holder",
        ),
        (
            pb::LeaseRequest {
                run_id: "x".repeat(129),
                ..request(chat_model("m"))
            },
            "RUN_ID_INVALID",
            "run_id",
        ),
        (
            pb::LeaseRequest {
                demand: None,
                ..request(chat_model("m"))
            },
            "DEMAND_MISSING",
            "demand",
        ),
    ];
    for (req, want_reason, want_field) in cases {
        let err = s.client.lease(req).await.expect_err(want_reason);
        assert_eq!(err.code(), Code::InvalidArgument, "{want_reason}");
        assert_eq!(reason(&err), want_reason);
        assert_eq!(fields(&err), [want_field], "{want_reason}");
        assert!(
            !err.message().contains("models/m") && !err.message().contains("has space"),
            "no echo: {}",
            err.message()
        );
    }
    assert_eq!(sim.requests(), 0, "nothing probed");
    assert!(
        leases(&mut s.client, true).await.is_empty(),
        "nothing written"
    );
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_admission_and_lease_management_requests_are_refused() {
    let sim = SimLlama::serving("m").await;
    let mut s = stack(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
    )
    .await;
    let o = &mut s.orchestrator;
    let close_err = |r: pb::CloseAdmissionRequest| {
        let mut o = o.clone();
        async move { o.close_admission(r).await.expect_err("bad close") }
    };
    let err = close_err(pb::CloseAdmissionRequest {
        request_id: "r".into(),
        animators: vec![],
        reason: "x".into(),
    })
    .await;
    assert_eq!(
        (reason(&err), fields(&err)),
        ("ANIMATORS_EMPTY".into(), vec!["animators".to_owned()])
    );
    let err = close_err(pb::CloseAdmissionRequest {
        request_id: "r".into(),
        animators: vec!["ghost".into()],
        reason: "x".into(),
    })
    .await;
    assert_eq!(reason(&err), "ANIMATOR_UNKNOWN");
    let err = close_err(pb::CloseAdmissionRequest {
        request_id: String::new(),
        animators: vec!["gpu0".into(), "gpu0".into()],
        reason: String::new(),
    })
    .await;
    assert_eq!(reason(&err), "REQUEST_ID_INVALID");
    assert_eq!(fields(&err), ["request_id", "animators[1]", "reason"]);
    let err = o
        .await_drain(pb::AwaitDrainRequest {
            animators: vec!["gpu0".into()],
            wait_ms: 600_000,
        })
        .await
        .expect_err("wait too long");
    assert_eq!(reason(&err), "WAIT_OUT_OF_BOUNDS");
    let err = o
        .reopen_admission(pb::ReopenAdmissionRequest {
            closure_token: "not-a-token".into(),
        })
        .await
        .expect_err("bad token");
    assert_eq!(reason(&err), "CLOSURE_TOKEN_MALFORMED");
    let err = s
        .client
        .renew_lease(pb::RenewLeaseRequest {
            lease_id: "nope".into(),
            holder: String::new(),
            ttl_seconds: 0,
        })
        .await
        .expect_err("bad renew");
    assert_eq!(reason(&err), "LEASE_ID_MALFORMED");
    assert_eq!(fields(&err), ["lease_id", "holder"]);
    let err = s
        .client
        .release_lease(pb::ReleaseLeaseRequest {
            lease_id: "nope".into(),
            holder: "h".into(),
        })
        .await
        .expect_err("bad release");
    assert_eq!(reason(&err), "LEASE_ID_MALFORMED");
    let err = s
        .client
        .list_leases(pb::ListLeasesRequest {
            animators: vec!["Bad Name".into()],
            ..Default::default()
        })
        .await
        .expect_err("bad filter");
    assert_eq!(reason(&err), "ANIMATOR_INVALID");
    // Nothing was closed.
    granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    s.spawned.stop().await;
}
