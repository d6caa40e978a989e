//! Adapter conformance (spec §9): per adapter, source inputs for the same
//! selected semantic cases of the core suite, mapped, then reduced through
//! the host path ([`super::host`]), and reported as the core suite is.
//!
//! Pure: the caller reads the files. `fixtures/helmloop/adapters/` holds
//! `selection.json` (the shared `fixtureSetId` and the core case digests the
//! content-derived `fixtureSetDigest` is computed from) and, per adapter,
//! `manifest.json` (its own fixture-manifest id) plus `cases/`. A case is
//! `{caseId, description, semanticCaseId?, semanticCaseDigest?,
//! expectedMapping, expected, host {contractRef, context, records}, source}`.
//! Reports are fixture evidence: `evidenceClass: fixture`,
//! `runtimeObservation: false`, `portabilityEligible: false`.

use std::collections::BTreeSet;

use super::host::{HostOutcome, Semantic, evaluate};
use super::sdk::AdapterCode;
use super::{Adapter, MappingStatus};
use crate::conformance::{
    CaseError, Expected, Failure, ManifestEntry, compare_semantic, fixture_set_digest, int,
    normalized_case_result, normalized_results, report_json,
};
use crate::digest::{Digest, binding_digest};
use crate::reduce::ReasonCode;
use crate::utf16::cmp_utf16;
use crate::validate::Channel;
use crate::value::{Map, Value};
use crate::{CANONICAL_PROFILE, PROTOCOL_VERSION, parse};

/// Name of the adapter report format.
pub const ADAPTER_REPORT_TYPE: &str = "helmloop-adapter-conformance-report/v1";

/// The shared selection of semantic cases.
#[derive(Debug, Clone)]
pub struct Selection {
    /// The shared `fixtureSetId`.
    pub fixture_set_id: String,
    /// `(core caseId, core caseDigest)`, in file order.
    pub cases: Vec<(String, String)>,
}

impl Selection {
    /// Reads `selection.json`.
    pub fn parse(bytes: &[u8]) -> Result<Selection, CaseError> {
        let doc = parse(bytes).map_err(|e| CaseError(format!("selection: {e}")))?;
        let id = str_of(&doc, "fixtureSetId", "selection")?;
        let mut cases = Vec::new();
        for c in doc.get("cases").and_then(Value::as_array).unwrap_or(&[]) {
            cases.push((
                str_of(c, "caseId", "selection case")?,
                str_of(c, "caseDigest", "selection case")?,
            ));
        }
        if cases.is_empty() {
            return Err(CaseError("selection: no cases".into()));
        }
        Ok(Selection {
            fixture_set_id: id,
            cases,
        })
    }

    /// The content-derived `fixtureSetDigest`: the same function as the core
    /// suite's, over the selected core case digests.
    pub fn fixture_set_digest(&self) -> Digest {
        let digests: Vec<Digest> = self
            .cases
            .iter()
            .filter_map(|(_, d)| Digest::parse(d))
            .collect();
        fixture_set_digest(&self.fixture_set_id, &digests)
    }
}

fn str_of(v: &Value, k: &str, what: &str) -> Result<String, CaseError> {
    v.get(k)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| CaseError(format!("{what}: {k} missing")))
}

/// One adapter's fixture manifest.
#[derive(Debug, Clone)]
pub struct AdapterManifest {
    /// `fixtureManifestId`.
    pub fixture_manifest_id: String,
    /// Binding digest of the manifest document.
    pub fixture_manifest_digest: Digest,
    /// `adapter`.
    pub adapter: String,
    /// `fixtureSetId` (must be the selection's).
    pub fixture_set_id: String,
    /// `(caseId, file, caseDigest)`.
    pub cases: Vec<ManifestEntry>,
}

impl AdapterManifest {
    /// Reads an adapter `manifest.json`.
    pub fn parse(bytes: &[u8]) -> Result<AdapterManifest, CaseError> {
        let doc = parse(bytes).map_err(|e| CaseError(format!("manifest: {e}")))?;
        let digest = binding_digest(&doc).map_err(|e| CaseError(format!("manifest: {e}")))?;
        let mut cases = Vec::new();
        for c in doc.get("cases").and_then(Value::as_array).unwrap_or(&[]) {
            cases.push((
                str_of(c, "caseId", "manifest case")?,
                str_of(c, "file", "manifest case")?,
                str_of(c, "caseDigest", "manifest case")?,
            ));
        }
        Ok(AdapterManifest {
            fixture_manifest_id: str_of(&doc, "fixtureManifestId", "manifest")?,
            fixture_manifest_digest: digest,
            adapter: str_of(&doc, "adapter", "manifest")?,
            fixture_set_id: str_of(&doc, "fixtureSetId", "manifest")?,
            cases,
        })
    }
}

