//! Placement by memory: the tie breaks, one test each; the planner's memory rows; and the
//! property that no plan exceeds a device's capacity by the footprints it used.

use std::collections::BTreeMap;

use lychd_registry::conflict::ConflictGraph;
use lychd_registry::fixtures::{cap, soulstone};
use lychd_registry::memory::DeviceDecl;
use lychd_registry::registry::{AnimatorDecl, Registry};
use proptest::prelude::*;

use super::*;
use crate::domain::plan::{Action, Decline, World, plan};

fn c(name: &str, mib: u64, priority: u8, leased: bool, recency: u64) -> Candidate {
    Candidate {
        animator: name.into(),
        mib,
        priority,
        leased,
        recency,
    }
}

fn names(v: &[Candidate]) -> Vec<&str> {
    v.iter().map(|c| c.animator.as_str()).collect()
}

#[test]
fn nothing_is_evicted_when_the_target_fits() {
    assert_eq!(choose(0, vec![c("a", 10, 0, false, 0)]), Ok(vec![]));
}

#[test]
fn lower_priority_goes_first() {
    let got = choose(
        10,
        vec![c("hi", 10, 50, false, 0), c("lo", 10, 10, true, 9)],
    )
    .expect("fits");
    assert_eq!(names(&got), ["lo"], "priority beats leased and recency");
}

#[test]
fn at_equal_priority_idle_goes_before_leased() {
    let got = choose(
        10,
        vec![c("busy", 10, 5, true, 0), c("idle", 10, 5, false, 9)],
    )
    .expect("fits");
    assert_eq!(names(&got), ["idle"], "idle beats recency");
}

#[test]
fn then_the_least_recently_used() {
    let got = choose(
        10,
        vec![c("new", 10, 5, false, 7), c("old", 10, 5, false, 3)],
    )
    .expect("fits");
    assert_eq!(names(&got), ["old"]);
}

#[test]
fn then_the_name() {
    let got = choose(10, vec![c("b", 10, 5, false, 3), c("a", 10, 5, false, 3)]).expect("fits");
    assert_eq!(names(&got), ["a"]);
}

#[test]
fn the_prefix_is_pruned_of_members_not_needed() {
    // Order: small (least disruptive), mid, big. The prefix that frees 30 is all three; big is
    // needed (small + mid = 15), and with big, small is not: mid is dropped first (the more
    // disruptive), then small.
    let got = choose(
        30,
        vec![
            c("small", 5, 0, false, 0),
            c("mid", 10, 1, false, 0),
            c("big", 30, 2, false, 0),
        ],
    )
    .expect("fits");
    assert_eq!(names(&got), ["big"]);
    // A member still needed stays: 12 needs small (5) and big (8)? big alone (8) is short.
    let got = choose(
        12,
        vec![
            c("small", 5, 0, false, 0),
            c("mid", 3, 1, false, 0),
            c("big", 8, 2, false, 0),
        ],
    )
    .expect("fits");
    assert_eq!(names(&got), ["small", "big"]);
}

#[test]
fn no_sufficient_set_reports_what_all_could_free() {
    let all = choose(30, vec![c("b", 5, 0, false, 0), c("a", 10, 0, false, 0)]).expect_err("short");
    assert_eq!(
        names(&all),
        ["a", "b"],
        "every candidate, in disruption order"
    );
    assert_eq!(all.iter().map(|c| c.mib).sum::<u64>(), 15);
    assert_eq!(choose(1, vec![]), Err(vec![]));
}

// The planner with devices.

struct Fx {
    reg: Registry,
    graph: ConflictGraph,
}

/// gpu0 (capacity `cap_mib`): placed animators `(name, mib)`; `res` is a resident on gpu0
/// holding 1000; `x` and `y` declare a conflict domain `pair` on gpu0.
fn fx(cap_mib: u64, placed: &[(&str, u64)]) -> Fx {
    let mut animators: Vec<AnimatorDecl> = placed
        .iter()
        .map(|(n, mib)| AnimatorDecl {
            device: Some("gpu0".into()),
            memory_mib: Some(*mib),
            ..soulstone(n)
        })
        .collect();
    animators.push(AnimatorDecl {
        resident: true,
        device: Some("gpu0".into()),
        memory_mib: Some(1000),
        ..soulstone("res")
    });
    let caps: Vec<_> = animators
        .iter()
        .map(|a| cap(&a.name, "chat", "m"))
        .collect();
    let devices = [DeviceDecl {
        name: "gpu0".into(),
        memory_mib: cap_mib,
    }];
    let reg = Registry::build(&animators, &caps)
        .and_then(|r| r.place(&animators, &devices))
        .expect("valid");
    let graph = ConflictGraph::compile(&reg).expect("compiles");
    Fx { reg, graph }
}

