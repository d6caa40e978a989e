//! Lease + release round trips on a WARM capability over loopback gRPC with the durable
//! ledger (real PostgreSQL from the test kit, Ward deciding each call — a lease twice: when it
//! arrives and again before its write — a fresh HTTP probe of the simulated llama.cpp runtime
//! before every issue), without and with a request id (`+req id`: the answer kept under it,
//! in the same statement): closed loop at concurrency 1 and 32,
//! and open loop at 500 round trips per second (the target: p99 ≤ 5 ms), each against a gRPC
//! health check measured in the same run; with 10 and 1,000 registered capabilities.
//!
//! Every case runs twice: on the test kit's throwaway cluster (`fsync`, `synchronous_commit`
//! and `full_page_writes` off), then — the bench runs itself again with
//! `LYCHD_TEST_PG_DURABILITY=durable` — on a second cluster with production durability (those
//! settings at their defaults: every commit waits for its WAL flush), which it stops when done.
//!
//! Run: `cargo bench -p lychd-dispatcher --bench lease` (needs PostgreSQL binaries, like the
//! tests); `LYCHD_LEASE_BENCH_QUICK=1` runs only 10 capabilities on the throwaway cluster (for
//! comparing variants). Timings never gate anything; CPU per call (printed for c=32) barely
//! moves with other load on the machine, latency does.

use lychd_proto::dispatcher::v1 as pb;
use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::bench::{Cpu, Stats, closed, ms, paced};
use lychd_testkit::simllama::{SimLlama, SimModel};
use lychd_testkit::spawn_office_with;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// Models per animator; each animator has its own simulated runtime serving all of them.
const MODELS_PER_ANIMATOR: usize = 10;
const WARMUP: usize = 200;
const SECONDS: u64 = 5;
const RATE: u32 = 500;
const QUICK_ENV: &str = "LYCHD_LEASE_BENCH_QUICK";

/// Request ids for the round trips that send one (each its own).
static NEXT_REQUEST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

async fn round_trip(mut c: DispatcherClient<PeerChannel>, model: &'static str, with_id: bool) {
    let request_id = if with_id {
        let n = NEXT_REQUEST.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("bench-{n}")
    } else {
        String::new()
    };
    let answer = c
        .lease(pb::LeaseRequest {
            demand: Some(pb::Demand {
                family: pb::Family::Chat as i32,
                model_id: model.into(),
                ..Default::default()
            }),
            holder: "bench".into(),
            priority: 50,
            request_id,
            ..Default::default()
        })
        .await
        .expect("lease")
        .into_inner();
    let Some(pb::lease_response::Outcome::Granted(g)) = answer.outcome else {
        panic!("expected a grant, got {:?}", answer.outcome);
    };
    c.release_lease(pb::ReleaseLeaseRequest {
        lease_id: g.lease_id,
        holder: "bench".into(),
    })
    .await
    .expect("release");
}

async fn health(mut c: HealthClient<tonic::transport::Channel>) {
    c.check(HealthCheckRequest {
        service: String::new(),
    })
    .await
    .expect("health");
}

/// The closed loop at concurrency 32, with the CPU each call cost (warm-up included).
async fn at_32<F, Fut>(call: F) -> (Stats, Cpu)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let before = Cpu::now();
    let stats = closed(32, WARMUP, SECONDS, call).await;
    (stats, before.per_call_since(stats.calls + WARMUP))
}

fn line(what: &str, closed1: Stats, closed32: Stats, open: Stats) -> String {
    format!(
        "{what:<9} c=1 p50 {:>6.3} p99 {:>6.3} ms {:>6.0}/s | c=32 p50 {:>7.3} p99 {:>7.3} ms {:>6.0}/s | @{RATE}/s p50 {:>6.3} p99 {:>6.3} ms",
        ms(closed1.p50),
        ms(closed1.p99),
        closed1.per_second,
        ms(closed32.p50),
        ms(closed32.p99),
        closed32.per_second,
        ms(open.p50),
        ms(open.p99),
    )
}

