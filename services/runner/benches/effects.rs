//! Effect overhead: what the Runner adds to one external effect beyond the adapter's own
//! exchange, and the intent-to-dispatch latency.
//!
//! Baseline, in the same run: the HTTP adapter alone (`HttpAdapter::deliver`, a fresh key per
//! call) against the simulated external system. Case: runs of one low-risk effect step
//! (preauthorized by a standing rule in Ward, so no human waits), each driven by a real
//! `lychd-runner` process with a real `lychd-ward` (the proposal, its replay, the consumption,
//! the effect-time permission, six fenced commits with their ledger entries). Reported per
//! effect: latency (start to the receipt re-ingested and the run handed to the independent
//! verifier — `VERIFY` or `WAIT_VERIFICATION` —, polled every 2 ms), the ratio to the adapter
//! alone, CPU of the office processes (Runner, Ward, HelmLoop) and of the database over that
//! span, and the intent-to-dispatch latency (the ledger's `attempt` entry, written just before
//! the dispatch, minus its `intent` entry, both the database's clock). Every workflow is
//! verified (issue 28): each run then goes on, untimed, to `SUCCEEDED` on the HelmLoop
//! office's PASS, its owner approving what is proposed (`lychd_testkit::verify`), before the
//! next run starts — the verifier's time is not the effect's overhead.
//!
//! Run: `cargo bench -p lychd-runner --bench effects` (needs the built binaries, `cargo build
//! --workspace --bins`, and PostgreSQL binaries, like the tests). Timings never gate anything.

use std::time::{Duration, Instant};

use lychd_proto::runner::v1 as pb;
use lychd_proto::runner::v1::runner_client::RunnerClient;
use lychd_runner::adapter::HttpAdapter;
use lychd_runtime::Office;
use lychd_testkit::bench::Cpu;
use lychd_testkit::simeffect::SimEffect;
use lychd_testkit::verify::{OWNER, Verification};
use lychd_testkit::{Sandbox, channel_with};

const ADAPTER_CALLS: usize = 300;
const RUNS: usize = 40;