fn world(fx: &Fx, warm: &[&str], leased: &[&str]) -> World {
    fx.reg
        .animators()
        .map(|a| {
            let phase = if warm.contains(&a.name.as_str()) {
                Phase::Warm
            } else {
                Phase::Cold
            };
            let view = AnimatorView {
                phases: BTreeMap::from([(format!("{}:chat:m", a.name), phase)]),
                admission_open: true,
                live_leases: u32::from(leased.contains(&a.name.as_str())),
            };
            (a.name.clone(), view)
        })
        .collect()
}

#[test]
fn memory_forces_the_eviction_a_declared_conflict_does_not() {
    // 10000 MiB: res 1000 + a 4000 + b 4000 held; c needs 3000 → 12000 > 10000: evict one.
    let fx = fx(10_000, &[("a", 4000), ("b", 4000), ("c", 3000)]);
    assert!(
        fx.graph.edges().next().is_none(),
        "placed animators coexist: no edges"
    );
    let w = world(&fx, &["res", "a", "b"], &["a"]);
    let mut memory = Memory::default();
    memory.usage.insert(
        "a".into(),
        Usage {
            priority: 5,
            recency: 1,
        },
    );
    memory.usage.insert(
        "b".into(),
        Usage {
            priority: 5,
            recency: 2,
        },
    );
    let p = plan(&fx.reg, &fx.graph, "c:chat:m", &w, &memory)
        .expect("plannable")
        .expect("plan");
    assert_eq!(p.action, Action::HardSwap);
    assert_eq!(p.evict, ["b"], "b is idle, a is leased");
    let m = p.memory.expect("arithmetic");
    assert_eq!(
        (m.capacity_mib, m.used_mib, m.needed_mib),
        (10_000, 9000, 3000)
    );
    assert_eq!(m.needed_source, Source::Declared);
    assert_eq!(
        m.freed,
        [Freed {
            animator: "b".into(),
            mib: 4000,
            cause: Cause::Memory
        }]
    );
    assert!(m.fits());
    assert_eq!(p.expected_active, ["a", "b", "res"]);
    // With room, nothing stops.
    let w = world(&fx, &["res", "a"], &[]);
    let p = plan(&fx.reg, &fx.graph, "c:chat:m", &w, &memory)
        .expect("ok")
        .expect("plan");
    assert!(p.evict.is_empty());
    assert_eq!(p.memory.expect("arithmetic").freed, []);
}

#[test]
fn a_measured_footprint_replaces_the_estimate() {
    let fx = fx(10_000, &[("a", 4000), ("c", 3000)]);
    let w = world(&fx, &["res", "a"], &[]);
    let mut memory = Memory::default();
    // c measured at 6000: 1000 + 4000 + 6000 > 10000.
    memory
        .measured
        .insert(FootprintKey::of(&fx.reg, "c:chat:m").expect("c"), 6000);
    let p = plan(&fx.reg, &fx.graph, "c:chat:m", &w, &memory)
        .expect("ok")
        .expect("plan");
    assert_eq!(p.evict, ["a"]);
    let m = p.memory.expect("arithmetic");
    assert_eq!((m.needed_mib, m.needed_source), (6000, Source::Measured));
}

