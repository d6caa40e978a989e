use super::*;
use crate::domain::progress::StepResult;

const DOC: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"summarize","version":"0.1.0",
  "obligations":[{"id":"gathered","evidence":["task_result"]},{"id":"summary","evidence":["model_answer"]}],
  "steps":[{"id":"gather","kind":"task","closes":["gathered"]},
           {"id":"draft","kind":"model","family":"chat","closes":["summary"]}],
  "verification":{"owner":"owner-alice"}}"#;

const RUN: &str = "0190aaaa-bbbb-7ccc-8ddd-eeeeffff0000";
const CREATED: i64 = 1_780_000_000_000;
const AT: i64 = CREATED + 5_000;

fn closed() -> Progress {
    Progress {
        cursor: 2,
        results: vec![
            StepResult {
                step: "gather".into(),
                digest: "11".repeat(32),
                tokens: 0,
                evidence: vec!["task_result".into()],
            },
            StepResult {
                step: "draft".into(),
                digest: "22".repeat(32),
                tokens: 7,
                evidence: vec!["model_answer".into()],
            },
        ],
        ..Progress::default()
    }
}

fn bundle(w: &Workflow, p: &Progress, at: i64) -> Bundle {
    let spec = w.verification.clone();
    build(&Run {
        id: RUN,
        workflow: w,
        workflow_sha256: &"aa".repeat(32),
        input_sha256: &"bb".repeat(32),
        created_ms: CREATED,
        progress: p,
        spec: &spec,
        at_ms: at,
    })
}

fn parse(b: &[u8]) -> Value {
    lychd_canon::parse(b).expect("canonical json")
}

/// Reduce the bundle's records (and `more`) as of `evaluated` with the real reducer.
fn reduce(b: &Bundle, more: &[Value], evaluated: i64) -> lychd_helmloop::ReductionResult {
    let mut records: Vec<Value> = b
        .owner_records
        .iter()
        .chain(&b.observations)
        .map(|d| parse(&d.body))
        .collect();
    records.extend(more.iter().cloned());
    let input = obj(vec![
        ("protocolVersion", s("0.1")),
        ("context", parse(&b.context_at(evaluated))),
        ("records", arr(records)),
    ]);
    lychd_helmloop::reduce_bytes(&lychd_canon::to_canonical_vec(&input).expect("canonical"))
        .expect("reduces")
}

fn summary(r: &lychd_helmloop::ReductionResult) -> serde_json::Value {
    serde_json::from_str(&r.to_json()).expect("result json")
}

#[test]
fn the_policy_digest_is_the_reducers() {
    let w = Workflow::parse(DOC.as_bytes()).expect("valid");
    let b = bundle(&w, &closed(), AT);
    let ctx = parse(&b.context_at(AT + 1));
    let ours = ctx
        .get("policy")
        .and_then(|p| p.get("digest"))
        .and_then(Value::as_str)
        .expect("digest")
        .to_owned();
    assert_eq!(
        lychd_helmloop::policy_digest(&ctx)
            .expect("digest")
            .render(),
        ours
    );
}

#[test]
fn every_drafted_record_is_valid_and_the_bundle_holds_only_for_the_owners_promotion() {
    let w = Workflow::parse(DOC.as_bytes()).expect("valid");
    let b = bundle(&w, &closed(), AT);
    for d in b.owner_records.iter().chain(&b.observations) {
        let report = lychd_helmloop::validate::validate_document(&d.body);
        assert!(
            report.is_valid(),
            "{} {} is valid: {:?}",
            d.reference.record_type,
            d.reference.id,
            report
        );
    }
    let r = summary(&reduce(&b, &[], AT + 60_000));
    assert_eq!(r["disposition"], "HOLD", "{r}");
    assert_eq!(r["reasonCodes"]["reject"], serde_json::json!([]), "{r}");
    assert_eq!(
        r["reasonCodes"]["hold"],
        serde_json::json!(["PROMOTION_NOT_REQUESTED"]),
        "only the owner's promotion is missing: {r}"
    );
    for (axis, pass) in [
        ("execution", "COMPLETED"),
        ("evidence", "FRESH"),
        ("authority", "MISSING"),
        ("reconciliation", "NOT_REQUIRED"),
        ("observedOutcome", "MET"),
    ] {
        assert_eq!(r["axes"][axis], pass, "{axis}: {r}");
    }
}

