//! Record fixtures and the schema bundle: every fixture validates and its
//! digests are current; one mutation of each kind per record type fails with
//! a precise instance path; the bundle itself is well-formed and closed.

use std::collections::BTreeMap;

use lychd_helmloop::schema::{self, RecordType, Shape};
use lychd_helmloop::validate::{
    RECORD_DIGEST_MISMATCH, RECORD_SCHEMA_INVALID, validate_document, validate_record,
};
use lychd_helmloop::{Value, binding_digest, parse, record_digest};
use serde_json::{Value as Json, json};

fn record_files() -> Vec<(String, Value)> {
    let dir = crate::fixture("records");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("fixtures/helmloop/records exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("readable fixture");
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let v = parse(&bytes).unwrap_or_else(|e| panic!("{name} does not parse strictly: {e}"));
        out.push((name, v));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(
        !out.is_empty(),
        "no record fixtures found in {}",
        dir.display()
    );
    out
}

fn record_type(v: &Value) -> RecordType {
    RecordType::from_name(
        v.get("recordType")
            .and_then(Value::as_str)
            .expect("recordType"),
    )
    .expect("known record type")
}

#[test]
fn every_record_fixture_validates_and_its_digest_is_current() {
    let records = record_files();
    let mut seen = BTreeMap::new();
    for (name, v) in &records {
        let declared = v
            .get("digest")
            .and_then(Value::as_str)
            .expect("digest member");
        let recomputed = record_digest(v)
            .expect("fixture is canonicalizable")
            .to_string();
        assert_eq!(
            declared, recomputed,
            "{name}: digest drifted; regenerate with gen_records.py"
        );
        let report = validate_document(&crate::read_fixture(&format!("records/{name}")));
        assert!(report.is_valid(), "{name}: {}", report.to_json());
        *seen.entry(record_type(v)).or_insert(0) += 1;
    }
    for t in RecordType::ALL {
        assert!(seen.contains_key(&t), "no fixture of type {t}");
    }
}

/// Every exact reference in the fixtures resolves to a fixture with that
/// type, id and digest; criterion and action digests are current.
#[test]
fn fixture_references_and_derived_digests_are_consistent() {
    let records = record_files();
    let by_id: BTreeMap<&str, &Value> = records
        .iter()
        .map(|(_, v)| (v.get("id").and_then(Value::as_str).expect("id"), v))
        .collect();
    let check_ref = |owner: &str, r: &Value| {
        let id = r.get("id").and_then(Value::as_str).expect("ref id");
        let target = by_id
            .get(id)
            .unwrap_or_else(|| panic!("{owner}: reference to unknown record {id}"));
        assert_eq!(
            r.get("recordType"),
            target.get("recordType"),
            "{owner} -> {id}: type"
        );
        assert_eq!(
            r.get("digest"),
            target.get("digest"),
            "{owner} -> {id}: digest"
        );
    };
    let mut checked = 0;
    for (name, v) in &records {
        for key in [
            "contractRef",
            "receiptRef",
            "grantRef",
            "assuranceRef",
            "consumedBy",
        ] {
            if let Some(r) = v.get(key) {
                check_ref(name, r);
                checked += 1;
            }
        }
        if let Some(r) = v.get("authority").and_then(|a| a.get("grantRef")) {
            check_ref(name, r);
            checked += 1;
        }
        for key in ["evidenceRefs", "supersedes"] {
            for r in v.get(key).and_then(Value::as_array).unwrap_or_default() {
                check_ref(name, r);
                checked += 1;
            }
        }
        for c in v
            .get("criteria")
            .and_then(Value::as_array)
            .unwrap_or_default()
        {
            let mut body = lychd_helmloop::Map::new();
            body.insert("id", c.get("id").cloned().expect("criterion id"));
            body.insert(
                "description",
                c.get("description").cloned().expect("description"),
            );
            let d = binding_digest(&Value::Object(body))
                .expect("canonical")
                .to_string();
            assert_eq!(
                c.get("digest").and_then(Value::as_str),
                Some(d.as_str()),
                "{name}: criterion"
            );
        }
        if let Some(Value::String(declared)) = v.get("actionDigest") {
            let mut scope: Vec<Value> = v.get("scope").and_then(Value::as_array).unwrap().to_vec();
            scope.sort();
            let mut body = lychd_helmloop::Map::new();
            for k in [
                "action",
                "actionParameters",
                "granteeId",
                "idempotencyKey",
                "revision",
                "subject",
            ] {
                body.insert(k, v.get(k).cloned().expect("grant field"));
            }
            body.insert("scope", Value::Array(scope));
            let d = binding_digest(&Value::Object(body))
                .expect("canonical")
                .to_string();
            assert_eq!(declared, &d, "{name}: actionDigest");
        }
    }
    assert!(checked >= 15, "only {checked} references checked");
}

#[test]
fn bundles_validate_and_policy_digest_is_current() {
    for name in ["bundles/all-records.json", "bundles/evaluation-input.json"] {
        let report = validate_document(&crate::read_fixture(name));
        assert!(report.is_valid(), "{name}: {}", report.to_json());
        assert_eq!(report.records, 11, "{name}");
    }
    let input = parse(&crate::read_fixture("bundles/evaluation-input.json")).unwrap();
    let ctx = input
        .get("context")
        .and_then(Value::as_object)
        .expect("context");
    let mut body = lychd_helmloop::Map::new();
    let policy = ctx.get("policy").expect("policy");
    body.insert("policyId", policy.get("id").cloned().unwrap());
    body.insert("policyRevision", policy.get("revision").cloned().unwrap());
    for (k, v) in ctx
        .iter()
        .filter(|(k, _)| *k != "policy" && *k != "evaluatedAt")
    {
        let v = match (k, v) {
            ("expectedScope" | "requiredEvidenceIds" | "trustedProducers", Value::Array(a)) => {
                let mut a = a.clone();
                a.sort();
                Value::Array(a)
            }
            _ => v.clone(),
        };
        body.insert(k, v);
    }
    let d = binding_digest(&Value::Object(body)).unwrap().to_string();
    assert_eq!(
        policy.get("digest").and_then(Value::as_str),
        Some(d.as_str())
    );
}

/// (record type, property to remove, (property path, wrong-typed value)).
fn mutations(t: RecordType) -> (&'static str, &'static str, Json) {
    match t {
        RecordType::OutcomeContract => ("desiredOutcome", "/axes", json!("all")),
        RecordType::AuthorityGrant => ("actionDigest", "/consequential", json!("yes")),
        RecordType::ExecutionReceipt => ("executionId", "/authority/required", json!("true")),
        RecordType::EvidenceRecord => ("claim", "/limitations", json!({})),
        RecordType::AssuranceDecision => ("decidedAt", "/evidenceRefs", json!("evidence-1")),
        RecordType::PromotionDecision => ("targetRevision", "/lineage/sequence", json!("1")),
        RecordType::ReconciliationRecord => ("receiptRef", "/query", json!([])),
        RecordType::LearningSignal => ("proposal", "/proposal", json!(["x"])),
    }
}

fn fixture_of(t: RecordType) -> Value {
    let name = t.entry_file().replace(".schema.json", ".json");
    parse(&crate::read_fixture(&format!("records/{name}"))).expect("fixture parses")
}

fn set_pointer(root: &mut Json, pointer: &str, value: Json) {
    *root
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("no {pointer}")) = value;
}

