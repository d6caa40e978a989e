//! `LocalVerifier::authorize` against PostgreSQL (the test kit's cluster): p50/p99 latency and
//! decisions per second at concurrency 1 and 32, each against a baseline measured in the same
//! run on the same pool — `SELECT 1` (one round trip, no decision, no audit).
//!
//! `cargo bench -p lychd-ward --bench authorize` (`WARD_BENCH_DECISIONS` sets the count per
//! concurrency level; default 4000). The gRPC-level benchmark is
//! `cargo bench -p lychd-e2e --bench authorize`.

use std::sync::Arc;

use lychd_ward::domain::grammar::Audiences;
use std::time::{Duration, Instant};

use lychd_auth::{Query, Verifier};
use lychd_runtime::Office;
use lychd_ward::domain::grammar::{Action, Audience, Object, PrincipalName, Purpose, Question};
use lychd_ward::domain::kinds::{CredentialKind, PrincipalKind};
use lychd_ward::store::{assignments, credentials, principals};
use secrecy::ExposeSecret;
use sqlx::PgPool;

const LEASE: (&str, &str, &str, &str) = ("dispatcher:lease", "lease:l-1", "dispatcher", "lease");

struct Stats {
    p50: Duration,
    p99: Duration,
    per_sec: f64,
}

fn stats(mut latencies: Vec<Duration>, wall: Duration) -> Stats {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        per_sec: latencies.len() as f64 / wall.as_secs_f64(),
    }
}

/// Run `total` calls of `op` from `concurrency` tasks; latency of each call and the wall time.
async fn run<F, Fut>(concurrency: usize, total: usize, op: F) -> Stats
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let per_task = total / concurrency;
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut out = Vec::with_capacity(per_task);
                for _ in 0..per_task {
                    let t = Instant::now();
                    op().await;
                    out.push(t.elapsed());
                }
                out
            })
        })
        .collect();
    let mut all = Vec::with_capacity(total);
    for t in tasks {
        all.extend(t.await.expect("bench task"));
    }
    stats(all, started.elapsed())
}

/// A grammar refusal as an error.
fn ok<T>(r: Result<T, &'static str>) -> anyhow::Result<T> {
    r.map_err(anyhow::Error::msg)
}

