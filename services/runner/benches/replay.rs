//! Replay speed: transitions re-executed per second by `ReplayRun` (the service's replay: the
//! run's whole record read in one read-only transaction, then the pure re-execution), against
//! reading the same rows alone (`store::replay::load`, the baseline) in the same run, and CPU
//! per replayed transition (this process plus the PostgreSQL cluster).
//!
//! Runs of 24 `task` steps (74 transitions each, every one with its recorded clock reads, task
//! result and tree read) are driven in-process first; each case then replays every run
//! `ROUNDS` times from one caller.
//!
//! Run: `cargo bench -p lychd-runner --bench replay` (needs PostgreSQL binaries, like the
//! tests). Timings never gate anything.

use std::sync::Arc;
use std::time::Instant;

use lychd_runner::config::Settings;
use lychd_runner::domain::budgets::Budgets;
use lychd_runner::domain::fsm::Fsm;
use lychd_runner::domain::workflow::Workflow;
use lychd_runner::model::Models;
use lychd_runner::service::Service;
use lychd_runner::service::driver::Driver;
use lychd_runner::service::runs::{Reader, StartRun};
use lychd_runner::store::{leases, replay};
use lychd_runtime::Office;
use lychd_testkit::bench::Cpu;
use sqlx::postgres::PgPoolOptions;
use uuid::Uuid;

/// Runs replayed, and how many times each.
const RUNS: usize = 12;
const ROUNDS: usize = 5;

fn workflow() -> Vec<u8> {
    let steps: Vec<String> = (0..24)
        .map(|i| {
            let closes = if i == 23 { r#","closes":["done"]"# } else { "" };
            format!(r#"{{"id":"s{i}","kind":"task"{closes}}}"#)
        })
        .collect();
    format!(
        r#"{{"schema":"lychd.runner.workflow/v1","name":"bench","version":"0.1.0",
        "obligations":[{{"id":"done","evidence":["task_result"]}}],"steps":[{}]}}"#,
        steps.join(",")
    )
    .into_bytes()
}

async fn runs(service: &Arc<Service>) -> Vec<Uuid> {
    let bytes = workflow();
    let w = Workflow::parse(&bytes).expect("valid workflow");
    for i in 0..RUNS {
        service
            .start(
                "bench",
                &StartRun {
                    request_id: format!("replay-{i}"),
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
    let settings = Settings {
        drive: true,
        lease_ttl_ms: 60_000,
        poll_ms: 10,
        concurrency: 1,
        task_step_ms: 0,
        price_milli_per_1k_tokens: Default::default(),
        effects: Default::default(),
    };
    let d = Driver::new(service.clone(), Models::none(), settings);
    while let Some(run) = leases::claim(&service.pool, d.holder(), 60_000)
        .await
        .expect("claim")
    {
        d.drive(run).await.expect("drive");
    }
    sqlx::query_scalar("SELECT id FROM runner.runs WHERE terminal_category = 'success'")
        .fetch_all(&service.pool)
        .await
        .expect("runs")
}

#[tokio::main]
async fn main() {
    let db = lychd_testkit::test_db_for(&[lychd_runner::spec()]).await;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(&db.runtime_url(Office::Runner))
        .await
        .expect("pool");
    let service = Service::new(pool.clone(), Fsm::bound().expect("fsm"));
    let ids = runs(&service).await;
    assert_eq!(ids.len(), RUNS, "every run succeeded");
    let inputs: i64 = sqlx::query_scalar("SELECT count(*) FROM runner.run_inputs")
        .fetch_one(&pool)
        .await
        .expect("inputs");
    println!(
        "{RUNS} runs of 24 task steps, {inputs} recorded inputs, each run replayed {ROUNDS} times"
    );
    for case in [
        "baseline: read the record alone",
        "ReplayRun (read + re-execute)",
    ] {
        let cpu = Cpu::now();
        let t = Instant::now();
        let mut transitions = 0usize;
        for _ in 0..ROUNDS {
            for id in &ids {
                if case.starts_with("baseline") {
                    let r = replay::load(&pool, *id, None)
                        .await
                        .expect("load")
                        .expect("run");
                    transitions += r.steps.len();
                } else {
                    let r = service.replay(*id, Reader::All).await.expect("replay");
                    assert!(r.report.divergence.is_none(), "no divergence");
                    transitions += r.report.replayed;
                }
            }
        }
        let wall = t.elapsed();
        let per = cpu.per_call_since(transitions);
        println!(
            "{case}: {transitions} transitions, {:.0}/s, CPU/transition {:.4} ms (process) + {:.4} ms (database)",
            transitions as f64 / wall.as_secs_f64(),
            per.process.as_secs_f64() * 1000.0,
            per.database.as_secs_f64() * 1000.0
        );
    }
}
