//! End to end over real processes (Ward, Dispatcher, Orchestrator binaries; PostgreSQL from
//! the test kit; the simulated host as its own process, `lychd-simhost`): `RequestTransition` answered `NO_OP` (a
//! fresh `ObserveAnimators` of the target and its neighbours through the Dispatcher, Ward
//! deciding each call) in a closed loop at concurrency 1, against a gRPC health check of the
//! Orchestrator in the same run; and the overhead of a `HARD_SWAP` beyond the simulated host's
//! own stop and start latency (two animators in conflict, swapped back and forth). First, CPU
//! per call of the Orchestrator process and of the database: a health check, a
//! `RequestTransition` recorded and not waited for, and a `GetTransition`.
//!
//! Run: `cargo bench -p lychd-orchestrator --bench transition` after
//! `cargo build --workspace --bins` (it spawns the binaries). Timings never gate anything.

use std::time::{Duration, Instant};

use lychd_proto::orchestrator::v1 as pb;
use lychd_proto::orchestrator::v1::orchestrator_client::OrchestratorClient;
use lychd_runtime::Office;
use lychd_testkit::bench::{closed, ms};
use lychd_testkit::simllama::{SimHostProcess, UnitFaults};
use lychd_testkit::{Sandbox, channel_with};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const SECONDS: u64 = 5;

/// CPU time of one office process (utime + stime from `/proc`, 10 ms ticks) and of the test
/// kit's PostgreSQL cluster.
#[derive(Clone, Copy)]
struct Cpu {
    office: Duration,
    database: Duration,
}

impl Cpu {
    fn of(pid: i32) -> Cpu {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The fields after the command name start at the state (field 3): utime is field 14,
        // stime field 15.
        let fields: Vec<&str> = text
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let field =
            |n: usize| -> u64 { fields.get(n - 3).and_then(|f| f.parse().ok()).unwrap_or(0) };
        let ticks = field(14) + field(15);
        Cpu {
            office: Duration::from_millis(ticks * 10),
            database: lychd_testkit::bench::Cpu::now().database,
        }
    }

    fn per_call_since(self, pid: i32, calls: usize) -> Cpu {
        let now = Cpu::of(pid);
        let n = u32::try_from(calls.max(1)).unwrap_or(u32::MAX);
        Cpu {
            office: now.office.saturating_sub(self.office) / n,
            database: now.database.saturating_sub(self.database) / n,
        }
    }
}
const SWAPS: usize = 10;
const START: Duration = Duration::from_millis(200);
const STOP: Duration = Duration::from_millis(100);

