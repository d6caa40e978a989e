//! `lychd dev --replicas 2` (issue 26 point 7): every office runs as two processes on one
//! PostgreSQL, each on its own port, and behaviour does not change — the cross-office flows
//! 1–3 of the design (warm grant, cold capability, consent) and a Runner run pass with every
//! client call alternating between the two replicas. The Orchestrator is fenced one per host
//! by its host lease: its second replica is a standby that serves reads and refuses to actuate.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lychd_runtime::Office;
use nix::sys::signal::Signal;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::{Interrupted, grpcurl, text};

/// The stack's replicas and the operator's session per office.
struct Replicas {
    addrs: BTreeMap<String, Vec<String>>,
    tokens: BTreeMap<Office, String>,
}

impl Replicas {
    /// Replica `i` (0 or 1) of `office`.
    fn at(&self, office: Office, i: usize) -> &str {
        &self.addrs[office.name()][i]
    }

    /// `method` of `office` at replica `i` as the operator: the answer, or the error text.
    fn try_call(
        &self,
        office: Office,
        i: usize,
        bearer: Option<&str>,
        method: &str,
        body: &str,
    ) -> Result<serde_json::Value, String> {
        let bearer = bearer.map_or_else(
            || format!("authorization: Bearer {}", self.tokens[&office]),
            str::to_owned,
        );
        let out = grpcurl(&[
            "-plaintext",
            "-H",
            &bearer,
            "-d",
            body,
            self.at(office, i),
            &format!("{}/{method}", office.grpc_service()),
        ]);
        if !out.status.success() {
            return Err(format!("{}{}", text(&out.stdout), text(&out.stderr)));
        }
        Ok(serde_json::from_slice(&out.stdout).expect("grpcurl prints JSON"))
    }

    fn call(&self, office: Office, i: usize, method: &str, body: &str) -> serde_json::Value {
        self.try_call(office, i, None, method, body)
            .unwrap_or_else(|e| panic!("{office}#{} {method}: {e}", i + 1))
    }

    fn call_as(
        &self,
        office: Office,
        i: usize,
        bearer: &str,
        method: &str,
        body: &str,
    ) -> serde_json::Value {
        self.try_call(office, i, Some(bearer), method, body)
            .unwrap_or_else(|e| panic!("{office}#{} {method}: {e}", i + 1))
    }
}

async fn health(addr: &str, service: &str) -> i32 {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .expect("health")
        .get_ref()
        .status
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_of_every_office_serve_the_flows_with_clients_alternating() {
    let state = tempfile::tempdir().expect("tmp");
    let mut stack = Interrupted::dev(
        state.path(),
        lychd_pg::free_port().expect("port"),
        &["--replicas", "2"],
    );
    let replicas_file = state.path().join("dev/replicas.json");
    stack
        .until_written(&replicas_file, Duration::from_secs(120))
        .await;
    let addrs: BTreeMap<String, Vec<String>> =
        serde_json::from_str(&std::fs::read_to_string(&replicas_file).expect("read"))
            .expect("office → addresses");
    let endpoints: BTreeMap<String, String> = serde_json::from_str(
        &std::fs::read_to_string(state.path().join("dev/endpoints.json")).expect("endpoints"),
    )
    .expect("endpoints");
    let mut all = Vec::new();
    for office in Office::ALL {
        let list = &addrs[office.name()];
        assert_eq!(list.len(), 2, "{office}: {list:?}");
        assert_eq!(
            list[0],
            endpoints[office.name()],
            "the first is the endpoint"
        );
        for addr in list {
            assert_eq!(health(addr, "").await, 1, "{office} {addr} SERVING");
            all.push(addr.clone());
        }
    }
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 2 * Office::ALL.len(), "distinct ports");
    let tokens = Office::ALL
        .into_iter()
        .map(|o| {
            let file = state.path().join(format!("dev/operator.{o}.token"));
            (
                o,
                std::fs::read_to_string(file).expect("token").trim().into(),
            )
        })
        .collect();
    let r = Replicas { addrs, tokens };

    the_second_orchestrator_is_a_standby_fenced_by_the_host_lease(&r).await;
    warm_grant_across_replicas(&r);
    cold_capability_across_replicas(&r);
    consent_across_replicas(&r);
    a_run_across_replicas(&r);

    let child = stack.0.take().expect("running");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().expect("pid") as i32),
        Signal::SIGINT,
    )
    .expect("ctrl-c");
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("stops within 60 s")
        .expect("output");
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "exit {}: {stderr}", out.status);
    assert!(
        !stderr.contains("stopped with"),
        "every replica exits 0: {stderr}"
    );
    // The replicas' ports are printed.
    let printed = stdout
        .split("replicas      2 of every office")
        .nth(1)
        .unwrap_or_else(|| panic!("the replicas are printed: {stdout}"));
    for office in Office::ALL {
        let line = format!("{}, {}", r.at(office, 0), r.at(office, 1));
        assert!(printed.contains(&line), "{office}: {printed}");
    }
    assert!(
        !replicas_file.exists(),
        "replicas.json removed on clean stop"
    );
    for addr in r.addrs.values().flatten() {
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "{addr} still listening"
        );
    }
}

