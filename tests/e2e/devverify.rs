//! The loop run of docs/runner.md (the offices brief's flow 6) against `lychd dev` with
//! grpcurl: the operator enrolls an accountable owner and starts a run whose workflow names it,
//! with a model step and a high-risk effect; the model step runs through a Dispatcher lease, the
//! effect parks the run in `WAIT_APPROVAL` with a Ward consent, the operator approves it, the
//! Runner consumes it, commits the intent and delivers the effect once to the simulated
//! external system, re-ingests the receipt and holds the run in `WAIT_VERIFICATION`; the owner
//! approves the run's owner records and then its promotion in Ward; HelmLoop's reduction is a
//! PASS and the run is `SUCCEEDED`, `GetRun` showing the verdict; the ended run replays from its
//! record with no divergence.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lychd_runtime::Office;
use lychd_testkit::simeffect::SimEffect;

use crate::grpcurl_json;

pub fn a_loop_run_with_an_approved_effect_succeeds_on_a_helmloop_pass_and_replays_with_grpcurl(
    endpoints: &BTreeMap<String, String>,
    tokens: &BTreeMap<Office, String>,
    sim: &SimEffect,
) {
    let call = |office: Office, bearer: &str, method: &str, body: &str| -> serde_json::Value {
        let method = format!("{}/{method}", office.grpc_service());
        grpcurl_json(&endpoints[office.name()], bearer, &method, body)
    };
    let op = |office: Office| format!("authorization: Bearer {}", tokens[&office]);
    // The accountable owner: a human principal who may approve promotions.
    let enrolled = call(
        Office::Ward,
        &op(Office::Ward),
        "EnrollPrincipal",
        r#"{"kind": "PRINCIPAL_KIND_HUMAN", "name": "owner-carol"}"#,
    );
    let owner_id = enrolled["principal"]["id"].as_str().expect("id").to_owned();
    call(
        Office::Ward,
        &op(Office::Ward),
        "Assign",
        &format!(
            r#"{{"principal_id": "{owner_id}", "action": "ward:approve", "object": "effect:helmloop", "audience": "ward", "purpose": "approve"}}"#
        ),
    );
    let issued = call(
        Office::Ward,
        &op(Office::Ward),
        "IssueCredential",
        &format!(r#"{{"principal_id": "{owner_id}", "kind": "CREDENTIAL_KIND_STANDING"}}"#),
    );
    let credential = issued["credential"].as_str().expect("credential");
    let session = call(
        Office::Ward,
        &format!("authorization: Bearer {credential}"),
        "ExchangeCredential",
        r#"{"audiences": ["ward"]}"#,
    );
    let owner = format!(
        "authorization: Bearer {}",
        session["sessionToken"].as_str().expect("session")
    );

    let workflow = format!(
        r#"{{"schema": "lychd.runner.workflow/v1", "name": "settle", "version": "0.1.0",
 "obligations": [{{"id": "summary", "evidence": ["model_answer"]}},
                 {{"id": "paid", "evidence": ["effect_receipt"]}}],
 "steps": [{{"id": "draft", "kind": "model", "family": "chat", "model": "qwen3-0.6b", "closes": ["summary"]}},
           {{"id": "pay", "kind": "effect", "adapter": "http", "destination": "{}",
             "risk": "high", "action": {{"amount": 7, "to": "acct-2"}}, "closes": ["paid"]}}],
 "verification": {{"owner": "owner-carol"}}}}"#,
        sim.url("/settlements")
    );
    let started = call(
        Office::Runner,
        &op(Office::Runner),
        "StartRun",
        &format!(
            r#"{{"request_id": "e2e-loop-run-1", "workflow": "{}", "input": "{}"}}"#,
            crate::devstack::b64(workflow.as_bytes()),
            crate::devstack::b64(b"the ledger of today")
        ),
    );
    let run_id = started["run"]["runId"].as_str().expect("run").to_owned();
    let get = || {
        call(
            Office::Runner,
            &op(Office::Runner),
            "GetRun",
            &format!(r#"{{"run_id": "{run_id}"}}"#),
        )["run"]
            .clone()
    };
    let until = |what: &str, ok: &dyn Fn(&serde_json::Value) -> bool| -> serde_json::Value {
        let t = Instant::now();
        loop {
            let r = get();
            if ok(&r) {
                return r;
            }
            assert!(t.elapsed() < Duration::from_secs(90), "{what}: {r}");
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    // The model step has run; the effect waits for a person's approval, nothing delivered.
    until("waiting for the effect's approval", &|r| {
        r["state"] == "WAIT_APPROVAL"
    });
    assert_eq!(sim.deliveries(), 0, "nothing delivered before the approval");
    let pending = |tool: &str| {
        let t = Instant::now();
        loop {
            let listed = call(
                Office::Ward,
                &op(Office::Ward),
                "ListConsents",
                &format!(r#"{{"run_id": "{run_id}", "state": "CONSENT_STATE_PENDING"}}"#),
            );
            let found = listed["consents"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["toolName"] == tool)
                .cloned();
            if let Some(c) = found {
                return c;
            }
            assert!(t.elapsed() < Duration::from_secs(90), "a pending {tool}");
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    let decide = |bearer: &str, consent: &serde_json::Value| {
        call(
            Office::Ward,
            bearer,
            "Decide",
            &format!(
                r#"{{"consent_id": "{}", "verdict": "VERDICT_APPROVE", "review_digest": "{}"}}"#,
                consent["consentId"].as_str().expect("id"),
                consent["bindingDigest"].as_str().expect("digest")
            ),
        );
    };
    // The operator approves the exact effect; the Runner consumes it at intent time.
    let effect = pending("runner.effect.http.high");
    decide(&op(Office::Ward), &effect);
    let held = until("held for the owner", &|r| {
        r["state"] == "WAIT_VERIFICATION"
            && r["verification"]["reasons"][0] == "OWNER_RECORDS_PENDING"
    });
    assert_ne!(held["state"], "SUCCEEDED");
    // The owner approves what the operator sees pending: the records, then the promotion.
    decide(&owner, &pending("helmloop.issue"));
    decide(&owner, &pending("helmloop.promote"));
    let done = until("succeeded", &|r| r["state"] == "SUCCEEDED");
    // The effect was applied exactly once and its approval consumed by the Runner.
    assert_eq!(
        (sim.applied(), sim.deliveries(), sim.duplicates()),
        (1, 1, 0)
    );
    let consumed = call(
        Office::Ward,
        &op(Office::Ward),
        "GetConsent",
        &format!(
            r#"{{"consent_id": "{}"}}"#,
            effect["consentId"].as_str().expect("id")
        ),
    );
    assert!(
        consumed["consent"].get("consumedAt").is_some(),
        "the Runner consumed the approval: {consumed}"
    );
    let verdict = &done["verification"];
    assert_eq!(verdict["disposition"], "PASS", "{done}");
    assert!(
        verdict["axes"]
            .as_array()
            .expect("axes")
            .iter()
            .any(|a| a == "promotion=APPROVED"),
        "{done}"
    );
    // The verdict is HelmLoop's stored evaluation.
    let evaluation = call(
        Office::HelmLoop,
        &op(Office::HelmLoop),
        "GetEvaluation",
        &format!(
            r#"{{"input_digest": "{}"}}"#,
            verdict["inputDigest"].as_str().expect("input digest")
        ),
    );
    assert_eq!(
        evaluation["summary"]["disposition"], "DISPOSITION_PASS",
        "{evaluation}"
    );
    // The ended run replays from its record with no divergence (read-only: nothing called).
    let replayed = call(
        Office::Runner,
        &op(Office::Runner),
        "ReplayRun",
        &format!(r#"{{"run_id": "{run_id}"}}"#),
    );
    assert!(replayed.get("divergence").is_none(), "{replayed}");
    assert_eq!(
        replayed["transitionsReplayed"], replayed["transitionsTotal"],
        "{replayed}"
    );
    assert_eq!(
        (sim.applied(), sim.deliveries()),
        (1, 1),
        "a replay delivers nothing"
    );
}