#[tokio::main]
async fn main() {
    let sim = SimEffect::start().await;
    let rules = std::env::temp_dir().join(format!("lychd-bench-rules-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&rules).expect("rules dir");
    std::fs::write(
        rules.join("runner.toml"),
        "[[rule]]\nslug = \"bench\"\neffect_class = \"standard\"\nprincipal = \"runner\"\n\
         tool = \"runner.effect.http.low\"\neffect_owner = \"runner\"\npriority = 10\n",
    )
    .expect("rule");
    let mut sandbox = Sandbox::builder()
        .office(Office::Runner)
        .verified(Office::Runner)
        .config_text(
            Office::Runner,
            "[office]\npoll_ms = 10\napproval_poll_ms = 10\neffect_timeout_ms = 5000\n\
             verify_recheck_ms = 50\n",
        )
        .config_text(
            Office::Ward,
            format!(
                "[office]\npreauth_dir = {:?}\n",
                rules.display().to_string()
            ),
        )
        .start()
        .await;
    let mut verification = Verification::in_sandbox(&mut sandbox, Office::Runner).await;
    let mut admin = sandbox.admin();
    let runner = admin
        .ensure_office_principal("runner")
        .await
        .expect("runner");
    for (principal, action, object, audience, purpose) in [
        (&runner, "ward:propose", "effect:runner", "ward", "propose"),
        (&runner, "ward:consume", "effect:runner", "ward", "consume"),
        (
            &runner,
            "runner:effect_http",
            "destination:*",
            "runner",
            "effect_http",
        ),
        (
            &sandbox.operator_id,
            "runner:start",
            "run:*",
            "runner",
            "start",
        ),
        (
            &sandbox.operator_id,
            "runner:read",
            "run:*",
            "runner",
            "read",
        ),
        (
            &sandbox.operator_id,
            "runner:effect_http",
            "destination:*",
            "runner",
            "effect_http",
        ),
    ] {
        admin
            .ensure_assignment(principal, action, object, audience, purpose)
            .await
            .expect("grant");
    }
    let mut client = RunnerClient::new(channel_with(
        &sandbox.office(Office::Runner).endpoint(),
        &sandbox.token,
    ));

    // The adapter alone.
    let adapter = HttpAdapter::new(None, Duration::from_secs(5));
    let url = sim.url("/orders");
    let cpu = Cpu::now();
    let t = Instant::now();
    for i in 0..ADAPTER_CALLS {
        let key = format!("sha256:{:064x}", i + 1);
        let body = format!("{{\"bare\":{i}}}");
        adapter.deliver(&url, &key, body.as_bytes()).await;
    }
    let alone = t.elapsed() / u32::try_from(ADAPTER_CALLS).unwrap_or(1);
    let alone_cpu = cpu.per_call_since(ADAPTER_CALLS);

    // Runs of one effect.
    let mut latencies = Vec::new();
    let mut per_run_cpu = Cpu::default();
    for i in 0..RUNS {
        let workflow = format!(
            r#"{{"schema":"lychd.runner.workflow/v1","name":"bench","version":"0.1.0",
              "obligations":[{{"id":"paid","evidence":["effect_receipt"]}}],
              "steps":[{{"id":"pay","kind":"effect","adapter":"http","destination":"{url}",
                         "risk":"low","action":{{"n":{i}}},"closes":["paid"]}}],
              "verification":{{"owner":"{OWNER}"}}}}"#
        );
        // The owner's polling of Ward is not the effect's: it waits while the effect is timed.
        verification.stop_approving();
        let cpu = Cpu::now();
        let t = Instant::now();
        let run = client
            .start_run(pb::StartRunRequest {
                request_id: format!("bench-{i}"),
                workflow: workflow.into_bytes(),
                input: Vec::new(),
                budgets: None,
                timeout_seconds: 0,
                parent_run_id: String::new(),
            })
            .await
            .expect("start")
            .into_inner()
            .run
            .expect("run");
        loop {
            let state = client
                .get_run(pb::GetRunRequest {
                    run_id: run.run_id.clone(),
                })
                .await
                .expect("get")
                .into_inner()
                .run
                .expect("run")
                .state;
            if matches!(state.as_str(), "VERIFY" | "WAIT_VERIFICATION" | "SUCCEEDED") {
                break;
            }
            assert!(
                !matches!(
                    state.as_str(),
                    "FAILED" | "HUMAN_RECONCILIATION" | "NO_PROGRESS"
                ),
                "run ended {state}"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        latencies.push(t.elapsed());
        let spent = cpu.per_call_since(RUNS);
        per_run_cpu.process += spent.process;
        per_run_cpu.offices += spent.offices;
        per_run_cpu.database += spent.database;
        // Untimed: the independent verifier's PASS ends the run.
        verification.approve_all();
        let t = Instant::now();
        loop {
            let r = client
                .get_run(pb::GetRunRequest {
                    run_id: run.run_id.clone(),
                })
                .await
                .expect("get")
                .into_inner()
                .run
                .expect("run");
            if r.state == "SUCCEEDED" {
                let v = r.verification.expect("a verified run");
                assert_eq!(v.disposition, "PASS");
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "run ended {}",
                r.state
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let mean = latencies.iter().sum::<Duration>() / u32::try_from(RUNS).unwrap_or(1);
    let mut sorted = latencies.clone();
    sorted.sort();
    let p50 = sorted[RUNS / 2];
    assert_eq!(sim.duplicates(), 0);

    let mut db = sandbox.db.superuser().await;
    let intent_to_dispatch: f64 = sqlx::query_scalar(
        "SELECT avg(extract(epoch FROM a.recorded_at - i.recorded_at) * 1000)::float8 \
           FROM runner.effect_ledger i JOIN runner.effect_ledger a \
             ON a.run_id = i.run_id AND a.effect_sequence = i.effect_sequence \
          WHERE i.kind = 'intent' AND a.kind = 'attempt'",
    )
    .fetch_one(&mut db)
    .await
    .expect("intent to dispatch");

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "effect overhead ({RUNS} runs of one low-risk effect, {ADAPTER_CALLS} bare adapter calls)"
    );
    println!(
        "adapter alone:        {:8.2} ms/call   cpu process {:.2} ms",
        ms(alone),
        ms(alone_cpu.process)
    );
    println!(
        "effect through runner: {:7.2} ms/run mean, {:.2} ms p50   ratio {:.1}x   cpu offices (runner+ward+helmloop) {:.2} ms + database {:.2} ms + bench {:.2} ms",
        ms(mean),
        ms(p50),
        mean.as_secs_f64() / alone.as_secs_f64().max(1e-9),
        ms(per_run_cpu.offices),
        ms(per_run_cpu.database),
        ms(per_run_cpu.process),
    );
    println!(
        "runner overhead per effect: {:.2} ms latency beyond the adapter's own",
        ms(mean.saturating_sub(alone))
    );
    println!("intent-to-dispatch latency (ledger, database clock): {intent_to_dispatch:.2} ms");
    let _ = std::fs::remove_dir_all(rules);
}