/// What a case expects of the mapping itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedMapping {
    /// `READY`, `HOLD` or `REJECT`.
    pub status: String,
    /// Reject-channel codes (adapter and protocol), complete.
    pub reject: BTreeSet<String>,
    /// Hold-channel codes, complete.
    pub hold: BTreeSet<String>,
    /// Gaps (JSON Pointers), complete.
    pub gaps: BTreeSet<String>,
    /// Unsupported fields (JSON Pointers), complete.
    pub unsupported: BTreeSet<String>,
    /// The exact candidate digests, when the case pins them.
    pub candidate_digests: Option<BTreeSet<String>>,
    /// The number of candidates, when the case pins only that.
    pub candidate_count: Option<usize>,
}

/// One adapter conformance case.
#[derive(Debug, Clone)]
pub struct AdapterCase {
    /// `caseId`.
    pub case_id: String,
    /// Binding digest of the case document.
    pub case_digest: Digest,
    /// The core case this one reproduces (shared selection cases only).
    pub semantic_case_id: Option<String>,
    /// That core case's digest.
    pub semantic_case_digest: Option<String>,
    /// What the mapping must return.
    pub expected_mapping: ExpectedMapping,
    /// What the host outcome must be (the core expectation for a selected case).
    pub expected: Expected,
    /// The host's exact contract reference.
    pub contract_ref: Value,
    /// The host's evaluation context.
    pub context: Value,
    /// The host's own records (the contract and every owner record).
    pub records: Vec<Value>,
    /// The adapter's source document.
    pub source: Value,
}

fn set(v: Option<&Value>, what: &str) -> Result<BTreeSet<String>, CaseError> {
    v.and_then(Value::as_array)
        .ok_or_else(|| CaseError(format!("{what} is not an array")))?
        .iter()
        .map(|x| {
            x.as_str()
                .map(str::to_owned)
                .ok_or_else(|| CaseError(format!("{what} holds a non-string")))
        })
        .collect()
}

impl AdapterCase {
    /// Parses a case document (strict HL-C14N-1).
    pub fn parse(bytes: &[u8]) -> Result<AdapterCase, CaseError> {
        let doc = parse(bytes).map_err(|e| CaseError(e.to_string()))?;
        let case_digest = binding_digest(&doc).map_err(|e| CaseError(e.to_string()))?;
        let case_id = str_of(&doc, "caseId", "case")?;
        let em = doc
            .get("expectedMapping")
            .ok_or_else(|| CaseError(format!("{case_id}: expectedMapping missing")))?;
        let expected_mapping = ExpectedMapping {
            status: str_of(em, "status", "expectedMapping")?,
            reject: set(em.get("reject"), "expectedMapping.reject")?,
            hold: set(em.get("hold"), "expectedMapping.hold")?,
            gaps: set(em.get("gaps"), "expectedMapping.gaps")?,
            unsupported: set(
                em.get("unsupportedFields"),
                "expectedMapping.unsupportedFields",
            )?,
            candidate_digests: em
                .get("candidateDigests")
                .map(|v| set(Some(v), "expectedMapping.candidateDigests"))
                .transpose()?,
            candidate_count: em
                .get("candidateCount")
                .and_then(Value::as_i64)
                .and_then(|n| usize::try_from(n).ok()),
        };
        // The host expectation has the core case shape; reuse its reader.
        let mut shell = Map::new();
        shell.insert("caseId", case_id.as_str().into());
        shell.insert(
            "expected",
            doc.get("expected")
                .cloned()
                .ok_or_else(|| CaseError(format!("{case_id}: expected missing")))?,
        );
        shell.insert("input", Value::Null);
        let expected = crate::conformance::Case::from_value(Value::Object(shell))?.expected;
        let host = doc
            .get("host")
            .ok_or_else(|| CaseError(format!("{case_id}: host missing")))?;
        Ok(AdapterCase {
            semantic_case_id: doc
                .get("semanticCaseId")
                .and_then(Value::as_str)
                .map(str::to_owned),
            semantic_case_digest: doc
                .get("semanticCaseDigest")
                .and_then(Value::as_str)
                .map(str::to_owned),
            expected_mapping,
            expected,
            contract_ref: host.get("contractRef").cloned().unwrap_or(Value::Null),
            context: host.get("context").cloned().unwrap_or(Value::Null),
            records: host
                .get("records")
                .and_then(Value::as_array)
                .map(<[Value]>::to_vec)
                .unwrap_or_default(),
            source: doc.get("source").cloned().unwrap_or(Value::Null),
            case_id,
            case_digest,
        })
    }

