//! The effect walk of docs/runner.md through `lychd dev` with grpcurl (called from
//! `devstack.rs`): a run with a high-risk effect parks in `WAIT_APPROVAL` with a Ward consent,
//! the operator reviews it and approves it with `Decide`, the Runner consumes the approval,
//! commits the intent, delivers the effect once to the simulated external system and goes on to
//! `SUCCEEDED` with the receipt re-ingested.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lychd_runtime::Office;
use lychd_testkit::simeffect::SimEffect;

use crate::{grpcurl, text};

fn call(
    endpoints: &BTreeMap<String, String>,
    tokens: &BTreeMap<Office, String>,
    office: Office,
    method: &str,
    body: &str,
) -> Vec<serde_json::Value> {
    let service = match office {
        Office::Ward => "lychd.ward.v1.Ward",
        _ => "lychd.runner.v1.Runner",
    };
    let bearer = format!("authorization: Bearer {}", tokens[&office]);
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
    serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("grpcurl prints JSON")
}

pub fn a_high_risk_effect_is_approved_in_ward_and_applied_once_with_grpcurl(
    endpoints: &BTreeMap<String, String>,
    tokens: &BTreeMap<Office, String>,
    sim: &SimEffect,
) {
    // The run's accountable owner (every workflow names one: success only on HelmLoop's PASS).
    let operator = format!("authorization: Bearer {}", tokens[&Office::Ward]);
    let owner = crate::devowner::Owner::enroll(&endpoints["ward"], &operator, "owner-erin");
    let workflow = crate::devowner::verified(
        &format!(
            r#"{{"schema": "lychd.runner.workflow/v1", "name": "pay", "version": "0.1.0",
 "obligations": [{{"id": "paid", "evidence": ["effect_receipt"]}}],
 "steps": [{{"id": "prepare", "kind": "task"}},
           {{"id": "pay", "kind": "effect", "adapter": "http", "destination": "{}",
             "risk": "high", "action": {{"amount": 5, "to": "acct-1"}}, "closes": ["paid"]}}]}}"#,
            sim.url("/orders")
        ),
        &owner.name,
    );
    let started = call(
        endpoints,
        tokens,
        Office::Runner,
        "StartRun",
        &format!(
            r#"{{"request_id": "e2e-effect-1", "workflow": "{}", "input": "{}"}}"#,
            crate::devstack::b64(workflow.as_bytes()),
            crate::devstack::b64(b"pay the invoice")
        ),
    );
    let run_id = started[0]["run"]["runId"]
        .as_str()
        .expect("run id")
        .to_owned();
    let run = format!(r#"{{"run_id": "{run_id}"}}"#);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = call(endpoints, tokens, Office::Runner, "GetRun", &run);
        if got[0]["run"]["state"] == "WAIT_APPROVAL" {
            break;
        }
        assert!(Instant::now() < deadline, "no WAIT_APPROVAL: {got:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(sim.deliveries(), 0, "nothing delivered before the approval");
    // The operator reviews the run's pending consent in Ward and approves the exact call.
    let consents = call(
        endpoints,
        tokens,
        Office::Ward,
        "ListConsents",
        &format!(r#"{{"run_id": "{run_id}", "state": "CONSENT_STATE_PENDING"}}"#),
    );
    let consent = &consents[0]["consents"][0];
    assert_eq!(consent["effectOwner"], "runner", "{consents:?}");
    let effect = call(endpoints, tokens, Office::Runner, "InspectEffect", &run);
    assert_eq!(
        consent["binding"]["actionHash"], effect[0]["actionDigest"],
        "the consent binds the exact action"
    );
    call(
        endpoints,
        tokens,
        Office::Ward,
        "Decide",
        &format!(
            r#"{{"consent_id": "{}", "verdict": "VERDICT_APPROVE", "review_digest": "{}"}}"#,
            consent["consentId"].as_str().expect("consent id"),
            consent["bindingDigest"].as_str().expect("binding digest")
        ),
    );
    // With the receipt re-ingested, the owner approves what the verifier proposes.
    owner.approve(&endpoints["ward"], &operator, &run_id);
    let watched = call(endpoints, tokens, Office::Runner, "WatchRun", &run);
    let triggers: Vec<&str> = watched
        .iter()
        .filter_map(|t| t["trigger"].as_str())
        .collect();
    assert_eq!(
        watched.last().and_then(|t| t["targetState"].as_str()),
        Some("SUCCEEDED"),
        "{triggers:?}"
    );
    for t in [
        "approval_consumed",
        "intent_committed",
        "response_received",
        "outcome_confirmed",
        "no_interrupt",
        "verification_hold",
        "verified_pass",
    ] {
        assert!(triggers.contains(&t), "{t}: {triggers:?}");
    }
    assert_eq!((sim.applied(), sim.deliveries()), (1, 1));
    assert_eq!(sim.duplicates(), 0);
    let consent = call(
        endpoints,
        tokens,
        Office::Ward,
        "GetConsent",
        &format!(
            r#"{{"consent_id": "{}"}}"#,
            consent["consentId"].as_str().expect("id")
        ),
    );
    assert!(
        consent[0]["consent"].get("consumedAt").is_some(),
        "the Runner consumed the approval: {consent:?}"
    );
}
