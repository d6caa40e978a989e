//! `lychd dev --ephemeral`: the whole stack comes up healthy, the endpoints file is right, and
//! Ctrl-C stops everything cleanly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lychd_runtime::Office;

use crate::{Interrupted, grpcurl, text};
use nix::sys::signal::Signal;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

#[tokio::test(flavor = "multi_thread")]
async fn dev_stack_comes_up_and_stops_cleanly() {
    let state = tempfile::tempdir().expect("tmp");
    let mut stack = Interrupted::dev(state.path(), lychd_pg::free_port().expect("port"), &[]);
    let endpoints_file = state.path().join("dev/endpoints.json");
    stack
        .until_written(&endpoints_file, Duration::from_secs(90))
        .await;
    let endpoints: BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(&endpoints_file).expect("read"))
            .expect("json object of strings");
    let names: Vec<&str> = endpoints.keys().map(String::as_str).collect();
    let mut expected: Vec<&str> = Office::ALL.iter().map(|o| o.name()).collect();
    expected.sort();
    assert_eq!(names, expected);
    for (name, addr) in &endpoints {
        assert!(
            addr.starts_with("127.0.0.1:"),
            "{name} listens on loopback: {addr}"
        );
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        let status = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect("health");
        assert_eq!(status.get_ref().status, 1, "{name} SERVING");
    }
    use std::os::unix::fs::PermissionsExt;
    let tokens: BTreeMap<Office, String> = Office::ALL
        .into_iter()
        .map(|office| {
            let file = state.path().join(format!("dev/operator.{office}.token"));
            let mode = std::fs::metadata(&file)
                .expect("token")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{}", file.display());
            let token = std::fs::read_to_string(&file).expect("token");
            (office, token.trim().to_owned())
        })
        .collect();
    every_office_sees_its_peers_serving(&endpoints, &tokens);
    a_token_is_refused_at_any_office_but_its_own(&endpoints, &tokens);
    operator_leases_the_simulated_model_with_grpcurl(
        &endpoints["dispatcher"],
        &tokens[&Office::Dispatcher],
    );
    a_run_takes_its_model_step_through_a_lease_to_succeeded_with_grpcurl(&endpoints, &tokens);
    let settlements = lychd_testkit::simeffect::SimEffect::start().await;
    crate::devverify::a_loop_run_with_an_approved_effect_succeeds_on_a_helmloop_pass_and_replays_with_grpcurl(
        &endpoints, &tokens, &settlements,
    );
    let external = lychd_testkit::simeffect::SimEffect::start().await;
    crate::deveffect::a_high_risk_effect_is_approved_in_ward_and_applied_once_with_grpcurl(
        &endpoints, &tokens, &external,
    );
    orchestrator_closes_drains_and_reopens_with_its_own_credential(&endpoints, state.path());
    operator_follows_a_pending_consent_and_approves_it_with_grpcurl(
        &endpoints["ward"],
        &tokens[&Office::Ward],
    );
    operator_walks_the_archive_as_documented(&endpoints["archive"], &tokens[&Office::Archive]);
    an_owner_approves_a_promotion_and_ward_delivers_its_records_with_grpcurl(&endpoints, &tokens);
    operator_watches_a_hard_swap_on_the_simulated_gpu_with_grpcurl(
        &endpoints["orchestrator"],
        &tokens[&Office::Orchestrator],
    );
    a_client_asks_for_the_transition_its_lease_needs_and_is_granted_with_grpcurl(
        &endpoints, &tokens,
    );
    memory_not_a_declared_conflict_forces_the_eviction_a_lease_needs_with_grpcurl(
        &endpoints, &tokens,
    );

    let child = stack.0.take().expect("running");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().expect("pid") as i32),
        Signal::SIGINT,
    )
    .expect("ctrl-c");
    let out = tokio::time::timeout(Duration::from_secs(40), child.wait_with_output())
        .await
        .expect("stops within 40 s")
        .expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {}: {stderr}", out.status);
    assert!(
        stdout.contains("grpcurl -plaintext") && stdout.contains("Dispatcher/Lease"),
        "prints grpcurl examples: {stdout}"
    );
    assert!(stdout.contains("stopping postgres"), "{stdout}");
    assert!(
        !stderr.contains("stopped with"),
        "every office exits 0: {stderr}"
    );
    assert!(
        !endpoints_file.exists(),
        "endpoints file removed on clean stop"
    );
    for addr in endpoints.values() {
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "{addr} still listening"
        );
    }
    // The simulated host (its own child process, `lychd-simhost`) stopped with the stack.
    let host = stdout
        .split("host control http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("the host control endpoint is printed");
    assert!(
        tokio::net::TcpStream::connect(host).await.is_err(),
        "the simulated host {host} still listening"
    );
}