    /// The host's contract: its record named by the exact reference.
    pub fn contract(&self) -> Value {
        let id = self.contract_ref.get("id");
        let digest = self.contract_ref.get("digest");
        self.records
            .iter()
            .find(|r| {
                r.get("recordType").and_then(Value::as_str) == Some("OutcomeContractV1")
                    && r.get("id") == id
                    && r.get("digest") == digest
            })
            .cloned()
            .unwrap_or(Value::Null)
    }
}

/// The channel of a protocol or adapter code.
pub fn code_channel(c: &str) -> Option<Channel> {
    ReasonCode::from_code(c)
        .map(ReasonCode::channel)
        .or_else(|| AdapterCode::from_code(c).map(AdapterCode::channel))
}

/// The outcome of one adapter case.
#[derive(Debug, Clone)]
pub struct AdapterCaseResult {
    /// `caseId`.
    pub case_id: String,
    /// Binding digest of the case document.
    pub case_digest: Digest,
    /// The shared semantic case, if any.
    pub semantic_case_id: Option<String>,
    /// What the host did.
    pub outcome: HostOutcome,
    /// Its semantic view.
    pub semantic: Semantic,
    /// Every difference from the expectations (mapping and host).
    pub failures: Vec<Failure>,
}

impl AdapterCaseResult {
    /// Whether the case passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

fn set_failures(
    check: &str,
    want: &BTreeSet<String>,
    got: &BTreeSet<String>,
    out: &mut Vec<Failure>,
) {
    for c in want.difference(got) {
        out.push(Failure {
            check: check.to_owned(),
            expected: c.clone(),
            actual: String::new(),
        });
    }
    for c in got.difference(want) {
        out.push(Failure {
            check: check.to_owned(),
            expected: String::new(),
            actual: c.clone(),
        });
    }
}

/// Maps the case's source, reduces through the host path, and compares both
/// the mapping and the host outcome with the case's expectations.
pub fn run_adapter_case(adapter: Adapter, case: &AdapterCase) -> AdapterCaseResult {
    let outcome = evaluate(
        adapter,
        &case.contract(),
        &case.contract_ref,
        &case.context,
        &case.records,
        &case.source,
    );
    let semantic = outcome.semantic();
    let mut failures = Vec::new();
    let em = &case.expected_mapping;
    let fail = |check: &str, expected: &str, actual: &str| Failure {
        check: check.to_owned(),
        expected: expected.to_owned(),
        actual: actual.to_owned(),
    };
    match outcome.mapping() {
        None => failures.push(fail("mapping.status", &em.status, "CONTRACT_REFUSED")),
        Some(m) => {
            if m.status().as_str() != em.status {
                failures.push(fail("mapping.status", &em.status, m.status().as_str()));
            }
            let codes = |ch| m.codes(ch).into_iter().collect::<BTreeSet<_>>();
            set_failures(
                "mapping.reject",
                &em.reject,
                &codes(Channel::Reject),
                &mut failures,
            );
            set_failures(
                "mapping.hold",
                &em.hold,
                &codes(Channel::Hold),
                &mut failures,
            );
            let gaps = m.gaps().iter().cloned().collect();
            set_failures("mapping.gaps", &em.gaps, &gaps, &mut failures);
            let unsupported = m.unsupported_fields().iter().cloned().collect();
            set_failures(
                "mapping.unsupportedFields",
                &em.unsupported,
                &unsupported,
                &mut failures,
            );
            if let Some(want) = &em.candidate_digests {
                let got = m.candidates().iter().map(|c| c.digest().render()).collect();
                set_failures("mapping.candidateDigests", want, &got, &mut failures);
            }
            if let Some(n) = em.candidate_count
                && n != m.candidates().len()
            {
                failures.push(fail(
                    "mapping.candidateCount",
                    &n.to_string(),
                    &m.candidates().len().to_string(),
                ));
            }
            if m.candidates()
                .iter()
                .any(|c| c.label() != super::sdk::UNVERIFIED_OBSERVATION)
            {
                failures.push(fail(
                    "mapping.label",
                    super::sdk::UNVERIFIED_OBSERVATION,
                    "",
                ));
            }
            // A REJECT is terminal: the host must not have reduced it (spec §8).
            if m.status() != MappingStatus::Ready && outcome.reduction().is_some() {
                failures.push(fail("host", "not reduced", "reduced"));
            }
        }
    }
    failures.extend(compare_semantic(
        &case.expected,
        semantic.disposition,
        &semantic.axes.pairs(),
        &semantic.reject,
        &semantic.hold,
        &code_channel,
    ));
    failures.sort_by(|a, b| {
        cmp_utf16(&a.check, &b.check)
            .then_with(|| cmp_utf16(&a.expected, &b.expected))
            .then_with(|| cmp_utf16(&a.actual, &b.actual))
    });
    AdapterCaseResult {
        case_id: case.case_id.clone(),
        case_digest: case.case_digest,
        semantic_case_id: case.semantic_case_id.clone(),
        outcome,
        semantic,
        failures,
    }
}

impl AdapterCaseResult {
    /// The normalized `helmloop-semantic-case-results/v1` entry, for a case of
    /// the shared selection.
    pub fn normalized(&self) -> Option<Value> {
        let id = self.semantic_case_id.as_deref()?;
        Some(normalized_case_result(
            id,
            self.semantic.disposition,
            &self.semantic.axes.pairs(),
            &self.semantic.reject,
            &self.semantic.hold,
            &self.failures,
        ))
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("caseId", self.case_id.as_str().into());
        m.insert("caseDigest", self.case_digest.render().into());
        m.insert(
            "semanticCaseId",
            self.semantic_case_id
                .as_deref()
                .map_or(Value::Null, Value::from),
        );
        let host = match &self.outcome {
            HostOutcome::ContractRefused(_) => "CONTRACT_REFUSED",
            HostOutcome::AdapterHold(_) => "ADAPTER_HOLD",
            HostOutcome::AdapterReject(_) => "ADAPTER_REJECT",
            HostOutcome::Reduced(..) => "REDUCED",
        };
        m.insert("hostOutcome", host.into());
        if let Some(mr) = self.outcome.mapping() {
            let mut v = mr.to_value();
            // The report lists candidate digests, not bodies.
            if let Value::Object(o) = &mut v {
                o.insert(
                    "candidates",
                    Value::Array(mr.candidates().iter().map(|c| c.exact_ref()).collect()),
                );
                o.remove("mapping");
            }
            m.insert("mappingResult", v);
        }
        m.insert("disposition", self.semantic.disposition.into());
        m.insert(
            "failures",
            Value::Array(self.failures.iter().map(Failure::to_value).collect()),
        );
        m.insert("passed", self.passed().into());
        Value::Object(m)
    }
}

/// An adapter conformance report.
#[derive(Debug, Clone)]
pub struct AdapterReport {
    /// Which adapter.
    pub adapter: Adapter,
    /// The shared selection.
    pub selection: Selection,
    /// The adapter's fixture-manifest id and digest.
    pub fixture_manifest: (String, Digest),
    /// Results, sorted by case id.
    pub results: Vec<AdapterCaseResult>,
    /// Problems with the fixture set itself.
    pub fixture_errors: Vec<String>,
}

impl AdapterReport {
    /// Reads the selection, the adapter's manifest and (through `read`, given
    /// a path relative to the manifest) every case, then runs them. A case
    /// that cannot be read or whose id or digest differs from the manifest is
    /// a fixture error; an unreadable selection or manifest is an error.
    pub fn from_files(
        adapter: Adapter,
        selection: &[u8],
        manifest: &[u8],
        read: &dyn Fn(&str) -> Result<Vec<u8>, String>,
    ) -> Result<AdapterReport, CaseError> {
        let selection = Selection::parse(selection)?;
        let manifest = AdapterManifest::parse(manifest)?;
        let mut cases = Vec::new();
        let mut errors = Vec::new();
        for (case_id, rel, digest) in &manifest.cases {
            let case = read(rel)
                .map_err(|e| format!("{case_id}: cannot read {rel}: {e}"))
                .and_then(|b| AdapterCase::parse(&b).map_err(|e| format!("{case_id}: {e}")));
            match case {
                Ok(c) if &c.case_id != case_id => {
                    errors.push(format!("{rel}: caseId differs from manifest"))
                }
                Ok(c) if &c.case_digest.render() != digest => {
                    errors.push(format!("{case_id}: case digest differs from manifest"))
                }
                Ok(c) => cases.push(c),
                Err(e) => errors.push(e),
            }
        }
        Ok(AdapterReport::run(
            adapter, selection, &manifest, &cases, errors,
        ))
    }

