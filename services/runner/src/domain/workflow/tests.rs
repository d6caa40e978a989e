//! The workflow document's parser: valid documents, and every refusal naming its JSON pointer.
use super::*;

const GOOD: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"summarize","version":"0.1.0",
    "obligations":[{"id":"summary","evidence":["model_answer"]}],
    "steps":[{"id":"draft","kind":"model","family":"chat","closes":["summary"]},
             {"id":"check","kind":"task"}],"verification":{"owner":"o"}}"#;

fn path_of(doc: &str) -> String {
    Workflow::parse(doc.as_bytes()).expect_err(doc).path
}

#[test]
fn a_document_without_verification_is_refused() {
    // Success only on an independent PASS (issue 28 item 3): no run of a workflow is judged by
    // the runner's own obligation check alone.
    let plain = GOOD.replace(r#","verification":{"owner":"o"}"#, "");
    assert!(!plain.contains("verification"), "{plain}");
    let e = Workflow::parse(plain.as_bytes()).expect_err("refused");
    assert_eq!(
        (e.path.as_str(), e.problem),
        ("/verification", "is required")
    );
}

#[test]
fn a_valid_document_parses() {
    let w = Workflow::parse(GOOD.as_bytes()).expect("valid");
    assert_eq!((w.name.as_str(), w.steps.len()), ("summarize", 2));
    assert_eq!(
        w.steps[0].kind,
        StepKind::Model {
            family: "chat".into(),
            model: None,
        }
    );
    let named = GOOD.replace(
        "\"family\":\"chat\"",
        "\"family\":\"chat\",\"model\":\"qwen3-0.6b\"",
    );
    let w = Workflow::parse(named.as_bytes()).expect("valid");
    assert_eq!(
        w.steps[0].kind,
        StepKind::Model {
            family: "chat".into(),
            model: Some("qwen3-0.6b".into()),
        }
    );
}

#[test]
fn an_effect_step_parses_and_closes_with_a_receipt() {
    let doc = r#"{"schema":"lychd.runner.workflow/v1","name":"pay","version":"0.1.0",
        "obligations":[{"id":"paid","evidence":["effect_receipt"]}],
        "steps":[{"id":"pay","kind":"effect","adapter":"http",
                  "destination":"http://127.0.0.1:9/orders","risk":"high",
                  "action":{"amount":5,"to":"x"},"closes":["paid"]}],"verification":{"owner":"o"}}"#;
    let w = Workflow::parse(doc.as_bytes()).expect("valid");
    let StepKind::Effect(spec) = &w.steps[0].kind else {
        panic!("an effect step");
    };
    assert_eq!(spec.action, br#"{"amount":5,"to":"x"}"#.to_vec());
    assert!(w.steps[0].kind.can_provide(EFFECT_RECEIPT));
    for (from, to, path) in [
        ("\"risk\":\"high\"", "\"risk\":\"huge\"", "/steps/0/risk"),
        (
            "\"adapter\":\"http\"",
            "\"adapter\":\"ftp\"",
            "/steps/0/adapter",
        ),
        ("{\"amount\":5,\"to\":\"x\"}", "[5]", "/steps/0/action"),
        (
            "{\"amount\":5,\"to\":\"x\"}",
            "{\"amount\":0.5}",
            "/steps/0/action",
        ),
        (
            "http://127.0.0.1:9/orders",
            "file:///etc",
            "/steps/0/destination",
        ),
        (
            "\"risk\":\"high\"",
            "\"risk\":\"high\",\"family\":\"chat\"",
            "/steps/0/family",
        ),
        (
            "[\"effect_receipt\"]",
            "[\"model_answer\"]",
            "/obligations/0/evidence",
        ),
    ] {
        assert_eq!(path_of(&doc.replace(from, to)), path, "{to}");
    }
}

#[test]
fn errors_name_the_path() {
    for (from, to, path) in [
        ("\"summarize\"", "\"Sum Up\"", "/name"),
        ("\"0.1.0\"", "\"1\"", "/version"),
        (
            "\"family\":\"chat\"",
            "\"family\":\"poetry\"",
            "/steps/0/family",
        ),
        (
            "\"kind\":\"task\"",
            "\"kind\":\"effect\"",
            "/steps/1/adapter",
        ),
        ("\"kind\":\"task\"", "\"kind\":\"mail\"", "/steps/1/kind"),
        (
            "\"kind\":\"task\"",
            "\"kind\":\"task\",\"risk\":\"low\"",
            "/steps/1/risk",
        ),
        (
            "\"family\":\"chat\"",
            "\"family\":\"chat\",\"model\":\"has space\"",
            "/steps/0/model",
        ),
        (
            "\"kind\":\"task\"",
            "\"kind\":\"task\",\"model\":\"m\"",
            "/steps/1/model",
        ),
        (
            "\"closes\":[\"summary\"]",
            "\"closes\":[\"nothing\"]",
            "/steps/0/closes/0",
        ),
        (
            "\"closes\":[\"summary\"]",
            "\"closes\":[]",
            "/obligations/0",
        ),
        ("\"id\":\"check\"", "\"id\":\"draft\"", "/steps/1/id"),
        ("\"evidence\"", "\"proof\"", "/obligations/0"),
        ("lychd.runner.workflow/v1", "other/v1", "/schema"),
        (
            "\"evidence\":[\"model_answer\"]",
            "\"evidence\":[\"vibes\"]",
            "/obligations/0/evidence/0",
        ),
        (
            "\"evidence\":[\"model_answer\"]",
            "\"evidence\":[\"task_result\"]",
            "/obligations/0/evidence",
        ),
    ] {
        assert_eq!(path_of(&GOOD.replace(from, to)), path, "{to}");
    }
    assert_eq!(path_of(""), "");
    assert_eq!(path_of("[1]"), "");
    assert_eq!(path_of("{"), "");
    assert_eq!(
        path_of(
            r#"{"schema":"lychd.runner.workflow/v1","name":"a","version":"0.1.0","obligations":[],"steps":[],"verification":{"owner":"o"}}"#
        ),
        "/steps"
    );
}

#[test]
fn an_effect_step_may_declare_its_compensation_and_only_an_effect_step() {
    let doc = r#"{"schema":"lychd.runner.workflow/v1","name":"pay","version":"0.1.0",
        "obligations":[{"id":"paid","evidence":["effect_receipt"]}],
        "steps":[{"id":"pay","kind":"effect","adapter":"http",
                  "destination":"http://127.0.0.1:9/orders","risk":"high",
                  "action":{"amount":5,"to":"x"},"closes":["paid"],
                  "compensation":{"destination":"http://127.0.0.1:9/refunds",
                                  "action":{"refund":5}}},
                 {"id":"check","kind":"task"}],"verification":{"owner":"o"}}"#;
    let w = Workflow::parse(doc.as_bytes()).expect("valid");
    let StepKind::Effect(spec) = &w.steps[0].kind else {
        panic!("an effect step");
    };
    let c = spec.compensation.as_deref().expect("declared");
    assert_eq!(
        (c.destination.as_str(), c.action.as_slice()),
        ("http://127.0.0.1:9/refunds", br#"{"refund":5}"#.as_slice())
    );
    for (from, to, path) in [
        (
            "http://127.0.0.1:9/refunds",
            "ftp://x/refunds",
            "/steps/0/compensation/destination",
        ),
        (
            "{\"refund\":5}",
            "{\"refund\":0.5}",
            "/steps/0/compensation/action",
        ),
        (
            "{\"id\":\"check\",\"kind\":\"task\"}",
            "{\"id\":\"check\",\"kind\":\"task\",\"compensation\":{}}",
            "/steps/1/compensation",
        ),
        (
            "\"compensation\":{",
            "\"compensation\":{\"risk\":\"low\",",
            "/steps/0/compensation",
        ),
        (
            "\"destination\":\"http://127.0.0.1:9/refunds\",",
            "",
            "/steps/0/compensation/destination",
        ),
        ("{\"refund\":5}", "[5]", "/steps/0/compensation/action"),
    ] {
        assert_eq!(path_of(&doc.replace(from, to)), path, "{to}");
    }
}
