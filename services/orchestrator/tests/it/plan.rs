//! `GetTopology` and `PreviewPlan`: the compiled graph as declared, and every planning row
//! from the Dispatcher's fresh observations of simulated runtimes.

use lychd_proto::orchestrator::v1 as pb;
use lychd_proto::orchestrator::v1::preview_plan_response::Outcome;
use lychd_testkit::simllama::SimHealth;
use tonic::Code;

use crate::common::{Decl, Stack, stack};

/// a, b, c: dedicated, conflicts omitted (default-exclusive, pairwise in conflict), in the
/// coven-free default; `free`: explicit `[]`; `shared`: not dedicated; `res`: resident.
fn decls(b_serving: bool) -> Vec<Decl> {
    vec![
        Decl {
            name: "a",
            extra: "dedicated = true",
            serving: false,
        },
        Decl {
            name: "b",
            extra: "dedicated = true",
            serving: b_serving,
        },
        Decl {
            name: "c",
            extra: "dedicated = true",
            serving: false,
        },
        Decl {
            name: "free",
            extra: "dedicated = true\nconflict_domains = []\ngroups = [\"pair\"]",
            serving: false,
        },
        Decl {
            name: "shared",
            extra: "groups = [\"pair\"]",
            serving: false,
        },
        Decl {
            name: "res",
            extra: "dedicated = true\nresident = true",
            serving: true,
        },
    ]
}

async fn preview(s: &mut Stack, key: &str) -> Outcome {
    s.client
        .preview_plan(pb::PreviewPlanRequest {
            capability_key: key.into(),
        })
        .await
        .expect("preview")
        .into_inner()
        .outcome
        .expect("an outcome")
}

fn plan(o: Outcome) -> pb::Plan {
    match o {
        Outcome::Plan(p) => p,
        Outcome::Declined(d) => panic!("declined: {d:?}"),
    }
}

fn declined(o: Outcome) -> pb::PlanDeclined {
    match o {
        Outcome::Declined(d) => d,
        Outcome::Plan(p) => panic!("planned: {p:?}"),
    }
}

#[tokio::test]
async fn the_topology_is_the_compiled_graph_with_its_digest() {
    let mut s = stack(&decls(true)).await;
    let t = s
        .client
        .get_topology(pb::GetTopologyRequest {})
        .await
        .expect("topology")
        .into_inner();
    assert_eq!(t.config_digest.len(), 64);
    let edges: Vec<(String, String)> = t.edges.iter().map(|e| (e.a.clone(), e.b.clone())).collect();
    assert_eq!(
        edges,
        [("a", "b"), ("a", "c"), ("b", "c")].map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    let a = t.animators.iter().find(|n| n.name == "a").expect("a");
    assert!(a.managed && a.default_exclusive);
    assert_eq!(a.conflict_domains, ["default-exclusive"]);
    assert_eq!(a.conflicts_with, ["b", "c"]);
    assert_eq!(a.capability_keys, ["a:chat:m"]);
    let res = t.animators.iter().find(|n| n.name == "res").expect("res");
    assert!(res.resident && !res.managed && res.conflicts_with.is_empty());
    assert_eq!(t.covens.len(), 1);
    assert_eq!(t.covens[0].members, ["free", "shared"]);
}

#[tokio::test]
async fn every_planning_row_from_fresh_observations() {
    let mut s = stack(&decls(true)).await;
    // Warm and open: NO_OP (dedicated, and a resident).
    for key in ["b:chat:m", "res:chat:m"] {
        let p = plan(preview(&mut s, key).await);
        assert_eq!(p.action(), pb::PlanAction::NoOp, "{key}");
        assert!(p.affected.is_empty());
    }
    // Down dedicated: HARD_SWAP evicting the active neighbour; the digest is GetTopology's.
    let p = plan(preview(&mut s, "a:chat:m").await);
    assert_eq!(p.action(), pb::PlanAction::HardSwap);
    assert_eq!(p.evict, ["b"]);
    assert_eq!(p.launch, ["a"]);
    assert_eq!(p.cost, 1);
    assert_eq!(p.expected_active, ["b"]);
    assert_eq!(p.affected, ["a", "b"]);
    let digest = s
        .client
        .get_topology(pb::GetTopologyRequest {})
        .await
        .expect("topology")
        .into_inner()
        .config_digest;
    assert_eq!(p.config_digest, digest);
    // Coexisting: a hard swap with nothing to evict.
    let p = plan(preview(&mut s, "free:chat:m").await);
    assert_eq!((p.action(), p.cost), (pb::PlanAction::HardSwap, 0));
    // Started but not warm (llama.cpp answers 503 "Loading model"): SOFT_SWAP.
    s.host.force("a", true).await;
    s.host.set_health("a", SimHealth::Loading).await;
    let p = plan(preview(&mut s, "a:chat:m").await);
    assert_eq!(p.action(), pb::PlanAction::SoftSwap);
    assert!(p.evict.is_empty() && p.launch.is_empty());
    assert_eq!(p.affected, ["a"]);
    // A started-not-warm dedicated neighbour is active, so it is evicted by a hard swap.
    let p = plan(preview(&mut s, "c:chat:m").await);
    assert_eq!(p.evict, ["a", "b"]);
    // Non-warm shared: refused, in-band, with the observed phase.
    let d = declined(preview(&mut s, "shared:chat:m").await);
    assert_eq!(
        (
            d.code.as_str(),
            d.animator.as_str(),
            d.observed_phase.as_str()
        ),
        ("NOT_MANAGED", "shared", "COLD")
    );
    // A target whose runtime answers 500: TARGET_ERROR.
    s.host.set_health("b", SimHealth::Status(500)).await;
    let d = declined(preview(&mut s, "b:chat:m").await);
    assert_eq!(d.code, "TARGET_ERROR");
}

#[tokio::test]
async fn a_preview_binds_nothing_and_bad_keys_are_refused() {
    let mut s = stack(&decls(true)).await;
    for _ in 0..2 {
        let p = plan(preview(&mut s, "a:chat:m").await);
        assert_eq!(p.action(), pb::PlanAction::HardSwap);
    }
    // Nothing was closed: b is still warm and open, a NO_OP.
    let p = plan(preview(&mut s, "b:chat:m").await);
    assert_eq!(p.action(), pb::PlanAction::NoOp);
    let e = s
        .client
        .preview_plan(pb::PreviewPlanRequest {
            capability_key: "not a key".into(),
        })
        .await
        .expect_err("malformed");
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = s
        .client
        .preview_plan(pb::PreviewPlanRequest {
            capability_key: "zz:chat:m".into(),
        })
        .await
        .expect_err("unknown");
    assert_eq!(e.code(), Code::NotFound);
}
