//! The planner's rows, one test each.

use std::collections::BTreeMap;

use lychd_registry::fixtures::{cap, portal, soulstone};
use lychd_registry::registry::AnimatorDecl;

use super::*;

struct Fx {
    reg: Registry,
    graph: ConflictGraph,
}

fn fx() -> Fx {
    // a, b, c: default-exclusive (pairwise conflicts); free: explicit []; shared: not
    // dedicated; res: resident; p: portal.
    let mut shared = soulstone("shared");
    shared.dedicated = false;
    let mut res = soulstone("res");
    res.resident = true;
    let free = AnimatorDecl {
        conflict_domains: Some(vec![]),
        ..soulstone("free")
    };
    let animators = vec![
        soulstone("a"),
        soulstone("b"),
        soulstone("c"),
        free,
        shared,
        res,
        portal("p"),
    ];
    let caps: Vec<_> = animators
        .iter()
        .map(|a| cap(&a.name, "chat", "m"))
        .collect();
    let reg = Registry::build(&animators, &caps).expect("valid");
    let graph = ConflictGraph::compile(&reg).expect("compiles");
    Fx { reg, graph }
}

fn v(phase: Phase) -> AnimatorView {
    AnimatorView {
        phases: BTreeMap::from([("x".to_owned(), phase)]),
        admission_open: true,
        live_leases: 0,
    }
}

/// A world where every animator of the fixture is COLD except the given ones; each view's
/// only key is the animator's `chat:m` key.
fn world(fx: &Fx, set: &[(&str, Phase)]) -> World {
    fx.reg
        .animators()
        .map(|a| {
            let phase = set
                .iter()
                .find(|(n, _)| *n == a.name)
                .map(|(_, p)| *p)
                .unwrap_or(Phase::Cold);
            let mut view = v(phase);
            view.phases = BTreeMap::from([(format!("{}:chat:m", a.name), phase)]);
            (a.name.clone(), view)
        })
        .collect()
}

fn run(fx: &Fx, key: &str, w: &World) -> Result<Plan, Decline> {
    plan(&fx.reg, &fx.graph, key, w, &Memory::default()).expect("plannable")
}

#[test]
fn warm_and_open_is_a_no_op_for_any_kind() {
    let fx = fx();
    for a in ["a", "free", "shared", "res", "p"] {
        let w = world(&fx, &[(a, Phase::Warm)]);
        let p = run(&fx, &format!("{a}:chat:m"), &w).expect(a);
        assert_eq!(p.action, Action::NoOp, "{a}");
        assert!(p.evict.is_empty() && p.launch.is_empty() && p.affected().is_empty());
    }
}

#[test]
fn warm_but_closed_declines() {
    let fx = fx();
    let mut w = world(&fx, &[("a", Phase::Warm)]);
    w.get_mut("a").expect("a").admission_open = false;
    assert_eq!(
        run(&fx, "a:chat:m", &w),
        Err(Decline::AdmissionClosed {
            animator: "a".into()
        })
    );
}

#[test]
fn started_but_not_warm_dedicated_is_a_soft_swap() {
    let fx = fx();
    for phase in [Phase::Warming, Phase::Activatable] {
        let w = world(&fx, &[("a", phase), ("b", Phase::Warm)]);
        let p = run(&fx, "a:chat:m", &w).expect("soft");
        assert_eq!(p.action, Action::SoftSwap);
        assert!(p.evict.is_empty(), "a soft swap stops nothing");
        assert_eq!(p.affected(), ["a"]);
        assert_eq!(p.cost, 0);
    }
}

#[test]
fn down_dedicated_is_a_hard_swap_evicting_active_neighbours_sorted() {
    let fx = fx();
    let w = world(
        &fx,
        &[
            ("c", Phase::Warm),
            ("b", Phase::Error),
            ("free", Phase::Warm),
            ("res", Phase::Warm),
        ],
    );
    let p = run(&fx, "a:chat:m", &w).expect("hard");
    assert_eq!(p.action, Action::HardSwap);
    assert_eq!(p.evict, ["b", "c"], "active neighbours only, sorted");
    assert_eq!(p.launch, ["a"]);
    assert_eq!(p.cost, 2);
    assert_eq!(p.expected_active, ["b", "c"]);
    assert_eq!(p.affected(), ["a", "b", "c"]);
    assert_eq!(p.config_digest, fx.graph.digest());
    // Nothing active: a hard swap with no evictee.
    let p = run(&fx, "a:chat:m", &world(&fx, &[])).expect("hard");
    assert_eq!((p.action, p.cost), (Action::HardSwap, 0));
    // A coexisting animator evicts nothing.
    let w = world(&fx, &[("a", Phase::Warm)]);
    let p = run(&fx, "free:chat:m", &w).expect("hard");
    assert_eq!((p.action, p.evict.len()), (Action::HardSwap, 0));
}

#[test]
fn non_warm_shared_resident_and_portal_are_refused() {
    let fx = fx();
    for a in ["shared", "res", "p"] {
        for phase in [
            Phase::Cold,
            Phase::Warming,
            Phase::Activatable,
            Phase::Error,
        ] {
            let w = world(&fx, &[(a, phase)]);
            assert_eq!(
                run(&fx, &format!("{a}:chat:m"), &w),
                Err(Decline::NotManaged {
                    animator: a.into(),
                    phase
                }),
                "{a} {phase:?}"
            );
        }
    }
}

#[test]
fn unknown_or_error_target_and_unobserved_neighbour_decline() {
    let fx = fx();
    let w = world(&fx, &[("a", Phase::Unknown)]);
    assert_eq!(
        run(&fx, "a:chat:m", &w).expect_err("x").code(),
        "TARGET_UNOBSERVED"
    );
    let w = world(&fx, &[("a", Phase::Error)]);
    assert_eq!(
        run(&fx, "a:chat:m", &w).expect_err("x").code(),
        "TARGET_ERROR"
    );
    let w = world(&fx, &[("c", Phase::Unknown)]);
    assert_eq!(
        run(&fx, "a:chat:m", &w),
        Err(Decline::NeighbourUnobserved {
            animator: "c".into()
        })
    );
}

#[test]
fn a_started_runtime_that_does_not_serve_the_key_declines() {
    let fx = fx();
    let mut w = world(&fx, &[]);
    w.get_mut("a")
        .expect("a")
        .phases
        .insert("a:chat:other".into(), Phase::Warm);
    assert_eq!(
        run(&fx, "a:chat:m", &w).expect_err("x").code(),
        "TARGET_NOT_SERVED"
    );
}

#[test]
fn the_observation_set_is_the_target_and_its_neighbours() {
    let fx = fx();
    assert_eq!(
        observation_set(&fx.reg, &fx.graph, "a:chat:m"),
        ["a", "b", "c"]
    );
    assert_eq!(observation_set(&fx.reg, &fx.graph, "free:chat:m"), ["free"]);
    assert!(observation_set(&fx.reg, &fx.graph, "nope:chat:m").is_empty());
    let w = world(&fx, &[]);
    assert_eq!(
        plan(&fx.reg, &fx.graph, "nope:chat:m", &w, &Memory::default()),
        Err(PlanError::UnknownCapability)
    );
    let mut w = world(&fx, &[]);
    w.remove("b");
    assert_eq!(
        plan(&fx.reg, &fx.graph, "a:chat:m", &w, &Memory::default()),
        Err(PlanError::MissingObservation("b".into()))
    );
}
