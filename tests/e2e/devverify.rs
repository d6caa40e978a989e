//! The verified run walk of docs/runner.md ("Independent verification") against `lychd dev`
//! with grpcurl: the operator enrolls an accountable owner, starts a run whose workflow names
//! it, sees the run held for the owner in `WAIT_VERIFICATION`; the owner approves the run's
//! owner records and then its promotion in Ward; HelmLoop's reduction is a PASS and the run is
//! `SUCCEEDED`, `GetRun` showing the verdict.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lychd_runtime::Office;

use crate::{grpcurl, text};

pub fn a_verified_run_succeeds_on_its_owners_promotion_and_a_helmloop_pass_with_grpcurl(
    endpoints: &BTreeMap<String, String>,
    tokens: &BTreeMap<Office, String>,
) {
    let call = |office: Office, bearer: &str, method: &str, body: &str| -> serde_json::Value {
        let service = match office {
            Office::Runner => "lychd.runner.v1.Runner",
            Office::HelmLoop => "lychd.helmloop.v1.HelmLoop",
            _ => "lychd.ward.v1.Ward",
        };
        let out = grpcurl(&[
            "-plaintext",
            "-H",
            bearer,
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
        serde_json::from_slice(&out.stdout).expect("grpcurl prints JSON")
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

    let workflow = r#"{"schema": "lychd.runner.workflow/v1", "name": "summarize", "version": "0.1.0",
 "obligations": [{"id": "summary", "evidence": ["model_answer"]}],
 "steps": [{"id": "draft", "kind": "model", "family": "chat", "model": "qwen3-0.6b", "closes": ["summary"]}],
 "verification": {"owner": "owner-carol"}}"#;
    let started = call(
        Office::Runner,
        &op(Office::Runner),
        "StartRun",
        &format!(
            r#"{{"request_id": "e2e-verified-1", "workflow": "{}", "input": "{}"}}"#,
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
    let held = until("held for the owner", &|r| {
        r["state"] == "WAIT_VERIFICATION"
            && r["verification"]["reasons"][0] == "OWNER_RECORDS_PENDING"
    });
    assert_ne!(held["state"], "SUCCEEDED");
    // The owner approves what the operator sees pending: the records, then the promotion.
    let approve = |tool: &str| {
        let t = Instant::now();
        let consent = loop {
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
                break c;
            }
            assert!(t.elapsed() < Duration::from_secs(90), "a pending {tool}");
            std::thread::sleep(Duration::from_millis(250));
        };
        call(
            Office::Ward,
            &owner,
            "Decide",
            &format!(
                r#"{{"consent_id": "{}", "verdict": "VERDICT_APPROVE", "review_digest": "{}"}}"#,
                consent["consentId"].as_str().expect("id"),
                consent["bindingDigest"].as_str().expect("digest")
            ),
        );
    };
    approve("helmloop.issue");
    approve("helmloop.promote");
    let done = until("succeeded", &|r| r["state"] == "SUCCEEDED");
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
}
