//! Planning latency: `observation_set` + `plan` (the pure planner) for 10, 100 and 1,000
//! animators, every one in conflict with every other (one shared `gpu0` domain: the target
//! has n−1 neighbours, the worst case), one neighbour active, a HARD_SWAP to a cold target.
//! The observations are given (a real request adds the Dispatcher's `ObserveAnimators`
//! round trip and its probes, measured end to end elsewhere). Baseline in the same run:
//! cloning the observation map the planner reads (the cost of merely touching its input).
//!
//! `cargo bench -p lychd-orchestrator --bench plan`

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use lychd_orchestrator::domain::plan::{Action, AnimatorView, Phase, World, observation_set, plan};
use lychd_registry::conflict::ConflictGraph;
use lychd_registry::fixtures::{cap, soulstone};
use lychd_registry::registry::{AnimatorDecl, Registry};

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
    println!("| animators | what | p50 | p99 | p50 / baseline |");
    println!("| --- | --- | --- | --- | --- |");
    for n in [10usize, 100, 1000] {
        let (reg, graph, world) = fixture(n);
        let key = "a0000:chat:m";
        let check = plan(&reg, &graph, key, &world)
            .expect("plannable")
            .expect("plan");
        assert_eq!(check.action, Action::HardSwap);
        assert_eq!(check.evict.len(), 1);
        let iterations = if n >= 1000 { 2_000 } else { 20_000 };
        let (b50, b99) = measure(iterations, || {
            black_box(world.clone());
        });
        let (p50, p99) = measure(iterations, || {
            let set = observation_set(&reg, &graph, black_box(key));
            black_box(set);
            black_box(plan(&reg, &graph, key, &world).ok());
        });
        println!(
            "| {n} | baseline: clone the observations | {:.1} µs | {:.1} µs | 1.0 |",
            us(b50),
            us(b99)
        );
        println!(
            "| {n} | observation set + plan | {:.1} µs | {:.1} µs | {:.2} |",
            us(p50),
            us(p99),
            p50.as_secs_f64() / b50.as_secs_f64().max(1e-9)
        );
    }
}
