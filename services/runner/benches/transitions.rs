//! Committed transitions per second and CPU per transition of the step loop (a fenced state
//! commit: the guarded `UPDATE … RETURNING` of the run, its transition row and its checkpoint
//! of the whole progress, one transaction; no effect), with one and with two runner drivers on
//! one database, against a bare `INSERT … RETURNING` of a row of the same size (a transition's
//! columns plus a checkpoint body) in the same run.
//!
//! Runs of 24 `task` steps (the contract's `max_tool_calls`: a task step is one tool call; a
//! no-op: 74 transitions a run, the last the hold at `VERIFY` — no independent verifier is
//! configured here, so every run is held for review: the step loop's commits are measured, not
//! the verifier) are started by the office's own
//! start and driven by `Driver` in-process; the baseline inserts rows one autocommit statement
//! at a time, from the same number of callers. CPU is this process plus the PostgreSQL cluster
//! (`lychd_testkit::bench::Cpu`).
//!
//! Run: `cargo bench -p lychd-runner --bench transitions` (needs PostgreSQL binaries, like the
//! tests). Target: at most 3× the baseline's time per row. Timings never gate anything.

use std::sync::Arc;
use std::time::Instant;

use lychd_runner::config::Settings;
use lychd_runner::domain::budgets::Budgets;
use lychd_runner::domain::fsm::Fsm;
use lychd_runner::domain::workflow::Workflow;
use lychd_runner::model::Models;
use lychd_runner::service::Service;
use lychd_runner::service::driver::Driver;
use lychd_runner::service::runs::StartRun;
use lychd_runner::store::leases;
use lychd_runtime::Office;
use lychd_testkit::bench::Cpu;
use sqlx::postgres::PgPoolOptions;

/// Runs per replica in a case.
const RUNS: usize = 12;

fn workflow() -> Vec<u8> {
    let steps: Vec<String> = (0..24)
        .map(|i| {
            let closes = if i == 23 { r#","closes":["done"]"# } else { "" };
            format!(r#"{{"id":"s{i}","kind":"task"{closes}}}"#)
        })
        .collect();
    format!(
        r#"{{"schema":"lychd.runner.workflow/v1","name":"bench","version":"0.1.0",
        "obligations":[{{"id":"done","evidence":["task_result"]}}],"steps":[{}],
        "verification":{{"owner":"owner-alice"}}}}"#,
        steps.join(",")
    )
    .into_bytes()
}

fn settings() -> Settings {
    Settings {
        drive: true,
        lease_ttl_ms: 60_000,
        poll_ms: 10,
        concurrency: 1,
        task_step_ms: 0,
        price_milli_per_1k_tokens: Default::default(),
        effects: Default::default(),
    }
}