    /// Runs every case and checks that the adapter's cases cover the shared
    /// selection exactly once each, with the selection's core digests.
    pub fn run(
        adapter: Adapter,
        selection: Selection,
        manifest: &AdapterManifest,
        cases: &[AdapterCase],
        mut fixture_errors: Vec<String>,
    ) -> AdapterReport {
        if manifest.adapter != adapter.name() {
            fixture_errors.push(format!("manifest is for adapter {}", manifest.adapter));
        }
        if manifest.fixture_set_id != selection.fixture_set_id {
            fixture_errors.push("manifest fixtureSetId differs from the selection".into());
        }
        for (id, digest) in &selection.cases {
            let covering: Vec<&AdapterCase> = cases
                .iter()
                .filter(|c| c.semantic_case_id.as_deref() == Some(id))
                .collect();
            if covering.len() != 1 {
                fixture_errors.push(format!("{id}: covered by {} case(s)", covering.len()));
            }
            for c in covering {
                if c.semantic_case_digest.as_deref() != Some(digest) {
                    fixture_errors.push(format!("{}: semanticCaseDigest differs", c.case_id));
                }
            }
        }
        for c in cases {
            if let Some(id) = &c.semantic_case_id
                && !selection.cases.iter().any(|(s, _)| s == id)
            {
                fixture_errors.push(format!("{}: {id} is not in the selection", c.case_id));
            }
        }
        let mut results: Vec<AdapterCaseResult> =
            cases.iter().map(|c| run_adapter_case(adapter, c)).collect();
        results.sort_by(|a, b| cmp_utf16(&a.case_id, &b.case_id));
        AdapterReport {
            adapter,
            selection,
            fixture_manifest: (
                manifest.fixture_manifest_id.clone(),
                manifest.fixture_manifest_digest,
            ),
            results,
            fixture_errors,
        }
    }

