//! `Reduce` of the baseline bundle (core case `core-001-pass-baseline`, 14 records, PASS) over
//! loopback gRPC at concurrency 16, Ward deciding every call (one decision: `Reduce` is
//! self-authenticating), against the in-process parse + reduce of the same bytes and a gRPC
//! health check, all measured in the same run; then `AppendRecords` of the baseline's 14
//! records: fresh bodies (each batch re-identified and re-sealed: 14 inserts, the owner
//! actions asked and asked again before the write) and exact replays.
//!
//! Run: `cargo bench -p lychd-helmloop-service --bench reduce` (needs PostgreSQL binaries,
//! like the tests). Timings never gate anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lychd_helmloop::conformance::Case;
use lychd_helmloop::{Value, record_digest, to_canonical_vec};
use lychd_proto::helmloop::v1 as pb;
use lychd_proto::helmloop::v1::helm_loop_client::HelmLoopClient;
use lychd_testkit::bench::{Cpu, Stats, closed, ms};
use lychd_testkit::spawn_office;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const CONCURRENCY: usize = 16;
const WARMUP: usize = 200;
const SECONDS: u64 = 5;

fn baseline() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/helmloop/core/cases/core-001-pass-baseline.json");
    let case = Case::parse(&std::fs::read(path).expect("baseline case")).expect("case");
    case.input.value().clone()
}

/// The baseline's records with `-b<n>` appended to every id, re-sealed.
fn batch(records: &[Value], n: u64) -> Vec<Vec<u8>> {
    records
        .iter()
        .map(|r| {
            let Value::Object(mut m) = r.clone() else {
                panic!("a record is an object")
            };
            let id = m
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("r")
                .to_owned();
            m.insert("id", format!("{id}-b{n}").into());
            let mut v = Value::Object(m);
            let d = record_digest(&v).expect("digest");
            if let Value::Object(m) = &mut v {
                m.insert("digest", d.render().into());
            }
            to_canonical_vec(&v).expect("canonical")
        })
        .collect()
}

fn line(what: &str, s: Stats) -> String {
    format!(
        "{what:<44} p50 {:>7.3} ms  p99 {:>7.3} ms ({:.3}–{:.3})  {:>8.0}/s",
        ms(s.p50),
        ms(s.p99),
        ms(s.p99_of_fifths.0),
        ms(s.p99_of_fifths.1),
        s.per_second
    )
}

/// In-process parse + reduce of `input` on `threads` threads for `seconds`: reductions/s.
fn in_process(input: &[u8], threads: usize, seconds: u64) -> f64 {
    for _ in 0..WARMUP {
        lychd_helmloop::reduce_bytes(input).expect("parses");
    }
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let done = done.clone();
            s.spawn(move || {
                while Instant::now() < until {
                    let r = lychd_helmloop::reduce_bytes(input).expect("parses");
                    assert!(r.is_pass());
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let input_value = baseline();
    let input = to_canonical_vec(&input_value).expect("canonical");
    let records: Vec<Value> = input_value
        .get("records")
        .and_then(Value::as_array)
        .expect("records")
        .to_vec();
    println!(
        "helmloop reduce bench: baseline {} bytes, {} records; cores {}; load {}",
        input.len(),
        records.len(),
        std::thread::available_parallelism().map_or(0, usize::from),
        load()
    );

    let spawned = spawn_office(lychd_helmloop_service::spec()).await;
    for (action, object) in [
        ("helmloop:reduce", "office:helmloop"),
        ("helmloop:append_observation", "subject:*"),
        ("helmloop:append_learning_proposal", "subject:*"),
        ("helmloop:append_contract", "subject:*"),
        ("helmloop:append_grant", "subject:*"),
        ("helmloop:append_assurance", "subject:*"),
        ("helmloop:append_promotion", "subject:*"),
        ("helmloop:append_learning_acceptance", "subject:*"),
    ] {
        spawned.allow(action, object).await;
    }
    let client = HelmLoopClient::new(spawned.channel());
    let channel = tonic::transport::Endpoint::from_shared(spawned.endpoint())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let health_client = HealthClient::new(channel);

    let health = closed(CONCURRENCY, WARMUP, SECONDS, move || {
        let mut c = health_client.clone();
        async move {
            c.check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect("health");
        }
    })
    .await;

    let one_core = in_process(&input, 1, SECONDS);
    let all_cores = in_process(
        &input,
        std::thread::available_parallelism().map_or(2, usize::from),
        SECONDS,
    );

    let before = Cpu::now();
    let reduce = {
        // Shared, not copied, by every call (as a client holding its input would send it).
        let input = tonic::codegen::Bytes::from(input.clone());
        let c = client.clone();
        closed(CONCURRENCY, WARMUP, SECONDS, move || {
            let mut c = c.clone();
            let input = input.clone();
            async move {
                let r = c
                    .reduce(pb::ReduceRequest {
                        input,
                        ..Default::default()
                    })
                    .await
                    .expect("reduce")
                    .into_inner();
                assert_eq!(
                    r.summary.map(|s| s.disposition),
                    Some(pb::Disposition::Pass as i32)
                );
            }
        })
        .await
    };
    // The warm-up's calls ran inside the measured span too.
    let reduce_cpu = before.per_call_since(reduce.calls + WARMUP);

    let next = Arc::new(AtomicU64::new(0));
    let fresh = {
        let c = client.clone();
        let records = records.clone();
        closed(CONCURRENCY, 20, SECONDS, move || {
            let mut c = c.clone();
            let n = next.fetch_add(1, Ordering::Relaxed);
            let batch = batch(&records, n);
            async move {
                let r = c
                    .append_records(pb::AppendRecordsRequest { records: batch })
                    .await
                    .expect("append")
                    .into_inner();
                assert!(
                    r.results
                        .iter()
                        .all(|x| x.outcome == pb::AppendOutcome::Stored as i32)
                );
            }
        })
        .await
    };
    let replay = {
        let c = client.clone();
        let same = batch(&records, u64::MAX);
        closed(CONCURRENCY, 20, SECONDS, move || {
            let mut c = c.clone();
            let batch = same.clone();
            async move {
                c.append_records(pb::AppendRecordsRequest { records: batch })
                    .await
                    .expect("append");
            }
        })
        .await
    };

    println!("{}", line("gRPC health check (c=16)", health));
    println!("in-process parse + reduce, 1 thread{:>22.0}/s", one_core);
    println!("in-process parse + reduce, every core{:>20.0}/s", all_cores);
    println!("{}", line("Reduce over gRPC (c=16, Ward per call)", reduce));
    println!(
        "  Reduce/s ÷ in-process 1 thread: {:.2}; ÷ every core: {:.2}; ÷ health/s: {:.2}",
        reduce.per_second / one_core,
        reduce.per_second / all_cores,
        reduce.per_second / health.per_second
    );
    println!(
        "  CPU per Reduce: {:.0} µs in this process (client, office) + {:.0} µs the Ward process + {:.0} µs PostgreSQL = {:.0} µs",
        reduce_cpu.process.as_secs_f64() * 1e6,
        reduce_cpu.offices.as_secs_f64() * 1e6,
        reduce_cpu.database.as_secs_f64() * 1e6,
        reduce_cpu.total().as_secs_f64() * 1e6
    );
    println!("{}", line("AppendRecords 14 fresh records (c=16)", fresh));
    println!(
        "  = {:.0} records/s",
        fresh.per_second * records.len() as f64
    );
    println!(
        "{}",
        line("AppendRecords 14 replayed records (c=16)", replay)
    );
    println!("load after: {}", load());
    spawned.stop().await;
}