#[tokio::main]
async fn main() {
    let host = SimHostProcess::spawn(
        &lychd_testkit::bin_path("lychd-simhost"),
        &[("a", &["m"][..]), ("b", &["m"][..])],
        &["b"],
    )
    .await
    .expect("the simulated host serves");
    let mut registry = String::new();
    for n in ["a", "b"] {
        registry.push_str(&format!(
            "[[office.animators]]\nname = \"{n}\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"{}\"\ndedicated = true\n\n",
            host.endpoint(n).await
        ));
    }
    for n in ["a", "b"] {
        registry.push_str(&format!(
            "[[office.capabilities]]\nanimator = \"{n}\"\nfamily = \"chat\"\nmodel_id = \"m\"\n\n"
        ));
    }
    let sandbox = Sandbox::builder()
        .office(Office::Dispatcher)
        .office(Office::Orchestrator)
        .peer(Office::Orchestrator, Office::Dispatcher)
        .config_text(Office::Dispatcher, format!("[office]\n{registry}"))
        .config_text(
            Office::Orchestrator,
            format!(
                "[office]\npoll_interval_ms = 5\n\n[office.actuator]\nkind = \"simulated\"\nendpoint = \"{}\"\n\n{registry}",
                host.control_endpoint()
            ),
        )
        .start()
        .await;
    let mut admin = sandbox.admin();
    let orchestrator = admin
        .ensure_office_principal("orchestrator")
        .await
        .expect("principal");
    for (action, purpose) in [
        ("dispatcher:observe", "observe"),
        ("dispatcher:admission", "admission"),
    ] {
        admin
            .ensure_assignment(&orchestrator, action, "animator:*", "dispatcher", purpose)
            .await
            .expect("grant");
    }
    for (action, object, purpose) in [
        ("orchestrator:transition", "capability:*", "transition"),
        ("orchestrator:read", "transition:*", "read"),
    ] {
        admin
            .ensure_assignment(
                &sandbox.operator_id,
                action,
                object,
                "orchestrator",
                purpose,
            )
            .await
            .expect("grant");
    }
    let pid = sandbox.office(Office::Orchestrator).pid();
    let endpoint = sandbox.office(Office::Orchestrator).endpoint();
    let client = OrchestratorClient::new(channel_with(&endpoint, &sandbox.token));
    let health = HealthClient::new(
        tonic::transport::Endpoint::from_shared(endpoint)
            .expect("endpoint")
            .connect()
            .await
            .expect("connect"),
    );

    let cpu = Cpu::of(pid);
    let h = health.clone();
    let baseline = closed(1, 200, SECONDS, move || {
        let mut h = h.clone();
        async move {
            h.check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect("health");
        }
    })
    .await;
    let health_cpu = cpu.per_call_since(pid, baseline.calls);
    let cpu = Cpu::of(pid);
    let c = client.clone();
    let recorded = closed(1, 50, SECONDS, move || {
        let mut c = c.clone();
        async move {
            let t = c
                .request_transition(pb::RequestTransitionRequest {
                    request_id: uuid::Uuid::new_v4().simple().to_string(),
                    wait_ms: None,
                    capability_key: "b:chat:m".into(),
                    priority: 50,
                    admission_timeout_s: None,
                })
                .await
                .expect("recorded")
                .into_inner()
                .transition
                .expect("transition");
            assert_eq!(t.transition_id.len(), 32);
        }
    })
    .await;
    let recorded_cpu = cpu.per_call_since(pid, recorded.calls);
    // Let the last background NO_OPs settle, then read one transition over and over.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let id = client
        .clone()
        .request_transition(pb::RequestTransitionRequest {
            request_id: uuid::Uuid::new_v4().simple().to_string(),
            wait_ms: Some(5_000),
            capability_key: "b:chat:m".into(),
            priority: 50,
            admission_timeout_s: None,
        })
        .await
        .expect("transition")
        .into_inner()
        .transition
        .expect("transition")
        .transition_id;
    let cpu = Cpu::of(pid);
    let c = client.clone();
    let got = closed(1, 200, SECONDS, move || {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            c.get_transition(pb::GetTransitionRequest { transition_id: id })
                .await
                .expect("get");
        }
    })
    .await;
    let get_cpu = cpu.per_call_since(pid, got.calls);
    println!(
        "| case | calls | Orchestrator CPU per call | database CPU per call | ratio to health (Orchestrator) |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (name, stats, c) in [
        ("gRPC health check", &baseline, health_cpu),
        (
            "RequestTransition recorded, not waited (NO_OP target)",
            &recorded,
            recorded_cpu,
        ),
        ("GetTransition", &got, get_cpu),
    ] {
        println!(
            "| {name} | {} | {:.3} ms | {:.3} ms | {:.1} |",
            stats.calls,
            ms(c.office),
            ms(c.database),
            c.office.as_secs_f64() / health_cpu.office.as_secs_f64().max(1e-9)
        );
    }
    println!(
        "| latency p50: health {:.3} ms, recorded {:.3} ms, get {:.3} ms | | | | |",
        ms(baseline.p50),
        ms(recorded.p50),
        ms(got.p50)
    );

    let baseline = closed(1, 200, SECONDS, move || {
        let mut h = health.clone();
        async move {
            h.check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect("health");
        }
    })
    .await;
    let c = client.clone();
    let no_op = closed(1, 50, SECONDS, move || {
        let mut c = c.clone();
        async move {
            let o = c
                .request_transition(pb::RequestTransitionRequest {
                    request_id: uuid::Uuid::new_v4().simple().to_string(),
                    wait_ms: Some(20_000),
                    capability_key: "b:chat:m".into(),
                    priority: 50,
                    admission_timeout_s: None,
                })
                .await
                .expect("transition")
                .into_inner()
                .outcome
                .expect("outcome");
            assert_eq!(o.phase(), pb::TransitionPhase::Completed);
        }
    })
    .await;
    println!("| case | p50 | p99 | per second | p50 / health |");
    println!("| --- | --- | --- | --- | --- |");
    println!(
        "| gRPC health check | {:.3} ms | {:.3} ms | {:.0} | 1.0 |",
        ms(baseline.p50),
        ms(baseline.p99),
        baseline.per_second
    );
    println!(
        "| RequestTransition NO_OP | {:.3} ms | {:.3} ms | {:.0} | {:.1} |",
        ms(no_op.p50),
        ms(no_op.p99),
        no_op.per_second,
        no_op.p50.as_secs_f64() / baseline.p50.as_secs_f64()
    );

    for n in ["a", "b"] {
        host.set_faults(
            n,
            UnitFaults {
                start_latency: START,
                stop_latency: STOP,
                ..UnitFaults::default()
            },
        )
        .await;
    }
    let mut overheads = Vec::new();
    for i in 0..SWAPS {
        let key = if i % 2 == 0 { "a:chat:m" } else { "b:chat:m" };
        let t = Instant::now();
        let o = client
            .clone()
            .request_transition(pb::RequestTransitionRequest {
                request_id: uuid::Uuid::new_v4().simple().to_string(),
                wait_ms: Some(20_000),
                capability_key: key.into(),
                priority: 50,
                admission_timeout_s: None,
            })
            .await
            .expect("swap")
            .into_inner()
            .outcome
            .expect("outcome");
        assert_eq!(o.phase(), pb::TransitionPhase::Completed, "{o:?}");
        overheads.push(t.elapsed().saturating_sub(START + STOP));
    }
    overheads.sort();
    println!(
        "| HARD_SWAP beyond the host's stop {} ms + start {} ms ({SWAPS} swaps) | {:.1} ms | max {:.1} ms | | |",
        STOP.as_millis(),
        START.as_millis(),
        ms(overheads[SWAPS / 2]),
        ms(overheads[SWAPS - 1])
    );
}