/// Drive every claimable run with `replicas` drivers at once; the transitions committed.
async fn drive(service: &Arc<Service>, replicas: usize) -> usize {
    let tasks: Vec<_> = (0..replicas)
        .map(|_| {
            let d = Driver::new(service.clone(), Models::none(), settings());
            let pool = service.pool.clone();
            tokio::spawn(async move {
                while let Some(run) = leases::claim(&pool, d.holder(), 60_000)
                    .await
                    .expect("claim")
                {
                    d.drive(run).await.expect("drive");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("driver");
    }
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM runner.run_transitions WHERE trigger <> 'created'",
    )
    .fetch_one(&service.pool)
    .await
    .expect("count");
    usize::try_from(n).expect("count")
}

async fn start(service: &Service, prefix: &str, n: usize) {
    let bytes = workflow();
    let w = Workflow::parse(&bytes).expect("valid workflow");
    for i in 0..n {
        service
            .start(
                "bench",
                &StartRun {
                    request_id: format!("{prefix}-{i}"),
                    workflow_bytes: bytes.clone(),
                    workflow: w.clone(),
                    input: Vec::new(),
                    budgets: Budgets::contract(),
                    timeout_seconds: None,
                    parent: None,
                },
            )
            .await
            .expect("start");
    }
}

#[tokio::main]
async fn main() {
    let db = lychd_testkit::test_db_for(&[lychd_runner::spec()]).await;
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect(&db.runtime_url(Office::Runner))
        .await
        .expect("pool");
    let service = Service::new(pool.clone(), Fsm::bound().expect("fsm"));
    let mut admin = db.superuser().await;
    // A checkpoint body of a run in the middle of its steps: the baseline's row size.
    start(&service, "size", 1).await;
    drive(&service, 1).await;
    let body_len: i32 = sqlx::query_scalar(
        "SELECT length(body)::int FROM runner.run_checkpoints ORDER BY version DESC LIMIT 1 OFFSET 38",
    )
    .fetch_one(&pool)
    .await
    .expect("body size");
    sqlx::query(
        "CREATE TABLE runner.bench_rows (sequence bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, \
         id uuid NOT NULL, version bigint NOT NULL, generation bigint NOT NULL, \
         source_state text NOT NULL, target_state text NOT NULL, trigger text NOT NULL, \
         actor text NOT NULL, body bytea NOT NULL, checksum text NOT NULL, \
         recorded_at timestamptz NOT NULL DEFAULT now())",
    )
    .execute(&mut admin)
    .await
    .expect("baseline table");
    sqlx::query("GRANT INSERT, SELECT ON runner.bench_rows TO lychd_runner_app")
        .execute(&mut admin)
        .await
        .expect("grant");
    sqlx::query("TRUNCATE runner.run_inputs, runner.run_transitions, runner.run_checkpoints, runner.run_reviews, runner.state_migrations, runner.provenance_snapshots, runner.runs CASCADE")
        .execute(&mut admin)
        .await
        .expect("reset");
    println!("checkpoint body: {body_len} bytes; runs of 24 task steps, {RUNS} per replica");

    for replicas in [1usize, 2] {
        // Baseline: the same number of callers inserting same-sized rows, one per statement.
        let rows = RUNS * 74 / 2;
        let body = vec![b'x'; usize::try_from(body_len).expect("size")];
        let cpu = Cpu::now();
        let t = Instant::now();
        let tasks: Vec<_> = (0..replicas)
            .map(|_| {
                let (pool, body) = (pool.clone(), body.clone());
                tokio::spawn(async move {
                    for v in 0..rows / replicas {
                        let _: i64 = sqlx::query_scalar(
                            "INSERT INTO runner.bench_rows (id, version, generation, source_state, \
                             target_state, trigger, actor, body, checksum) \
                             VALUES (gen_random_uuid(), $1, 2, 'INGEST', 'PLAN', 'ingested', 'runner', $2, \
                             repeat('a', 64)) RETURNING sequence",
                        )
                        .bind(i64::try_from(v).expect("v"))
                        .bind(&body)
                        .fetch_one(&pool)
                        .await
                        .expect("insert");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("baseline");
        }
        let base_wall = t.elapsed();
        let base_cpu = cpu.per_call_since(rows);
        let base_rate = rows as f64 / base_wall.as_secs_f64();

        start(&service, &format!("r{replicas}"), RUNS * replicas).await;
        let cpu = Cpu::now();
        let t = Instant::now();
        let n = drive(&service, replicas).await;
        let wall = t.elapsed();
        let per = cpu.per_call_since(n);
        let rate = n as f64 / wall.as_secs_f64();
        println!(
            "{replicas} replica(s): {n} transitions, {rate:.0}/s, CPU/transition {:.3} ms (process) + {:.3} ms (database)",
            per.process.as_secs_f64() * 1000.0,
            per.database.as_secs_f64() * 1000.0
        );
        println!(
            "  baseline INSERT … RETURNING ({replicas} caller(s)): {rows} rows, {base_rate:.0}/s, CPU/row {:.3} ms + {:.3} ms",
            base_cpu.process.as_secs_f64() * 1000.0,
            base_cpu.database.as_secs_f64() * 1000.0
        );
        println!(
            "  ratio (time per transition / time per row): {:.2}×",
            base_rate / rate
        );
        sqlx::query("TRUNCATE runner.run_inputs, runner.run_transitions, runner.run_checkpoints, runner.run_reviews, runner.state_migrations, runner.provenance_snapshots, runner.runs, runner.bench_rows CASCADE")
            .execute(&mut admin)
            .await
            .expect("reset");
    }
}
