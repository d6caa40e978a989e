//! The metrics layer's cost (issue 30 item 2): the same gRPC call — a health check over
//! loopback, client and server in this process — against a server whose stack has
//! `MetricsLayer` recording into a real meter provider (the one an office installs, with its
//! scrape endpoint) and against the same server without it, in one run, alternating. Reports
//! CPU per call (this process, from `/proc`) and mean latency for each, and their ratios.
//!
//! Run: `cargo bench -p lychd-runtime --bench metrics` (no PostgreSQL needed).

use std::time::{Duration, Instant};

use lychd_runtime::Office;
use lychd_runtime::metrics::{Metrics, MetricsConfig, MetricsLayer};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const CALLS: usize = 20_000;
const ROUNDS: usize = 5;

/// CPU time (user + system) this process has spent, from `/proc/self/stat` (clock ticks of
/// 10 ms: meaningful over thousands of calls).
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name (which may hold spaces) start after its `)`.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 =
        fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

async fn serve(with_metrics: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (_reporter, health) = tonic_health::server::health_reporter();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let layer = tower::util::option_layer(
        with_metrics.then(|| MetricsLayer::new(&lychd_runtime::metrics::meter(Office::Ward))),
    );
    tokio::spawn(async move {
        let _keep = _reporter;
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(incoming)
            .await
            .expect("serve");
    });
    format!("http://{addr}")
}

/// `CALLS` sequential health checks: CPU per call and mean latency.
async fn case(client: &mut HealthClient<tonic::transport::Channel>) -> (Duration, Duration) {
    let cpu_before = cpu();
    let started = Instant::now();
    for _ in 0..CALLS {
        client
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect("check");
    }
    let wall = started.elapsed() / u32::try_from(CALLS).expect("calls fit");
    let calls = u32::try_from(CALLS).expect("calls fit");
    ((cpu() - cpu_before) / calls, wall)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[tokio::main]
async fn main() {
    let cfg = MetricsConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        ..MetricsConfig::defaults(Office::Ward)
    };
    let metrics = Metrics::start(&cfg, Office::Ward, None)
        .await
        .expect("metrics endpoint")
        .expect("enabled");
    let mut clients = Vec::new();
    for with in [false, true] {
        let channel = tonic::transport::Endpoint::from_shared(serve(with).await)
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        let mut client = HealthClient::new(channel);
        for _ in 0..500 {
            client
                .check(HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .expect("warm up");
        }
        clients.push(client);
    }
    let (mut cpu, mut wall) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for _ in 0..ROUNDS {
        for (i, client) in clients.iter_mut().enumerate() {
            let (c, w) = case(client).await;
            cpu[i].push(c);
            wall[i].push(w);
        }
    }
    for (name, i) in [("without", 0), ("with", 1)] {
        let rounds: Vec<String> = cpu[i]
            .iter()
            .zip(&wall[i])
            .map(|(c, w)| format!("{:.1}/{:.1}", us(*c), us(*w)))
            .collect();
        println!(
            "{name} the layer, each round (µs CPU/µs wall per call): {}",
            rounds.join(", ")
        );
    }
    let [cpu_without, cpu_with] = cpu.map(median);
    let [wall_without, wall_with] = wall.map(median);
    println!(
        "health check, {CALLS} sequential calls x {ROUNDS} rounds (medians), client and server in one process"
    );
    println!(
        "without the metrics layer: {:.1} µs CPU/call, {:.1} µs/call",
        us(cpu_without),
        us(wall_without)
    );
    println!(
        "with the metrics layer:    {:.1} µs CPU/call, {:.1} µs/call",
        us(cpu_with),
        us(wall_with)
    );
    println!(
        "ratio with/without: CPU {:.3}, latency {:.3}; layer CPU ≈ {:.1} µs/call",
        cpu_with.as_secs_f64() / cpu_without.as_secs_f64().max(1e-12),
        wall_with.as_secs_f64() / wall_without.as_secs_f64().max(1e-12),
        us(cpu_with.saturating_sub(cpu_without))
    );
    metrics.shutdown().await;
}
