//! The adapter SDK, both mappings, the host path and both adapter
//! conformance suites (`fixtures/helmloop/adapters/`), through the library
//! and through the `helmloop` binary.

use std::process::Command;

use lychd_helmloop::adapter::host::{HostOutcome, evaluate};
use lychd_helmloop::adapter::sdk::{
    AdapterCode, ContractCapability, Draft, ObservationType, SealError, UNVERIFIED_OBSERVATION,
    check_collection, seal,
};
use lychd_helmloop::adapter::suite::{AdapterCase, AdapterManifest, AdapterReport, Selection};
use lychd_helmloop::adapter::{Adapter, MappingStatus};
use lychd_helmloop::conformance::{Case, Report, parse_manifest};
use lychd_helmloop::reduce::{Disposition, EvaluationInput, ReasonCode, reduce};
use lychd_helmloop::schema::RecordType;
use lychd_helmloop::{Map, Value, parse, record_digest};

use crate::read_fixture;

const BIN: &str = env!("CARGO_BIN_EXE_helmloop");

fn selection() -> Selection {
    Selection::parse(&read_fixture("adapters/selection.json")).expect("selection parses")
}

fn manifest(a: Adapter) -> AdapterManifest {
    AdapterManifest::parse(&read_fixture(&format!(
        "adapters/{}/manifest.json",
        a.name()
    )))
    .expect("manifest parses")
}

fn cases(a: Adapter) -> Vec<AdapterCase> {
    manifest(a)
        .cases
        .iter()
        .map(|(id, file, digest)| {
            let c = AdapterCase::parse(&read_fixture(&format!("adapters/{}/{file}", a.name())))
                .unwrap_or_else(|e| panic!("{id}: {e}"));
            assert_eq!(&c.case_id, id);
            assert_eq!(&c.case_digest.render(), digest, "{id}: digest drifted");
            c
        })
        .collect()
}

fn adapter_case(a: Adapter, slug: &str) -> AdapterCase {
    cases(a)
        .into_iter()
        .find(|c| c.case_id.ends_with(&format!("-{slug}")))
        .unwrap_or_else(|| panic!("no case {slug}"))
}

fn report(a: Adapter) -> AdapterReport {
    AdapterReport::run(a, selection(), &manifest(a), &cases(a), Vec::new())
}