fn assert_issue(t: RecordType, mutated: Json, path: &str, keyword: &str) {
    let v = Value::from_serde(&mutated).expect("mutation stays in the profile");
    let issues = validate_record(&v, "");
    assert!(
        issues.iter().any(|i| i.code == RECORD_SCHEMA_INVALID
            && i.path == path
            && i.keyword.as_deref() == Some(keyword)),
        "{t}: expected {keyword} at {path}, got {issues:#?}"
    );
    assert!(
        issues
            .iter()
            .all(|i| i.code == RECORD_SCHEMA_INVALID || i.code == RECORD_DIGEST_MISMATCH),
        "{t}: unexpected codes {issues:#?}"
    );
}

#[test]
fn unknown_property_is_refused_with_its_path_for_every_record_type() {
    for t in RecordType::ALL {
        let mut top = fixture_of(t).to_serde();
        top["unexpectedField"] = json!(1);
        assert_issue(t, top, "/unexpectedField", "additionalProperties");
        let mut nested = fixture_of(t).to_serde();
        nested["source"]["extra"] = json!("x");
        assert_issue(t, nested, "/source/extra", "additionalProperties");
    }
}

#[test]
fn missing_required_field_is_refused_with_its_path_for_every_record_type() {
    for t in RecordType::ALL {
        let (remove, _, _) = mutations(t);
        let mut j = fixture_of(t).to_serde();
        j.as_object_mut()
            .unwrap()
            .remove(remove)
            .expect("field present");
        assert_issue(t, j, &format!("/{remove}"), "required");
    }
}

