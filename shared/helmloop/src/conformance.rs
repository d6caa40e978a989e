//! The core conformance suite runner (spec §6 oracle, §9 reports).
//!
//! Pure: the caller reads the fixture files (the `helmloop conformance` CLI
//! or a test) and hands their bytes over. Each case declares the expected
//! disposition, all six axes and the complete reject and hold code sets; the
//! oracle requires exact set equality, so a missing code, an extra code or a
//! code in the wrong channel fails even when disposition and axes match.
//! Reports are fixture evidence only: `evidenceClass: "fixture"`,
//! `runtimeObservation: false`, `portabilityEligible: false`.

use std::collections::BTreeSet;
use std::fmt;

use crate::digest::{Digest, binding_digest};
use crate::reduce::{EvaluationInput, ReasonCode, ReductionResult, reduce};
use crate::utf16::cmp_utf16;
use crate::validate::Channel;
use crate::value::{Map, Value};
use crate::{CANONICAL_PROFILE, PROTOCOL_VERSION, canon, parse};

/// Name of the per-case result format (spec §9).
pub const SEMANTIC_CASE_RESULTS: &str = "helmloop-semantic-case-results/v1";
/// Name of the report format.
pub const REPORT_TYPE: &str = "helmloop-conformance-report/v1";

/// A case file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseError(pub String);

impl fmt::Display for CaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FIXTURE_INVALID {}", self.0)
    }
}

impl std::error::Error for CaseError {}

/// What a case expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// `PASS`, `HOLD` or `REJECT`.
    pub disposition: String,
    /// `(axis, state)` for the six axes, in spec order.
    pub axes: Vec<(String, String)>,
    /// The complete reject channel.
    pub reject: BTreeSet<String>,
    /// The complete hold channel.
    pub hold: BTreeSet<String>,
    /// Optional `recordStatuses`: `(recordType, id, status)` that every
    /// distinct body with that identity must have in `recordResults`. Used
    /// where the rule under test shows only in record results (resolutions
    /// §H.6: lineage flags computed to a fixed point).
    pub record_statuses: Vec<(String, String, String)>,
}

/// One conformance case.
#[derive(Debug, Clone)]
pub struct Case {
    /// `caseId`.
    pub case_id: String,
    /// Binding digest of the whole case document.
    pub case_digest: Digest,
    /// The evaluation input.
    pub input: EvaluationInput,
    /// The expectation.
    pub expected: Expected,
}

const AXES: [&str; 6] = [
    "execution",
    "evidence",
    "authority",
    "promotion",
    "reconciliation",
    "observedOutcome",
];

fn strings(v: Option<&Value>, what: &str) -> Result<BTreeSet<String>, CaseError> {
    let items = v
        .and_then(Value::as_array)
        .ok_or_else(|| CaseError(format!("{what} is not an array")))?;
    items
        .iter()
        .map(|x| {
            x.as_str()
                .map(str::to_owned)
                .ok_or_else(|| CaseError(format!("{what} holds a non-string")))
        })
        .collect()
}

impl Case {
    /// Parses a case document (strict HL-C14N-1).
    pub fn parse(bytes: &[u8]) -> Result<Case, CaseError> {
        // Records nest as deep inside a case as on their own (resolutions §H.8).
        let doc = crate::parse_records(
            bytes,
            crate::ParseOptions::default(),
            crate::RecordRoots::CaseRecords,
        )
        .map_err(|e| CaseError(e.to_string()))?;
        Case::from_value(doc)
    }