/// One Orchestrator per host: the first replica holds the host lease, the second is a
/// standby — NOT_SERVING for the Orchestrator service (SERVING for the server), `Describe`
/// says so, and a transition asked of it is refused `HOST_LEASE_NOT_HELD` with nothing
/// recorded, while reads (the topology, a plan preview) still answer.
async fn the_second_orchestrator_is_a_standby_fenced_by_the_host_lease(r: &Replicas) {
    let o = Office::Orchestrator;
    assert_eq!(health(r.at(o, 0), o.grpc_service()).await, 1, "holder");
    assert_eq!(health(r.at(o, 1), o.grpc_service()).await, 2, "standby");
    let holder = r.call(o, 0, "Describe", "{}");
    let standby = r.call(o, 1, "Describe", "{}");
    assert_eq!(
        holder["hostLease"]["standing"], "HOST_LEASE_STANDING_HOLDING",
        "{holder}"
    );
    assert_eq!(
        standby["hostLease"]["standing"], "HOST_LEASE_STANDING_STANDBY",
        "{standby}"
    );
    assert_eq!(
        standby["hostLease"]["holder"], holder["hostLease"]["thisHolder"],
        "the standby names the holder"
    );
    let refused = r
        .try_call(
            o,
            1,
            None,
            "RequestTransition",
            r#"{"capability_key": "gpu-b:chat:qwen3-8b-q4", "priority": 50, "request_id": "standby-1"}"#,
        )
        .expect_err("the standby actuates nothing");
    assert!(
        refused.contains("FailedPrecondition") && refused.contains("HOST_LEASE_NOT_HELD"),
        "{refused}"
    );
    let topology = r.call(o, 1, "GetTopology", "{}");
    assert_eq!(topology["edges"].as_array().map(Vec::len), Some(3));
    let listed = r.call(o, 0, "ListTransitions", "{}");
    assert!(
        !listed.to_string().contains("standby-1"),
        "nothing recorded: {listed}"
    );
}

