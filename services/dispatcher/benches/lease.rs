//! Lease + release round trips on a WARM capability over loopback gRPC with the durable
//! ledger (real PostgreSQL from the test kit, Ward deciding each call, a fresh HTTP probe of
//! the simulated llama.cpp runtime before every issue), at concurrency 1 and 32, against a
//! gRPC health check measured in the same run; and p99 with 10 and 1,000 registered
//! capabilities.
//!
//! Run: `cargo bench -p lychd-dispatcher --bench lease` (needs PostgreSQL binaries, like the
//! tests). Timings never gate anything.

use std::time::{Duration, Instant};

use lychd_proto::dispatcher::v1 as pb;
use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
use lychd_runtime::Office;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::simllama::{SimLlama, SimModel};
use lychd_testkit::spawn_office_with;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// Models per animator; each animator has its own simulated runtime serving all of them.
const MODELS_PER_ANIMATOR: usize = 10;
const WARMUP: usize = 200;
const SERIAL: usize = 1000;
const PER_TASK: usize = 100;
const TASKS: usize = 32;

struct Stats {
    p50: Duration,
    p99: Duration,
    per_second: f64,
}

fn stats(mut v: Vec<Duration>, wall: Duration) -> Stats {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        per_second: v.len() as f64 / wall.as_secs_f64(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn round_trip(c: &mut DispatcherClient<PeerChannel>, model: &str) -> Duration {
    let t = Instant::now();
    let answer = c
        .lease(pb::LeaseRequest {
            demand: Some(pb::Demand {
                family: pb::Family::Chat as i32,
                model_id: model.into(),
                ..Default::default()
            }),
            holder: "bench".into(),
            priority: 50,
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
    t.elapsed()
}

async fn health(c: &mut HealthClient<tonic::transport::Channel>) -> Duration {
    let t = Instant::now();
    c.check(HealthCheckRequest {
        service: String::new(),
    })
    .await
    .expect("health");
    t.elapsed()
}

/// Run `f` serially `n` times, then in `TASKS` tasks of `PER_TASK`; return both.
macro_rules! measure {
    ($client:expr, $call:ident $(, $arg:expr)?) => {{
        let mut c = $client.clone();
        for _ in 0..WARMUP {
            $call(&mut c $(, $arg)?).await;
        }
        let t = Instant::now();
        let mut serial = Vec::with_capacity(SERIAL);
        for _ in 0..SERIAL {
            serial.push($call(&mut c $(, $arg)?).await);
        }
        let serial = stats(serial, t.elapsed());
        let t = Instant::now();
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let mut c = $client.clone();
                tokio::spawn(async move {
                    let mut v = Vec::with_capacity(PER_TASK);
                    for _ in 0..PER_TASK {
                        v.push($call(&mut c $(, $arg)?).await);
                    }
                    v
                })
            })
            .collect();
        let mut all = Vec::with_capacity(TASKS * PER_TASK);
        for task in tasks {
            all.extend(task.await.expect("task"));
        }
        let concurrent = stats(all, t.elapsed());
        (serial, concurrent)
    }};
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
    let spawned = spawn_office_with(Office::Dispatcher, move |cfg| cfg.office = table).await;
    spawned.allow("dispatcher:lease", "capability:*").await;
    spawned.allow("dispatcher:lease", "lease:*").await;
    let client = DispatcherClient::new(spawned.channel());
    let channel = tonic::transport::Endpoint::from_shared(spawned.endpoint())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let health_client = HealthClient::new(channel);

    // Where the time goes (c=1): an authorized RPC with one query, a probe of one animator,
    // and a lease alone.
    if capabilities == 10 {
        let mut c = client.clone();
        let part = |name: &str, v: Vec<Duration>| {
            let s = stats(v, Duration::from_secs(1));
            println!(
                "breakdown c=1 {name:<28} p50 {:>6.3} ms p99 {:>6.3} ms",
                ms(s.p50),
                ms(s.p99)
            );
        };
        spawned.allow("dispatcher:read", "lease:*").await;
        let mut v = Vec::new();
        for _ in 0..300 {
            let t = Instant::now();
            c.list_leases(pb::ListLeasesRequest::default())
                .await
                .expect("list");
            v.push(t.elapsed());
        }
        part("ListLeases (authz + 1 query)", v);
        spawned.allow("dispatcher:observe", "animator:*").await;
        let mut v = Vec::new();
        for _ in 0..300 {
            let t = Instant::now();
            c.observe_animators(pb::ObserveAnimatorsRequest {
                animators: vec!["gpu000".into()],
            })
            .await
            .expect("observe");
            v.push(t.elapsed());
        }
        part("ObserveAnimators (probe)", v);
    }

    // The demand names a pool: model `m3` on every animator (1 or 100 candidates).
    let (h1, h32) = measure!(health_client, health);
    let (l1, l32) = measure!(client, round_trip, "m3");
    println!(
        "capabilities={capabilities:>4} candidates={animators:>3} | health   c=1  p50 {:>6.3} ms p99 {:>6.3} ms {:>7.0}/s | c=32 p50 {:>6.3} ms p99 {:>6.3} ms {:>7.0}/s",
        ms(h1.p50),
        ms(h1.p99),
        h1.per_second,
        ms(h32.p50),
        ms(h32.p99),
        h32.per_second
    );
    println!(
        "capabilities={capabilities:>4} candidates={animators:>3} | lease+rel c=1  p50 {:>6.3} ms p99 {:>6.3} ms {:>7.0}/s | c=32 p50 {:>6.3} ms p99 {:>6.3} ms {:>7.0}/s",
        ms(l1.p50),
        ms(l1.p99),
        l1.per_second,
        ms(l32.p50),
        ms(l32.p99),
        l32.per_second
    );
    println!(
        "capabilities={capabilities:>4} ratio lease+release / health: p50 c=1 {:.1}x, p99 c=1 {:.1}x, p99 c=32 {:.1}x",
        l1.p50.as_secs_f64() / h1.p50.as_secs_f64(),
        l1.p99.as_secs_f64() / h1.p99.as_secs_f64(),
        l32.p99.as_secs_f64() / h32.p99.as_secs_f64(),
    );
    spawned.stop().await;
    drop(sims);
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        println!(
            "lease bench: {WARMUP} warm-up, {SERIAL} serial, {TASKS}x{PER_TASK} concurrent round trips; \
             each lease = Ward decision + candidate snapshot + fresh HTTP probe + observation write + guarded insert; \
             each release = Ward decision + guarded update"
        );
        for capabilities in [10, 1000] {
            scenario(capabilities).await;
        }
    });
}
