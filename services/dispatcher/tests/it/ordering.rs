//! Candidate order (open before draining, non-error before error, active before inactive,
//! warm before warming, then animator name and key) and exact-key no-substitution.

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::simllama::{RouterStatus, SimHealth, SimLlama};

use crate::common::*;

/// Animators `a` and `b` (dedicated, dynamic) each declaring chat model `m` on their own
/// simulated runtime.
async fn pair() -> (SimLlama, SimLlama, Stack) {
    let a = SimLlama::serving("m").await;
    let b = SimLlama::serving("m").await;
    let reg = animator("a", &a.endpoint(), "dedicated = true\ndynamic = true")
        + &capability("a", "chat", "m", "")
        + &animator("b", &b.endpoint(), "dedicated = true\ndynamic = true")
        + &capability("b", "chat", "m", "");
    let s = stack(&reg).await;
    (a, b, s)
}

fn key_of(o: Outcome) -> String {
    match o {
        Outcome::Granted(g) => g.capability_key,
        Outcome::HardwareTransitionRequired(t) => t.capability_key,
        Outcome::Unavailable(u) => u.capability_key,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn name_then_key_when_everything_else_is_equal() {
    let (_a, _b, mut s) = pair().await;
    observe(&mut s.client, &[]).await;
    let g = granted(lease(&mut s.client, chat_model("m")).await);
    assert_eq!(g.capability_key, "a:chat:m");
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn open_before_draining() {
    let (_a, _b, mut s) = pair().await;
    observe(&mut s.client, &[]).await;
    let closed = close(&mut s.orchestrator, "t1", &["a"]).await;
    let g = granted(lease(&mut s.client, chat_model("m")).await);
    assert_eq!(g.capability_key, "b:chat:m", "a is draining");
    reopen(&mut s.orchestrator, &closed.closure_token).await;
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn active_before_inactive() {
    let (mut a, _b, mut s) = pair().await;
    a.stop().await;
    let obs = observe(&mut s.client, &[]).await;
    assert_eq!(phase_of(&obs, "a:chat:m").0, pb::Phase::Cold);
    // a (inactive, cold) would come first by name; b's runtime is up.
    assert_eq!(
        key_of(lease(&mut s.client, chat_model("m")).await),
        "b:chat:m"
    );
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn warm_before_warming() {
    let a = SimLlama::start().await;
    a.set_router_model("m", RouterStatus::Loading);
    let b = SimLlama::start().await;
    b.set_router_model("m", RouterStatus::Loaded);
    let reg = animator("a", &a.endpoint(), "dedicated = true\ndynamic = true")
        + &capability("a", "chat", "m", "")
        + &animator("b", &b.endpoint(), "dedicated = true\ndynamic = true")
        + &capability("b", "chat", "m", "");
    let mut s = stack(&reg).await;
    let obs = observe(&mut s.client, &[]).await;
    assert_eq!(phase_of(&obs, "a:chat:m").0, pb::Phase::Warming);
    assert_eq!(phase_of(&obs, "b:chat:m").0, pb::Phase::Warm);
    let g = granted(lease(&mut s.client, chat_model("m")).await);
    assert_eq!(g.capability_key, "b:chat:m");
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn error_ranks_behind_and_recovers_when_freshly_observed() {
    let (a, b, mut s) = pair().await;
    a.set_health(SimHealth::Status(500));
    observe(&mut s.client, &[]).await;
    assert_eq!(
        key_of(lease(&mut s.client, chat_model("m")).await),
        "b:chat:m"
    );
    // b becomes unavailable (cold) and a recovers: the cached ERROR of a still ranks behind
    // the cached WARM of b, so b is chosen, freshly observed cold, and refused — no retry of
    // another candidate.
    let mut b = b;
    b.stop().await;
    a.set_health(SimHealth::Ok);
    let t = transition(lease(&mut s.client, chat_model("m")).await);
    assert_eq!(t.capability_key, "b:chat:m");
    // Now b is cached COLD (inactive) and a cached ERROR: a ranks behind; still b.
    assert_eq!(
        key_of(lease(&mut s.client, chat_model("m")).await),
        "b:chat:m"
    );
    // A fresh observation of a (the Orchestrator's view) recovers it: a is WARM, chosen.
    observe(&mut s.client, &["a"]).await;
    assert_eq!(
        granted(lease(&mut s.client, chat_model("m")).await).capability_key,
        "a:chat:m"
    );
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exact_key_never_substitutes_another_candidate() {
    let (mut a, _b, mut s) = pair().await;
    a.stop().await;
    observe(&mut s.client, &[]).await;
    // a is cold (dedicated): transition for a, never a grant on the warm b.
    let t = transition(lease(&mut s.client, exact("a:chat:m")).await);
    assert_eq!(t.capability_key, "a:chat:m");
    // Unknown key: unavailable, no other candidate.
    let u = unavailable(lease(&mut s.client, exact("c:chat:m")).await);
    assert_eq!(u.reason, "CAPABILITY_UNKNOWN");
    assert!(u.capability_key.is_empty());
    // The key intersects the rest of the demand: incompatible, not substituted.
    let mut d = exact("b:chat:m");
    d.tools_required = true;
    let u = unavailable(lease(&mut s.client, d).await);
    assert_eq!(u.reason, "CAPABILITY_INCOMPATIBLE");
    let mut d = exact("b:chat:m");
    d.model_id = "other".into();
    assert_eq!(
        unavailable(lease(&mut s.client, d).await).reason,
        "CAPABILITY_INCOMPATIBLE"
    );
    let mut d = exact("b:chat:m");
    d.family = pb::Family::Embedding as i32;
    assert_eq!(
        unavailable(lease(&mut s.client, d).await).reason,
        "CAPABILITY_INCOMPATIBLE"
    );
    assert!(leases(&mut s.client, true).await.is_empty());
    // A family demand, by contrast, is a pool.
    assert_eq!(
        granted(lease(&mut s.client, chat_model("m")).await).capability_key,
        "b:chat:m"
    );
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn demands_filter_by_alias_modalities_and_tools() {
    let a = SimLlama::start().await;
    a.set_models(vec![
        lychd_testkit::simllama::SimModel::served("gpt-4o"),
        lychd_testkit::simllama::SimModel::served("Vision-M.gguf"),
    ]);
    let reg = animator(
        "a",
        &a.endpoint(),
        "dedicated = true\naliases = { \"gpt-4o\" = \"m\" }",
    ) + &capability("a", "chat", "m", "supports_tools = true")
        + &capability(
            "a",
            "chat",
            "vis",
            "runtime_model = \"Vision-M.gguf\"\ninput_modalities = [\"text\", \"image\"]",
        );
    let mut s = stack(&reg).await;
    // The runtime lists the alias: the probe maps it to `m`.
    assert_eq!(
        granted(lease(&mut s.client, chat_model("gpt-4o")).await).capability_key,
        "a:chat:m"
    );
    let mut d = by_family(pb::Family::Chat);
    d.input_modalities = vec![pb::InputModality::Image as i32];
    let g = granted(lease(&mut s.client, d).await);
    assert_eq!(g.capability_key, "a:chat:vis");
    assert_eq!(g.route.expect("route").model, "Vision-M.gguf");
    let mut d = by_family(pb::Family::Chat);
    d.tools_required = true;
    assert_eq!(
        granted(lease(&mut s.client, d).await).capability_key,
        "a:chat:m"
    );
    let mut d = by_family(pb::Family::Chat);
    d.input_modalities = vec![pb::InputModality::Audio as i32];
    assert_eq!(
        unavailable(lease(&mut s.client, d).await).reason,
        "NO_CANDIDATE"
    );
    s.spawned.stop().await;
}
