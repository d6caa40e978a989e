//! Replay speed: transitions re-executed per second by `ReplayRun` (the service's replay: the
//! run's whole record read in one read-only transaction, then the pure re-execution), against
//! reading the same rows alone (`store::replay::load`, the baseline) in the same run, and CPU
//! per replayed transition (this process plus the PostgreSQL cluster).
//!
//! Runs of 24 `task` steps (74 transitions to `VERIFY`, every one with its recorded clock
//! reads, task result and tree read, then the independent verifier's holds and PASS: every
//! workflow is verified, issue 28) are driven in-process first — the HelmLoop office and Ward
//! beside the Runner, the owner approving what is proposed (`lychd_testkit::verify`), which
//! stops before anything is measured; each case then replays every run `ROUNDS` times from one
//! caller.
//!
//! Run: `cargo bench -p lychd-runner --bench replay` (needs the built binaries, `cargo build
//! --workspace --bins`, and PostgreSQL binaries, like the tests). Timings never gate anything.

use std::sync::Arc;
use std::time::Instant;

use lychd_auth::credentials::SessionSource;
use lychd_runner::config::Settings;
use lychd_runner::domain::budgets::Budgets;
use lychd_runner::domain::fsm::Fsm;
use lychd_runner::domain::workflow::Workflow;
use lychd_runner::model::Models;
use lychd_runner::service::Service;
use lychd_runner::service::driver::Driver;
use lychd_runner::service::runs::{Reader, StartRun};
use lychd_runner::store::{leases, replay};
use lychd_runner::verifier::Verifier;
use lychd_runtime::client::Outgoing;
use lychd_testkit::bench::Cpu;
use lychd_testkit::verify::{OWNER, Verification};
use secrecy::SecretString;
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
        "obligations":[{{"id":"done","evidence":["task_result"]}}],"steps":[{}],
        "verification":{{"owner":"{OWNER}"}}}}"#,
        steps.join(",")
    )
    .into_bytes()
}

async fn runs(service: &Arc<Service>, verifier: Verifier) -> Vec<Uuid> {
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
    let d = Driver::new(service.clone(), Models::none(), settings).with_verifier(verifier);
    // A held verification gives a run back until its recheck: drive until every run ended.
    let t = Instant::now();
    loop {
        match leases::claim(&service.pool, d.holder(), 60_000)
            .await
            .expect("claim")
        {
            Some(run) => {
                d.drive(run).await.expect("drive");
            }
            None => {
                let open: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM runner.runs WHERE terminal_category IS NULL",
                )
                .fetch_one(&service.pool)
                .await
                .expect("open runs");
                if open == 0 {
                    break;
                }
                assert!(t.elapsed().as_secs() < 300, "{open} runs still open");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
    sqlx::query_scalar("SELECT id FROM runner.runs WHERE terminal_category = 'success'")
        .fetch_all(&service.pool)
        .await
        .expect("runs")
}

#[tokio::main]
async fn main() {
    // The Runner in this process (its step loop off: the bench drives, asking the verifier it
    // is given), its Ward a process, the HelmLoop office beside it.
    let mut spawned = lychd_testkit::spawn_office_with(lychd_runner::spec(), |c| {
        c.office = "drive = false".parse().expect("office section");
    })
    .await;
    let mut verification = Verification::beside(&mut spawned, 0).await;
    verification.approve_all();
    let session = SessionSource::start(
        spawned.ward_channel(),
        SecretString::from(verification.credential.clone()),
        vec!["ward".into(), "helmloop".into()],
    );
    assert!(
        session.ready(std::time::Duration::from_secs(10)).await,
        "verifier session"
    );
    let verifier = Verifier::at(
        &verification.helmloop_endpoint,
        &spawned.ward_endpoint(),
        Outgoing::new(Some(session)),
    )
    .expect("endpoints")
    .recheck_ms(50);
    let pool = spawned.ctx.pool.clone();
    let service = Service::new(pool.clone(), Fsm::bound().expect("fsm"));
    let ids = runs(&service, verifier).await;
    // Nothing but the replay from here on: the owner stops looking at Ward.
    verification.stop_approving();
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