    /// Reads a case from its value.
    pub fn from_value(doc: Value) -> Result<Case, CaseError> {
        // Records nest as deep inside a case as on their own (resolutions §H.8).
        let case_digest =
            crate::canon::to_canonical_vec_records(&doc, crate::RecordRoots::CaseRecords)
                .map(|bytes| {
                    crate::digest::digest_canonical(crate::digest::Domain::Binding, &bytes)
                })
                .map_err(|e| CaseError(e.to_string()))?;
        let case_id = doc
            .get("caseId")
            .and_then(Value::as_str)
            .ok_or_else(|| CaseError("caseId missing".into()))?
            .to_owned();
        let exp = doc
            .get("expected")
            .ok_or_else(|| CaseError(format!("{case_id}: expected missing")))?;
        let disposition = exp
            .get("disposition")
            .and_then(Value::as_str)
            .ok_or_else(|| CaseError(format!("{case_id}: expected.disposition missing")))?
            .to_owned();
        let mut axes = Vec::new();
        for a in AXES {
            let s = exp
                .get("axes")
                .and_then(|x| x.get(a))
                .and_then(Value::as_str)
                .ok_or_else(|| CaseError(format!("{case_id}: expected axis {a} missing")))?;
            axes.push((a.to_owned(), s.to_owned()));
        }
        let codes = exp.get("reasonCodes");
        let reject = strings(codes.and_then(|c| c.get("reject")), "expected reject codes")?;
        let hold = strings(codes.and_then(|c| c.get("hold")), "expected hold codes")?;
        let mut record_statuses = Vec::new();
        if let Some(list) = exp.get("recordStatuses") {
            let items = list.as_array().ok_or_else(|| {
                CaseError(format!(
                    "{case_id}: expected.recordStatuses is not an array"
                ))
            })?;
            for item in items {
                let field = |k: &str| {
                    item.get(k)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .ok_or_else(|| {
                            CaseError(format!(
                                "{case_id}: expected.recordStatuses entry lacks {k}"
                            ))
                        })
                };
                record_statuses.push((field("recordType")?, field("id")?, field("status")?));
            }
        }
        let input = doc
            .get("input")
            .cloned()
            .ok_or_else(|| CaseError(format!("{case_id}: input missing")))?;
        Ok(Case {
            case_id,
            case_digest,
            input: EvaluationInput::from_value(input),
            expected: Expected {
                disposition,
                axes,
                reject,
                hold,
                record_statuses,
            },
        })
    }
}

/// The outcome of one case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// `caseId`.
    pub case_id: String,
    /// Binding digest of the case document.
    pub case_digest: Digest,
    /// What the reducer returned.
    pub actual: ReductionResult,
    /// Every difference from the expectation (empty when the case passes).
    pub failures: Vec<String>,
    /// The same differences, structured (what the normalized results carry).
    pub failure_details: Vec<Failure>,
}

/// One difference between an expectation and what was returned, in a form
/// free of source detail: which check, what was expected, what came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `disposition`, `axes.<axis>`, `reject`, `hold`, `recordStatuses`,
    /// `expectedCode` or `harness`.
    pub check: String,
    /// The expected value (empty when the check expected nothing).
    pub expected: String,
    /// The actual value (empty when nothing came).
    pub actual: String,
}

impl Failure {
    fn new(check: &str, expected: &str, actual: &str) -> Failure {
        Failure {
            check: check.to_owned(),
            expected: expected.to_owned(),
            actual: actual.to_owned(),
        }
    }

    /// `{actual, check, expected}`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("check", self.check.as_str().into());
        m.insert("expected", self.expected.as_str().into());
        m.insert("actual", self.actual.as_str().into());
        Value::Object(m)
    }
}

/// Compares a semantic outcome with an expectation (spec §6 oracle): exact
/// disposition and axes, exact set equality per channel, every expected code
/// a known code, and the harness invariants (no code in the wrong channel; a
/// PASS has empty channels). Codes are compared as text, so adapter-scoped
/// codes of a refused mapping compare like protocol codes. `known` says
/// whether an expected code exists at all.
pub fn compare_semantic(
    e: &Expected,
    disposition: &str,
    axes: &[(&str, &str); 6],
    reject: &[String],
    hold: &[String],
    known: &dyn Fn(&str) -> Option<Channel>,
) -> Vec<Failure> {
    let mut out = Vec::new();
    if disposition != e.disposition {
        out.push(Failure::new("disposition", &e.disposition, disposition));
    }
    for ((axis, want), (_, got)) in e.axes.iter().zip(axes.iter()) {
        if want != got {
            out.push(Failure::new(&format!("axes.{axis}"), want, got));
        }
    }
    for (name, want, got) in [("reject", &e.reject, reject), ("hold", &e.hold, hold)] {
        let got: BTreeSet<String> = got.iter().cloned().collect();
        for c in want.difference(&got) {
            out.push(Failure::new(name, c, ""));
        }
        for c in got.difference(want) {
            out.push(Failure::new(name, "", c));
        }
    }
    for c in e.reject.iter().chain(&e.hold) {
        if known(c).is_none() {
            out.push(Failure::new("expectedCode", c, ""));
        }
    }
    if hold.iter().any(|c| known(c) == Some(Channel::Reject))
        || reject.iter().any(|c| known(c) == Some(Channel::Hold))
    {
        out.push(Failure::new(
            "harness",
            "codes in their channel",
            "a code in the wrong channel",
        ));
    }
    if disposition == "PASS" && !(reject.is_empty() && hold.is_empty()) {
        out.push(Failure::new(
            "harness",
            "PASS with empty channels",
            "PASS with a non-empty channel",
        ));
    }
    out
}

