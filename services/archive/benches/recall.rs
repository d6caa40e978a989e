//! Recall over a corpus of 100,000 promoted notes in one namespace (plus 20,000 notes of noise
//! in two other namespaces, same vocabulary), through loopback gRPC with Ward deciding every
//! call (twice: before the read and before the receipt is written, then once more before the
//! answer) and a receipt written per recall; against the same full-text query run directly in
//! SQL and a gRPC health check, measured in the same run. Then intake throughput.
//!
//! The corpus is bulk-inserted by SQL (not through `Intake`) so the setup takes seconds: 12
//! words a note, two from 50 common words (`c0`..`c49`, each in ~4,000 notes of the
//! namespace), ten from 5,000 rarer ones (`w0`..`w4999`, each in ~240 notes). Queries are taken
//! from stored notes: one rare word, two rare words, one common word.
//!
//! Run: `cargo bench -p lychd-archive --bench recall` (needs PostgreSQL binaries, like the
//! tests). Targets: recall p95 ≤ 20 ms, intake ≥ 1,000 notes/s. Timings never gate anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lychd_proto::archive::v1 as pb;
use lychd_proto::archive::v1::archive_client::ArchiveClient;
use lychd_testkit::bench::Cpu;
use lychd_testkit::spawn_office;
use sqlx::Executor;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const CORPUS: i32 = 100_000;
const NOISE: i32 = 10_000;
const CALLS: usize = 400;

const GENERATE: &str = "
CREATE TEMP TABLE gen AS
SELECT gen_random_uuid() AS id, ns, 'doc://' || i AS key,
       (SELECT string_agg(CASE WHEN k <= 2 THEN 'c' || (abs(hashint4(i * 7 + k + 1000000)) % 50)
                               ELSE 'w' || (abs(hashint4(i * 13 + k)) % 5000) END, ' ')
        FROM generate_series(1, 12) k) AS body
FROM (SELECT 'corpus' AS ns, i FROM generate_series(1, $CORPUS) i
      UNION ALL SELECT 'noise-a', i FROM generate_series(1, $NOISE) i
      UNION ALL SELECT 'noise-b', i FROM generate_series(1, $NOISE) i) s;
INSERT INTO archive.namespaces (name, owner, policy_revision)
    VALUES ('corpus', 'bench', 1), ('noise-a', 'bench', 1), ('noise-b', 'bench', 1);
INSERT INTO archive.sources (namespace, source_key) SELECT ns, key FROM gen;
INSERT INTO archive.note_revisions (id, namespace, source_key, source_revision, content_digest,
        chars, producer, classification, observed_at)
    SELECT id, ns, key, '1', sha256(convert_to(body, 'UTF8')), length(body), 'bench', 'public', now()
    FROM gen;
INSERT INTO archive.note_texts (revision_id, namespace, body) SELECT id, ns, body FROM gen;
INSERT INTO archive.lifecycle (revision_id, namespace, source_key, state, version)
    SELECT id, ns, key, 'promoted', 2 FROM gen;
INSERT INTO archive.recall_index (revision_id, namespace, search)
    SELECT id, ns, to_tsvector('simple', body) FROM gen;
";

#[derive(Debug, Clone, Copy)]
struct Pct {
    p50: Duration,
    p95: Duration,
    p99: Duration,
}

