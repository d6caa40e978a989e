//! Step 1 after the boundary parse: the evaluation frame.
//!
//! The frame is the input version, the context controls (resolutions §D:
//! all required, no defaults, no coercion), the policy digest over those
//! controls and the target transition. A missing control is HOLD
//! `CONTEXT_CONTROL_MISSING`; a malformed, mistyped or unknown one is REJECT
//! `CONTEXT_CONTROL_INVALID`; a drifted policy digest is REJECT
//! `POLICY_DIGEST_DRIFT`; another transition than `CONFORMANCE` is HOLD
//! `TRANSITION_UNSUPPORTED`; another protocol version is HOLD
//! `PROTOCOL_VERSION_UNSUPPORTED`. With any of these the frame is unusable
//! and no record is evaluated against it (design-inference: controls that
//! are missing, invalid or not bound by the policy digest cannot be trusted
//! to evaluate anything).

use super::codes::ReasonCode;
use super::time::{Millis, parse_timestamp};
use crate::PROTOCOL_VERSION;
use crate::digest::binding_digest;
use crate::schema::{self, Shape};
use crate::utf16::cmp_utf16;
use crate::value::{Map, Value};

/// The only target transition v0.1 implements.
pub const CONFORMANCE: &str = "CONFORMANCE";

/// The parsed controls of a usable context.
#[derive(Debug)]
pub(crate) struct Controls<'a> {
    pub evaluated_at: Millis,
    pub subject: &'a Value,
    pub revision_id: &'a str,
    pub revision_digest: &'a str,
    pub policy_id: &'a str,
    pub policy_revision: &'a str,
    pub policy_digest: &'a str,
    pub expected_action: &'a str,
    pub expected_parameters: &'a Value,
    pub expected_scope: Vec<&'a str>,
    pub execution_authority_required: bool,
    pub required_evidence_ids: Vec<&'a str>,
    pub required_level: u8,
    pub outcome_claim_id: &'a str,
    pub evidence_max_age_ms: Millis,
    pub reconciliation_max_age_ms: Millis,
    pub trusted_producers: Vec<&'a str>,
}

#[derive(Debug)]
pub(crate) struct Frame<'a> {
    /// Frame codes (version, input shape, controls, policy digest, transition).
    pub codes: Vec<ReasonCode>,
    pub controls: Option<Controls<'a>>,
    /// `context.targetTransition` when it is a string.
    pub target_transition: Option<&'a str>,
    version_unsupported: bool,
}

impl<'a> Frame<'a> {
    /// The controls, when the frame is usable.
    pub fn usable(&self) -> Option<&Controls<'a>> {
        if self.codes.is_empty() {
            self.controls.as_ref()
        } else {
            None
        }
    }

    pub fn version_unsupported(&self) -> bool {
        self.version_unsupported
    }

    /// The usable controls. Only called from stages that run after
    /// [`Frame::usable`] returned `Some`.
    pub fn c(&self) -> &Controls<'a> {
        self.controls
            .as_ref()
            .expect("stages 4-10 run only with a usable frame")
    }
}

/// `L0`..`L3` as 0..3.
pub(crate) fn level_of(s: &str) -> Option<u8> {
    match s {
        "L0" => Some(0),
        "L1" => Some(1),
        "L2" => Some(2),
        "L3" => Some(3),
        _ => None,
    }
}

fn sorted_strs(v: &Value) -> Vec<&str> {
    let mut out: Vec<&str> = v
        .as_array()
        .unwrap_or(&[])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    out.sort_by(|a, b| cmp_utf16(a, b));
    out
}

fn str_array(v: Vec<&str>) -> Value {
    Value::Array(v.into_iter().map(Value::from).collect())
}

/// The policy-digest body of resolutions §D for `context`.
pub fn policy_body(context: &Value) -> Value {
    let mut m = Map::new();
    let get = |k: &str| context.get(k).cloned().unwrap_or(Value::Null);
    m.insert(
        "policyId",
        context
            .get("policy")
            .and_then(|p| p.get("id"))
            .cloned()
            .unwrap_or_default(),
    );
    m.insert(
        "policyRevision",
        context
            .get("policy")
            .and_then(|p| p.get("revision"))
            .cloned()
            .unwrap_or_default(),
    );
    for k in [
        "subject",
        "revision",
        "targetTransition",
        "expectedAction",
        "expectedParameters",
        "executionAuthorityRequired",
        "requiredAssuranceLevel",
        "outcomeClaimId",
        "evidenceMaxAgeMs",
        "reconciliationMaxAgeMs",
    ] {
        m.insert(k, get(k));
    }
    for k in ["expectedScope", "requiredEvidenceIds", "trustedProducers"] {
        m.insert(k, str_array(sorted_strs(&get(k))));
    }
    Value::Object(m)
}