/// Flow 1: a lease granted by one Dispatcher is seen, renewed and released at the other.
fn warm_grant_across_replicas(r: &Replicas) {
    let d = Office::Dispatcher;
    let granted = r.call(
        d,
        0,
        "Lease",
        r#"{"demand": {"family": "FAMILY_CHAT", "model_id": "qwen3-0.6b"}, "holder": "client", "request_id": "replica-lease-1"}"#,
    );
    let lease = granted["granted"]["leaseId"]
        .as_str()
        .unwrap_or_else(|| panic!("granted: {granted}"))
        .to_owned();
    // The same request id at the other replica answers the same lease (idempotency is in
    // PostgreSQL, not in a process).
    let again = r.call(
        d,
        1,
        "Lease",
        r#"{"demand": {"family": "FAMILY_CHAT", "model_id": "qwen3-0.6b"}, "holder": "client", "request_id": "replica-lease-1"}"#,
    );
    assert_eq!(again["granted"]["leaseId"], lease.as_str(), "{again}");
    let listed = r.call(d, 1, "ListLeases", "{}");
    assert!(listed.to_string().contains(&lease), "{listed}");
    r.call(
        d,
        0,
        "RenewLease",
        &format!(r#"{{"lease_id": "{lease}", "holder": "client", "ttl_seconds": 120}}"#),
    );
    let released = r.call(
        d,
        1,
        "ReleaseLease",
        &format!(r#"{{"lease_id": "{lease}", "holder": "client"}}"#),
    );
    assert!(released.get("alreadyOver").is_none(), "{released}");
    let twice = r.call(
        d,
        0,
        "ReleaseLease",
        &format!(r#"{{"lease_id": "{lease}", "holder": "client"}}"#),
    );
    assert_eq!(twice["alreadyOver"], true, "released once: {twice}");
}

/// Flow 2: the second Dispatcher refuses a cold capability naming the transition; the
/// transition is asked of the lease holder, followed at the standby (reads serve there), and
/// the first Dispatcher then grants the lease.
fn cold_capability_across_replicas(r: &Replicas) {
    let (d, o) = (Office::Dispatcher, Office::Orchestrator);
    let lease =
        r#"{"demand": {"family": "FAMILY_CHAT", "model_id": "mistral-7b-q4"}, "holder": "client"}"#;
    let refused = r.call(d, 1, "Lease", lease);
    let key = refused["hardwareTransitionRequired"]["capabilityKey"]
        .as_str()
        .unwrap_or_else(|| panic!("a transition is required: {refused}"))
        .to_owned();
    assert_eq!(key, "gpu-c:chat:mistral-7b-q4");
    let requested = r.call(
        o,
        0,
        "RequestTransition",
        &format!(
            r#"{{"capability_key": "{key}", "priority": 50, "request_id": "replica-cold-1"}}"#
        ),
    );
    let id = requested["transition"]["transitionId"]
        .as_str()
        .unwrap_or_else(|| panic!("recorded: {requested}"))
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(45);
    let settled = loop {
        let got = r.call(
            o,
            1,
            "GetTransition",
            &format!(r#"{{"transition_id": "{id}"}}"#),
        );
        if got["transition"]["settled"] == true {
            break got;
        }
        assert!(Instant::now() < deadline, "not settled in 45 s: {got}");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(
        settled["transition"]["phase"], "TRANSITION_PHASE_COMPLETED",
        "{settled}"
    );
    // A retry of the same request id at the holder returns the same transition.
    let retried = r.call(
        o,
        0,
        "RequestTransition",
        &format!(
            r#"{{"capability_key": "{key}", "priority": 50, "request_id": "replica-cold-1"}}"#
        ),
    );
    assert_eq!(retried["transition"]["transitionId"], id.as_str());
    let granted = r.call(d, 0, "Lease", lease);
    assert_eq!(
        granted["granted"]["capabilityKey"],
        key.as_str(),
        "{granted}"
    );
    let lease_id = granted["granted"]["leaseId"].as_str().expect("lease id");
    r.call(
        d,
        1,
        "ReleaseLease",
        &format!(r#"{{"lease_id": "{lease_id}", "holder": "client"}}"#),
    );
}

/// Flow 3: a runner enrolled at one Ward proposes at it; the operator follows the run's
/// consents on the other Ward's stream, approves there and sees the grant at the first; the
/// runner (the effect's owner) consumes it at the second — once: its retry at the first answers
/// that same consumption.
fn consent_across_replicas(r: &Replicas) {
    let w = Office::Ward;
    let enrolled = r.call(
        w,
        0,
        "EnrollPrincipal",
        r#"{"kind": "PRINCIPAL_KIND_SERVICE", "name": "runner-replicas"}"#,
    );
    let runner_id = enrolled["principal"]["id"].as_str().expect("principal id");
    for (i, verb) in [(1, "propose"), (0, "consume")] {
        r.call(
            w,
            i,
            "Assign",
            &format!(
                r#"{{"principal_id": "{runner_id}", "action": "ward:{verb}", "object": "effect:runner", "audience": "ward", "purpose": "{verb}"}}"#
            ),
        );
    }
    let issued = r.call(
        w,
        1,
        "IssueCredential",
        &format!(r#"{{"principal_id": "{runner_id}", "kind": "CREDENTIAL_KIND_STANDING"}}"#),
    );
    let credential = issued["credential"].as_str().expect("credential");
    let session = r.call_as(
        w,
        0,
        &format!("authorization: Bearer {credential}"),
        "ExchangeCredential",
        r#"{"audiences": ["ward"]}"#,
    );
    let runner = format!(
        "authorization: Bearer {}",
        session["sessionToken"].as_str().expect("session")
    );

    let operator = format!("authorization: Bearer {}", r.tokens[&w]);
    let mut watcher = std::process::Command::new(lychd_testkit::grpcurl())
        .args([
            "-plaintext",
            "-max-time",
            "30",
            "-H",
            &operator,
            "-d",
            r#"{"run_id": "replica-run"}"#,
            r.at(w, 1),
            "lychd.ward.v1.Ward/WatchConsents",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("grpcurl watches");
    let (tx, changes) = std::sync::mpsc::channel::<serde_json::Value>();
    let stdout = watcher.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for message in serde_json::Deserializer::from_reader(stdout).into_iter() {
            let Ok(message) = message else { return };
            if tx.send(message).is_err() {
                return;
            }
        }
    });
    // {"path":"/srv/report.txt"} in base64.
    let proposed = r.call_as(
        w,
        0,
        &runner,
        "ProposeEffect",
        r#"{"run_id": "replica-run", "effect_owner": "runner", "effect_id": "write-report", "effect_revision": 1, "tool_name": "fs.write", "deferred_call_id": "call-1", "arguments_json": "eyJwYXRoIjoiL3Nydi9yZXBvcnQudHh0In0=", "effect_class": "EFFECT_CLASS_STANDARD"}"#,
    );
    assert_eq!(
        proposed["consent"]["state"], "CONSENT_STATE_PENDING",
        "{proposed}"
    );
    let next = || {
        changes
            .recv_timeout(Duration::from_secs(20))
            .expect("the other replica's stream prints the next change")
    };
    let pending = next();
    assert_eq!(pending["changedTo"], "CONSENT_STATE_PENDING", "{pending}");
    let consent_id = pending["consent"]["consentId"]
        .as_str()
        .expect("id")
        .to_owned();
    let digest = pending["consent"]["bindingDigest"]
        .as_str()
        .expect("digest")
        .to_owned();
    let decided = r.call_as(
        w,
        1,
        &operator,
        "Decide",
        &format!(
            r#"{{"consent_id": "{consent_id}", "verdict": "VERDICT_APPROVE", "review_digest": "{digest}"}}"#
        ),
    );
    assert_eq!(decided["changed"], true, "{decided}");
    assert_eq!(next()["changedTo"], "CONSENT_STATE_GRANTED");
    let _ = watcher.kill();
    let _ = watcher.wait();

    let seen = r.call(
        w,
        0,
        "GetConsent",
        &format!(r#"{{"consent_id": "{consent_id}"}}"#),
    );
    assert_eq!(seen["consent"]["state"], "CONSENT_STATE_GRANTED", "{seen}");
    let consume = format!(r#"{{"consent_id": "{consent_id}", "binding_digest": "{digest}"}}"#);
    let consumed = r.call_as(w, 1, &runner, "ConsumeConsent", &consume);
    assert!(consumed["consent"]["consumedAt"].is_string(), "{consumed}");
    // Its consumer's retry at the other replica (an answer lost) is the same, single
    // consumption — never a second one.
    let retried = r.call_as(w, 0, &runner, "ConsumeConsent", &consume);
    assert_eq!(
        retried["consent"]["consumedAt"], consumed["consent"]["consumedAt"],
        "{retried}"
    );
}

/// A Runner run started at one replica (its retry at the other is the same run) is driven to
/// its end by whichever runner replica claims it, and both replicas answer the same run.
fn a_run_across_replicas(r: &Replicas) {
    // The runbook's workflow document and `{}` as input, in base64 (`base64 -w0`):
    // lychd.runner.workflow/v1 "summarize": one model step closing one obligation, verified
    // for the accountable owner `owner-rita`.
    const WORKFLOW: &str = "eyJzY2hlbWEiOiAibHljaGQucnVubmVyLndvcmtmbG93L3YxIiwgIm5hbWUiOiAic3VtbWFyaXplIiwgInZlcnNpb24iOiAiMC4xLjAiLCAib2JsaWdhdGlvbnMiOiBbeyJpZCI6ICJzdW1tYXJ5IiwgImV2aWRlbmNlIjogWyJtb2RlbF9hbnN3ZXIiXX1dLCAic3RlcHMiOiBbeyJpZCI6ICJkcmFmdCIsICJraW5kIjogIm1vZGVsIiwgImZhbWlseSI6ICJjaGF0IiwgImNsb3NlcyI6IFsic3VtbWFyeSJdfV0sICJ2ZXJpZmljYXRpb24iOiB7Im93bmVyIjogIm93bmVyLXJpdGEifX0=";
    const INPUT: &str = "e30=";
    let start = format!(
        r#"{{"request_id": "replica-run-1", "workflow": "{WORKFLOW}", "input": "{INPUT}"}}"#
    );
    let ru = Office::Runner;
    let started = r.call(ru, 0, "StartRun", &start);
    let run = started["run"]["runId"]
        .as_str()
        .unwrap_or_else(|| panic!("a run: {started}"))
        .to_owned();
    let same = r.call(ru, 1, "StartRun", &start);
    assert_eq!(same["run"]["runId"], run.as_str(), "one run per request id");
    // The owner approves the run's records and promotion (at Ward's first replica; the
    // operator lists them at its second): success only on HelmLoop's PASS.
    let operator = format!("authorization: Bearer {}", r.tokens[&Office::Ward]);
    let owner = crate::devowner::Owner::enroll(r.at(Office::Ward, 0), &operator, "owner-rita");
    owner.approve(r.at(Office::Ward, 1), &operator, &run);
    let get = format!(r#"{{"run_id": "{run}"}}"#);
    // Read alternately at each replica until the run ends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut replica = 0;
    let ended = loop {
        let got = r.call(ru, replica, "GetRun", &get);
        if got["run"]["terminalCategory"].is_string() {
            break got;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not end: {got}"
        );
        replica = 1 - replica;
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert_eq!(ended["run"]["state"], "SUCCEEDED", "{ended}");
    assert_eq!(
        ended["run"]["verification"]["disposition"], "PASS",
        "{ended}"
    );
    let other = r.call(ru, 1 - replica, "GetRun", &get);
    assert_eq!(
        other["run"], ended["run"],
        "both replicas answer the same run"
    );
}
