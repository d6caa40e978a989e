//! Metrics (issue 30 item 2) from `lychd dev --ephemeral`: every office's Prometheus scrape
//! endpoint (named in `dev/metrics.json` and printed) answers the text format; after some
//! traffic — a lease, a refusal, an admission closure, a consent, a recall, a reduction, a
//! run — the next scrape shows the named series moved.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use lychd_runtime::Office;

use crate::{Interrupted, grpcurl, text};

/// `GET /metrics` at `addr`: the body of a 200 answer.
fn scrape(addr: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: lychd\r\nConnection: close\r\n\r\n")
        .expect("request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    body.to_owned()
}

/// The sum of the samples of `name` whose labels include every one of `labels` (`k="v"`).
pub(crate) fn sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = match series.split_once('{') {
                Some((m, rest)) => (m, rest),
                None => (series, ""),
            };
            (metric == name && labels.iter().all(|want| rest.contains(want)))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

fn call(addr: &str, token: &str, method: &str, body: &str) -> std::process::Output {
    grpcurl(&[
        "-plaintext",
        "-H",
        &format!("authorization: Bearer {token}"),
        "-d",
        body,
        addr,
        method,
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn every_office_exposes_metrics_that_move_with_traffic() {
    let state = tempfile::tempdir().expect("tmp");
    let mut stack = Interrupted::dev(state.path(), lychd_pg::free_port().expect("port"), &[]);
    let endpoints_file = state.path().join("dev/endpoints.json");
    stack
        .until_written(&endpoints_file, Duration::from_secs(120))
        .await;
    let read = |name: &str| -> BTreeMap<String, String> {
        serde_json::from_str(&std::fs::read_to_string(state.path().join(name)).expect("read"))
            .expect("json object of strings")
    };
    let endpoints = read("dev/endpoints.json");
    let metrics = read("dev/metrics.json");
    let token = |office: Office| {
        std::fs::read_to_string(state.path().join(format!("dev/operator.{office}.token")))
            .expect("token")
            .trim()
            .to_owned()
    };
    let mut before = BTreeMap::new();
    for office in Office::ALL {
        let addr = &metrics[office.name()];
        assert!(addr.starts_with("127.0.0.1:"), "{office}: loopback {addr}");
        assert_ne!(addr, &endpoints[office.name()], "{office}: its own port");
        before.insert(office, scrape(addr));
    }

    // Traffic: an admission closure (closed, drained, reopened) by the Orchestrator's
    // credential, then a lease kept live and a refusal, at the Dispatcher.
    crate::devstack::orchestrator_closes_drains_and_reopens_with_its_own_credential(
        &endpoints,
        state.path(),
    );
    let dispatcher = &endpoints["dispatcher"];
    let leased = call(
        dispatcher,
        &token(Office::Dispatcher),
        "lychd.dispatcher.v1.Dispatcher/Lease",
        r#"{"demand": {"family": "FAMILY_CHAT", "model_id": "qwen3-0.6b"}, "holder": "metrics"}"#,
    );
    assert!(leased.status.success(), "lease: {}", text(&leased.stderr));
    let refused = call(
        dispatcher,
        &token(Office::Dispatcher),
        "lychd.dispatcher.v1.Dispatcher/GetLease",
        r#"{"lease_id": "00000000-0000-4000-8000-000000000000"}"#,
    );
    assert!(
        !refused.status.success() && text(&refused.stderr).contains("LEASE_NOT_FOUND"),
        "refused: {}",
        text(&refused.stderr)
    );
    // A reduction at HelmLoop.
    let input = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/helmloop/bundles/evaluation-input.json"),
    )
    .expect("fixture");
    let reduced = call(
        &endpoints["helmloop"],
        &token(Office::HelmLoop),
        "lychd.helmloop.v1.HelmLoop/Reduce",
        &format!(r#"{{"input": "{}"}}"#, crate::devstack::b64(&input)),
    );
    assert!(
        reduced.status.success(),
        "reduce: {}",
        text(&reduced.stderr)
    );

    // A consent followed and approved at Ward; a recall at the Archive; a run to SUCCEEDED.
    let tokens: BTreeMap<Office, String> = Office::ALL.into_iter().map(|o| (o, token(o))).collect();
    crate::devstack::operator_follows_a_pending_consent_and_approves_it_with_grpcurl(
        &endpoints["ward"],
        &tokens[&Office::Ward],
    );
    crate::devstack::operator_walks_the_archive_as_documented(
        &endpoints["archive"],
        &tokens[&Office::Archive],
    );
    crate::devstack::a_run_takes_its_model_step_through_a_lease_to_succeeded_with_grpcurl(
        &endpoints, &tokens,
    );
    // The database gauges refresh every 2 s under `lychd dev`: wait for the live lease.
    let deadline = Instant::now() + Duration::from_secs(20);
    while sum(
        &scrape(&metrics["dispatcher"]),
        "lychd_dispatcher_leases",
        &[r#"state="active""#],
    ) < 1.0
    {
        assert!(
            Instant::now() < deadline,
            "the live lease never showed:\n{}",
            scrape(&metrics["dispatcher"])
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;

    let after: BTreeMap<Office, String> = Office::ALL
        .into_iter()
        .map(|o| (o, scrape(&metrics[o.name()])))
        .collect();
    let moved = |office: Office, name: &str, labels: &[&str]| {
        let (was, is) = (
            sum(&before[&office], name, labels),
            sum(&after[&office], name, labels),
        );
        assert!(
            is > was,
            "{office}: {name}{labels:?} did not move ({was} → {is}):\n{}",
            after[&office]
        );
    };
    moved(
        Office::Dispatcher,
        "lychd_rpc_server_requests_total",
        &[r#"rpc_method="Lease""#, r#"rpc_grpc_code="OK""#],
    );
    moved(
        Office::Dispatcher,
        "lychd_rpc_server_refusals_total",
        &[
            r#"rpc_method="GetLease""#,
            r#"error_reason="LEASE_NOT_FOUND""#,
            r#"error_domain="lychd.dispatcher""#,
        ],
    );
    moved(
        Office::Dispatcher,
        "lychd_rpc_server_duration_seconds_count",
        &[r#"rpc_method="Lease""#],
    );
    moved(
        Office::HelmLoop,
        "lychd_rpc_server_requests_total",
        &[r#"rpc_method="Reduce""#, r#"rpc_grpc_code="OK""#],
    );
    // Every office's decisions go through Ward (an office sends them as AuthorizeBatch calls):
    // that count moved too.
    moved(
        Office::Ward,
        "lychd_rpc_server_requests_total",
        &[r#"rpc_method="AuthorizeBatch""#],
    );

    // The offices' own series.
    moved(
        Office::Dispatcher,
        "lychd_rpc_server_requests_total",
        &[r#"rpc_method="CloseAdmission""#, r#"rpc_grpc_code="OK""#],
    );
    moved(
        Office::HelmLoop,
        "lychd_helmloop_reductions_total",
        &[r#"source="inline""#],
    );
    moved(
        Office::Ward,
        "lychd_ward_decision_duration_seconds_count",
        &[r#"asked="rpc""#],
    );
    moved(
        Office::Archive,
        "lychd_archive_recall_duration_seconds_count",
        &[],
    );
    let present = |office: Office, name: &str, labels: &[&str]| {
        assert!(
            after[&office]
                .lines()
                .any(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
                && labels.iter().all(|want| {
                    after[&office]
                        .lines()
                        .any(|l| l.starts_with(name) && l.contains(want))
                }),
            "{office}: no {name}{labels:?}:\n{}",
            after[&office]
        );
    };
    present(Office::Dispatcher, "lychd_dispatcher_admission_closed", &[]);
    present(Office::Dispatcher, "lychd_dispatcher_closures_open", &[]);
    present(
        Office::Dispatcher,
        "lychd_dispatcher_leases",
        &[r#"state="expired""#],
    );
    present(
        Office::Ward,
        "lychd_ward_consents_pending",
        &[r#"class="destructive_deletion""#],
    );
    present(Office::Ward, "lychd_ward_consents_pending_age_seconds", &[]);
    present(
        Office::Ward,
        "lychd_ward_decision_log_queued",
        &[r#"log="rpc""#],
    );
    present(
        Office::Orchestrator,
        "lychd_orchestrator_containments",
        &[r#"state="open""#],
    );
    present(
        Office::Runner,
        "lychd_runner_budget_used",
        &[r#"budget="tokens""#],
    );
    present(
        Office::Runner,
        "lychd_runner_budget_utilization",
        &[r#"budget="steps""#],
    );
    assert!(
        sum(
            &after[&Office::Runner],
            "lychd_runner_runs",
            &[r#"state="SUCCEEDED""#]
        ) >= 1.0,
        "the run that succeeded is counted:\n{}",
        after[&Office::Runner]
    );
    assert!(
        sum(
            &after[&Office::Dispatcher],
            "lychd_dispatcher_leases",
            &[r#"state="active""#]
        ) >= 1.0
    );
    // No secret, token or payload in any series: the operator's tokens appear nowhere.
    for (office, text) in &after {
        for token in tokens.values() {
            assert!(!text.contains(token.as_str()), "{office} exposes a token");
        }
    }

    let out = stack.0.take().expect("running");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(out.id().expect("pid") as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("ctrl-c");
    let out = tokio::time::timeout(Duration::from_secs(40), out.wait_with_output())
        .await
        .expect("stops within 40 s")
        .expect("output");
    let stdout = text(&out.stdout);
    for office in Office::ALL {
        assert!(
            stdout.contains(&format!("http://{}/metrics", metrics[office.name()])),
            "prints {office}'s metrics endpoint: {stdout}"
        );
    }
    assert!(
        !state.path().join("dev/metrics.json").exists(),
        "the metrics file goes with the stack"
    );
}