/// Start one call every `1/rate` s (without waiting for earlier ones), `total` in all.
async fn at_rate<F, Fut>(rate: u32, total: usize, op: F) -> Stats
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(total);
    for _ in 0..total {
        tick.tick().await;
        let fut = op();
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            fut.await;
            t.elapsed()
        }));
    }
    let mut all = Vec::with_capacity(total);
    for t in tasks {
        all.push(t.await.expect("bench task"));
    }
    stats(all, started.elapsed())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let total: usize = std::env::var("WARD_BENCH_DECISIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let db = lychd_testkit::test_db().await;
    let opts =
        lychd_runtime::db::connect_options(&db.runtime_url(Office::Ward), None, Office::Ward)?;
    let pool: PgPool = lychd_runtime::db::pool(opts, 40).await?;

    // One service principal with the asked-for assignment, among a few hundred others'.
    let svc = principals::enroll(
        &pool,
        None,
        &principals::Enrollment {
            kind: PrincipalKind::Service,
            name: ok(PrincipalName::parse("bench"))?,
            display_name: None,
        },
    )
    .await?;
    for i in 0..300 {
        let p = principals::enroll(
            &pool,
            None,
            &principals::Enrollment {
                kind: PrincipalKind::Service,
                name: ok(PrincipalName::parse(&format!("other-{i}")))?,
                display_name: None,
            },
        )
        .await?;
        let q = Question {
            action: ok(Action::parse(LEASE.0))?,
            object: ok(Object::parse(&format!("lease:l-{i}")))?,
            audience: ok(Audience::parse(LEASE.2))?,
            purpose: ok(Purpose::parse(LEASE.3))?,
        };
        assignments::assign(&pool, None, p.id, &q, None).await?;
        let c = credentials::issue(&pool, None, p.id, CredentialKind::Standing, 3600).await?;
        credentials::exchange(&pool, c.secret.expose_secret(), 0, &everywhere()).await?;
    }
    let grant = Question {
        action: ok(Action::parse(LEASE.0))?,
        object: ok(Object::parse(LEASE.1))?,
        audience: ok(Audience::parse(LEASE.2))?,
        purpose: ok(Purpose::parse(LEASE.3))?,
    };
    assignments::assign(&pool, None, svc.id, &grant, None).await?;
    let c = credentials::issue(&pool, None, svc.id, CredentialKind::Standing, 3600).await?;
    let token: Arc<str> = credentials::exchange(&pool, c.secret.expose_secret(), 0, &everywhere())
        .await?
        .token
        .expose_secret()
        .into();

    let verifier: Arc<dyn Verifier> = lychd_ward::local_verifier(pool.clone(), &Default::default());
    let decide = {
        let (verifier, token) = (verifier.clone(), token.clone());
        move || {
            let (verifier, token) = (verifier.clone(), token.clone());
            async move {
                let q = Query {
                    token: &token,
                    action: LEASE.0,
                    object: LEASE.1,
                    audience: LEASE.2,
                    purpose: LEASE.3,
                    expected_policy_generation: None,
                };
                let d = verifier.authorize(&q).await.expect("decision");
                assert!(d.allowed, "bench decision must be allowed");
            }
        }
    };
    let authenticate = {
        let (verifier, token) = (verifier.clone(), token.clone());
        move || {
            let (verifier, token) = (verifier.clone(), token.clone());
            async move {
                verifier
                    .authenticate(&token, LEASE.2)
                    .await
                    .expect("authenticated");
            }
        }
    };
    let select1 = {
        let pool = pool.clone();
        move || {
            let pool = pool.clone();
            async move {
                let _: i32 = sqlx::query_scalar("SELECT 1")
                    .fetch_one(&pool)
                    .await
                    .expect("select 1");
            }
        }
    };
    // Warm up connections and plans.
    run(32, 640, decide.clone()).await;
    run(32, 640, select1.clone()).await;

    println!(
        "ward LocalVerifier::authorize vs SELECT 1, {total} calls per row (PostgreSQL {})",
        server_version(&pool).await
    );
    println!(
        "{:>11} {:>13} {:>9} {:>9} {:>11} {:>10}",
        "concurrency", "what", "p50 ms", "p99 ms", "per second", "p50 ratio"
    );
    for concurrency in [1usize, 32] {
        let base = run(concurrency, total, select1.clone()).await;
        let d = run(concurrency, total, decide.clone()).await;
        let a = run(concurrency, total, authenticate.clone()).await;
        for (what, s) in [("SELECT 1", &base), ("authenticate", &a), ("authorize", &d)] {
            println!(
                "{:>11} {:>13} {:>9.3} {:>9.3} {:>11.0} {:>10.2}",
                concurrency,
                what,
                ms(s.p50),
                ms(s.p99),
                s.per_sec,
                s.p50.as_secs_f64() / base.p50.as_secs_f64()
            );
        }
    }
    // Open loop: decisions started at a fixed rate (the issue's target: p99 ≤ 2 ms at 500/s).
    let rate = 500;
    let s = at_rate(rate, total.min(2500), decide.clone()).await;
    println!(
        "{:>11} {:>13} {:>9.3} {:>9.3} {:>11.0}",
        format!("{rate}/s"),
        "authorize",
        ms(s.p50),
        ms(s.p99),
        s.per_sec
    );
    let audited: i64 =
        sqlx::query_scalar("SELECT count(*) FROM ward.audit WHERE event = 'authorize.allow'")
            .fetch_one(&pool)
            .await?;
    println!("decisions audited: {audited}");
    Ok(())
}

async fn server_version(pool: &PgPool) -> String {
    sqlx::query_scalar("SHOW server_version")
        .fetch_one(pool)
        .await
        .unwrap_or_default()
}

/// Sessions the bench may present anywhere.
fn everywhere() -> Audiences {
    Audiences::parse(&lychd_runtime::Office::ALL.map(|o| o.name()))
        .expect("office names are audiences")
}