fn pct(mut v: Vec<Duration>) -> Pct {
    v.sort_unstable();
    let q = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)];
    Pct {
        p50: q(0.50),
        p95: q(0.95),
        p99: q(0.99),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn show(what: &str, p: Pct) {
    println!(
        "  {what:<34} p50 {:>7.3} ms  p95 {:>7.3} ms  p99 {:>7.3} ms",
        ms(p.p50),
        ms(p.p95),
        ms(p.p99)
    );
}

#[tokio::main]
async fn main() {
    let spawned = spawn_office(lychd_archive::spec()).await;
    for action in ["archive:intake", "archive:recall"] {
        spawned.allow(action, "namespace:*").await;
    }
    let mut db = spawned.db.superuser().await;
    let started = Instant::now();
    db.execute(
        GENERATE
            .replace("$CORPUS", &CORPUS.to_string())
            .replace("$NOISE", &NOISE.to_string())
            .as_str(),
    )
    .await
    .expect("generate the corpus");
    // What autovacuum does after a bulk load, done now so every measured query (direct or not)
    // sees the steady state: statistics, set hint bits and a visibility map.
    db.execute("VACUUM (FREEZE, ANALYZE) archive.note_texts, archive.recall_index, archive.lifecycle, archive.note_revisions")
        .await
        .expect("vacuum the corpus");
    println!(
        "corpus: {CORPUS} promoted notes in `corpus`, {} in two noise namespaces, generated in {:.1} s",
        2 * NOISE,
        started.elapsed().as_secs_f64()
    );
    let bodies: Vec<String> = sqlx::query_scalar(
        "SELECT body FROM archive.note_texts WHERE namespace = 'corpus' ORDER BY revision_id LIMIT $1",
    )
    .bind(CALLS as i64)
    .fetch_all(&mut db)
    .await
    .expect("sample");
    let words = |b: &String| b.split(' ').map(str::to_owned).collect::<Vec<_>>();
    let classes: Vec<(&str, Vec<String>)> = vec![
        (
            "one rare word (~240 matches)",
            bodies.iter().map(|b| words(b)[5].clone()).collect(),
        ),
        (
            "two rare words (~1 match)",
            bodies
                .iter()
                .map(|b| format!("{} {}", words(b)[5], words(b)[6]))
                .collect(),
        ),
        (
            "one common word (~4,000 matches)",
            bodies.iter().map(|b| words(b)[0].clone()).collect(),
        ),
    ];

    let client = ArchiveClient::new(spawned.channel());
    let channel = tonic::transport::Endpoint::from_shared(spawned.endpoint())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut health = HealthClient::new(channel);
    let mut h = Vec::new();
    for i in 0..(CALLS + 100) {
        let t = Instant::now();
        health
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect("health");
        if i >= 100 {
            h.push(t.elapsed());
        }
    }
    let health = pct(h);
    println!("recall, c=1, {CALLS} calls per class, max_results 10, max_chars 10000:");
    show("gRPC health check (baseline)", health);

    // The same statement the office runs, directly, on a runtime-role connection.
    let pool = sqlx::PgPool::connect(&spawned.db.runtime_url(lychd_runtime::Office::Archive))
        .await
        .expect("runtime pool");
    let next = AtomicU64::new(0);
    for (class, queries) in &classes {
        let mut sql = Vec::new();
        for q in queries.iter().cycle().take(CALLS + 50).enumerate() {
            let t = Instant::now();
            let rows = sqlx::query(lychd_archive::store::receipts::SEARCH_SQL)
                .bind("corpus")
                .bind(q.1)
                .bind(10_i64)
                .fetch_all(&pool)
                .await
                .expect("direct query");
            assert!(!rows.is_empty(), "queries come from stored notes");
            if q.0 >= 50 {
                sql.push(t.elapsed());
            }
        }
        let mut grpc = Vec::new();
        let mut found = 0usize;
        for (i, q) in queries.iter().cycle().take(CALLS + 50).enumerate() {
            let n = next.fetch_add(1, Ordering::Relaxed);
            let mut c = client.clone();
            let t = Instant::now();
            let answer = c
                .recall(pb::RecallRequest {
                    namespace: "corpus".into(),
                    request_id: format!("bench-{n}"),
                    query: q.clone(),
                    purpose: "bench".into(),
                    max_results: 10,
                    max_chars: 10_000,
                })
                .await
                .expect("recall")
                .into_inner();
            if i >= 50 {
                grpc.push(t.elapsed());
                found += answer.notes.len();
            }
        }
        let (sql, grpc) = (pct(sql), pct(grpc));
        println!(
            " {class}: {:.1} notes per recall",
            found as f64 / CALLS as f64
        );
        show("  direct SQL (same statement)", sql);
        show("  Recall over gRPC (+receipt)", grpc);
        println!(
            "    ratio Recall / SQL: p50 {:.2}x  p95 {:.2}x; Recall / health p50 {:.1}x; target p95 <= 20 ms: {}",
            grpc.p50.as_secs_f64() / sql.p50.as_secs_f64(),
            grpc.p95.as_secs_f64() / sql.p95.as_secs_f64(),
            grpc.p50.as_secs_f64() / health.p50.as_secs_f64(),
            if grpc.p95 <= Duration::from_millis(20) {
                "met"
            } else {
                "NOT met"
            }
        );
    }

    // Intake: distinct notes (new sources), each in its own transaction, Ward asked twice.
    println!("intake (new candidates, 5 s each; one namespace serializes its intakes):");
    for (concurrency, spread) in [(1usize, 1usize), (8, 1), (32, 1), (32, 8), (32, 32)] {
        let counter = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + Duration::from_secs(5);
        let started = Instant::now();
        let cpu = Cpu::now();
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let counter = counter.clone();
                let mut c = client.clone();
                tokio::spawn(async move {
                    let mut lat = Vec::new();
                    while Instant::now() < deadline {
                        let n = counter.fetch_add(1, Ordering::Relaxed);
                        let t = Instant::now();
                        c.intake(pb::IntakeRequest {
                            namespace: format!("intake-{}", n as usize % spread),
                            request_id: format!("in-{concurrency}-{spread}-{n}"),
                            source_key: format!("doc://{concurrency}/{spread}/{n}"),
                            source_revision: "1".into(),
                            text: format!(
                                "c{} w{} w{} bench note {n}",
                                n % 50,
                                n % 5000,
                                (n * 7) % 5000
                            ),
                            producer: "bench".into(),
                            classification: "public".into(),
                            observed_at: Some(prost_types::Timestamp {
                                seconds: 1_780_000_000,
                                nanos: 0,
                            }),
                        })
                        .await
                        .expect("intake");
                        lat.push(t.elapsed());
                    }
                    lat
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("caller"));
        }
        let rate = all.len() as f64 / started.elapsed().as_secs_f64();
        let cpu = cpu.per_call_since(all.len());
        let p = pct(all);
        println!(
            "  c={concurrency:<3} namespaces={spread:<3} {rate:>7.0} notes/s  p50 {:>7.3} ms  p95 {:>7.3} ms  CPU {} + {} µs  (target >= 1,000/s: {})",
            ms(p.p50),
            ms(p.p95),
            cpu.process.as_micros(),
            cpu.database.as_micros(),
            if rate >= 1000.0 { "met" } else { "NOT met" }
        );
    }
}
