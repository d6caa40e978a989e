//! Every row of the decision table, over real gRPC, real PostgreSQL and real HTTP probes.

use std::time::Duration;

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::simllama::{RouterStatus, SimHealth, SimLlama, SimModel};

use crate::common::*;

fn one(
    name: &str,
    endpoint: &str,
    dedicated: bool,
    family: &str,
    model: &str,
    cap_extra: &str,
) -> String {
    animator(
        name,
        endpoint,
        &format!("dedicated = {dedicated}\ndynamic = true\nready_estimate_seconds = 42"),
    ) + &capability(name, family, model, cap_extra)
}

#[tokio::test(flavor = "multi_thread")]
async fn warm_and_open_grants_with_route_lease_row_and_event() {
    let sim = SimLlama::serving("qwen3-8b").await;
    let mut s = stack(&one(
        "gpu0",
        &sim.endpoint(),
        true,
        "chat",
        "qwen3-8b",
        "context_tokens = 32768\nsupports_tools = true",
    ))
    .await;
    let g = granted(lease(&mut s.client, chat_model("qwen3-8b")).await);
    assert_eq!(g.capability_key, "gpu0:chat:qwen3-8b");
    assert_eq!(g.animator, "gpu0");
    assert_eq!(g.holder, "worker-1");
    let route = g.route.expect("route");
    assert_eq!(route.endpoint, sim.endpoint());
    assert_eq!(route.model, "qwen3-8b");
    assert_eq!(route.dialect, pb::Dialect::LlamaCpp as i32);
    assert_eq!(route.context_tokens, 32768);
    assert!(route.supports_tools);
    let (issued, expires) = (g.issued_at.expect("issued"), g.expires_at.expect("expires"));
    assert_eq!(
        expires.seconds - issued.seconds,
        300,
        "default TTL from the database clock"
    );
    let rows = leases(&mut s.client, false).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].lease_id, g.lease_id);
    assert_eq!(rows[0].state, pb::LeaseState::Active as i32);
    assert_eq!(rows[0].run_id, "run-1");
    assert!(!rows[0].principal_id.is_empty());
    let ev = events(&mut s.client).await;
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].lease_id, g.lease_id);
    assert_eq!(ev[0].capability_key, "gpu0:chat:qwen3-8b");
    // The fresh probe was recorded.
    assert!(sim.requests() >= 2, "health and inventory were asked");
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn warm_with_metadata_only_or_empty_surface_is_unavailable_without_probing() {
    let sim = SimLlama::start().await;
    sim.set_models(vec![SimModel::served("bge-m3"), SimModel::served("tools")]);
    let reg = animator("gpu0", &sim.endpoint(), "dedicated = true")
        + &capability("gpu0", "embedding", "bge-m3", "")
        + &capability("gpu0", "tool_execution", "tools", "");
    let mut s = stack(&reg).await;
    let u = unavailable(lease(&mut s.client, by_family(pb::Family::Embedding)).await);
    assert_eq!(u.reason, "SURFACE_NOT_EXECUTABLE");
    assert_eq!(u.capability_key, "gpu0:embedding:bge-m3");
    let u = unavailable(lease(&mut s.client, exact("gpu0:tool_execution:tools")).await);
    assert_eq!(u.reason, "SURFACE_NOT_EXECUTABLE");
    assert_eq!(sim.requests(), 0, "refused before readiness probing");
    assert!(leases(&mut s.client, true).await.is_empty());
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dedicated_cold_activatable_or_warming_needs_a_transition() {
    // COLD: nothing listens.
    let mut down = SimLlama::start().await;
    down.stop().await;
    // WARMING: llama.cpp loading its model.
    let loading = SimLlama::serving("m").await;
    loading.set_health(SimHealth::Loading);
    // ACTIVATABLE: router mode, model unloaded, runtime dynamic.
    let router = SimLlama::start().await;
    router.set_router_model("m", RouterStatus::Unloaded);
    let reg = one("cold", &down.endpoint(), true, "chat", "m", "")
        + &one("warming", &loading.endpoint(), true, "chat", "m", "")
        + &one("activatable", &router.endpoint(), true, "chat", "m", "");
    let mut s = stack(&reg).await;
    for a in ["cold", "warming", "activatable"] {
        let t = transition(lease(&mut s.client, exact(&format!("{a}:chat:m"))).await);
        assert_eq!(t.capability_key, format!("{a}:chat:m"));
        assert_eq!(t.animator, a);
        assert_eq!(t.ready_estimate_seconds, Some(42));
    }
    let obs = observe(&mut s.client, &[]).await;
    assert_eq!(phase_of(&obs, "cold:chat:m").0, pb::Phase::Cold);
    assert_eq!(phase_of(&obs, "warming:chat:m").0, pb::Phase::Warming);
    assert_eq!(
        phase_of(&obs, "activatable:chat:m").0,
        pb::Phase::Activatable
    );
    assert!(leases(&mut s.client, true).await.is_empty());
    assert!(events(&mut s.client).await.is_empty());
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_not_warm_is_unavailable_with_the_observation() {
    let mut down = SimLlama::start().await;
    down.stop().await;
    let loading = SimLlama::serving("m").await;
    loading.set_health(SimHealth::Loading);
    let router = SimLlama::start().await;
    router.set_router_model("m", RouterStatus::Unloaded);
    let reg = one("cold", &down.endpoint(), false, "chat", "m", "")
        + &one("warming", &loading.endpoint(), false, "chat", "m", "")
        + &one("activatable", &router.endpoint(), false, "chat", "m", "");
    let mut s = stack(&reg).await;
    for (a, phase) in [
        ("cold", pb::Phase::Cold),
        ("warming", pb::Phase::Warming),
        ("activatable", pb::Phase::Activatable),
    ] {
        let u = unavailable(lease(&mut s.client, exact(&format!("{a}:chat:m"))).await);
        assert_eq!(u.reason, "NOT_WARM", "{a}");
        assert_eq!(u.observed_phase, phase as i32, "{a}");
    }
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn error_is_unavailable_with_the_observed_reason() {
    let broken = SimLlama::serving("m").await;
    broken.set_health(SimHealth::Status(500));
    let failed = SimLlama::start().await;
    failed.set_router_model("m", RouterStatus::Failed);
    let reg = one("broken", &broken.endpoint(), true, "chat", "m", "")
        + &one("failed", &failed.endpoint(), true, "chat", "m", "");
    let mut s = stack(&reg).await;
    let u = unavailable(lease(&mut s.client, exact("broken:chat:m")).await);
    assert_eq!(u.reason, "OBSERVED_ERROR");
    assert_eq!(u.observed_phase, pb::Phase::Error as i32);
    assert_eq!(u.observed_reason, "HEALTH_HTTP_500");
    let u = unavailable(lease(&mut s.client, exact("failed:chat:m")).await);
    assert_eq!(u.observed_reason, "MODEL_LOAD_FAILED");
    // Dedicated or not, an ERROR never becomes a hardware request.
    assert!(leases(&mut s.client, true).await.is_empty());
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_is_reprobed_once_then_unavailable() {
    let sim = SimLlama::serving("m").await;
    sim.set_raw_inventory(Some((200, "{\"data\": \"not a list\"}".into())));
    let mut s = stack(&one("gpu0", &sim.endpoint(), true, "chat", "m", "")).await;
    let u = unavailable(lease(&mut s.client, exact("gpu0:chat:m")).await);
    assert_eq!(u.reason, "PROBE_FAILED");
    assert_eq!(u.observed_phase, pb::Phase::Unknown as i32);
    assert_eq!(u.observed_reason, "PROBE_MALFORMED");
    assert_eq!(
        sim.requests(),
        4,
        "two probes of health + inventory: one re-probe, no more"
    );
    // Once the runtime answers sensibly, the same request is granted (no stale refusal).
    sim.set_raw_inventory(None);
    granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drain_closing_during_issue_is_a_transition_and_leaves_no_lease() {
    let sim = SimLlama::serving("m").await;
    let mut s = stack(&one("gpu0", &sim.endpoint(), true, "chat", "m", "")).await;
    // Close (and, in the second round, also reopen) while the issue probe is in flight.
    for reopen_too in [false, true] {
        sim.set_delay(Duration::from_millis(400));
        let mut c = s.client.clone();
        let issue = tokio::spawn(async move { lease(&mut c, exact("gpu0:chat:m")).await });
        tokio::time::sleep(Duration::from_millis(150)).await;
        let closed = close(&mut s.orchestrator, &format!("t-{reopen_too}"), &["gpu0"]).await;
        if reopen_too {
            reopen(&mut s.orchestrator, &closed.closure_token).await;
        }
        let t = transition(issue.await.expect("join"));
        assert_eq!(t.capability_key, "gpu0:chat:m");
        assert!(
            leases(&mut s.client, true).await.is_empty(),
            "no lease leaked"
        );
        assert!(
            events(&mut s.client).await.is_empty(),
            "no event for a raced issue"
        );
        sim.set_delay(Duration::ZERO);
        if !reopen_too {
            // Closed: WARM but admission closed is the transition too.
            transition(lease(&mut s.client, exact("gpu0:chat:m")).await);
            reopen(&mut s.orchestrator, &closed.closure_token).await;
        }
    }
    // Reopened: granted.
    granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    assert_eq!(events(&mut s.client).await.len(), 1);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn portals_fail_closed_even_when_probed_warm() {
    let sim = SimLlama::serving("m").await;
    let reg = format!(
        "[[animators]]\nname = \"cloud\"\nsource = \"portal\"\ndialect = \"openai_models_v1\"\nendpoint = \"https://api.provider.example/v1\"\n\n\
         [[animators]]\nname = \"probed\"\nsource = \"portal\"\ndialect = \"openai_models_v1\"\nendpoint = \"{}\"\nprobe = true\n\n",
        sim.endpoint()
    ) + &capability("cloud", "chat", "m", "")
        + &capability("probed", "chat", "m", "");
    let mut s = stack(&reg).await;
    for key in ["cloud:chat:m", "probed:chat:m"] {
        let u = unavailable(lease(&mut s.client, exact(key)).await);
        assert_eq!(u.reason, "PORTAL_QUARANTINED");
    }
    let u = unavailable(lease(&mut s.client, chat_model("m")).await);
    assert_eq!(u.reason, "PORTAL_QUARANTINED");
    assert_eq!(sim.requests(), 0, "no egress for a grant decision");
    // Observation: unprobed is UNKNOWN (never WARM); the probed portal may be observed.
    let obs = observe(&mut s.client, &[]).await;
    assert_eq!(
        phase_of(&obs, "cloud:chat:m"),
        (pb::Phase::Unknown, "PROBE_DISABLED".into())
    );
    assert_eq!(phase_of(&obs, "probed:chat:m").0, pb::Phase::Warm);
    let u = unavailable(lease(&mut s.client, exact("probed:chat:m")).await);
    assert_eq!(u.reason, "PORTAL_QUARANTINED");
    assert!(leases(&mut s.client, true).await.is_empty());
    s.spawned.stop().await;
}