    /// Whether every case passed and the fixture set is intact.
    pub fn all_passed(&self) -> bool {
        self.fixture_errors.is_empty()
            && !self.results.is_empty()
            && self.results.iter().all(AdapterCaseResult::passed)
    }

    /// The normalized semantic results of the shared selection and their digest.
    pub fn semantic_results(&self) -> (Value, Digest) {
        normalized_results(
            &self.selection.fixture_set_id,
            &self.selection.fixture_set_digest(),
            self.results
                .iter()
                .filter_map(AdapterCaseResult::normalized)
                .collect(),
        )
    }

    /// The report value.
    pub fn to_value(&self) -> Value {
        let (semantic, digest) = self.semantic_results();
        let passed = self.results.iter().filter(|r| r.passed()).count();
        let mut summary = Map::new();
        summary.insert("total", int(self.results.len()));
        summary.insert("passed", int(passed));
        summary.insert("failed", int(self.results.len() - passed));
        let mut m = Map::new();
        m.insert("reportType", ADAPTER_REPORT_TYPE.into());
        m.insert("adapter", self.adapter.name().into());
        m.insert("mapping", self.adapter.identity().to_value());
        m.insert("protocolVersion", PROTOCOL_VERSION.into());
        m.insert("canonicalProfile", CANONICAL_PROFILE.into());
        m.insert("evidenceClass", "fixture".into());
        m.insert("runtimeObservation", false.into());
        m.insert("portabilityEligible", false.into());
        m.insert(
            "fixtureSetId",
            self.selection.fixture_set_id.as_str().into(),
        );
        m.insert(
            "fixtureSetDigest",
            self.selection.fixture_set_digest().render().into(),
        );
        m.insert("fixtureManifestId", self.fixture_manifest.0.as_str().into());
        m.insert(
            "fixtureManifestDigest",
            self.fixture_manifest.1.render().into(),
        );
        m.insert("semanticCaseResults", semantic);
        m.insert("semanticCaseResultsDigest", digest.render().into());
        m.insert(
            "adapterCases",
            Value::Array(
                self.results
                    .iter()
                    .map(AdapterCaseResult::to_value)
                    .collect(),
            ),
        );
        m.insert("summary", Value::Object(summary));
        m.insert(
            "fixtureErrors",
            Value::Array(
                self.fixture_errors
                    .iter()
                    .map(|e| Value::from(e.as_str()))
                    .collect(),
            ),
        );
        m.insert("passed", self.all_passed().into());
        Value::Object(m)
    }

    /// Canonical JSON of the report.
    pub fn to_json(&self) -> String {
        report_json(&self.to_value())
    }
}