#[test]
fn the_same_run_drafts_the_same_bytes_and_another_instant_other_bytes() {
    let w = Workflow::parse(DOC.as_bytes()).expect("valid");
    let (one, two) = (bundle(&w, &closed(), AT), bundle(&w, &closed(), AT));
    let bodies = |b: &Bundle| -> Vec<Vec<u8>> {
        b.owner_records
            .iter()
            .chain(&b.observations)
            .map(|d| d.body.clone())
            .collect()
    };
    assert_eq!(bodies(&one), bodies(&two));
    assert_ne!(bodies(&one), bodies(&bundle(&w, &closed(), AT + 1)));
    // Digests of the results, never content: the bodies name the result digests.
    let evidence = String::from_utf8(one.observations[2].body.clone()).expect("utf8");
    assert!(evidence.contains(&format!("sha256:{}", "22".repeat(32))));
}

#[test]
fn an_observer_decides_the_outcome_and_its_contradiction_rejects() {
    let doc = DOC.replace(
        r#""verification":{"owner":"owner-alice"}"#,
        r#""verification":{"owner":"owner-alice","observer":"outcome-bot"}"#,
    );
    let w = Workflow::parse(doc.as_bytes()).expect("valid");
    let b = bundle(&w, &closed(), AT);
    let held = summary(&reduce(&b, &[], AT + 60_000));
    assert_eq!(held["axes"]["observedOutcome"], "NOT_OBSERVED", "{held}");
    let observed = |status: &str, conclusion: &str| {
        let crit = criterion(OBSERVED_OUTCOME, &observed_description("outcome-bot"));
        let contract = parse(&b.owner_records[0].body);
        let mut m = lychd_canon::Map::new();
        for k in ["schemaVersion", "subject", "revision", "policy"] {
            m.insert(k, contract.get(k).cloned().expect("member"));
        }
        let mut e = Value::Object(m);
        if let Value::Object(m) = &mut e {
            m.insert("recordType", s("EvidenceRecordV1"));
            m.insert("id", s("observed-1"));
            m.insert(
                "source",
                obj(vec![
                    ("system", s("observer")),
                    ("producer", s("outcome-bot")),
                    ("locator", s("observer://1")),
                ]),
            );
            m.insert("issuedAt", s(timestamp(AT + 1_000)));
            m.insert("contractRef", reference(b.contract()));
            m.insert("claim", s("the summary was read"));
            m.insert(
                "criterionResult",
                obj(vec![
                    ("id", crit.get("id").cloned().expect("id")),
                    ("digest", crit.get("digest").cloned().expect("digest")),
                    ("conclusion", s(conclusion)),
                ]),
            );
            m.insert("status", s(status));
            m.insert("observedAt", s(timestamp(AT + 1_000)));
            m.insert("validUntil", s(timestamp(AT + VALID_MS)));
            m.insert(
                "provenance",
                obj(vec![(
                    "artifactDigest",
                    s(format!("sha256:{}", "33".repeat(32))),
                )]),
            );
            m.insert("dependencyRevisions", arr([b.revision.clone()]));
            m.insert("limitations", arr([]));
        }
        parse(&seal(e).body)
    };
    let met = summary(&reduce(&b, &[observed("supports", "MET")], AT + 60_000));
    assert_eq!(met["axes"]["observedOutcome"], "MET", "{met}");
    let not_met = summary(&reduce(
        &b,
        &[observed("contradicts", "NOT_MET")],
        AT + 60_000,
    ));
    assert_eq!(not_met["disposition"], "REJECT", "{not_met}");
    assert_eq!(
        not_met["reasonCodes"]["reject"],
        serde_json::json!(["OUTCOME_NOT_MET"]),
        "{not_met}"
    );
}

