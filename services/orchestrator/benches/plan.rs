//! Planning latency: `observation_set` + `plan` (the pure planner) for 10, 100 and 1,000
//! animators, in the same run:
//! - the hand-conflict planner: every animator in conflict with every other (one shared `gpu0`
//!   domain: the target has n−1 neighbours, the worst case), one neighbour active, a HARD_SWAP
//!   to a cold target;
//! - placement by memory: every animator placed on one device (the target has n−1 co-tenants,
//!   the worst case), all but the target WARM (so every one is a candidate to sort), varied
//!   priorities, leases and recency, some footprints measured, and a target that needs three
//!   evictions to fit;
//! - the baseline: cloning the observation map the planner reads (the cost of merely touching
//!   its input).
//!
//! The observations are given (a real request adds the Dispatcher's `ObserveAnimators`
//! round trip and its probes, measured end to end elsewhere).
//!
//! `cargo bench -p lychd-orchestrator --bench plan`

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use lychd_orchestrator::domain::memory::{FootprintKey, Memory, Usage};
use lychd_orchestrator::domain::plan::{Action, AnimatorView, Phase, World, observation_set, plan};
use lychd_registry::conflict::ConflictGraph;
use lychd_registry::fixtures::{cap, soulstone};
use lychd_registry::memory::DeviceDecl;
use lychd_registry::registry::{AnimatorDecl, Registry};

/// n animators on one device, 1,000 MiB each (declared), all WARM but the target `a0000`,
/// whose 3,000 MiB fit only once three others stop.
fn memory_fixture(n: usize) -> (Registry, ConflictGraph, World, Memory) {
    let animators: Vec<AnimatorDecl> = (0..n)
        .map(|i| AnimatorDecl {
            device: Some("gpu0".into()),
            memory_mib: Some(if i == 0 { 3_000 } else { 1_000 }),
            ..soulstone(&format!("a{i:04}"))
        })
        .collect();
    let caps: Vec<_> = animators
        .iter()
        .map(|a| cap(&a.name, "chat", "m"))
        .collect();
    let capacity = (n as u64 - 1) * 1_000 + 500;
    let devices = [DeviceDecl {
        name: "gpu0".into(),
        memory_mib: capacity.max(3_000),
    }];
    let reg = Registry::build(&animators, &caps)
        .and_then(|r| r.place(&animators, &devices))
        .expect("valid");
    let graph = ConflictGraph::compile(&reg).expect("compiles");
    let mut memory = Memory::default();
    let world: World = animators
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let key = format!("{}:chat:m", a.name);
            let phase = if i == 0 { Phase::Cold } else { Phase::Warm };
            if i % 3 == 0 && i > 0 {
                let id = FootprintKey::of(&reg, &key).expect("declared");
                memory.measured.insert(id, 1_000);
            }
            memory.usage.insert(
                a.name.clone(),
                Usage {
                    priority: (i % 7) as u8 * 10,
                    recency: (i * 7919 % 1009) as u64,
                },
            );
            (
                a.name.clone(),
                AnimatorView {
                    phases: BTreeMap::from([(key, phase)]),
                    admission_open: true,
                    live_leases: u32::from(i % 2 == 0),
                },
            )
        })
        .collect();
    (reg, graph, world, memory)
}

fn fixture(n: usize) -> (Registry, ConflictGraph, World) {
    let animators: Vec<AnimatorDecl> = (0..n)
        .map(|i| AnimatorDecl {
            conflict_domains: Some(vec!["gpu0".into()]),
            ..soulstone(&format!("a{i:04}"))
        })
        .collect();
    let caps: Vec<_> = animators
        .iter()
        .map(|a| cap(&a.name, "chat", "m"))
        .collect();
    let reg = Registry::build(&animators, &caps).expect("valid");
    let graph = ConflictGraph::compile(&reg).expect("compiles");
    let world: World = animators
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let phase = if i == n / 2 { Phase::Warm } else { Phase::Cold };
            (
                a.name.clone(),
                AnimatorView {
                    phases: BTreeMap::from([(format!("{}:chat:m", a.name), phase)]),
                    admission_open: true,
                    live_leases: 0,
                },
            )
        })
        .collect();
    (reg, graph, world)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn measure(iterations: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..iterations / 10 {
        f();
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        f();
        samples.push(t.elapsed());
    }
    samples.sort();
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    println!("| animators | what | p50 | p99 | p50 / baseline | p50 / conflict planner |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let none = Memory::default();
    for n in [10usize, 100, 1000] {
        let (reg, graph, world) = fixture(n);
        let key = "a0000:chat:m";
        let check = plan(&reg, &graph, key, &world, &none)
            .expect("plannable")
            .expect("plan");
        assert_eq!(check.action, Action::HardSwap);
        assert_eq!(check.evict.len(), 1);
        let (mreg, mgraph, mworld, memory) = memory_fixture(n);
        let mcheck = plan(&mreg, &mgraph, key, &mworld, &memory)
            .expect("plannable")
            .expect("plan");
        assert_eq!(mcheck.action, Action::HardSwap);
        assert_eq!(mcheck.evict.len(), 3, "{mcheck:?}");
        let iterations = if n >= 1000 { 2_000 } else { 20_000 };
        let (b50, b99) = measure(iterations, || {
            black_box(world.clone());
        });
        let (p50, p99) = measure(iterations, || {
            let set = observation_set(&reg, &graph, black_box(key));
            black_box(set);
            black_box(plan(&reg, &graph, key, &world, &none).ok());
        });
        let (m50, m99) = measure(iterations, || {
            let set = observation_set(&mreg, &mgraph, black_box(key));
            black_box(set);
            black_box(plan(&mreg, &mgraph, key, &mworld, &memory).ok());
        });
        let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
        println!(
            "| {n} | baseline: clone the observations | {:.1} µs | {:.1} µs | 1.0 | |",
            us(b50),
            us(b99)
        );
        println!(
            "| {n} | hand conflicts: observation set + plan | {:.1} µs | {:.1} µs | {:.2} | 1.0 |",
            us(p50),
            us(p99),
            ratio(p50, b50)
        );
        println!(
            "| {n} | memory placement: observation set + plan | {:.1} µs | {:.1} µs | {:.2} | {:.2} |",
            us(m50),
            us(m99),
            ratio(m50, b50),
            ratio(m50, p50)
        );
    }
}