#[test]
fn the_adapter_fixtures_match_their_generator() {
    let out = Command::new("python3")
        .arg(crate::fixture("gen_adapter_cases.py"))
        .arg("--check")
        .output()
        .expect("python3 runs (needed to check the adapter fixtures)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_standalone_suite_passes_as_fixture_evidence() {
    suite_passes(Adapter::Standalone);
}

#[test]
fn the_better_workflows_suite_passes_as_fixture_evidence() {
    suite_passes(Adapter::BetterWorkflows);
}

fn suite_passes(a: Adapter) {
    let r = report(a);
    let failed: Vec<String> = r
        .results
        .iter()
        .filter(|c| !c.passed())
        .map(|c| format!("{}: {:?}", c.case_id, c.failures))
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(r.fixture_errors.is_empty(), "{:?}", r.fixture_errors);
    assert!(r.all_passed());
    let v = r.to_value();
    assert_eq!(v.get("evidenceClass"), Some(&Value::from("fixture")));
    assert_eq!(v.get("runtimeObservation"), Some(&Value::Bool(false)));
    assert_eq!(v.get("portabilityEligible"), Some(&Value::Bool(false)));
    assert_eq!(
        v.get("fixtureSetId"),
        Some(&Value::from("helmloop-adapter-selection-v0.1"))
    );
    assert_eq!(
        v.get("fixtureManifestId").and_then(Value::as_str),
        Some(manifest(a).fixture_manifest_id.as_str())
    );
    let mapping = v.get("mapping").expect("mapping identity");
    assert_eq!(
        mapping.get("mappingId").and_then(Value::as_str),
        Some(a.name())
    );
    // Every selected semantic case, and the adapter-only cases of each outcome.
    let sel = selection();
    let semantic = r.results.iter().filter(|c| c.semantic_case_id.is_some());
    assert_eq!(semantic.count(), sel.cases.len());
    for want in ["REDUCED", "ADAPTER_HOLD", "ADAPTER_REJECT"] {
        let n = v
            .get("adapterCases")
            .and_then(Value::as_array)
            .expect("cases")
            .iter()
            .filter(|c| c.get("hostOutcome").and_then(Value::as_str) == Some(want))
            .count();
        assert!(n >= 2, "{}: {n} case(s) {want}", a.name());
    }
}

#[test]
fn the_two_suites_share_the_fixture_set_and_differ_in_manifest_and_mapping() {
    let s = report(Adapter::Standalone).to_value();
    let b = report(Adapter::BetterWorkflows).to_value();
    for k in ["fixtureSetId", "fixtureSetDigest"] {
        assert_eq!(s.get(k), b.get(k), "{k}");
    }
    for k in ["fixtureManifestId", "fixtureManifestDigest", "mapping"] {
        assert_ne!(s.get(k), b.get(k), "{k}");
    }
    // The fixture set digest is derived from the selected core cases' content.
    let (_, entries) = parse_manifest(&read_fixture("core/manifest.json")).expect("core manifest");
    for (id, digest) in &selection().cases {
        assert!(
            entries.iter().any(|(c, _, d)| c == id && d == digest),
            "{id} is not in the core suite with that digest"
        );
    }
}

#[test]
fn the_same_semantic_cases_give_one_normalized_digest_through_core_and_both_adapters() {
    let sel = selection();
    let (_, entries) = parse_manifest(&read_fixture("core/manifest.json")).expect("core manifest");
    let core: Vec<Case> = entries
        .iter()
        .filter(|(id, _, _)| sel.cases.iter().any(|(s, _)| s == id))
        .map(|(_, file, _)| Case::parse(&read_fixture(&format!("core/{file}"))).expect("case"))
        .collect();
    assert_eq!(core.len(), sel.cases.len());
    let core_report = Report::run("core", &sel.fixture_set_id, &core, Vec::new());
    assert!(core_report.all_passed());
    assert_eq!(core_report.fixture_set_digest, sel.fixture_set_digest());
    let core_digest = core_report
        .to_value()
        .get("semanticCaseResultsDigest")
        .cloned()
        .expect("digest");
    for a in Adapter::ALL {
        let (_, digest) = report(a).semantic_results();
        assert_eq!(Value::from(digest.render()), core_digest, "{}", a.name());
    }
    // And the inputs really differ: no adapter case reduces the core input.
    let s = adapter_case(Adapter::Standalone, "pass-baseline");
    let b = adapter_case(Adapter::BetterWorkflows, "pass-baseline");
    assert_ne!(s.records, b.records);
    assert_ne!(s.source, b.source);
}

#[test]
fn a_failing_case_changes_the_normalized_digest() {
    let a = Adapter::Standalone;
    let mut cs = cases(a);
    let (_, good) =
        AdapterReport::run(a, selection(), &manifest(a), &cs, Vec::new()).semantic_results();
    let c = cs
        .iter_mut()
        .find(|c| c.case_id.ends_with("-execution-failed"))
        .expect("case");
    // A mapping that lost the failure would reduce to PASS: the expectation catches it.
    c.expected.reject.clear();
    let r = AdapterReport::run(a, selection(), &manifest(a), &cs, Vec::new());
    assert!(!r.all_passed());
    assert_ne!(r.semantic_results().1, good);
}

#[test]
fn cli_adapter_conformance_exits_0_and_reports_the_core_selection_digest() {
    let core = Command::new(BIN)
        .args(["conformance", "--adapter", "core", "--selection"])
        .output()
        .expect("runs");
    assert_eq!(
        core.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&core.stderr)
    );
    let core = parse(&core.stdout[..core.stdout.len() - 1]).expect("json");
    for a in ["standalone", "better-workflows"] {
        let o = Command::new(BIN)
            .args(["conformance", "--adapter", a])
            .output()
            .expect("runs");
        assert_eq!(
            o.status.code(),
            Some(0),
            "{a}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v = parse(&o.stdout[..o.stdout.len() - 1]).expect("one canonical json line");
        assert_eq!(v.get("adapter"), Some(&Value::from(a)));
        assert_eq!(v.get("evidenceClass"), Some(&Value::from("fixture")));
        assert_eq!(v.get("portabilityEligible"), Some(&Value::Bool(false)));
        for k in [
            "fixtureSetId",
            "fixtureSetDigest",
            "semanticCaseResultsDigest",
        ] {
            assert_eq!(v.get(k), core.get(k), "{a}: {k}");
        }
    }
    // A fixture directory without the adapter's files is a usage error.
    let o = Command::new(BIN)
        .args([
            "conformance",
            "--adapter",
            "standalone",
            "--fixtures",
            "/nonexistent/x",
        ])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn adapters_emit_only_observation_candidates_labelled_unverified() {
    for a in Adapter::ALL {
        for c in cases(a) {
            let r = evaluate(
                a,
                &c.contract(),
                &c.contract_ref,
                &c.context,
                &c.records,
                &c.source,
            );
            let m = r.mapping().expect("the contract validates");
            for cand in m.candidates() {
                assert_eq!(cand.label(), UNVERIFIED_OBSERVATION);
                let t = cand.record().get("recordType").and_then(Value::as_str);
                assert!(
                    matches!(
                        t,
                        Some("ExecutionReceiptV1" | "EvidenceRecordV1" | "ReconciliationRecordV1")
                    ),
                    "{}: {t:?}",
                    c.case_id
                );
                assert_eq!(cand.record().get("contractRef"), Some(&c.contract_ref));
                // The producer is the source's; trust stays the host's.
                assert!(
                    cand.record()
                        .get("source")
                        .and_then(|s| s.get("producer"))
                        .is_some()
                );
            }
            let v = m.to_value();
            assert_eq!(v.get("label"), Some(&Value::from(UNVERIFIED_OBSERVATION)));
        }
    }
}

fn baseline(a: Adapter) -> AdapterCase {
    adapter_case(a, "pass-baseline")
}

#[test]
fn an_adapter_reject_is_terminal_for_the_host() {
    for a in Adapter::ALL {
        let c = baseline(a);
        let mut source = c.source.clone();
        // The source's contract projection names another digest: a supplied contradiction.
        let projection = match a {
            Adapter::Standalone => vec!["contract"],
            Adapter::BetterWorkflows => vec!["helmloop", "contract"],
        };
        set(
            &mut source,
            &[projection.as_slice(), &["digest"]].concat(),
            Value::from("sha256:0000000000000000000000000000000000000000000000000000000000000000"),
        );
        let outcome = evaluate(
            a,
            &c.contract(),
            &c.contract_ref,
            &c.context,
            &c.records,
            &source,
        );
        let HostOutcome::AdapterReject(m) = &outcome else {
            panic!("{}: expected an adapter REJECT, got {outcome:?}", a.name());
        };
        assert_eq!(m.status(), MappingStatus::Reject);
        // The candidates are preserved ...
        assert_eq!(m.candidates().len(), 4);
        // ... and they are well-formed: fed to the reducer as if READY they would PASS,
        assert_eq!(reduce_as_if_ready(&c, m), Disposition::Pass);
        // ... but the host neither reduces nor lets them be made READY.
        assert!(outcome.reduction().is_none());
        assert!(m.clone().into_ready().is_err());
        let s = outcome.semantic();
        assert_eq!(s.disposition, "REJECT");
        assert!(
            s.reject
                .contains(&"ADAPTER_CONTRACT_CONTRADICTION".to_owned())
        );
        assert!(s.reject.contains(&"REF_DIGEST_MISMATCH".to_owned()));
        assert_eq!(s.axes, lychd_helmloop::reduce::Axes::UNEVALUATED);
    }
}

/// What a host that ignored the adapter's REJECT would get.
fn reduce_as_if_ready(c: &AdapterCase, m: &lychd_helmloop::adapter::MappingResult) -> Disposition {
    let mut records = c.records.clone();
    records.extend(m.candidates().iter().map(|x| x.record().clone()));
    let mut input = Map::new();
    input.insert("protocolVersion", "0.1".into());
    input.insert("context", c.context.clone());
    input.insert("records", Value::Array(records));
    reduce(&EvaluationInput::from_value(Value::Object(input))).disposition
}

fn set(v: &mut Value, path: &[&str], to: Value) {
    let Value::Object(m) = v else {
        panic!("not an object")
    };
    if path.len() == 1 {
        m.insert(path[0], to);
    } else {
        set(m.get_mut(path[0]).expect("member"), &path[1..], to);
    }
}

fn remove(v: &mut Value, path: &[&str]) {
    let Value::Object(m) = v else {
        panic!("not an object")
    };
    if path.len() == 1 {
        m.remove(path[0]);
    } else {
        remove(m.get_mut(path[0]).expect("member"), &path[1..]);
    }
}

fn codes(
    r: &[lychd_helmloop::adapter::sdk::AdapterReason],
) -> Vec<(AdapterCode, Option<ReasonCode>)> {
    r.iter().map(|r| (r.adapter, r.protocol)).collect()
}

#[test]
fn the_capability_validates_the_complete_digest_valid_contract_and_exact_reference() {
    let c = baseline(Adapter::Standalone);
    let contract = c.contract();
    assert!(ContractCapability::validate(&contract, &c.contract_ref).is_ok());
    // Tampered body: the declared digest no longer binds it.
    let mut tampered = contract.clone();
    set(
        &mut tampered,
        &["desiredOutcome"],
        Value::from("something else"),
    );
    let e = ContractCapability::validate(&tampered, &c.contract_ref).expect_err("tampered");
    assert!(codes(&e).contains(&(
        AdapterCode::ContractInvalid,
        Some(ReasonCode::RecordDigestMismatch)
    )));
    // A purely missing member is HOLD.
    let mut incomplete = contract.clone();
    remove(&mut incomplete, &["stopConditions"]);
    let e = ContractCapability::validate(&incomplete, &c.contract_ref).expect_err("incomplete");
    assert!(
        e.iter()
            .all(|r| r.adapter == AdapterCode::ContractIncomplete),
        "{e:?}"
    );
    assert!(
        e.iter().any(|r| r.path.ends_with("/stopConditions")),
        "{e:?}"
    );
    // An id-only reference is invalid; another digest is a substituted contract.
    let mut id_only = c.contract_ref.clone();
    remove(&mut id_only, &["digest"]);
    let e = ContractCapability::validate(&contract, &id_only).expect_err("id only");
    assert!(codes(&e).contains(&(AdapterCode::ContractInvalid, Some(ReasonCode::RefIdOnly))));
    let mut other = c.contract_ref.clone();
    set(
        &mut other,
        &["digest"],
        Value::from("sha256:1111111111111111111111111111111111111111111111111111111111111111"),
    );
    let e = ContractCapability::validate(&contract, &other).expect_err("other digest");
    assert!(codes(&e).contains(&(
        AdapterCode::ContractInvalid,
        Some(ReasonCode::RefDigestMismatch)
    )));
    let mut wrong_type = c.contract_ref.clone();
    set(
        &mut wrong_type,
        &["recordType"],
        Value::from("PromotionDecisionV1"),
    );
    let e = ContractCapability::validate(&contract, &wrong_type).expect_err("type");
    assert!(codes(&e).contains(&(
        AdapterCode::ContractInvalid,
        Some(ReasonCode::RefTypeMismatch)
    )));
    // A draft contract, re-sealed so its digest is right, is HOLD.
    let mut draft = contract.clone();
    set(&mut draft, &["status"], Value::from("draft"));
    let d = record_digest(&draft).expect("digest").render();
    set(&mut draft, &["digest"], Value::from(d.as_str()));
    let mut draft_ref = c.contract_ref.clone();
    set(&mut draft_ref, &["digest"], Value::from(d.as_str()));
    let e = ContractCapability::validate(&draft, &draft_ref).expect_err("draft");
    assert_eq!(
        codes(&e),
        vec![(
            AdapterCode::ContractNotActive,
            Some(ReasonCode::ContractNotActive)
        )]
    );
    // No contract at all.
    let e = ContractCapability::validate(&Value::Null, &c.contract_ref).expect_err("none");
    assert!(
        e.iter()
            .all(|r| r.adapter.channel() == lychd_helmloop::validate::Channel::Hold)
    );
    // The host refuses to map anything without a capability.
    let o = evaluate(
        Adapter::Standalone,
        &tampered,
        &c.contract_ref,
        &c.context,
        &c.records,
        &c.source,
    );
    assert!(matches!(o, HostOutcome::ContractRefused(_)));
    assert_eq!(o.semantic().disposition, "REJECT");
}

fn draft(t: ObservationType, id: &str, body: Map) -> Draft {
    Draft {
        record_type: t,
        id: id.to_owned(),
        system: "sys".to_owned(),
        producer: "runner-7".to_owned(),
        locator: format!("file:///log#{id}"),
        issued_at: "2025-01-21T08:00:05.000Z".to_owned(),
        body,
        origin: format!("/entries/{id}"),
    }
}

fn body_of(record: &Value) -> Map {
    const ENVELOPE: [&str; 10] = [
        "schemaVersion",
        "recordType",
        "id",
        "subject",
        "source",
        "revision",
        "policy",
        "issuedAt",
        "digest",
        "contractRef",
    ];
    record
        .as_object()
        .expect("object")
        .iter()
        .filter(|(k, _)| !ENVELOPE.contains(k))
        .map(|(k, v)| (k.to_owned(), v.clone()))
        .collect()
}

#[test]
fn sealing_binds_the_capability_and_refuses_envelope_members() {
    let c = baseline(Adapter::Standalone);
    let cap = ContractCapability::validate(&c.contract(), &c.contract_ref).expect("cap");
    let m = Adapter::Standalone.map(&cap, &c.source);
    let ev = m
        .candidates()
        .iter()
        .find(|x| x.record_type() == ObservationType::EvidenceRecord)
        .expect("evidence");
    let body = body_of(ev.record());
    let sealed = seal(
        &cap,
        draft(ObservationType::EvidenceRecord, "ev-x", body.clone()),
    )
    .expect("seals");
    assert_eq!(sealed.record().get("contractRef"), Some(cap.reference()));
    assert_eq!(
        sealed.record().get("subject"),
        cap.contract().get("subject")
    );
    assert_eq!(
        sealed.record().get("digest").and_then(Value::as_str),
        Some(record_digest(sealed.record()).expect("d").render().as_str())
    );
    assert_eq!(
        sealed.exact_ref().get("digest").and_then(Value::as_str),
        Some(sealed.digest().render().as_str())
    );
    // The envelope is the capability's: a body cannot smuggle its own binding.
    let mut smuggled = body.clone();
    smuggled.insert("contractRef", Value::Null);
    assert_eq!(
        seal(
            &cap,
            draft(ObservationType::EvidenceRecord, "ev-y", smuggled)
        ),
        Err(SealError::EnvelopeMember("contractRef".into()))
    );
    // A body that is not a valid record of the type does not seal.
    assert_eq!(
        seal(&cap, draft(ObservationType::ExecutionReceipt, "r-x", body)),
        Err(SealError::Schema)
    );
    // Only the three observation types exist to seal.
    let types = [
        ObservationType::ExecutionReceipt,
        ObservationType::EvidenceRecord,
        ObservationType::ReconciliationRecord,
    ];
    assert_eq!(
        types.map(ObservationType::record_type),
        [
            RecordType::ExecutionReceipt,
            RecordType::EvidenceRecord,
            RecordType::ReconciliationRecord
        ]
    );
}

#[test]
fn collection_contradictions_report_both_codes_and_keep_the_candidates() {
    let c = baseline(Adapter::Standalone);
    let cap = ContractCapability::validate(&c.contract(), &c.contract_ref).expect("cap");
    let mapped = Adapter::Standalone.map(&cap, &c.source);
    assert_eq!(mapped.status(), MappingStatus::Ready);
    let mut cands = mapped.candidates().to_vec();
    assert!(check_collection(&cap, &cands).is_empty());
    // One identity, two digests.
    let ev = cands
        .iter()
        .find(|x| x.record_type() == ObservationType::EvidenceRecord)
        .expect("evidence")
        .clone();
    let mut body = body_of(ev.record());
    body.insert("claim", "another body".into());
    let mut d = draft(ObservationType::EvidenceRecord, ev.id(), body);
    d.producer = ev
        .record()
        .get("source")
        .and_then(|s| s.get("producer"))
        .and_then(Value::as_str)
        .expect("p")
        .into();
    cands.push(seal(&cap, d).expect("seals"));
    let r = check_collection(&cap, &cands);
    assert_eq!(
        codes(&r),
        vec![(
            AdapterCode::IdentityTwoDigests,
            Some(ReasonCode::RecordEquivocation)
        )]
    );
    assert_eq!(cands.len(), 5, "nothing dropped");
    // A provider query before its receipt's terminal boundary.
    let recon = cands
        .iter()
        .find(|x| x.record_type() == ObservationType::ReconciliationRecord)
        .expect("recon")
        .clone();
    let mut body = body_of(recon.record());
    let mut q = body
        .get("query")
        .and_then(Value::as_object)
        .expect("query")
        .clone();
    q.insert("observedAt", "2025-01-20T10:09:29.999Z".into());
    body.insert("query", Value::Object(q));
    let premature = seal(
        &cap,
        draft(ObservationType::ReconciliationRecord, "recon-early", body),
    )
    .expect("seals");
    let r = check_collection(&cap, &[mapped.candidates()[0].clone(), premature]);
    assert_eq!(
        codes(&r),
        vec![(
            AdapterCode::QueryBeforeTerminal,
            Some(ReasonCode::ReconciliationPremature)
        )]
    );
    // Every protocol code sits in its adapter code's channel.
    for a in AdapterCode::ALL {
        assert!(a.as_str().starts_with("ADAPTER_"));
        assert_eq!(AdapterCode::from_code(a.as_str()), Some(*a));
    }
}

#[test]
fn holds_are_only_for_missing_unknown_drifted_unsupported_or_lossy_input() {
    use lychd_helmloop::validate::Channel;
    let hold = [
        AdapterCode::ContractIncomplete,
        AdapterCode::ContractNotActive,
        AdapterCode::ContractDrift,
        AdapterCode::VersionUnsupported,
        AdapterCode::RequiredInputMissing,
        AdapterCode::UnsupportedField,
        AdapterCode::LossyInput,
        AdapterCode::ValueUnsupported,
        AdapterCode::ReferenceUnresolved,
        AdapterCode::AttemptNotTerminal,
    ];
    for a in AdapterCode::ALL {
        assert_eq!(a.channel() == Channel::Hold, hold.contains(a), "{a}");
    }
    // A mapped semantic violation in a source is REJECT, for both adapters.
    for a in Adapter::ALL {
        for c in cases(a) {
            let o = evaluate(
                a,
                &c.contract(),
                &c.contract_ref,
                &c.context,
                &c.records,
                &c.source,
            );
            if let Some(m) = o.mapping()
                && m.status() == MappingStatus::Reject
            {
                assert!(matches!(o, HostOutcome::AdapterReject(_)), "{}", c.case_id);
                assert!(
                    !m.candidates().is_empty(),
                    "{}: candidates preserved",
                    c.case_id
                );
            }
        }
    }
}

/// The `compile_fail` snippets of `adapter::sdk`, each with the error code it names.
fn compile_fail_snippets() -> Vec<(String, String)> {
    let src =
        std::fs::read_to_string(crate::repo_root().join("shared/helmloop/src/adapter/sdk.rs"))
            .expect("sdk source");
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in src.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = doc.strip_prefix(' ').unwrap_or(doc);
        match (&mut current, doc.strip_prefix("```compile_fail,")) {
            (None, Some(code)) => current = Some((code.trim().to_owned(), String::new())),
            (Some(_), _) if doc.trim() == "```" => out.extend(current.take()),
            (Some((_, body)), _) => {
                body.push_str(doc);
                body.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// The crate's rlib next to this test binary (the newest, should there be several).
fn helmloop_rlib() -> std::path::PathBuf {
    let deps = std::env::current_exe()
        .expect("test binary")
        .parent()
        .expect("deps dir")
        .to_path_buf();
    std::fs::read_dir(&deps)
        .expect("deps")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("liblychd_helmloop-") && n.ends_with(".rlib"))
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("liblychd_helmloop rlib")
}

#[test]
fn raw_bindings_cannot_be_sealed_and_each_compile_fail_snippet_fails_for_its_stated_reason() {
    let snippets = compile_fail_snippets();
    assert_eq!(snippets.len(), 4, "{snippets:?}");
    let rlib = helmloop_rlib();
    let deps = rlib.parent().expect("deps").to_path_buf();
    let dir = std::env::temp_dir().join(format!("helmloop-compile-fail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    for (n, (code, body)) in snippets.iter().enumerate() {
        let file = dir.join(format!("snippet{n}.rs"));
        std::fs::write(&file, format!("#![allow(dead_code, unused)]\n{body}")).expect("write");
        let out = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
            .args([
                "--edition",
                "2024",
                "--crate-type",
                "lib",
                "--emit",
                "metadata",
            ])
            .arg(&file)
            .arg("--extern")
            .arg(format!("lychd_helmloop={}", rlib.display()))
            .arg("-L")
            .arg(format!("dependency={}", deps.display()))
            .arg("--out-dir")
            .arg(&dir)
            .output()
            .expect("rustc runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "snippet {n} compiled:\n{body}");
        let codes: std::collections::BTreeSet<&str> = stderr
            .match_indices("error[E")
            .map(|(i, _)| &stderr[i + 6..i + 11])
            .collect();
        assert_eq!(
            codes.into_iter().collect::<Vec<_>>(),
            vec![code.as_str()],
            "snippet {n} must fail only with {code}:\n{stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn each_mapping_identity_is_the_digest_of_its_declared_table() {
    use lychd_helmloop::adapter::{better_workflows, standalone};
    for (a, table, format) in [
        (
            Adapter::Standalone,
            standalone::MAPPING_TABLE,
            standalone::SOURCE_FORMAT,
        ),
        (
            Adapter::BetterWorkflows,
            better_workflows::MAPPING_TABLE,
            better_workflows::SOURCE_FORMAT,
        ),
    ] {
        let id = a.identity();
        let parsed = parse(table.as_bytes()).expect("the mapping table is strict HL-C14N-1 JSON");
        assert_eq!(
            id.mapping_digest,
            lychd_helmloop::binding_digest(&parsed).expect("digest")
        );
        assert_eq!(id.source_format, format);
        assert_eq!(parsed.get("sourceFormat"), Some(&Value::from(format)));
        assert_eq!(
            parsed.get("label"),
            Some(&Value::from(UNVERIFIED_OBSERVATION))
        );
        assert_eq!(Adapter::from_name(a.name()), Some(a));
    }
    assert_ne!(
        Adapter::Standalone.identity().mapping_digest,
        Adapter::BetterWorkflows.identity().mapping_digest
    );
}