#[test]
fn verdicts_map_to_fsm_events_and_only_pass_is_success() {
    assert_eq!(Verdict::of("PASS").event(), "verified_pass");
    assert_eq!(Verdict::of("REJECT").event(), "verification_reject");
    assert_eq!(Verdict::of(OWNER_DENIED).event(), "verification_reject");
    for other in ["HOLD", "", "pass", "UNKNOWN"] {
        assert_eq!(Verdict::of(other), Verdict::Hold, "{other}");
    }
    let all = Predicate {
        obligations_closed: true,
        independent_pass: true,
        no_unknown_effect: true,
        terminal_edge_legal: true,
    };
    assert!(all.holds());
    for i in 0..4 {
        let mut p = all.clone();
        *[
            &mut p.obligations_closed,
            &mut p.independent_pass,
            &mut p.no_unknown_effect,
            &mut p.terminal_edge_legal,
        ][i] = false;
        assert!(!p.holds(), "conjunct {i}");
    }
}

#[test]
fn a_verification_section_is_checked() {
    let with = |v: &str| DOC.replace(r#"{"owner":"owner-alice"}"#, v);
    for (v, path) in [
        (r#"{"owner":"Owner Alice"}"#, "/verification/owner"),
        (r#"{}"#, "/verification/owner"),
        (r#"{"owner":"a","extra":1}"#, "/verification"),
        (
            r#"{"owner":"a","observer":"lychd-runner"}"#,
            "/verification/observer",
        ),
        (
            r#"{"owner":"a","observer":"bad id"}"#,
            "/verification/observer",
        ),
        (r#""owner-alice""#, "/verification"),
    ] {
        let e = Workflow::parse(with(v).as_bytes()).expect_err(v);
        assert_eq!(e.path, path, "{v}");
    }
    let none = r#"{"schema":"lychd.runner.workflow/v1","name":"w","version":"0.1.0",
      "obligations":[],"steps":[{"id":"a","kind":"task"}],"verification":{"owner":"o"}}"#;
    assert_eq!(
        Workflow::parse(none.as_bytes())
            .expect_err("no obligation")
            .path,
        "/verification"
    );
    let w = Workflow::parse(DOC.as_bytes()).expect("valid");
    assert_eq!(outcome_claim(&w, &w.verification), "summary");
}

#[test]
fn timestamps_are_millisecond_utc() {
    assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(timestamp(1_780_000_000_123), "2026-05-28T20:26:40.123Z");
}

#[test]
fn a_verified_workflow_asks_the_verifier_only_with_its_obligations_closed() {
    use crate::domain::budgets::Budgets;
    use crate::domain::progress::{Next, next};
    let w = Workflow::parse(DOC.as_bytes()).expect("valid");
    let b = Budgets::contract();
    assert_eq!(next(&w, &b, "VERIFY", &closed(), 1), Next::Verify);
    assert_eq!(
        next(&w, &b, "WAIT_VERIFICATION", &closed(), 1),
        Next::Verify
    );
    // An obligation open: the repair round, never the verifier.
    let mut open = closed();
    open.results.pop();
    match next(&w, &b, "VERIFY", &open, 1) {
        Next::Commit { event, .. } => assert_eq!(event, "verified_reject"),
        other => panic!("{other:?}"),
    }
    // Without `verification` a workflow is refused: no run succeeds on the runner's own
    // obligation check.
    let plain = DOC.replace(",\n  \"verification\":{\"owner\":\"owner-alice\"}", "");
    assert!(!plain.contains("verification"), "{plain}");
    assert_eq!(
        Workflow::parse(plain.as_bytes()).expect_err("refused").path,
        "/verification"
    );
    // The FSM: held runs leave only through the verifier, a budget, a deadline, a cancel or a
    // quarantine; success only from VERIFY.
    let fsm = crate::domain::fsm::Fsm::bound().expect("fsm");
    for (from, event, to) in [
        ("VERIFY", "verification_hold", "WAIT_VERIFICATION"),
        ("VERIFY", "verification_reject", "FAILED"),
        ("WAIT_VERIFICATION", "verification_changed", "VERIFY"),
        ("WAIT_VERIFICATION", "cancel", "CANCELED"),
        ("WAIT_VERIFICATION", "budget_exhausted", "BUDGET_EXHAUSTED"),
        ("WAIT_VERIFICATION", "deadline_passed", "TIMED_OUT"),
        ("VERIFY", "verified_pass", "SUCCEEDED"),
    ] {
        assert_eq!(
            fsm.next(from, event).map(|e| e.to.as_str()),
            Some(to),
            "{from} {event}"
        );
    }
    assert!(fsm.next("WAIT_VERIFICATION", "verified_pass").is_none());
}
