//! Adapter cost against the reducer: `cargo bench -p lychd-helmloop --bench adapters`.
//! A plain `main` (no criterion).
//!
//! For the baseline PASS case of each adapter suite it times, in the same run: the reduction
//! of the host records plus the mapped candidates (the baseline workload, what the host does
//! anyway); contract validation alone (`ContractCapability::validate`); validation plus mapping
//! (what an adapter adds); and the whole host path (`adapter::host::evaluate`: validate, map,
//! reduce). It prints p50/p99 over 20,000 timed runs after 2,000 warm-up runs and each figure's
//! ratio to the reduction's p50, with the load average, since absolute times on a shared
//! machine drift while ratios hold.

use std::hint::black_box;
use std::time::{Duration, Instant};

use lychd_helmloop::adapter::Adapter;
use lychd_helmloop::adapter::host::{HostOutcome, evaluate};
use lychd_helmloop::adapter::sdk::ContractCapability;
use lychd_helmloop::adapter::suite::AdapterCase;

const WARMUP: usize = 2_000;
const RUNS: usize = 20_000;

fn case(a: Adapter) -> AdapterCase {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/helmloop/adapters"
    );
    let prefix = match a {
        Adapter::Standalone => "standalone-001-pass-baseline",
        Adapter::BetterWorkflows => "better-workflows-001-pass-baseline",
    };
    let path = format!("{dir}/{}/cases/{prefix}.json", a.name());
    let bytes = std::fs::read(&path).expect("adapter fixture (run gen_adapter_cases.py)");
    AdapterCase::parse(&bytes).expect("case parses")
}

fn time(mut f: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..WARMUP {
        f();
    }
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        f();
        samples.push(t.elapsed());
    }
    samples.sort();
    (samples[RUNS / 2], samples[RUNS * 99 / 100])
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".into())
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    println!("load average: {}", load());
    for a in Adapter::ALL {
        let c = case(a);
        let contract = c.contract();
        // The workload the host has anyway: reducing the records the mapping yields.
        let HostOutcome::Reduced(r, _) = evaluate(
            a,
            &contract,
            &c.contract_ref,
            &c.context,
            &c.records,
            &c.source,
        ) else {
            panic!("{}: the baseline maps READY", a.name())
        };
        assert!(r.is_pass(), "{}: the baseline passes", a.name());
        let cap = ContractCapability::validate(&contract, &c.contract_ref).expect("capability");
        let ready = a.map(&cap, &c.source).into_ready().expect("READY");
        let (reduce_p50, reduce_p99) = time(|| {
            black_box(lychd_helmloop::adapter::host::reduce_ready(
                black_box(&ready),
                &c.context,
                &c.records,
            ));
        });
        let (validate_p50, validate_p99) = time(|| {
            black_box(ContractCapability::validate(black_box(&contract), &c.contract_ref).is_ok());
        });
        let (map_p50, map_p99) = time(|| {
            let cap = ContractCapability::validate(black_box(&contract), &c.contract_ref)
                .expect("capability");
            black_box(a.map(&cap, black_box(&c.source)));
        });
        let (host_p50, host_p99) = time(|| {
            black_box(evaluate(
                a,
                &contract,
                &c.contract_ref,
                &c.context,
                &c.records,
                black_box(&c.source),
            ));
        });
        println!(
            "{} ({} host records, 4 candidates):",
            a.name(),
            c.records.len()
        );
        for (what, p50, p99) in [
            ("reduce (baseline)", reduce_p50, reduce_p99),
            ("validate contract", validate_p50, validate_p99),
            ("validate + map", map_p50, map_p99),
            ("host path (validate + map + reduce)", host_p50, host_p99),
        ] {
            println!(
                "  {what:<38} p50 {:>8.1} us  p99 {:>8.1} us  p50 x reduce {:.2}",
                us(p50),
                us(p99),
                us(p50) / us(reduce_p50)
            );
        }
    }
    println!("load average: {}", load());
}