async fn scenario(capabilities: usize) {
    let animators = capabilities / MODELS_PER_ANIMATOR;
    let mut sims = Vec::new();
    let mut office = String::new();
    for a in 0..animators {
        let models: Vec<String> = (0..MODELS_PER_ANIMATOR).map(|m| format!("m{m}")).collect();
        let sim = SimLlama::start().await;
        sim.set_models(models.iter().map(|m| SimModel::served(m)).collect());
        office += &format!(
            "[[animators]]\nname = \"gpu{a:03}\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"{}\"\ndedicated = true\n\n",
            sim.endpoint()
        );
        for m in &models {
            office += &format!(
                "[[capabilities]]\nanimator = \"gpu{a:03}\"\nfamily = \"chat\"\nmodel_id = \"{m}\"\n\n"
            );
        }
        sims.push(sim);
    }
    let table: toml::Table = toml::from_str(&office).expect("registry");
    let spawned = spawn_office_with(lychd_dispatcher::spec(), move |cfg| cfg.office = table).await;
    spawned.allow("dispatcher:lease", "capability:*").await;
    spawned.allow("dispatcher:lease", "lease:*").await;
    let client = DispatcherClient::new(spawned.channel());
    let channel = tonic::transport::Endpoint::from_shared(spawned.endpoint())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let health_client = HealthClient::new(channel);

    // Where the time goes (c=1): an authorized RPC with one query, a probe of one animator.
    if capabilities == 10 {
        spawned.allow("dispatcher:read", "lease:*").await;
        spawned.allow("dispatcher:observe", "animator:*").await;
        let list = {
            let c = client.clone();
            move || {
                let mut c = c.clone();
                async move {
                    c.list_leases(pb::ListLeasesRequest::default())
                        .await
                        .expect("list");
                }
            }
        };
        let observe = {
            let c = client.clone();
            move || {
                let mut c = c.clone();
                async move {
                    c.observe_animators(pb::ObserveAnimatorsRequest {
                        animators: vec!["gpu000".into()],
                    })
                    .await
                    .expect("observe");
                }
            }
        };
        for (name, s) in [
            ("ListLeases (authz + 1 query)", closed(1, 50, 2, list).await),
            ("ObserveAnimators (probe)", closed(1, 50, 2, observe).await),
        ] {
            println!(
                "breakdown c=1 {name:<28} p50 {:>6.3} ms p99 {:>6.3} ms",
                ms(s.p50),
                ms(s.p99)
            );
        }
    }

    // The demand names a pool: model `m3` on every animator (1 or 100 candidates).
    let health = move || health(health_client.clone());
    let lease = {
        let client = client.clone();
        move || round_trip(client.clone(), "m3", false)
    };
    let keyed = move || round_trip(client.clone(), "m3", true);
    let (h, h_cpu) = (
        closed(1, WARMUP, SECONDS, health.clone()).await,
        at_32(health.clone()).await,
    );
    let h = [h, h_cpu.0, paced(RATE, SECONDS, health).await];
    let (l, l_cpu) = (
        closed(1, WARMUP, SECONDS, lease.clone()).await,
        at_32(lease.clone()).await,
    );
    let l = [l, l_cpu.0, paced(RATE, SECONDS, lease).await];
    let (k, k_cpu) = (
        closed(1, WARMUP, SECONDS, keyed.clone()).await,
        at_32(keyed.clone()).await,
    );
    let k = [k, k_cpu.0, paced(RATE, SECONDS, keyed).await];
    println!("capabilities={capabilities:>4} candidates={animators:>3}");
    println!("  {}", line("health", h[0], h[1], h[2]));
    println!("  {}", line("lease+rel", l[0], l[1], l[2]));
    println!("  {}", line("+req id", k[0], k[1], k[2]));
    let r = |i: usize| {
        (
            l[i].p50.as_secs_f64() / h[i].p50.as_secs_f64(),
            l[i].p99.as_secs_f64() / h[i].p99.as_secs_f64(),
        )
    };
    let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
    let cpu = |c: &Cpu| {
        format!(
            "{:.0} + {:.0} + {:.0} = {:.0} us",
            us(c.process),
            us(c.offices),
            us(c.database),
            us(c.total())
        )
    };
    println!(
        "  CPU per call at c=32 (this process with the Dispatcher + the Ward process + PostgreSQL): health {}, lease+rel {}, +req id {}",
        cpu(&h_cpu.1),
        cpu(&l_cpu.1),
        cpu(&k_cpu.1)
    );
    println!(
        "  @{RATE}/s p99 of each fifth of the run: health {:.3} .. {:.3} ms, lease+rel {:.3} .. {:.3} ms, +req id {:.3} .. {:.3} ms",
        ms(h[2].p99_of_fifths.0),
        ms(h[2].p99_of_fifths.1),
        ms(l[2].p99_of_fifths.0),
        ms(l[2].p99_of_fifths.1),
        ms(k[2].p99_of_fifths.0),
        ms(k[2].p99_of_fifths.1)
    );
    println!(
        "  ratio lease+release / health (p50, p99): c=1 {:.1}x {:.1}x, c=32 {:.1}x {:.1}x, @{RATE}/s {:.1}x {:.1}x",
        r(0).0,
        r(0).1,
        r(1).0,
        r(1).1,
        r(2).0,
        r(2).1
    );
    spawned.stop().await;
    drop(sims);
}

fn main() {
    let durability = lychd_testkit::durability().unwrap_or_else(|e| panic!("{e}"));
    let durable = durability == lychd_testkit::Durability::Durable;
    println!(
        "cluster: {}",
        if durable {
            "durable (fsync, synchronous_commit and full_page_writes on)"
        } else {
            "throwaway (fsync, synchronous_commit and full_page_writes off)"
        }
    );
    let quick = std::env::var_os(QUICK_ENV).is_some();
    run(if quick { &[10] } else { &[10, 1000] });
    if !durable && !quick {
        // The same cases against a cluster that commits as a deployment does: this binary
        // again, in a process of its own (the test kit picks its cluster once per process).
        let status = std::process::Command::new(std::env::current_exe().expect("own path"))
            .args(std::env::args_os().skip(1))
            .env(lychd_testkit::DURABILITY_ENV, "durable")
            .status()
            .expect("run the durable cases");
        let stopped = lychd_testkit::stop_durable_cluster();
        assert!(status.success(), "durable cases: {status}");
        stopped.unwrap_or_else(|e| panic!("stop the durable cluster: {e}"));
    }
}

fn run(sizes: &[usize]) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        println!(
            "lease bench: {WARMUP} warm-up, then {SECONDS} s per case (closed loop c=1, c=32; open loop {RATE}/s); \
             each lease = Ward decision (overlapping the candidate snapshot) + fresh HTTP probe + Ward decision again (the effect) + one statement writing observation, lease and event \
             (+req id: and the kept answer); each release = Ward decision + owner-guarded update"
        );
        for &capabilities in sizes {
            scenario(capabilities).await;
        }
    });
}
