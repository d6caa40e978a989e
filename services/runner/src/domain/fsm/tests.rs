use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::*;

fn file() -> Value {
    serde_json::from_slice(FSM_JSON).expect("the fsm file is JSON")
}

fn load(v: &Value) -> Result<Fsm, Broken> {
    Fsm::load(&serde_json::to_vec(v).expect("encode"))
}

#[test]
fn the_file_loads_and_its_digest_is_the_recorded_one_not_the_contracts() {
    let fsm = Fsm::bound().expect("the office's fsm is sound");
    assert_eq!(hex::encode(Sha256::digest(FSM_JSON)), FSM_SHA256);
    assert_eq!(fsm.sha256(), FSM_SHA256);
    assert_ne!(
        FSM_SHA256, CONTRACT_FSM_SHA256,
        "a design inference, not the seed's file"
    );
    let docs = include_str!("../../../../../docs/runner.md");
    assert!(
        docs.contains(FSM_SHA256),
        "docs/runner.md records the digest"
    );
    assert!(
        docs.contains(CONTRACT_FSM_SHA256),
        "and says the contract's differs"
    );
}

#[test]
fn every_terminal_category_and_effect_critical_state_of_the_contract_is_present() {
    let fsm = Fsm::bound().expect("fsm");
    for c in TERMINAL_CATEGORIES {
        let n = fsm
            .states()
            .into_iter()
            .filter(|s| fsm.category(s) == Some(c))
            .count();
        assert_eq!(n, 1, "{c}");
    }
    for s in EFFECT_CRITICAL {
        assert!(fsm.is_effect_critical(s), "{s}");
    }
    for s in NAMED_STATES {
        assert!(fsm.states().contains(s), "{s}");
    }
    assert_eq!(fsm.category("NO_PROGRESS"), Some("pathology"));
    assert_eq!(
        fsm.category("EFFECT_OUTCOME_UNKNOWN"),
        Some("unknown_external_outcome")
    );
    assert_eq!(fsm.category("RETRY_EXHAUSTED"), Some("retry_exhausted"));
}

/// Every (state, event) pair: allowed exactly when the file lists it, to the state it names.
#[test]
fn every_listed_transition_is_allowed_and_every_other_is_refused() {
    let fsm = Fsm::bound().expect("fsm");
    let v = file();
    let listed: Vec<(String, String, String)> = v["transitions"]
        .as_array()
        .expect("transitions")
        .iter()
        .map(|t| {
            let s = |k: &str| t[k].as_str().expect("text").to_owned();
            (s("from"), s("event"), s("to"))
        })
        .collect();
    let mut allowed = 0;
    for state in fsm.states() {
        for event in fsm.events() {
            let want = listed
                .iter()
                .find(|(f, e, _)| f == state && e == event)
                .map(|(_, _, t)| t.as_str());
            assert_eq!(
                fsm.next(state, event).map(|e| e.to.as_str()),
                want,
                "{state} {event}"
            );
            allowed += usize::from(want.is_some());
        }
    }
    assert_eq!(allowed, listed.len());
    assert!(fsm.next("CREATED", "verified_pass").is_none());
    assert!(fsm.next("NOT_A_STATE", "start").is_none());
    for t in fsm.states().into_iter().filter(|s| fsm.is_terminal(s)) {
        assert!(fsm.events().iter().all(|e| fsm.next(t, e).is_none()), "{t}");
    }
}

fn edge(from: &str, event: &str, to: &str, guards: &[&str]) -> Value {
    json!({"from": from, "event": event, "to": to, "guards": guards})
}

