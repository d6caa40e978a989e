//! `Authorize` over loopback gRPC with PostgreSQL, against a gRPC health check measured in the
//! same run: p50/p99 and decisions/s at concurrency 1 and 32.
//!
//! Run: `cargo bench -p lychd-e2e --bench authorize` (needs PostgreSQL like the tests).

use std::time::{Duration, Instant};

use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_proto::ward::v1::{AuthorizeRequest, Decision, PrincipalKind};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const SECONDS_PER_CASE: u64 = 5;

struct Stats {
    p50: Duration,
    p99: Duration,
    per_second: f64,
}

async fn measure<F, Fut>(concurrency: usize, call: F) -> Stats
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    // Warm-up.
    for _ in 0..200 {
        call().await;
    }
    let deadline = Instant::now() + Duration::from_secs(SECONDS_PER_CASE);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                call().await;
                samples.push(t.elapsed());
            }
            samples
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    let elapsed = started.elapsed();
    all.sort();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        per_second: all.len() as f64 / elapsed.as_secs_f64(),
    }
}

/// Open loop: start `rate` calls per second for the case's duration, whatever answers take.
async fn paced<F, Fut>(rate: u32, call: F) -> Stats
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let total = rate as u64 * SECONDS_PER_CASE;
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    for _ in 0..total {
        tick.tick().await;
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            call().await;
            t.elapsed()
        }));
    }
    let mut all = Vec::with_capacity(tasks.len());
    for t in tasks {
        all.push(t.await.expect("task"));
    }
    let elapsed = started.elapsed();
    all.sort();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        per_second: all.len() as f64 / elapsed.as_secs_f64(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let (spawned, _) = lychd_testkit::spawn_ward().await;
    spawned.allow("ward:describe", "office:ward").await;
    // An office-like principal that may ask for decisions, and a subject with one assignment.
    let (office_id, office_token) = spawned
        .principal(PrincipalKind::Service, "bench-office")
        .await;
    let mut admin = spawned.admin.clone();
    admin
        .ensure_assignment(&office_id, "ward:decide", "decision:*", "ward", "decide")
        .await
        .expect("decide");
    let (subject_id, subject_token) = spawned
        .principal(PrincipalKind::Human, "bench-subject")
        .await;
    admin
        .ensure_assignment(
            &subject_id,
            "dispatcher:lease",
            "capability:*",
            "dispatcher",
            "lease",
        )
        .await
        .expect("grant");

    let endpoint = spawned.endpoint();
    let channel = tonic::transport::Endpoint::from_shared(endpoint.clone())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let bearer: tonic::metadata::MetadataValue<_> =
        format!("Bearer {office_token}").parse().expect("ascii");
    let authorize = {
        let channel = channel.clone();
        move || {
            let mut client = WardClient::new(channel.clone());
            let bearer = bearer.clone();
            let token = subject_token.clone();
            async move {
                let mut request = tonic::Request::new(AuthorizeRequest {
                    token,
                    action: "dispatcher:lease".into(),
                    object: "capability:anvil:chat:qwen3-8b".into(),
                    audience: "dispatcher".into(),
                    purpose: "lease".into(),
                    expected_policy_generation: None,
                });
                request.metadata_mut().insert("authorization", bearer);
                let answer = client
                    .authorize(request)
                    .await
                    .expect("authorize")
                    .into_inner();
                assert_eq!(answer.decision, Decision::Allow as i32);
            }
        }
    };
    let health = {
        let channel = channel.clone();
        move || {
            let mut client = HealthClient::new(channel.clone());
            async move {
                client
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await
                    .expect("health");
            }
        }
    };

    println!("case                      conc   p50 ms   p99 ms      per s");
    for concurrency in [1usize, 32] {
        let h = measure(concurrency, health.clone()).await;
        let a = measure(concurrency, authorize.clone()).await;
        println!(
            "health check              {concurrency:>4} {:>8.3} {:>8.3} {:>10.0}",
            ms(h.p50),
            ms(h.p99),
            h.per_second
        );
        println!(
            "authorize                 {concurrency:>4} {:>8.3} {:>8.3} {:>10.0}",
            ms(a.p50),
            ms(a.p99),
            a.per_second
        );
        println!(
            "ratio authorize/health    {concurrency:>4} {:>8.2} {:>8.2} {:>10.2}",
            ms(a.p50) / ms(h.p50),
            ms(a.p99) / ms(h.p99),
            a.per_second / h.per_second
        );
    }
    let h = paced(500, health.clone()).await;
    let a = paced(500, authorize.clone()).await;
    println!(
        "health check   @500/s          {:>8.3} {:>8.3} {:>10.0}",
        ms(h.p50),
        ms(h.p99),
        h.per_second
    );
    println!(
        "authorize      @500/s          {:>8.3} {:>8.3} {:>10.0}",
        ms(a.p50),
        ms(a.p99),
        a.per_second
    );
    println!(
        "ratio authorize/health @500/s  {:>8.2} {:>8.2}",
        ms(a.p50) / ms(h.p50),
        ms(a.p99) / ms(h.p99)
    );
    spawned.stop().await;
}