fn protocol_channel(c: &str) -> Option<Channel> {
    ReasonCode::from_code(c).map(ReasonCode::channel)
}

impl CaseResult {
    /// Whether the case passed.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

fn channel_failures(
    name: &str,
    expected: &BTreeSet<String>,
    actual: &[ReasonCode],
    failures: &mut Vec<String>,
) {
    let actual: BTreeSet<String> = actual.iter().map(|c| c.as_str().to_owned()).collect();
    for c in expected.difference(&actual) {
        failures.push(format!("{name}: missing {c}"));
    }
    for c in actual.difference(expected) {
        failures.push(format!("{name}: unexpected {c}"));
    }
}

/// Runs one case through the reducer and the oracle.
pub fn run_case(case: &Case) -> CaseResult {
    let actual = reduce(&case.input);
    let mut failures = Vec::new();
    let e = &case.expected;
    if actual.disposition.as_str() != e.disposition {
        failures.push(format!(
            "disposition: expected {}, got {}",
            e.disposition,
            actual.disposition.as_str()
        ));
    }
    for ((axis, want), (_, got)) in e.axes.iter().zip(actual.axes.pairs()) {
        if want != got {
            failures.push(format!("axes.{axis}: expected {want}, got {got}"));
        }
    }
    channel_failures("reject", &e.reject, &actual.reject, &mut failures);
    channel_failures("hold", &e.hold, &actual.hold, &mut failures);
    for (t, id, want) in &e.record_statuses {
        let got: Vec<&str> = actual
            .record_results
            .iter()
            .filter(|r| r.record_type.as_deref() == Some(t) && r.id.as_deref() == Some(id))
            .map(|r| r.status.as_str())
            .collect();
        if got.is_empty() {
            failures.push(format!("recordStatuses: no record {t} {id}"));
        }
        for g in got.into_iter().filter(|g| g != want) {
            failures.push(format!("recordStatuses: {t} {id} expected {want}, got {g}"));
        }
    }
    for c in e.reject.iter().chain(&e.hold) {
        if ReasonCode::from_code(c).is_none() {
            failures.push(format!("expected code {c} is not a reason code"));
        }
    }
    // Harness invariants (spec §6): no terminal-reject code in the hold
    // channel, and PASS only with every axis passing and empty channels.
    if actual.hold.iter().any(|c| c.channel() == Channel::Reject)
        || actual.reject.iter().any(|c| c.channel() == Channel::Hold)
    {
        failures.push("a code is reported in the wrong channel".to_owned());
    }
    if actual.is_pass() && !(actual.reject.is_empty() && actual.hold.is_empty()) {
        failures.push("PASS with a non-empty channel".to_owned());
    }
    let reject: Vec<String> = actual
        .reject
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    let hold: Vec<String> = actual.hold.iter().map(|c| c.as_str().to_owned()).collect();
    let mut failure_details = compare_semantic(
        e,
        actual.disposition.as_str(),
        &actual.axes.pairs(),
        &reject,
        &hold,
        &protocol_channel,
    );
    for (t, id, want) in &e.record_statuses {
        let got: Vec<&str> = actual
            .record_results
            .iter()
            .filter(|r| r.record_type.as_deref() == Some(t) && r.id.as_deref() == Some(id))
            .map(|r| r.status.as_str())
            .collect();
        if got.is_empty() {
            failure_details.push(Failure::new("recordStatuses", want, ""));
        }
        for g in got.into_iter().filter(|g| g != want) {
            failure_details.push(Failure::new("recordStatuses", want, g));
        }
    }
    CaseResult {
        case_id: case.case_id.clone(),
        case_digest: case.case_digest,
        actual,
        failures,
        failure_details,
    }
}

/// `fixtureSetDigest`: binding digest of `{fixtureSetId, caseDigests}` with
/// the case digests sorted (content-derived: any case change changes it).
pub fn fixture_set_digest(fixture_set_id: &str, case_digests: &[Digest]) -> Digest {
    let mut digests: Vec<String> = case_digests.iter().map(Digest::render).collect();
    digests.sort_by(|a, b| cmp_utf16(a, b));
    let mut m = Map::new();
    m.insert("fixtureSetId", fixture_set_id.into());
    m.insert(
        "caseDigests",
        Value::Array(digests.into_iter().map(Value::from).collect()),
    );
    binding_digest(&Value::Object(m)).unwrap_or(Digest::from_bytes([0; 32]))
}

/// One normalized `helmloop-semantic-case-results/v1` entry (spec §9): the
/// semantic case id, disposition, six axes, both actual channels and the
/// structured failures. Nothing from the source input: no case digest, no
/// input digest, no record identity or digest, no free text. The same
/// semantic case reduced through core, `standalone` or `better-workflows`
/// therefore yields the same entry.
pub fn normalized_case_result(
    semantic_case_id: &str,
    disposition: &str,
    axes: &[(&str, &str); 6],
    reject: &[String],
    hold: &[String],
    failures: &[Failure],
) -> Value {
    let mut ax = Map::new();
    for (k, v) in axes {
        ax.insert(*k, (*v).into());
    }
    let list = |v: &[String]| Value::Array(v.iter().map(|c| Value::from(c.as_str())).collect());
    let mut channels = Map::new();
    channels.insert("reject", list(reject));
    channels.insert("hold", list(hold));
    let mut fs: Vec<Value> = failures.iter().map(Failure::to_value).collect();
    fs.sort();
    let mut m = Map::new();
    m.insert("caseId", semantic_case_id.into());
    m.insert("disposition", disposition.into());
    m.insert("axes", Value::Object(ax));
    m.insert("reasonCodes", Value::Object(channels));
    m.insert("failures", Value::Array(fs));
    m.insert("passed", failures.is_empty().into());
    Value::Object(m)
}

/// The normalized entry of a core case (its semantic case id is its case id).
pub fn semantic_case_result(r: &CaseResult) -> Value {
    let reject: Vec<String> = r
        .actual
        .reject
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    let hold: Vec<String> = r
        .actual
        .hold
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect();
    normalized_case_result(
        &r.case_id,
        r.actual.disposition.as_str(),
        &r.actual.axes.pairs(),
        &reject,
        &hold,
        &r.failure_details,
    )
}

/// The normalized `helmloop-semantic-case-results/v1` document `{format,
/// fixtureSetId, fixtureSetDigest, cases}` (entries sorted by case id) and its
/// binding digest: the results digest portability receipts compare (§9).
pub fn normalized_results(
    fixture_set_id: &str,
    fixture_set_digest: &Digest,
    mut entries: Vec<Value>,
) -> (Value, Digest) {
    entries.sort_by(|a, b| {
        let id = |v: &Value| {
            v.get("caseId")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        cmp_utf16(&id(a), &id(b))
    });
    let mut semantic = Map::new();
    semantic.insert("format", SEMANTIC_CASE_RESULTS.into());
    semantic.insert("fixtureSetId", fixture_set_id.into());
    semantic.insert("fixtureSetDigest", fixture_set_digest.render().into());
    semantic.insert("cases", Value::Array(entries));
    let semantic = Value::Object(semantic);
    let digest = binding_digest(&semantic).unwrap_or(Digest::from_bytes([0; 32]));
    (semantic, digest)
}

/// A conformance report.
#[derive(Debug, Clone)]
pub struct Report {
    /// Adapter name (`core`).
    pub adapter: String,
    /// `fixtureSetId` of the manifest.
    pub fixture_set_id: String,
    /// Content-derived digest of the case set.
    pub fixture_set_digest: Digest,
    /// Case results, sorted by case ID.
    pub results: Vec<CaseResult>,
    /// Problems with the fixture set itself (unreadable case, manifest drift).
    pub fixture_errors: Vec<String>,
}

impl Report {
    /// Runs every case; the set digest is computed from the cases given.
    pub fn run(
        adapter: &str,
        fixture_set_id: &str,
        cases: &[Case],
        fixture_errors: Vec<String>,
    ) -> Report {
        let mut results: Vec<CaseResult> = cases.iter().map(run_case).collect();
        results.sort_by(|a, b| cmp_utf16(&a.case_id, &b.case_id));
        let digests: Vec<Digest> = cases.iter().map(|c| c.case_digest).collect();
        Report {
            adapter: adapter.to_owned(),
            fixture_set_id: fixture_set_id.to_owned(),
            fixture_set_digest: fixture_set_digest(fixture_set_id, &digests),
            results,
            fixture_errors,
        }
    }

    /// Whether every case passed and the fixture set is intact.
    pub fn all_passed(&self) -> bool {
        self.fixture_errors.is_empty()
            && !self.results.is_empty()
            && self.results.iter().all(CaseResult::passed)
    }

    /// The report value.
    pub fn to_value(&self) -> Value {
        let entries: Vec<Value> = self.results.iter().map(semantic_case_result).collect();
        let (semantic, semantic_digest) =
            normalized_results(&self.fixture_set_id, &self.fixture_set_digest, entries);
        let case_digests: Vec<Value> = self
            .results
            .iter()
            .map(|r| {
                let mut m = Map::new();
                m.insert("caseId", r.case_id.as_str().into());
                m.insert("caseDigest", r.case_digest.render().into());
                Value::Object(m)
            })
            .collect();
        let passed = self.results.iter().filter(|r| r.passed()).count();
        let mut summary = Map::new();
        summary.insert("total", int(self.results.len()));
        summary.insert("passed", int(passed));
        summary.insert("failed", int(self.results.len() - passed));
        let mut m = Map::new();
        m.insert("reportType", REPORT_TYPE.into());
        m.insert("adapter", self.adapter.as_str().into());
        m.insert("protocolVersion", PROTOCOL_VERSION.into());
        m.insert("canonicalProfile", CANONICAL_PROFILE.into());
        m.insert("evidenceClass", "fixture".into());
        m.insert("runtimeObservation", false.into());
        m.insert("portabilityEligible", false.into());
        m.insert("fixtureSetId", self.fixture_set_id.as_str().into());
        m.insert("fixtureSetDigest", self.fixture_set_digest.render().into());
        m.insert("semanticCaseResultsDigest", semantic_digest.render().into());
        m.insert("cases", Value::Array(case_digests));
        m.insert("semanticCaseResults", semantic);
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

/// A report as canonical JSON (its error code in place of the report if it has none).
pub(crate) fn report_json(report: &Value) -> String {
    canon::to_canonical_string(report).unwrap_or_else(|e| format!("{{\"error\":\"{}\"}}", e.code()))
}

/// A count as a JSON integer.
pub(crate) fn int(n: usize) -> Value {
    Value::Int(
        i64::try_from(n)
            .unwrap_or(i64::MAX)
            .min(crate::MAX_SAFE_INTEGER),
    )
}

/// One manifest entry: `(caseId, file relative to the manifest, caseDigest)`.
pub type ManifestEntry = (String, String, String);

/// Reads a manifest `{fixtureSetId, cases: [{caseId, file, caseDigest}]}`.
pub fn parse_manifest(bytes: &[u8]) -> Result<(String, Vec<ManifestEntry>), CaseError> {
    let doc = parse(bytes).map_err(|e| CaseError(format!("manifest: {e}")))?;
    let id = doc
        .get("fixtureSetId")
        .and_then(Value::as_str)
        .ok_or_else(|| CaseError("manifest: fixtureSetId missing".into()))?
        .to_owned();
    let mut cases = Vec::new();
    for c in doc.get("cases").and_then(Value::as_array).unwrap_or(&[]) {
        let f = |k: &str| {
            c.get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| CaseError(format!("manifest: case {k} missing")))
        };
        cases.push((f("caseId")?, f("file")?, f("caseDigest")?));
    }
    Ok((id, cases))
}