#[test]
fn wrong_type_is_refused_with_its_path_for_every_record_type() {
    for t in RecordType::ALL {
        let (_, pointer, wrong) = mutations(t);
        let mut j = fixture_of(t).to_serde();
        set_pointer(&mut j, pointer, wrong);
        assert_issue(t, j, pointer, "type");
    }
}

#[test]
fn digest_tampering_is_reported_at_the_digest_member() {
    for t in RecordType::ALL {
        let mut j = fixture_of(t).to_serde();
        j["id"] = json!("tampered-id");
        let v = Value::from_serde(&j).unwrap();
        let issues = validate_record(&v, "/x");
        assert_eq!(issues.len(), 1, "{t}: {issues:#?}");
        assert_eq!(
            (issues[0].code.as_str(), issues[0].path.as_str()),
            (RECORD_DIGEST_MISMATCH, "/x/digest")
        );
    }
}

#[test]
fn other_version_holds_before_schema_validation() {
    let mut j = fixture_of(RecordType::EvidenceRecord).to_serde();
    j["schemaVersion"] = json!("0.2");
    j["unknown"] = json!(true);
    let issues = validate_record(&Value::from_serde(&j).unwrap(), "");
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(issues[0].code, "PROTOCOL_VERSION_UNSUPPORTED");
    assert_eq!(issues[0].channel.as_str(), "hold");
    assert_eq!(issues[0].path, "/schemaVersion");
}

#[test]
fn conditional_rules_of_the_bundle_hold() {
    // A consumed grant step needs consumedBy; other states must not carry it.
    let mut g = fixture_of(RecordType::AuthorityGrant).to_serde();
    g["lineage"]["state"] = json!("consumed");
    assert!(
        schema::validate(Shape::Record(RecordType::AuthorityGrant), &g)
            .iter()
            .any(|i| i.instance_path == "/consumedBy" && i.keyword == "required")
    );
    // A promote grant's parameters are exactly {targetRevision, targetDigest}.
    let mut p = parse(&crate::read_fixture(
        "records/authority-grant-v1-promote-reserved.json",
    ))
    .unwrap()
    .to_serde();
    p["actionParameters"]["extra"] = json!(1);
    assert!(
        schema::validate(Shape::Record(RecordType::AuthorityGrant), &p)
            .iter()
            .any(|i| i.instance_path == "/actionParameters/extra")
    );
    // authority.required = false cannot carry a grantRef.
    let mut r = fixture_of(RecordType::ExecutionReceipt).to_serde();
    r["authority"]["required"] = json!(false);
    assert!(!schema::validate(Shape::Record(RecordType::ExecutionReceipt), &r).is_empty());
    // A succeeded receipt needs finishedAt; an unknown one does not.
    let mut r = fixture_of(RecordType::ExecutionReceipt).to_serde();
    r.as_object_mut().unwrap().remove("finishedAt");
    assert!(
        schema::validate(Shape::Record(RecordType::ExecutionReceipt), &r)
            .iter()
            .any(|i| i.instance_path == "/finishedAt")
    );
    r["status"] = json!("unknown");
    assert!(schema::validate(Shape::Record(RecordType::ExecutionReceipt), &r).is_empty());
    // An active contract lists all six axes.
    let mut c = fixture_of(RecordType::OutcomeContract).to_serde();
    c["axes"] = json!(["execution", "evidence"]);
    assert!(!schema::validate(Shape::Record(RecordType::OutcomeContract), &c).is_empty());
    c["status"] = json!("draft");
    assert!(schema::validate(Shape::Record(RecordType::OutcomeContract), &c).is_empty());
    // Timestamps: exact shape and a real calendar date.
    for bad in [
        "2025-02-30T00:00:00.000Z",
        "2025-01-01T00:00:00Z",
        "2025-01-01T00:00:60.000Z",
        "2025-01-01T00:00:00.000+00:00",
    ] {
        let mut e = fixture_of(RecordType::EvidenceRecord).to_serde();
        e["observedAt"] = json!(bad);
        assert!(
            schema::validate(Shape::Record(RecordType::EvidenceRecord), &e)
                .iter()
                .any(|i| i.instance_path == "/observedAt"),
            "{bad} accepted"
        );
    }
    // An id-only reference is refused.
    let mut a = fixture_of(RecordType::AssuranceDecision).to_serde();
    a["evidenceRefs"] = json!([{"id": "evidence-latency-1"}]);
    assert!(
        schema::validate(Shape::Record(RecordType::AssuranceDecision), &a)
            .iter()
            .any(|i| i.instance_path == "/evidenceRefs/0/digest" && i.keyword == "required")
    );
}