/// Each mutation of the file is refused naming the invariant it breaks.
#[test]
fn a_mutated_fsm_is_refused_naming_the_broken_invariant() {
    type Mutation = fn(&mut Value);
    type Expected = fn(&Broken) -> bool;
    let cases: Vec<(&str, Mutation, Expected)> = vec![
        (
            "an edge out of a terminal",
            |v| push_edge(v, edge("SUCCEEDED", "start", "PLAN", &[])),
            |b| matches!(b, Broken::TerminalHasEdge(s) if s == "SUCCEEDED"),
        ),
        (
            "a missing terminal category",
            |v| drop_state(v, "SATURATED"),
            |b| matches!(b, Broken::TerminalCategory(c) if c == "saturated"),
        ),
        (
            "an intent not through approval",
            |v| {
                push_edge(
                    v,
                    edge(
                        "PLAN_EFFECTS",
                        "approval_consumed",
                        "COMMIT_INTENT",
                        &["exact_hash_approval"],
                    ),
                )
            },
            |b| matches!(b, Broken::IntentWithoutApproval(_)),
        ),
        (
            "an approval edge without the exact-hash guard",
            |v| strip_guard(v, "approval_consumed", "exact_hash_approval"),
            |b| matches!(b, Broken::IntentWithoutApproval(_)),
        ),
        (
            "execution without an intent",
            |v| push_edge(v, edge("PLAN_EFFECTS", "intent_committed", "EXECUTE", &[])),
            |b| matches!(b, Broken::IntentWithoutApproval(_)),
        ),
        (
            "success without closed obligations",
            |v| strip_guard(v, "verified_pass", "obligations_closed"),
            |b| matches!(b, Broken::UnverifiedSuccess(_)),
        ),
        (
            "success with an unknown effect",
            |v| strip_guard(v, "verified_pass", "no_unknown_effect"),
            |b| matches!(b, Broken::UnverifiedSuccess(_)),
        ),
        (
            "success not decided by the verifier",
            |v| {
                push_edge(
                    v,
                    edge(
                        "VERIFY",
                        "ingested",
                        "SUCCEEDED",
                        &["obligations_closed", "no_unknown_effect"],
                    ),
                )
            },
            |b| matches!(b, Broken::UnverifiedSuccess(_)),
        ),
        (
            "a confirmed effect verified without re-ingestion",
            |v| {
                push_edge(
                    v,
                    edge(
                        "HONOR_PENDING_INTERRUPT",
                        "ready_to_verify",
                        "VERIFY",
                        &["obligations_closed"],
                    ),
                )
            },
            |b| matches!(b, Broken::ReceiptNotReingested(_)),
        ),
        (
            "an unknown outcome verified",
            |v| {
                push_edge(
                    v,
                    edge(
                        "HUMAN_RECONCILIATION",
                        "ready_to_verify",
                        "VERIFY",
                        &["obligations_closed"],
                    ),
                )
            },
            |b| matches!(b, Broken::ReceiptNotReingested(_)),
        ),
        (
            "content issuing a control event",
            |v| {
                v["events"]
                    .as_array_mut()
                    .expect("e")
                    .push(json!({"name": "model_says_done", "issuer": "model"}))
            },
            |b| matches!(b, Broken::ContentIssuer(_)),
        ),
        (
            "content declared an issuer",
            |v| {
                v["issuers"]
                    .as_array_mut()
                    .expect("i")
                    .push(json!("retrieved_content"))
            },
            |b| matches!(b, Broken::ContentIssuer(_)),
        ),
        (
            "a missing effect-critical state",
            |v| drop_state(v, "RECONCILE"),
            |b| matches!(b, Broken::EffectCriticalState(s) if s == "RECONCILE"),
        ),
        (
            "an effect-critical state declared as control",
            |v| set_kind(v, "EXECUTE", "control"),
            |b| matches!(b, Broken::EffectCriticalState(s) if s == "EXECUTE"),
        ),
        (
            "a missing named state",
            |v| drop_state(v, "WAIT_APPROVAL"),
            |b| matches!(b, Broken::NamedState(s) if s == "WAIT_APPROVAL"),
        ),
        (
            "two edges on one event",
            |v| push_edge(v, edge("CREATED", "start", "ACT", &[])),
            |b| matches!(b, Broken::Nondeterministic(s) if s == "CREATED"),
        ),
        (
            "an undeclared guard",
            |v| push_edge(v, edge("ACT", "no_progress", "NO_PROGRESS", &["vibes"])),
            |b| matches!(b, Broken::Undeclared(g) if g == "vibes"),
        ),
        (
            "a state nothing reaches",
            |v| {
                v["states"]
                    .as_array_mut()
                    .expect("s")
                    .push(json!({"name": "LIMBO", "kind": "control"}))
            },
            |b| matches!(b, Broken::Stranded(s) if s == "LIMBO"),
        ),
        (
            "an unknown field",
            |v| v["extra"] = json!(1),
            |b| matches!(b, Broken::Unreadable(_)),
        ),
    ];
    assert!(load(&file()).is_ok());
    for (what, mutate, expected) in cases {
        let mut v = file();
        mutate(&mut v);
        let refused = load(&v).expect_err(what);
        assert!(expected(&refused), "{what}: {refused}");
    }
}

fn push_edge(v: &mut Value, e: Value) {
    v["transitions"]
        .as_array_mut()
        .expect("transitions")
        .push(e);
}

fn drop_state(v: &mut Value, name: &str) {
    v["states"]
        .as_array_mut()
        .expect("states")
        .retain(|s| s["name"] != name);
    v["transitions"]
        .as_array_mut()
        .expect("transitions")
        .retain(|t| t["from"] != name && t["to"] != name);
}

fn strip_guard(v: &mut Value, event: &str, guard: &str) {
    for t in v["transitions"].as_array_mut().expect("transitions") {
        if t["event"] == event {
            t["guards"]
                .as_array_mut()
                .expect("guards")
                .retain(|g| g != guard);
        }
    }
}

fn set_kind(v: &mut Value, name: &str, kind: &str) {
    for s in v["states"].as_array_mut().expect("states") {
        if s["name"] == name {
            s["kind"] = json!(kind);
        }
    }
}