#[test]
fn a_resident_is_never_evicted_and_no_fit_declines() {
    // res holds 1000 of 5000; a 3000 is evictable; c needs 4500: even without a, 5500 > 5000.
    let fx = fx(5000, &[("a", 3000), ("c", 4500)]);
    let w = world(&fx, &["res", "a"], &[]);
    let d = plan(&fx.reg, &fx.graph, "c:chat:m", &w, &Memory::default())
        .expect("ok")
        .expect_err("declined");
    assert_eq!(d.code(), "MEMORY_INSUFFICIENT");
    let m = d.memory().expect("arithmetic");
    assert_eq!(
        m.freed
            .iter()
            .map(|f| f.animator.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    assert!(!m.fits());
}

#[test]
fn a_declared_conflict_still_evicts_when_memory_fits() {
    let mut animators: Vec<AnimatorDecl> = ["x", "y"]
        .iter()
        .map(|n| AnimatorDecl {
            device: Some("gpu0".into()),
            memory_mib: Some(100),
            conflict_domains: Some(vec!["pair".into()]),
            ..soulstone(n)
        })
        .collect();
    animators.push(AnimatorDecl {
        device: Some("gpu0".into()),
        memory_mib: Some(100),
        ..soulstone("z")
    });
    let caps: Vec<_> = animators
        .iter()
        .map(|a| cap(&a.name, "chat", "m"))
        .collect();
    let devices = [DeviceDecl {
        name: "gpu0".into(),
        memory_mib: 100_000,
    }];
    let reg = Registry::build(&animators, &caps)
        .and_then(|r| r.place(&animators, &devices))
        .expect("valid");
    let graph = ConflictGraph::compile(&reg).expect("compiles");
    let fx = Fx { reg, graph };
    let w = world(&fx, &["y", "z"], &[]);
    let p = plan(&fx.reg, &fx.graph, "x:chat:m", &w, &Memory::default())
        .expect("ok")
        .expect("plan");
    assert_eq!(p.evict, ["y"], "the conflict evicts; z stays (memory fits)");
    let m = p.memory.expect("arithmetic");
    assert_eq!(
        m.freed,
        [Freed {
            animator: "y".into(),
            mib: 100,
            cause: Cause::Conflict
        }]
    );
}

#[test]
fn an_unobserved_cotenant_declines() {
    let fx = fx(10_000, &[("a", 4000), ("c", 3000)]);
    let mut w = world(&fx, &[], &[]);
    w.get_mut("a")
        .expect("a")
        .phases
        .insert("a:chat:m".into(), Phase::Unknown);
    let d = plan(&fx.reg, &fx.graph, "c:chat:m", &w, &Memory::default()).expect("ok");
    assert_eq!(
        d,
        Err(Decline::NeighbourUnobserved {
            animator: "a".into()
        })
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever is running, measured, leased or used: a plan never leaves the device over its
    /// capacity by the footprints it used, never evicts the resident or a cold animator, and a
    /// decline means even every candidate stopped would not fit.
    #[test]
    fn no_plan_exceeds_the_capacity(
        cap_mib in 1_000u64..20_000,
        sizes in proptest::collection::vec(1u64..5_000, 2..12),
        warm in proptest::collection::vec(any::<bool>(), 12),
        leased in proptest::collection::vec(any::<bool>(), 12),
        measured in proptest::collection::vec(proptest::option::of(1u64..6_000), 12),
        usage in proptest::collection::vec((0u8..100, 0u64..50), 12),
    ) {
        let names: Vec<String> = (0..sizes.len()).map(|i| format!("a{i:02}")).collect();
        let sizes: Vec<u64> = sizes.iter().map(|s| (*s).min(cap_mib)).collect();
        let placed: Vec<(&str, u64)> = names.iter().map(String::as_str).zip(sizes.iter().copied()).collect();
        let fx = fx(cap_mib.max(1000), &placed);
        let target = names.last().expect("at least two");
        let warm_names: Vec<&str> = names
            .iter()
            .zip(&warm)
            .filter(|(n, w)| **w && *n != target)
            .map(|(n, _)| n.as_str())
            .chain(["res"])
            .collect();
        let leased_names: Vec<&str> = names.iter().zip(&leased).filter(|(_, l)| **l).map(|(n, _)| n.as_str()).collect();
        let w = world(&fx, &warm_names, &leased_names);
        let mut memory = Memory::default();
        for (i, n) in names.iter().enumerate() {
            if let Some(m) = measured[i] {
                memory.measured.insert(FootprintKey::of(&fx.reg, &format!("{n}:chat:m")).expect("declared"), m);
            }
            memory.usage.insert(n.clone(), Usage { priority: usage[i].0, recency: usage[i].1 });
        }
        let key = format!("{target}:chat:m");
        let held = |n: &str| memory.held(&fx.reg, n, &w[n]);
        let used: u64 = warm_names.iter().map(|n| held(n)).sum();
        let (needed, _) = memory.footprint(&fx.reg, &key).expect("declared");
        match plan(&fx.reg, &fx.graph, &key, &w, &memory).expect("plannable") {
            Ok(p) => {
                prop_assert_eq!(p.action, Action::HardSwap);
                prop_assert!(!p.evict.iter().any(|e| e == "res"), "a resident is never evicted");
                prop_assert!(p.evict.iter().all(|e| warm_names.contains(&e.as_str())));
                let freed: u64 = p.evict.iter().map(|e| held(e)).sum();
                prop_assert!(used - freed + needed <= fx.reg.device("gpu0").expect("gpu0").memory_mib,
                    "used {} freed {} needed {}", used, freed, needed);
                let m = p.memory.expect("arithmetic");
                prop_assert_eq!(m.freed_mib(), freed);
                prop_assert!(m.fits());
            }
            Err(d) => {
                prop_assert_eq!(d.code(), "MEMORY_INSUFFICIENT");
                let all: u64 = warm_names.iter().filter(|n| **n != "res").map(|n| held(n)).sum();
                prop_assert!(used - all + needed > fx.reg.device("gpu0").expect("gpu0").memory_mib);
            }
        }
    }
}
