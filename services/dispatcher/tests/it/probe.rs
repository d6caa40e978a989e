//! The real probe adapters against the simulated llama.cpp endpoint: router mode, the named
//! OpenAI-compatible dialect, totality violations, invalidation on failure, and the client's
//! bounds (timeout, no redirects, response size).

use std::time::Duration;

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::simllama::{RouterStatus, SimLlama, SimModel};

use crate::common::*;

/// Sockets in TIME_WAIT (state 06 of `/proc/net/tcp`) with the port of `endpoint` on either
/// side.
fn time_wait_with(endpoint: &str) -> usize {
    let port = endpoint.rsplit(':').next().expect("endpoint has a port");
    let port: u16 = port.trim_end_matches('/').parse().expect("numeric port");
    let port = format!(":{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .expect("/proc/net/tcp is readable")
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[3] == "06" && (f[1].ends_with(&port) || f[2].ends_with(&port))
        })
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn router_mode_observes_each_model_individually() {
    let sim = SimLlama::start().await;
    sim.set_router_model("a", RouterStatus::Loaded);
    sim.set_router_model("b", RouterStatus::Unloaded);
    sim.set_router_model("c", RouterStatus::Loading);
    sim.set_router_model("d", RouterStatus::Failed);
    sim.set_router_model("e", RouterStatus::Sleeping);
    sim.set_router_model("f", RouterStatus::Downloading);
    let mut reg = animator("router", &sim.endpoint(), "dynamic = true");
    for m in ["a", "b", "c", "d", "e", "f", "g"] {
        reg += &capability("router", "chat", m, "");
    }
    let mut s = stack(&reg).await;
    let obs = observe(&mut s.orchestrator, &["router"]).await;
    assert!(obs[0].probe_ok);
    assert_eq!(obs[0].observations.len(), 7);
    assert_eq!(
        (sim.requests(), sim.connections()),
        (2, 1),
        "health and inventory over one fresh connection"
    );
    assert_eq!(
        time_wait_with(&sim.endpoint()),
        0,
        "the probe's connection is reset, not left in TIME_WAIT"
    );
    let p = |k: &str| phase_of(&obs, &format!("router:chat:{k}"));
    assert_eq!(p("a").0, pb::Phase::Warm);
    assert_eq!(p("b").0, pb::Phase::Activatable);
    assert_eq!(p("c").0, pb::Phase::Warming);
    assert_eq!(p("d"), (pb::Phase::Error, "MODEL_LOAD_FAILED".into()));
    assert_eq!(p("e"), (pb::Phase::Error, "RUNTIME_SLEEPING".into()));
    assert_eq!(p("f").0, pb::Phase::Warming);
    assert_eq!(p("g").0, pb::Phase::Cold, "not in the router's inventory");
    assert_eq!(
        obs[0].admission.as_ref().expect("admission").open_closures,
        0
    );
    // Shared router: only the loaded model is granted.
    granted(lease(&mut s.client, exact("router:chat:a")).await);
    assert_eq!(
        unavailable(lease(&mut s.client, exact("router:chat:b")).await).reason,
        "NOT_WARM"
    );
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_named_openai_dialect_reads_the_model_list_only() {
    let sim = SimLlama::start().await;
    sim.set_models(vec![SimModel::served("meta-llama/Llama-3.1-8B-Instruct")]);
    let reg =
        "[[animators]]\nname = \"vllm\"\nsource = \"soulstone\"\ndialect = \"openai_models_v1\"\n"
            .to_owned()
            + &format!("endpoint = \"{}\"\n\n", sim.endpoint())
            + &capability(
                "vllm",
                "chat",
                "llama-3.1-8b",
                "runtime_model = \"meta-llama/Llama-3.1-8B-Instruct\"",
            )
            + &capability("vllm", "chat", "other", "");
    let mut s = stack(&reg).await;
    let obs = observe(&mut s.client, &["vllm"]).await;
    assert_eq!(phase_of(&obs, "vllm:chat:llama-3.1-8b").0, pb::Phase::Warm);
    assert_eq!(phase_of(&obs, "vllm:chat:other").0, pb::Phase::Cold);
    assert_eq!(sim.requests(), 1, "one request, no /health");
    let g = granted(lease(&mut s.client, exact("vllm:chat:llama-3.1-8b")).await);
    assert_eq!(
        g.route.expect("route").dialect,
        pb::Dialect::OpenaiModelsV1 as i32
    );
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_duplicate_inventory_entry_violates_totality_and_invalidates() {
    let sim = SimLlama::serving("m").await;
    let reg = animator("gpu0", &sim.endpoint(), "dedicated = true")
        + &capability("gpu0", "chat", "m", "")
        + &capability("gpu0", "chat", "n", "");
    let mut s = stack(&reg).await;
    let obs = observe(&mut s.client, &[]).await;
    assert_eq!(phase_of(&obs, "gpu0:chat:m").0, pb::Phase::Warm);
    // The runtime now lists `m` twice: the whole batch is invalid; nothing stays WARM.
    sim.set_models(vec![SimModel::served("m"), SimModel::served("m")]);
    let obs = observe(&mut s.client, &[]).await;
    assert!(!obs[0].probe_ok);
    assert_eq!(obs[0].probe_error, "PROBE_DUPLICATE_KEY");
    for k in ["gpu0:chat:m", "gpu0:chat:n"] {
        assert_eq!(
            phase_of(&obs, k),
            (pb::Phase::Unknown, "PROBE_DUPLICATE_KEY".into())
        );
    }
    let u = unavailable(lease(&mut s.client, exact("gpu0:chat:m")).await);
    assert_eq!(u.reason, "PROBE_FAILED");
    assert_eq!(u.observed_reason, "PROBE_DUPLICATE_KEY");
    // The registry view shows the invalidated cache.
    let caps = s
        .client
        .list_capabilities(pb::ListCapabilitiesRequest {})
        .await
        .expect("list")
        .into_inner();
    let m = caps
        .capabilities
        .iter()
        .find(|c| c.capability_key == "gpu0:chat:m")
        .expect("m");
    assert_eq!(
        m.observation.as_ref().expect("obs").phase,
        pb::Phase::Unknown as i32
    );
    assert!(leases(&mut s.client, true).await.is_empty());
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_refresh_invalidates_rather_than_keeping_warmth() {
    let sim = SimLlama::serving("m").await;
    let reg = "probe_timeout_ms = 300\nprobe_max_response_bytes = 4096\n".to_owned()
        + &animator("gpu0", &sim.endpoint(), "dedicated = true")
        + &capability("gpu0", "chat", "m", "");
    let mut s = stack(&reg).await;
    assert_eq!(
        phase_of(&observe(&mut s.client, &[]).await, "gpu0:chat:m").0,
        pb::Phase::Warm
    );

    sim.set_delay(Duration::from_millis(800));
    let obs = observe(&mut s.client, &[]).await;
    assert_eq!(
        phase_of(&obs, "gpu0:chat:m"),
        (pb::Phase::Unknown, "PROBE_TIMEOUT".into())
    );
    sim.set_delay(Duration::ZERO);

    sim.set_redirect(true);
    let obs = observe(&mut s.client, &[]).await;
    assert_eq!(obs[0].probe_error, "PROBE_REDIRECT_REFUSED");
    sim.set_redirect(false);
    assert_eq!(
        phase_of(&observe(&mut s.client, &[]).await, "gpu0:chat:m").0,
        pb::Phase::Warm
    );

    let big = format!(
        "{{\"data\":[{{\"id\":\"m\",\"pad\":\"{}\"}}]}}",
        "x".repeat(10_000)
    );
    sim.set_raw_inventory(Some((200, big)));
    let obs = observe(&mut s.client, &[]).await;
    assert_eq!(
        phase_of(&obs, "gpu0:chat:m"),
        (pb::Phase::Unknown, "PROBE_RESPONSE_TOO_LARGE".into())
    );
    sim.set_raw_inventory(Some((500, "{}".into())));
    let obs = observe(&mut s.client, &[]).await;
    assert!(
        obs[0].probe_ok,
        "an HTTP error is an observation, not a probe failure"
    );
    assert_eq!(
        phase_of(&obs, "gpu0:chat:m"),
        (pb::Phase::Error, "INVENTORY_HTTP_500".into())
    );
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn observe_refuses_unknown_animators() {
    let sim = SimLlama::serving("m").await;
    let mut s =
        stack(&(animator("gpu0", &sim.endpoint(), "") + &capability("gpu0", "chat", "m", "")))
            .await;
    let err = s
        .orchestrator
        .observe_animators(pb::ObserveAnimatorsRequest {
            animators: vec!["gpu0".into(), "nope".into(), "gpu0".into()],
        })
        .await
        .expect_err("unknown");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(reason(&err), "ANIMATOR_UNKNOWN");
    assert_eq!(fields(&err), ["animators[1]", "animators[2]"]);
    s.spawned.stop().await;
}