#[test]
fn auxiliary_definitions_accept_examples_and_refuse_unknown_fields() {
    let d = format!("sha256:{}", "0".repeat(64));
    let result = json!({
        "protocolVersion": "0.1", "targetTransition": "CONFORMANCE", "disposition": "HOLD",
        "axes": {"execution": "COMPLETED", "evidence": "FRESH", "authority": "CONSUMED",
                 "promotion": "PENDING", "reconciliation": "MATCHED", "observedOutcome": "NOT_DUE"},
        "reasonCodes": {"reject": [], "hold": ["PROMOTION_PENDING"]},
        "inputDigest": d,
        "recordResults": [{"recordType": "OutcomeContractV1", "id": "c-1", "digest": d, "status": "ELIGIBLE", "reasons": []}],
        "trust": {"trustedProducers": ["runner-7"], "untrustedProducers": []}
    });
    assert_eq!(schema::validate(Shape::ReductionResult, &result), vec![]);
    let mut bad = result.clone();
    bad["axes"]["mood"] = json!("happy");
    assert!(
        schema::validate(Shape::ReductionResult, &bad)
            .iter()
            .any(|i| i.instance_path == "/axes/mood")
    );
    let mut bad = result;
    bad["reasonCodes"]["hold"] = json!(["RECORD_DIGEST_MISMATCH"]);
    assert!(
        !schema::validate(Shape::ReductionResult, &bad).is_empty(),
        "reject code in hold channel"
    );

    let receipt = json!({
        "receiptType": "PortabilityReceiptV1", "schemaVersion": "0.1", "id": "port-1",
        "issuedAt": "2025-01-01T00:00:00.000Z", "evidenceClass": "runtime-observation",
        "observationMode": "live-runtime", "fixtureDerived": false,
        "runtime": {"family": "rust", "implementationId": "lychd", "instanceId": "i-1", "identityDigest": d},
        "sourceBinding": {"repository": "lychd", "revision": "abc123", "treeDigest": d},
        "adapter": {"id": "standalone", "digest": d, "mappingId": "standalone-v1", "mappingDigest": d},
        "validator": {"id": "helmloop-core", "digest": d},
        "protocolVersion": "0.1", "schemaBundleDigest": d, "fixtureSetId": "core-1", "fixtureSetDigest": d,
        "acceptancePolicyDigest": d,
        "caseResults": {"format": "helmloop-semantic-case-results/v1", "digest": d, "caseCount": 3, "failureCount": 0},
        "producerVerification": {"receiptDigest": d, "verifierId": "verifier-1"},
        "timing": {"startedAt": "2025-01-01T00:00:00.000Z", "finishedAt": "2025-01-01T00:01:00.000Z"},
        "limitations": ["single host"], "digest": d
    });
    assert_eq!(
        schema::validate(Shape::PortabilityReceipt, &receipt),
        vec![]
    );
    let mut bad = receipt;
    bad.as_object_mut().unwrap().remove("limitations");
    assert!(
        schema::validate(Shape::PortabilityReceipt, &bad)
            .iter()
            .any(|i| i.instance_path == "/limitations")
    );

    let input = parse(&crate::read_fixture("bundles/evaluation-input.json"))
        .unwrap()
        .to_serde();
    let mut ctx = input["context"].clone();
    assert_eq!(schema::validate(Shape::EvaluationContext, &ctx), vec![]);
    ctx["evidenceMaxAgeMs"] = json!(0);
    assert!(
        schema::validate(Shape::EvaluationContext, &ctx)
            .iter()
            .any(|i| i.instance_path == "/evidenceMaxAgeMs")
    );
    ctx["evidenceMaxAgeMs"] = json!("1000");
    assert!(
        schema::validate(Shape::EvaluationContext, &ctx)
            .iter()
            .any(|i| i.instance_path == "/evidenceMaxAgeMs")
    );
}

