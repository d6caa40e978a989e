//! Bad input of every kind: INVALID_ARGUMENT with a stable reason and the fields named, and
//! nothing changed.

use lychd_proto::dispatcher::v1 as pb;
use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
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

/// Each bad input the issue found answered `UNAVAILABLE` (an object for Ward built from it):
/// refused `INVALID_ARGUMENT` with its field before Ward is asked about any object, and with a
/// junk session refused `UNAUTHENTICATED` whatever the input.
#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_invalid_argument_and_a_junk_session_is_unauthenticated_first() {
    let sim = SimLlama::serving("m").await;
    let s = stack(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
    )
    .await;
    s.spawned.allow("dispatcher:admission", "animator:*").await;

    type Call = Box<
        dyn Fn(Client) -> futures::future::BoxFuture<'static, Result<(), tonic::Status>>
            + Send
            + Sync,
    >;
    fn call<F, Fut>(f: F) -> Call
    where
        F: Fn(Client) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), tonic::Status>> + Send + 'static,
    {
        Box::new(move |c| Box::pin(f(c)))
    }
    let long_key = format!("{}:chat:{}", "a".repeat(64), "m".repeat(64));
    let cases: Vec<(&str, &str, &str, Call)> = vec![
        (
            "lease, a key with a space",
            "CAPABILITY_KEY_MALFORMED",
            "demand.capability_key",
            call(|mut c| async move {
                c.lease(request(exact("gpu0:chat:has space")))
                    .await
                    .map(|_| ())
            }),
        ),
        (
            "lease, a key of 130 characters",
            "CAPABILITY_KEY_MALFORMED",
            "demand.capability_key",
            call(move |mut c| {
                let k = long_key.clone();
                async move { c.lease(request(exact(&k))).await.map(|_| ()) }
            }),
        ),
        (
            "lease, a request id with a control character",
            "REQUEST_ID_INVALID",
            "request_id",
            call(|mut c| async move {
                c.lease(pb::LeaseRequest {
                    request_id: "a\u{7}".into(),
                    ..request(exact("gpu0:chat:m"))
                })
                .await
                .map(|_| ())
            }),
        ),
        (
            "renew, an empty lease id",
            "LEASE_ID_MALFORMED",
            "lease_id",
            call(|mut c| async move {
                c.renew_lease(pb::RenewLeaseRequest {
                    lease_id: String::new(),
                    holder: "h".into(),
                    ttl_seconds: 0,
                })
                .await
                .map(|_| ())
            }),
        ),
        (
            "release, an empty lease id",
            "LEASE_ID_MALFORMED",
            "lease_id",
            call(|mut c| async move {
                c.release_lease(pb::ReleaseLeaseRequest {
                    lease_id: String::new(),
                    holder: "h".into(),
                })
                .await
                .map(|_| ())
            }),
        ),
        (
            "get, no lookup",
            "LEASE_LOOKUP_MISSING",
            "lookup",
            call(|mut c| async move {
                c.get_lease(pb::GetLeaseRequest { lookup: None })
                    .await
                    .map(|_| ())
            }),
        ),
        (
            "get, an empty lease id",
            "LEASE_ID_MALFORMED",
            "lease_id",
            call(|mut c| async move {
                c.get_lease(pb::GetLeaseRequest {
                    lookup: Some(pb::get_lease_request::Lookup::LeaseId(String::new())),
                })
                .await
                .map(|_| ())
            }),
        ),
        (
            "reopen, an empty closure token",
            "CLOSURE_TOKEN_MALFORMED",
            "closure_token",
            call(|mut c| async move {
                c.reopen_admission(pb::ReopenAdmissionRequest {
                    closure_token: String::new(),
                })
                .await
                .map(|_| ())
            }),
        ),
        (
            "observe, an animator named `Bad Name`",
            "ANIMATOR_INVALID",
            "animators[0]",
            call(|mut c| async move {
                c.observe_animators(pb::ObserveAnimatorsRequest {
                    animators: vec!["Bad Name".into()],
                })
                .await
                .map(|_| ())
            }),
        ),
        (
            "close, an animator named `Bad Name`",
            "ANIMATOR_INVALID",
            "animators[0]",
            call(|mut c| async move {
                c.close_admission(pb::CloseAdmissionRequest {
                    request_id: "r".into(),
                    animators: vec!["Bad Name".into()],
                    reason: "r".into(),
                })
                .await
                .map(|_| ())
            }),
        ),
        (
            "drain, an animator named `Bad Name`",
            "ANIMATOR_INVALID",
            "animators[0]",
            call(|mut c| async move {
                c.await_drain(pb::AwaitDrainRequest {
                    animators: vec!["Bad Name".into()],
                    wait_ms: 0,
                })
                .await
                .map(|_| ())
            }),
        ),
        (
            "list, an animator named `Bad Name`",
            "ANIMATOR_INVALID",
            "animators[0]",
            call(|mut c| async move {
                c.list_leases(pb::ListLeasesRequest {
                    animators: vec!["Bad Name".into()],
                    ..Default::default()
                })
                .await
                .map(|_| ())
            }),
        ),
    ];
    let junk = DispatcherClient::new(s.spawned.channel_with("junk"));
    for (what, want_reason, want_field, call) in &cases {
        let err = call(s.client.clone()).await.expect_err(what);
        assert_eq!(err.code(), Code::InvalidArgument, "{what}: {err:?}");
        assert_eq!(reason(&err), *want_reason, "{what}");
        assert_eq!(fields(&err), [*want_field], "{what}");
        let err = call(junk.clone()).await.expect_err(what);
        assert_eq!(
            err.code(),
            Code::Unauthenticated,
            "{what} with a junk session: {err:?}"
        );
    }
    assert_eq!(sim.requests(), 0, "nothing probed");
    s.spawned.stop().await;
}

/// The longest key the registry accepts is one Ward decides on and an operator can assign.
#[tokio::test(flavor = "multi_thread")]
async fn the_longest_key_the_registry_accepts_can_be_assigned_and_leased() {
    let sim = SimLlama::serving(&"m".repeat(58)).await;
    let animator_name = "a".repeat(64);
    let key = format!("{animator_name}:chat:{}", "m".repeat(58));
    assert_eq!(key.len(), 128);
    let s = stack(
        &(animator(&animator_name, &sim.endpoint(), "dedicated = true")
            + &capability(&animator_name, "chat", &"m".repeat(58), "")),
    )
    .await;
    // Exactly this capability, assigned by the operator (Ward's grammar takes the object).
    let (_, _, mut worker) = crate::common::principal(
        &s,
        "worker",
        &[("dispatcher:lease", &format!("capability:{key}"))],
    )
    .await;
    let g = granted(lease(&mut worker, exact(&key)).await);
    assert_eq!(g.capability_key, key);
    s.spawned.stop().await;
}