/// Evaluates the frame of an input value.
pub(crate) fn evaluate(input: &Value) -> Frame<'_> {
    let context = input.get("context");
    let mut frame = Frame {
        codes: Vec::new(),
        controls: None,
        target_transition: context
            .and_then(|c| c.get("targetTransition"))
            .and_then(Value::as_str),
        version_unsupported: false,
    };
    if !matches!(input, Value::Object(_)) {
        frame.codes.push(ReasonCode::InputSchemaInvalid);
        return frame;
    }
    if let Some(Value::String(v)) = input.get("protocolVersion")
        && v != PROTOCOL_VERSION
    {
        frame.codes.push(ReasonCode::ProtocolVersionUnsupported);
        frame.version_unsupported = true;
        return frame;
    }
    let shallow = shallow_input(input);
    let codes = if schema::is_valid_value(Shape::EvaluationInput, &shallow) {
        std::collections::BTreeSet::new()
    } else {
        shape_codes(&shallow).unwrap_or_else(|| shape_codes_by_interpreter(&shallow))
    };
    let Some(ctx) = context.filter(|_| codes.is_empty()) else {
        frame.codes.extend(codes);
        return frame;
    };
    let s = |path: &[&str]| super::at(ctx, path).and_then(Value::as_str).unwrap_or("");
    let int = |k: &str| ctx.get(k).and_then(Value::as_i64).unwrap_or(0);
    let evaluated_at = parse_timestamp(s(&["evaluatedAt"]));
    let required_level = level_of(s(&["requiredAssuranceLevel"]));
    let (Some(evaluated_at), Some(required_level)) = (evaluated_at, required_level) else {
        frame.codes.push(ReasonCode::ContextControlInvalid);
        return frame;
    };
    let drift = match binding_digest(&policy_body(ctx)) {
        Ok(d) => d.render() != s(&["policy", "digest"]),
        Err(_) => true,
    };
    if drift {
        frame.codes.push(ReasonCode::PolicyDigestDrift);
    }
    if s(&["targetTransition"]) != CONFORMANCE {
        frame.codes.push(ReasonCode::TransitionUnsupported);
    }
    let null = &Value::Null;
    frame.controls = Some(Controls {
        evaluated_at,
        subject: ctx.get("subject").unwrap_or(null),
        revision_id: s(&["revision", "id"]),
        revision_digest: s(&["revision", "digest"]),
        policy_id: s(&["policy", "id"]),
        policy_revision: s(&["policy", "revision"]),
        policy_digest: s(&["policy", "digest"]),
        expected_action: s(&["expectedAction"]),
        expected_parameters: ctx.get("expectedParameters").unwrap_or(null),
        expected_scope: sorted_strs(ctx.get("expectedScope").unwrap_or(null)),
        execution_authority_required: ctx
            .get("executionAuthorityRequired")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        required_evidence_ids: sorted_strs(ctx.get("requiredEvidenceIds").unwrap_or(null)),
        required_level,
        outcome_claim_id: s(&["outcomeClaimId"]),
        evidence_max_age_ms: int("evidenceMaxAgeMs"),
        reconciliation_max_age_ms: int("reconciliationMaxAgeMs"),
        trusted_producers: sorted_strs(ctx.get("trustedProducers").unwrap_or(null)),
    });
    frame
}