fn schema_files() -> Vec<(String, Json)> {
    let dir = crate::repo_root().join("schemas");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("schemas/ exists") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".schema.json") {
            let j: Json = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            out.push((name, j));
        }
    }
    out
}

#[test]
fn schema_files_are_valid_2020_12_and_match_the_embedded_copies() {
    schema::self_check().expect("embedded schemas compile");
    let files = schema_files();
    assert!(files.len() >= 10);
    for (name, j) in &files {
        jsonschema::meta::validate(j)
            .unwrap_or_else(|e| panic!("{name} is not a valid schema: {e}"));
        assert_eq!(
            j["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name}"
        );
        let embedded = match name.as_str() {
            "helmloop-v0.1.schema.json" => schema::BUNDLE_JSON,
            "portability-receipt.schema.json" => schema::PORTABILITY_RECEIPT_JSON,
            other => RecordType::ALL
                .into_iter()
                .find(|t| t.entry_file() == other)
                .unwrap_or_else(|| panic!("unexpected schema file {other}"))
                .entry_json(),
        };
        assert_eq!(
            &serde_json::from_str::<Json>(embedded).unwrap(),
            j,
            "{name}"
        );
    }
    let bundle: Json = serde_json::from_str(schema::BUNDLE_JSON).unwrap();
    for t in RecordType::ALL {
        let entry: Json = serde_json::from_str(t.entry_json()).unwrap();
        assert_eq!(
            entry["$ref"],
            format!("helmloop-v0.1.schema.json#/$defs/{t}")
        );
        assert!(bundle["$defs"].get(t.as_str()).is_some(), "no $defs/{t}");
    }
    for def in ["EvaluationContext", "EvaluationInput", "ReductionResult"] {
        assert!(bundle["$defs"].get(def).is_some(), "no $defs/{def}");
    }
}

/// Every object schema with properties is closed, except the application payload.
#[test]
fn every_object_in_the_bundle_is_closed() {
    fn walk(j: &Json, path: &str, open: &mut Vec<String>) {
        match j {
            Json::Object(m) => {
                if m.contains_key("properties")
                    && m.get("additionalProperties") != Some(&Json::Bool(false))
                {
                    let in_conditional = ["/if", "/then", "/else", "/allOf"]
                        .iter()
                        .any(|k| path.contains(k));
                    if !in_conditional {
                        open.push(path.to_owned());
                    }
                }
                for (k, v) in m {
                    walk(v, &format!("{path}/{k}"), open);
                }
            }
            Json::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    walk(v, &format!("{path}/{i}"), open);
                }
            }
            _ => {}
        }
    }
    let mut open = Vec::new();
    for (name, j) in schema_files() {
        walk(&j, &name, &mut open);
    }
    // AnyRecord only dispatches on recordType; each branch is a closed record.
    open.retain(|p| !p.ends_with("$defs/AnyRecord"));
    assert!(open.is_empty(), "open object schemas: {open:#?}");
    let bundle: Json = serde_json::from_str(schema::BUNDLE_JSON).unwrap();
    assert_eq!(
        bundle["$defs"]["ApplicationPayload"],
        json!({
            "description": "Application payload object: the only kind of open object in the bundle.",
            "type": "object"
        })
    );
}