/// `Describe` with peers on every office, Ward included (each calls its peers with its own
/// service session, so a refused or missing credential shows as a peer not SERVING).
fn every_office_sees_its_peers_serving(
    endpoints: &BTreeMap<String, String>,
    tokens: &BTreeMap<Office, String>,
) {
    for office in Office::ALL {
        let bearer = format!("authorization: Bearer {}", tokens[&office]);
        let service = format!("{}/Describe", office.grpc_service());
        let out = grpcurl(&[
            "-plaintext",
            "-H",
            &bearer,
            "-d",
            r#"{"include_peers": true}"#,
            &endpoints[office.name()],
            &service,
        ]);
        assert!(
            out.status.success(),
            "{service}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let described: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("grpcurl prints JSON");
        let peers = described["office"]["peers"]
            .as_array()
            .unwrap_or_else(|| panic!("{service}: no peers in {described}"));
        assert_eq!(peers.len(), Office::ALL.len() - 1, "{described}");
        for peer in peers {
            assert_eq!(peer["state"], "SERVING_STATE_SERVING", "{office}: {peer}");
        }
    }
}

/// The operator's Dispatcher session, replayed elsewhere (as the Dispatcher could replay it),
/// authenticates nobody: not at another office, not at Ward's administration.
fn a_token_is_refused_at_any_office_but_its_own(
    endpoints: &BTreeMap<String, String>,
    tokens: &BTreeMap<Office, String>,
) {
    let bearer = format!("authorization: Bearer {}", tokens[&Office::Dispatcher]);
    let calls = [
        (Office::Ward, "lychd.ward.v1.Ward/ListPrincipals"),
        (Office::Archive, "lychd.archive.v1.Archive/Describe"),
    ];
    for (office, method) in calls {
        let out = grpcurl(&[
            "-plaintext",
            "-H",
            &bearer,
            "-d",
            "{}",
            &endpoints[office.name()],
            method,
        ]);
        let answer = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(!out.status.success(), "{method}: {answer}");
        assert!(answer.contains("Unauthenticated"), "{method}: {answer}");
        assert!(
            answer.contains("SESSION_AUDIENCE_MISMATCH"),
            "{method}: {answer}"
        );
    }
}

/// The Orchestrator's service principal, with the credential `lychd dev` wrote for it (its
/// session exchanged over grpcurl as an operator would): close admission on the simulated
/// animator, wait for the drain, reopen it — then the operator leases again.
pub(crate) fn orchestrator_closes_drains_and_reopens_with_its_own_credential(
    endpoints: &BTreeMap<String, String>,
    state: &std::path::Path,
) {
    let credential = std::fs::read_to_string(state.join("dev/credentials/orchestrator.credential"))
        .expect("the orchestrator's credential");
    let exchanged = grpcurl(&[
        "-plaintext",
        "-H",
        &format!("authorization: Bearer {}", credential.trim()),
        "-d",
        r#"{"audiences": ["dispatcher"]}"#,
        &endpoints["ward"],
        "lychd.ward.v1.Ward/ExchangeCredential",
    ]);
    assert!(
        exchanged.status.success(),
        "exchange: {}",
        text(&exchanged.stderr)
    );
    let session: serde_json::Value =
        serde_json::from_slice(&exchanged.stdout).expect("grpcurl prints JSON");
    let token = session["sessionToken"].as_str().expect("a session token");
    let bearer = format!("authorization: Bearer {token}");
    let call = |method: &str, body: &str| -> serde_json::Value {
        crate::grpcurl_json(
            &endpoints["dispatcher"],
            &bearer,
            &format!("lychd.dispatcher.v1.Dispatcher/{method}"),
            body,
        )
    };
    let closed = call(
        "CloseAdmission",
        r#"{"request_id": "transition-1", "animators": ["sim0"], "reason": "e2e transition"}"#,
    );
    let token = closed["closureToken"].as_str().expect("a closure token");
    assert_eq!(closed["admission"][0]["openClosures"], 1, "{closed}");
    let drained = call("AwaitDrain", r#"{"animators": ["sim0"], "wait_ms": 2000}"#);
    assert_eq!(drained["drained"], true, "{drained}");
    let reopened = call(
        "ReopenAdmission",
        &format!(r#"{{"closure_token": "{token}"}}"#),
    );
    assert!(
        reopened["admission"][0].get("openClosures").is_none(),
        "open again: {reopened}"
    );
    assert!(reopened.get("alreadyReopened").is_none(), "{reopened}");
}

/// As an operator would: with the dev session, list the capabilities, lease the simulated
/// runtime's model (the Dispatcher's real probe finds it WARM), see the lease, release it.
fn operator_leases_the_simulated_model_with_grpcurl(dispatcher: &str, token: &str) {
    let bearer = format!("authorization: Bearer {token}");
    let call = |method: &str, body: &str| -> serde_json::Value {
        crate::grpcurl_json(
            dispatcher,
            &bearer,
            &format!("lychd.dispatcher.v1.Dispatcher/{method}"),
            body,
        )
    };
    let caps = call("ListCapabilities", "{}");
    let keys: Vec<&str> = caps["capabilities"]
        .as_array()
        .expect("capabilities")
        .iter()
        .filter_map(|c| c["capabilityKey"].as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "gpu-a:chat:llama-3.1-8b-q4",
            "gpu-b:chat:qwen3-8b-q4",
            "gpu-c:chat:mistral-7b-q4",
            "mem-a:chat:gemma-2-9b-q8",
            "mem-b:chat:phi-4-q8",
            "sim0:chat:qwen3-0.6b"
        ],
        "{caps}"
    );

    let answer = call(
        "Lease",
        r#"{"demand": {"family": "FAMILY_CHAT", "model_id": "qwen3-0.6b"}, "holder": "operator"}"#,
    );
    let grant = &answer["granted"];
    assert_eq!(grant["capabilityKey"], "sim0:chat:qwen3-0.6b", "{answer}");
    let lease_id = grant["leaseId"].as_str().expect("lease id");
    assert!(
        grant["route"]["endpoint"]
            .as_str()
            .is_some_and(|e| e.starts_with("http://127.0.0.1:")),
        "{answer}"
    );

    let listed = call("ListLeases", "{}");
    assert!(listed.to_string().contains(lease_id), "{listed}");
    let released = call(
        "ReleaseLease",
        &format!(r#"{{"lease_id": "{lease_id}", "holder": "operator"}}"#),
    );
    assert_eq!(released["lease"]["leaseId"], lease_id, "{released}");
    assert!(
        released.get("alreadyOver").is_none(),
        "released now: {released}"
    );
}

/// The run walk of docs/runner.md: the operator starts a run whose model step the Runner
/// leases from the Dispatcher (with its own Ward session), calls on the simulated runtime and
/// releases; `WatchRun` streams its transitions and ends at `SUCCEEDED`.
#[test]
fn base64_is_the_standard_alphabet_with_padding() {
    assert_eq!(b64(b""), "");
    assert_eq!(b64(b"f"), "Zg==");
    assert_eq!(b64(b"fo"), "Zm8=");
    assert_eq!(b64(b"foo"), "Zm9v");
    assert_eq!(
        b64(br#"{"path":"/srv/report.txt","token":"s3cr3t"}"#),
        CONSENT_ARGUMENTS_BASE64
    );
}

pub(crate) fn a_run_takes_its_model_step_through_a_lease_to_succeeded_with_grpcurl(
    endpoints: &BTreeMap<String, String>,
    tokens: &BTreeMap<Office, String>,
) {
    let call = |office: Office, method: &str, body: &str, stream: bool| -> Vec<serde_json::Value> {
        let bearer = format!("authorization: Bearer {}", tokens[&office]);
        let service = match office {
            Office::Runner => "lychd.runner.v1.Runner",
            _ => "lychd.dispatcher.v1.Dispatcher",
        };
        let out = grpcurl(&[
            "-plaintext",
            "-max-time",
            "60",
            "-H",
            &bearer,
            "-d",
            body,
            &endpoints[office.name()],
            &format!("{service}/{method}"),
        ]);
        assert!(
            out.status.success(),
            "{method}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let all: Vec<serde_json::Value> = serde_json::Deserializer::from_slice(&out.stdout)
            .into_iter()
            .collect::<Result<_, _>>()
            .expect("grpcurl prints JSON");
        assert!(stream || all.len() == 1, "{method}: one answer");
        all
    };
    // The run's accountable owner (every workflow names one: success only on HelmLoop's PASS).
    let operator = format!("authorization: Bearer {}", tokens[&Office::Ward]);
    let owner = crate::devowner::Owner::enroll(&endpoints["ward"], &operator, "owner-dana");
    let workflow = crate::devowner::verified(
        r#"{"schema": "lychd.runner.workflow/v1", "name": "summarize", "version": "0.1.0",
 "obligations": [{"id": "summary", "evidence": ["model_answer"]}],
 "steps": [{"id": "gather", "kind": "task"},
           {"id": "draft", "kind": "model", "family": "chat", "model": "qwen3-0.6b", "closes": ["summary"]}]}"#,
        &owner.name,
    );
    let started = call(
        Office::Runner,
        "StartRun",
        &format!(
            r#"{{"request_id": "e2e-run-1", "workflow": "{}", "input": "{}"}}"#,
            b64(workflow.as_bytes()),
            b64(b"the ledger of today")
        ),
        false,
    );
    let run_id = started[0]["run"]["runId"]
        .as_str()
        .expect("run id")
        .to_owned();
    // The owner approves the run's records and promotion as the verifier proposes them.
    owner.approve(&endpoints["ward"], &operator, &run_id);
    let watched = call(
        Office::Runner,
        "WatchRun",
        &format!(r#"{{"run_id": "{run_id}"}}"#),
        true,
    );
    let targets: Vec<&str> = watched
        .iter()
        .filter_map(|t| t["targetState"].as_str())
        .collect();
    assert_eq!(targets.last(), Some(&"SUCCEEDED"), "{watched:?}");
    let triggers: Vec<&str> = watched
        .iter()
        .filter_map(|t| t["trigger"].as_str())
        .collect();
    assert_eq!(
        triggers.iter().filter(|t| **t == "step_result").count(),
        2,
        "{triggers:?}"
    );
    assert_eq!(triggers.last(), Some(&"verified_pass"), "{triggers:?}");
    assert!(triggers.contains(&"verification_hold"), "{triggers:?}");
    let run = call(
        Office::Runner,
        "GetRun",
        &format!(r#"{{"run_id": "{run_id}"}}"#),
        false,
    );
    assert_eq!(run[0]["run"]["terminalCategory"], "success", "{run:?}");
    // The ended run replays from its record with no divergence (read-only: no runtime call).
    let replayed = call(
        Office::Runner,
        "ReplayRun",
        &format!(r#"{{"run_id": "{run_id}"}}"#),
        false,
    );
    assert!(replayed[0].get("divergence").is_none(), "{replayed:?}");
    assert_eq!(
        replayed[0]["transitionsReplayed"], replayed[0]["transitionsTotal"],
        "{replayed:?}"
    );
    assert_eq!(
        replayed[0]["transitionsTotal"].as_str(),
        Some(watched.len().to_string().as_str()),
        "{replayed:?}"
    );
    // The Runner's lease for the step, released after the call.
    let leases = call(
        Office::Dispatcher,
        "ListLeases",
        r#"{"include_inactive": true}"#,
        false,
    );
    let mine: Vec<&serde_json::Value> = leases[0]["leases"]
        .as_array()
        .expect("leases")
        .iter()
        .filter(|l| l["runId"] == run_id.as_str())
        .collect();
    assert_eq!(mine.len(), 1, "{leases:?}");
    assert_eq!(mine[0]["capabilityKey"], "sim0:chat:qwen3-0.6b");
    assert!(mine[0].get("releasedAt").is_some(), "{leases:?}");
}

/// Standard base64 (as `bytes` fields take it in grpcurl's JSON).
pub(crate) fn b64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `{"path":"/srv/report.txt","token":"s3cr3t"}` in base64, as `bytes` fields take it in
/// grpcurl's JSON (`base64 -w0 args.json`).
const CONSENT_ARGUMENTS_BASE64: &str =
    "eyJwYXRoIjoiL3Nydi9yZXBvcnQudHh0IiwidG9rZW4iOiJzM2NyM3QifQ==";

/// The consent walk of docs/consent.md: the operator enrolls a runner that may propose effects
/// of `effect:runner`, follows the run's consents with `WatchConsents`, sees the runner's
/// proposal arrive pending (its secret argument censored), approves it with the binding digest
/// it saw, and sees the verdict on the same stream.
pub(crate) fn operator_follows_a_pending_consent_and_approves_it_with_grpcurl(
    ward: &str,
    token: &str,
) {
    let operator = format!("authorization: Bearer {token}");
    let call = |bearer: &str, method: &str, body: &str| -> serde_json::Value {
        crate::grpcurl_json(ward, bearer, &format!("lychd.ward.v1.Ward/{method}"), body)
    };
    let enrolled = call(
        &operator,
        "EnrollPrincipal",
        r#"{"kind": "PRINCIPAL_KIND_SERVICE", "name": "runner-e2e"}"#,
    );
    let runner_id = enrolled["principal"]["id"].as_str().expect("principal id");
    call(
        &operator,
        "Assign",
        &format!(
            r#"{{"principal_id": "{runner_id}", "action": "ward:propose", "object": "effect:runner", "audience": "ward", "purpose": "propose"}}"#
        ),
    );
    let issued = call(
        &operator,
        "IssueCredential",
        &format!(r#"{{"principal_id": "{runner_id}", "kind": "CREDENTIAL_KIND_STANDING"}}"#),
    );
    let credential = issued["credential"].as_str().expect("credential");
    let session = call(
        &format!("authorization: Bearer {credential}"),
        "ExchangeCredential",
        r#"{"audiences": ["ward"]}"#,
    );
    let runner = format!(
        "authorization: Bearer {}",
        session["sessionToken"].as_str().expect("session token")
    );

    // The operator follows run `e2e-run` (grpcurl prints each message as it arrives).
    let mut watcher = std::process::Command::new(lychd_testkit::grpcurl())
        .args([
            "-plaintext",
            "-max-time",
            "30",
            "-H",
            &operator,
            "-d",
            r#"{"run_id": "e2e-run"}"#,
            ward,
            "lychd.ward.v1.Ward/WatchConsents",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("grpcurl watches");
    let (changes_tx, changes) = std::sync::mpsc::channel::<serde_json::Value>();
    let stdout = watcher.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for message in serde_json::Deserializer::from_reader(stdout).into_iter() {
            let Ok(message) = message else { return };
            if changes_tx.send(message).is_err() {
                return;
            }
        }
    });

    let proposed = call(
        &runner,
        "ProposeEffect",
        &format!(
            r#"{{"run_id": "e2e-run", "effect_owner": "runner", "effect_id": "write-report", "effect_revision": 1, "tool_name": "fs.write", "deferred_call_id": "call-1", "arguments_json": "{CONSENT_ARGUMENTS_BASE64}", "effect_class": "EFFECT_CLASS_STANDARD"}}"#
        ),
    );
    assert_eq!(
        proposed["consent"]["state"], "CONSENT_STATE_PENDING",
        "{proposed}"
    );
    let next = || {
        changes
            .recv_timeout(Duration::from_secs(20))
            .expect("the watcher prints the next change")
    };
    let pending = next();
    assert_eq!(pending["changedTo"], "CONSENT_STATE_PENDING", "{pending}");
    let consent = &pending["consent"];
    assert_eq!(
        consent["censoredArgumentsJson"], r#"{"path":"/srv/report.txt","token":"[censored]"}"#,
        "the reviewer sees the call, never its secret"
    );
    let decided = call(
        &operator,
        "Decide",
        &format!(
            r#"{{"consent_id": "{}", "verdict": "VERDICT_APPROVE", "review_digest": "{}"}}"#,
            consent["consentId"].as_str().expect("id"),
            consent["bindingDigest"].as_str().expect("digest")
        ),
    );
    assert_eq!(decided["changed"], true, "{decided}");
    let granted = next();
    assert_eq!(granted["changedTo"], "CONSENT_STATE_GRANTED", "{granted}");
    assert_eq!(granted["consent"]["consentId"], consent["consentId"]);
    let _ = watcher.kill();
    let _ = watcher.wait();
}

/// The promotion walk of docs/consent.md: the operator appends a contract at HelmLoop, enrolls
/// its accountable owner and a runner; the runner proposes the promotion, the operator (not
/// the owner) is refused, the owner approves, and Ward delivers the four issued records to
/// HelmLoop with its own session.
fn an_owner_approves_a_promotion_and_ward_delivers_its_records_with_grpcurl(
    endpoints: &BTreeMap<String, String>,
    tokens: &BTreeMap<Office, String>,
) {
    let ward = &endpoints["ward"];
    let helmloop = &endpoints["helmloop"];
    let operator = format!("authorization: Bearer {}", tokens[&Office::Ward]);
    let operator_helmloop = format!("authorization: Bearer {}", tokens[&Office::HelmLoop]);
    let call = |addr: &str, bearer: &str, method: &str, body: &str| -> std::process::Output {
        grpcurl(&["-plaintext", "-H", bearer, "-d", body, addr, method])
    };
    let ok = |out: std::process::Output, method: &str| -> serde_json::Value {
        assert!(
            out.status.success(),
            "{method}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("grpcurl prints JSON")
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let fixture = |name: &str| -> serde_json::Value {
        let path = root.join(format!("fixtures/helmloop/records/{name}.json"));
        serde_json::from_slice(&std::fs::read(path).expect("fixture")).expect("json")
    };
    // Owner records come only from Ward (issue 22 point 8): the operator, holding every other
    // HelmLoop action, appends neither the contract nor a complete promotion decision.
    let base64 = |name: &str| -> String {
        let path = root.join(format!("fixtures/helmloop/records/{name}.json"));
        let encoded = std::process::Command::new("base64")
            .arg("-w0")
            .arg(&path)
            .output()
            .expect("base64");
        text(&encoded.stdout).trim().to_owned()
    };
    for name in ["outcome-contract-v1", "promotion-decision-v1"] {
        let refused = call(
            helmloop,
            &operator_helmloop,
            "lychd.helmloop.v1.HelmLoop/AppendRecords",
            &format!(r#"{{"records": ["{}"]}}"#, base64(name)),
        );
        assert!(!refused.status.success(), "the operator appended {name}");
        assert!(
            text(&refused.stderr).contains("PermissionDenied"),
            "{name}: {}",
            text(&refused.stderr)
        );
    }

    let ward_call = |bearer: &str, method: &str, body: &str| {
        ok(
            call(ward, bearer, &format!("lychd.ward.v1.Ward/{method}"), body),
            method,
        )
    };
    let enrol = |kind: &str, name: &str, action: &str, object: &str| -> String {
        let enrolled = ward_call(
            &operator,
            "EnrollPrincipal",
            &format!(r#"{{"kind": "{kind}", "name": "{name}"}}"#),
        );
        let id = enrolled["principal"]["id"].as_str().expect("id").to_owned();
        let purpose = action.split_once(':').expect("action").1;
        ward_call(
            &operator,
            "Assign",
            &format!(
                r#"{{"principal_id": "{id}", "action": "{action}", "object": "{object}", "audience": "ward", "purpose": "{purpose}"}}"#
            ),
        );
        let issued = ward_call(
            &operator,
            "IssueCredential",
            &format!(r#"{{"principal_id": "{id}", "kind": "CREDENTIAL_KIND_STANDING"}}"#),
        );
        let credential = issued["credential"].as_str().expect("credential");
        let session = ward_call(
            &format!("authorization: Bearer {credential}"),
            "ExchangeCredential",
            r#"{"audiences": ["ward"]}"#,
        );
        format!(
            "authorization: Bearer {}",
            session["sessionToken"].as_str().expect("session")
        )
    };
    let owner = enrol(
        "PRINCIPAL_KIND_HUMAN",
        "owner-alice",
        "ward:approve",
        "effect:helmloop",
    );
    let runner = enrol(
        "PRINCIPAL_KIND_SERVICE",
        "runner-promote-e2e",
        "ward:propose",
        "effect:helmloop",
    );

    // The contract is proposed through Ward and approved by its owner, then delivered.
    let proposed = ward_call(
        &runner,
        "ProposeOwnerRecords",
        &format!(
            r#"{{"run_id": "e2e-contract", "records": ["{}"]}}"#,
            base64("outcome-contract-v1")
        ),
    );
    let consent = &proposed["consent"];
    assert_eq!(
        proposed["promotion"]["ownerName"], "owner-alice",
        "{proposed}"
    );
    let decide = format!(
        r#"{{"consent_id": "{}", "verdict": "VERDICT_APPROVE", "review_digest": "{}"}}"#,
        consent["consentId"].as_str().expect("id"),
        consent["bindingDigest"].as_str().expect("digest")
    );
    assert_eq!(ward_call(&owner, "Decide", &decide)["changed"], true);
    let get = format!(
        r#"{{"consent_id": "{}"}}"#,
        consent["consentId"].as_str().expect("id")
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let p = ward_call(&operator, "GetPromotion", &get);
        let records = p["promotion"]["records"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if records.len() == 1 && records[0]["delivery"] == "stored" {
            break;
        }
        assert!(Instant::now() < deadline, "not delivered within 20 s: {p}");
        std::thread::sleep(Duration::from_millis(200));
    }

    let contract = fixture("outcome-contract-v1");
    let assurance = fixture("assurance-decision-v1");
    let evidence = fixture("evidence-record-v1");
    let r = |v: &serde_json::Value| serde_json::json!({"id": v["id"], "digest": v["digest"]});
    let body = serde_json::json!({
        "run_id": "e2e-promote",
        "contract": r(&contract),
        "target_revision": contract["revision"],
        "assurance": r(&assurance),
        "evidence": [r(&evidence)],
        "grantee_id": "release-host",
        "scope": ["release/payments"],
        "not_after": "2099-01-31T00:00:00Z",
    });
    let proposed = ward_call(&runner, "ProposePromotion", &body.to_string());
    let consent = &proposed["consent"];
    assert_eq!(consent["state"], "CONSENT_STATE_PENDING", "{proposed}");
    assert_eq!(proposed["promotion"]["ownerName"], "owner-alice");
    let decide = format!(
        r#"{{"consent_id": "{}", "verdict": "VERDICT_APPROVE", "review_digest": "{}"}}"#,
        consent["consentId"].as_str().expect("id"),
        consent["bindingDigest"].as_str().expect("digest")
    );
    let refused = call(ward, &operator, "lychd.ward.v1.Ward/Decide", &decide);
    assert!(!refused.status.success(), "the operator is not the owner");
    assert!(
        text(&refused.stderr).contains("PermissionDenied"),
        "{}",
        text(&refused.stderr)
    );
    let decided = ward_call(&owner, "Decide", &decide);
    assert_eq!(decided["changed"], true, "{decided}");

    let get = format!(
        r#"{{"consent_id": "{}"}}"#,
        consent["consentId"].as_str().expect("id")
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let records = loop {
        let p = ward_call(&operator, "GetPromotion", &get);
        let records = p["promotion"]["records"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if records.len() == 4 && records.iter().all(|r| r["delivery"] == "stored") {
            break records;
        }
        assert!(Instant::now() < deadline, "not delivered within 20 s: {p}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let decision = records
        .iter()
        .find(|r| r["recordType"] == "PromotionDecisionV1")
        .expect("decision");
    let stored = ok(
        call(
            helmloop,
            &operator_helmloop,
            "lychd.helmloop.v1.HelmLoop/GetRecord",
            &format!(
                r#"{{"record_type": "PromotionDecisionV1", "id": "{}"}}"#,
                decision["id"].as_str().expect("id")
            ),
        ),
        "GetRecord",
    );
    assert_eq!(stored["records"][0]["digest"], decision["digest"]);
    assert_eq!(stored["records"].as_array().map(Vec::len), Some(1));
}

/// The Archive walk of `docs/archive.md` (intake → promote → recall → revoke → resolve), run
/// exactly as its command block says, with the dev operator's Archive session: the recall
/// finds the note, and resolving its receipt after the revocation is refused.
pub(crate) fn operator_walks_the_archive_as_documented(archive: &str, token: &str) {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/archive.md"),
    )
    .expect("docs/archive.md");
    let block = doc
        .split("<!-- archive-walk -->\n```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the walk's command block");
    let commands: Vec<(String, String)> = block
        .lines()
        .filter(|l| l.starts_with("grpcurl "))
        .map(|l| {
            let body = l
                .split_once("-d '")
                .and_then(|(_, rest)| rest.rsplit_once("' \"$ARCHIVE\""))
                .map(|(body, _)| body.to_owned())
                .expect("-d '<body>' \"$ARCHIVE\"");
            let method = l.rsplit(' ').next().expect("method").to_owned();
            (method, body)
        })
        .collect();
    let methods: Vec<&str> = commands
        .iter()
        .map(|(m, _)| m.trim_start_matches("lychd.archive.v1.Archive/"))
        .collect();
    assert_eq!(
        methods,
        ["Intake", "Promote", "Recall", "Revoke", "ResolveReceipt"]
    );
    let bearer = format!("authorization: Bearer {token}");
    let mut revision = String::new();
    let mut answers = Vec::new();
    for (method, body) in &commands {
        let body = body.replace("'$REVISION'", &revision);
        let out = grpcurl(&["-plaintext", "-H", &bearer, "-d", &body, archive, method]);
        if method.ends_with("/ResolveReceipt") {
            assert!(!out.status.success(), "resolving after revoke must refuse");
            let err = text(&out.stderr);
            assert!(
                err.contains("FailedPrecondition") && err.contains("RECEIPT_NOTE_REVOKED"),
                "{err}"
            );
            continue;
        }
        assert!(
            out.status.success(),
            "{method}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let answer: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("grpcurl prints JSON");
        if method.ends_with("/Intake") {
            revision = answer["note"]["revisionId"]
                .as_str()
                .expect("revision id")
                .to_owned();
        }
        answers.push(answer);
    }
    assert_eq!(answers[0]["note"]["state"], "LIFECYCLE_STATE_CANDIDATE");
    assert_eq!(answers[1]["note"]["state"], "LIFECYCLE_STATE_PROMOTED");
    let recalled = &answers[2];
    assert_eq!(
        recalled["notes"][0]["note"]["revisionId"],
        revision.as_str(),
        "{recalled}"
    );
    assert_eq!(
        recalled["notes"][0]["text"],
        "The amber lantern hangs by the north door."
    );
    assert!(recalled["receipt"]["receiptId"].is_string(), "{recalled}");
    assert_eq!(answers[3]["note"]["state"], "LIFECYCLE_STATE_REVOKED");
    assert_eq!(answers[3]["note"]["version"], "3");
}

/// As an operator would: the compiled topology (three animators in conflict on one simulated
/// GPU, one resident), then a hard swap from the running `gpu-a` to `gpu-b`.
fn operator_watches_a_hard_swap_on_the_simulated_gpu_with_grpcurl(orchestrator: &str, token: &str) {
    let bearer = format!("authorization: Bearer {token}");
    let call = |method: &str, body: &str| -> serde_json::Value {
        crate::grpcurl_json(
            orchestrator,
            &bearer,
            &format!("lychd.orchestrator.v1.Orchestrator/{method}"),
            body,
        )
    };
    let topology = call("GetTopology", "{}");
    assert_eq!(
        topology["edges"].as_array().map(Vec::len),
        Some(3),
        "{topology}"
    );
    // A transition is a resource: the caller names the attempt and, here, waits for the
    // outcome (bounded below the request timeout).
    let outcome = call(
        "RequestTransition",
        r#"{"capability_key": "gpu-b:chat:qwen3-8b-q4", "priority": 50, "request_id": "swap-1", "wait_ms": 15000}"#,
    );
    assert_eq!(
        outcome["outcome"]["phase"], "TRANSITION_PHASE_COMPLETED",
        "{outcome}"
    );
    assert_eq!(outcome["outcome"]["plan"]["evict"][0], "gpu-a", "{outcome}");
    let again = call(
        "RequestTransition",
        r#"{"capability_key": "gpu-b:chat:qwen3-8b-q4", "priority": 50, "request_id": "swap-2", "wait_ms": 15000}"#,
    );
    assert_eq!(
        again["outcome"]["plan"]["action"], "PLAN_ACTION_NO_OP",
        "{again}"
    );
}

/// The cold-capability flow (issue 25, point 4): after the hard swap `gpu-a` is cold; a
/// client's `Lease` of its model is refused in-band `hardwareTransitionRequired`, naming the
/// capability to converge; the client asks the Orchestrator for that transition (recorded and
/// answered at once), follows it with `WatchTransitions` from a cursor until it completes, and
/// its repeated `Lease` is granted.
fn a_client_asks_for_the_transition_its_lease_needs_and_is_granted_with_grpcurl(
    endpoints: &BTreeMap<String, String>,
    tokens: &BTreeMap<Office, String>,
) {
    let call = |office: Office, service: &str, method: &str, body: &str| -> serde_json::Value {
        let bearer = format!("authorization: Bearer {}", tokens[&office]);
        crate::grpcurl_json(
            &endpoints[office.name()],
            &bearer,
            &format!("{service}/{method}"),
            body,
        )
    };
    let lease = r#"{"demand": {"family": "FAMILY_CHAT", "model_id": "llama-3.1-8b-q4"}, "holder": "client"}"#;
    let refused = call(
        Office::Dispatcher,
        "lychd.dispatcher.v1.Dispatcher",
        "Lease",
        lease,
    );
    let key = refused["hardwareTransitionRequired"]["capabilityKey"]
        .as_str()
        .unwrap_or_else(|| panic!("a hardware transition is required: {refused}"))
        .to_owned();
    assert_eq!(key, "gpu-a:chat:llama-3.1-8b-q4", "{refused}");
    let orchestrator = "lychd.orchestrator.v1.Orchestrator";
    let requested = call(
        Office::Orchestrator,
        orchestrator,
        "RequestTransition",
        &format!(r#"{{"capability_key": "{key}", "priority": 50, "request_id": "cold-1"}}"#),
    );
    let transition = &requested["transition"];
    let id = transition["transitionId"]
        .as_str()
        .unwrap_or_else(|| panic!("recorded: {requested}"))
        .to_owned();
    let cursor = transition["events"][0]["sequence"]
        .as_str()
        .unwrap_or_else(|| panic!("a sequence: {requested}"))
        .to_owned();
    // Follow it from the cursor (grpcurl prints each event as it arrives).
    let phases = watch_until_completed(
        &endpoints["orchestrator"],
        &tokens[&Office::Orchestrator],
        &cursor,
        &id,
    );
    assert_eq!(
        phases.first().map(String::as_str),
        Some("TRANSITION_PHASE_ARBITRATING"),
        "every phase after the cursor: {phases:?}"
    );
    let got = call(
        Office::Orchestrator,
        orchestrator,
        "GetTransition",
        &format!(r#"{{"transition_id": "{id}"}}"#),
    );
    assert_eq!(got["transition"]["settled"], true, "{got}");
    let granted = call(
        Office::Dispatcher,
        "lychd.dispatcher.v1.Dispatcher",
        "Lease",
        lease,
    );
    assert_eq!(
        granted["granted"]["capabilityKey"],
        key.as_str(),
        "{granted}"
    );
    let lease_id = granted["granted"]["leaseId"].as_str().expect("lease id");
    call(
        Office::Dispatcher,
        "lychd.dispatcher.v1.Dispatcher",
        "ReleaseLease",
        &format!(r#"{{"lease_id": "{lease_id}", "holder": "client"}}"#),
    );
}

/// `WatchTransitions` from `cursor` with grpcurl (a real process) until transition `id`
/// completes: its phases, in order (a final phase other than COMPLETED fails).
fn watch_until_completed(orchestrator: &str, token: &str, cursor: &str, id: &str) -> Vec<String> {
    let bearer = format!("authorization: Bearer {token}");
    let mut watcher = std::process::Command::new(lychd_testkit::grpcurl())
        .args([
            "-plaintext",
            "-max-time",
            "60",
            "-H",
            &bearer,
            "-d",
            &format!(r#"{{"after_sequence": "{cursor}"}}"#),
            orchestrator,
            "lychd.orchestrator.v1.Orchestrator/WatchTransitions",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("grpcurl watches");
    let (events_tx, events) = std::sync::mpsc::channel::<serde_json::Value>();
    let stdout = watcher.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for message in serde_json::Deserializer::from_reader(stdout).into_iter() {
            let Ok(message) = message else { return };
            if events_tx.send(message).is_err() {
                return;
            }
        }
    });
    let mut phases = Vec::new();
    loop {
        let e = events
            .recv_timeout(Duration::from_secs(45))
            .expect("the watcher prints the next phase");
        if e["transitionId"] != id {
            continue;
        }
        let phase = e["phase"].as_str().expect("phase").to_owned();
        phases.push(phase.clone());
        if phase != "TRANSITION_PHASE_COMPLETED" {
            assert!(
                !phase.ends_with("DECLINED_NO_EFFECT")
                    && !phase.ends_with("FAILED_RESTORED")
                    && !phase.ends_with("CONTAINED_UNCERTAIN"),
                "{phases:?}"
            );
            continue;
        }
        break;
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
    phases
}

/// The cold-capability flow where memory, not a declared conflict, forces the eviction
/// (issue 25, point 4): `mem-a` (declared 9,000 MiB, running) and `mem-b` (declared 8,000) are
/// placed on the simulated 16,000 MiB `sim-gpu` with no conflict declared — the topology has
/// no edge for them. A client's `Lease` of `mem-b`'s model is refused
/// `hardwareTransitionRequired`; `PreviewPlan` shows the arithmetic (9,000 used and 8,000
/// needed exceed 16,000: `mem-a` stops, cause `MEMORY`); the client requests the transition, watches it
/// complete, finds the same arithmetic kept on the transition, and its repeated `Lease` is
/// granted — while `mem-a`'s model is now the cold one.
fn memory_not_a_declared_conflict_forces_the_eviction_a_lease_needs_with_grpcurl(
    endpoints: &BTreeMap<String, String>,
    tokens: &BTreeMap<Office, String>,
) {
    let call = |office: Office, method: &str, body: &str| -> serde_json::Value {
        let bearer = format!("authorization: Bearer {}", tokens[&office]);
        crate::grpcurl_json(
            &endpoints[office.name()],
            &bearer,
            &format!("{}/{method}", office.grpc_service()),
            body,
        )
    };
    let topology = call(Office::Orchestrator, "GetTopology", "{}");
    assert!(
        !topology["edges"].to_string().contains("mem-"),
        "no conflict declared for the placed pair: {topology}"
    );

    let lease =
        r#"{"demand": {"family": "FAMILY_CHAT", "model_id": "phi-4-q8"}, "holder": "client"}"#;
    let refused = call(Office::Dispatcher, "Lease", lease);
    let key = refused["hardwareTransitionRequired"]["capabilityKey"]
        .as_str()
        .unwrap_or_else(|| panic!("a hardware transition is required: {refused}"))
        .to_owned();
    assert_eq!(key, "mem-b:chat:phi-4-q8", "{refused}");

    let preview = call(
        Office::Orchestrator,
        "PreviewPlan",
        &format!(r#"{{"capability_key": "{key}"}}"#),
    );
    let plan = &preview["plan"];
    assert_eq!(plan["action"], "PLAN_ACTION_HARD_SWAP", "{preview}");
    assert_eq!(plan["evict"], serde_json::json!(["mem-a"]), "{preview}");
    let expected_arithmetic = serde_json::json!({
        "device": "sim-gpu",
        "capacityMib": "16000",
        "usedMib": "9000",
        "neededMib": "8000",
        "neededSource": "DECLARED",
        "freed": [{"animator": "mem-a", "mib": "9000", "cause": "MEMORY"}],
        "freedMib": "9000",
        "freeAfterMib": "8000",
    });
    assert_eq!(plan["memory"], expected_arithmetic, "{preview}");

    let requested = call(
        Office::Orchestrator,
        "RequestTransition",
        &format!(r#"{{"capability_key": "{key}", "priority": 50, "request_id": "memory-1"}}"#),
    );
    let transition = &requested["transition"];
    let id = transition["transitionId"]
        .as_str()
        .unwrap_or_else(|| panic!("recorded: {requested}"))
        .to_owned();
    let cursor = transition["events"][0]["sequence"]
        .as_str()
        .unwrap_or_else(|| panic!("a sequence: {requested}"))
        .to_owned();
    let phases = watch_until_completed(
        &endpoints["orchestrator"],
        &tokens[&Office::Orchestrator],
        &cursor,
        &id,
    );
    assert_eq!(
        phases.last().map(String::as_str),
        Some("TRANSITION_PHASE_COMPLETED")
    );
    let got = call(
        Office::Orchestrator,
        "GetTransition",
        &format!(r#"{{"transition_id": "{id}"}}"#),
    );
    assert_eq!(got["transition"]["settled"], true, "{got}");
    assert_eq!(
        got["transition"]["plan"]["memory"], expected_arithmetic,
        "the arithmetic the transition ran is kept with it: {got}"
    );

    let granted = call(Office::Dispatcher, "Lease", lease);
    assert_eq!(
        granted["granted"]["capabilityKey"],
        key.as_str(),
        "{granted}"
    );
    let lease_id = granted["granted"]["leaseId"].as_str().expect("lease id");
    call(
        Office::Dispatcher,
        "ReleaseLease",
        &format!(r#"{{"lease_id": "{lease_id}", "holder": "client"}}"#),
    );
    // Memory stopped mem-a: its model is now the cold one.
    let evicted = call(
        Office::Dispatcher,
        "Lease",
        r#"{"demand": {"family": "FAMILY_CHAT", "model_id": "gemma-2-9b-q8"}, "holder": "client"}"#,
    );
    assert_eq!(
        evicted["hardwareTransitionRequired"]["capabilityKey"], "mem-a:chat:gemma-2-9b-q8",
        "{evicted}"
    );
}