/// The input with an array `records` replaced by an empty one: the records
/// are checked one by one in step 2, the input shape only needs to know that
/// `records` is an array.
fn shallow_input(input: &Value) -> Value {
    match input {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| match (k, v) {
                    ("records", Value::Array(_)) => (k.to_owned(), Value::Array(Vec::new())),
                    _ => (k.to_owned(), v.clone()),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The frame codes of an input (its [`shallow_input`]) whose shape is
/// invalid, member by member with
/// the structural validator: a missing control (or a missing `context`) is
/// `CONTEXT_CONTROL_MISSING`; any other context problem
/// `CONTEXT_CONTROL_INVALID`; any other input problem `INPUT_SCHEMA_INVALID`.
/// Each member is judged yes/no, never issue by issue, so a hostile context
/// with a million bad items costs one pass (resolutions §H.7). `None` when
/// the definitions did not compile; tested to agree with
/// [`shape_codes_by_interpreter`].
fn shape_codes(input: &Value) -> Option<std::collections::BTreeSet<ReasonCode>> {
    let (inputs, contexts) = (schema::input_members()?, schema::context_members()?);
    let mut codes = std::collections::BTreeSet::new();
    let shape = inputs.verdict(input, &["context"]);
    if shape.missing || shape.invalid {
        codes.insert(ReasonCode::InputSchemaInvalid);
    }
    match input.get("context") {
        None => {
            codes.insert(ReasonCode::ContextControlMissing);
        }
        Some(ctx) => {
            let v = contexts.verdict(ctx, &[]);
            if v.missing {
                codes.insert(ReasonCode::ContextControlMissing);
            }
            if v.invalid {
                codes.insert(ReasonCode::ContextControlInvalid);
            }
        }
    }
    Some(codes)
}

/// The same codes from the reference interpreter's complete issue list.
fn shape_codes_by_interpreter(input: &Value) -> std::collections::BTreeSet<ReasonCode> {
    let mut codes = std::collections::BTreeSet::new();
    for issue in schema::validate(Shape::EvaluationInput, &input.to_serde()) {
        let p = issue.instance_path.as_str();
        let code = if p == "/context" && issue.keyword == "required" {
            ReasonCode::ContextControlMissing
        } else if let Some(rest) = p.strip_prefix("/context/") {
            if issue.keyword == "required" && !rest.contains('/') {
                ReasonCode::ContextControlMissing
            } else {
                ReasonCode::ContextControlInvalid
            }
        } else if p == "/context" {
            ReasonCode::ContextControlInvalid
        } else {
            ReasonCode::InputSchemaInvalid
        };
        codes.insert(code);
    }
    codes
}

/// Sorted string elements of an array value (scope sets, producer sets).
pub(crate) fn string_set(v: Option<&Value>) -> Vec<&str> {
    v.map(sorted_strs).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_body_sorts_the_three_sets_and_names_the_policy() {
        let ctx = crate::parse(
            br#"{"policy":{"id":"p","revision":"3","digest":"x"},"expectedScope":["b","a"],
                 "requiredEvidenceIds":["z","\u00e9","y"],"trustedProducers":["r","q"]}"#,
        )
        .expect("parses");
        let body = policy_body(&ctx);
        let strs = |k: &str| -> Vec<&str> {
            body.get(k)
                .and_then(Value::as_array)
                .expect("array")
                .iter()
                .filter_map(Value::as_str)
                .collect()
        };
        assert_eq!(strs("expectedScope"), ["a", "b"]);
        assert_eq!(strs("requiredEvidenceIds"), ["y", "z", "\u{e9}"]);
        assert_eq!(strs("trustedProducers"), ["q", "r"]);
        assert_eq!(body.get("policyId"), Some(&Value::from("p")));
        assert_eq!(body.get("policyRevision"), Some(&Value::from("3")));
        assert_eq!(body.get("outcomeClaimId"), Some(&Value::Null));
    }

    /// The member-by-member codes agree with the interpreter's issue list on
    /// every context member removed, mistyped, malformed, on unknown
    /// members, and on broken input members.
    #[test]
    fn shape_codes_agree_with_the_interpreter() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/helmloop/core/cases/core-001-pass-baseline.json"
        );
        let case = crate::parse(&std::fs::read(path).expect("baseline case")).expect("parses");
        let base = shallow_input(case.get("input").expect("input"));
        let Value::Object(input) = base.clone() else {
            panic!("object")
        };
        let Some(Value::Object(ctx)) = input.get("context").cloned() else {
            panic!("context")
        };
        let bad_values = [
            Value::Null,
            Value::Bool(true),
            Value::Int(0),
            Value::Int(-1),
            Value::from(""),
            Value::from("not an id!"),
            Value::from("2025-02-30T10:00:00.000Z"),
            Value::Array(vec![]),
            Value::Array(vec![Value::from("a"), Value::from("a")]),
            Value::Array(vec![Value::Int(1)]),
            Value::Object(Map::new()),
        ];
        let mut inputs = vec![base.clone()];
        let with_ctx = |c: Map| {
            let mut i = input.clone();
            i.insert("context", Value::Object(c));
            Value::Object(i)
        };
        for k in ctx.keys() {
            let mut c = ctx.clone();
            c.remove(k);
            inputs.push(with_ctx(c.clone()));
            for v in &bad_values {
                let mut c = ctx.clone();
                c.insert(k, v.clone());
                inputs.push(with_ctx(c.clone()));
                // Two problems at once: this one and a missing control.
                let mut c2 = c.clone();
                let other = ctx.keys().find(|o| *o != k).expect("another key");
                c2.remove(other);
                inputs.push(with_ctx(c2));
            }
            if let Some(Value::Object(inner)) = ctx.get(k) {
                for ik in inner.keys() {
                    let mut o = inner.clone();
                    o.remove(ik);
                    let mut c = ctx.clone();
                    c.insert(k, Value::Object(o));
                    inputs.push(with_ctx(c));
                }
            }
        }
        let mut c = ctx.clone();
        c.insert("extraControl", Value::Int(1));
        inputs.push(with_ctx(c));
        for (k, v) in [
            ("protocolVersion", None),
            ("records", None),
            ("context", None),
            ("records", Some(Value::Int(1))),
            ("protocolVersion", Some(Value::Int(1))),
            ("context", Some(Value::Array(vec![]))),
            ("extra", Some(Value::Null)),
        ] {
            let mut i = input.clone();
            match v {
                None => {
                    i.remove(k);
                }
                Some(v) => {
                    i.insert(k, v);
                }
            }
            inputs.push(Value::Object(i));
        }
        assert!(inputs.len() > 300);
        for i in &inputs {
            let structural = shape_codes(i).expect("the definitions compile");
            assert_eq!(structural, shape_codes_by_interpreter(i), "{i:?}");
        }
    }

    #[test]
    fn levels_parse_only_l0_to_l3() {
        assert_eq!(level_of("L0"), Some(0));
        assert_eq!(level_of("L3"), Some(3));
        assert_eq!(level_of("L4"), None);
        assert_eq!(level_of("l1"), None);
    }
}
