//! The portability gate (spec §9): `helmloop portability <runtime-receipts.json>`.
//!
//! Input (`helmloop-portability-input/v1`, this project's shape,
//! `design-inference`):
//!
//! ```text
//! { "format": "helmloop-portability-input/v1",
//!   "evaluatedAt": "<timestamp>",            // the host's instant; the gate reads no clock
//!   "acceptancePolicy": { "id", "protocolVersion", "schemaBundleDigest", "fixtureSetId",
//!       "fixtureSetDigest", "semanticCaseResultsDigest", "maxReceiptAgeMs", "trustedVerifiers" },
//!   "receipts": [ PortabilityReceiptV1, ... ],          // at most 64
//!   "registry": [ { "receiptId", "receiptDigest", "runtimeIdentityDigest",
//!                   "producerVerificationReceiptDigest", "verifierId" } ] }   // the host's
//! ```
//!
//! `acceptancePolicyDigest` is the binding digest of `acceptancePolicy`. Each
//! receipt is judged by every rule and the report names each rule that failed
//! for it; a receipt qualifies only when none did. Receipt fields are claims,
//! not authentication: only a host registry entry binding the exact tuple
//! (receipt id and digest, runtime-identity digest, producer-verification
//! receipt digest, verifier id) with a trusted verifier counts. The gate
//! passes only with at least two qualifying receipts of which one pair
//! differs in all eight independence dimensions. A passing gate supports only
//! the exact host-attested pinned matrix.

use std::fmt;

use crate::digest::{Digest, binding_digest, record_digest};
use crate::schema::{Shape, is_valid_value};
use crate::time::{Millis, parse_timestamp};
use crate::utf16::cmp_utf16;
use crate::value::{Map, Value};
use crate::{canon, parse};

/// Name of the input format.
pub const INPUT_FORMAT: &str = "helmloop-portability-input/v1";
/// Name of the report format.
pub const REPORT_FORMAT: &str = "helmloop-portability-report/v1";
/// Most receipts one input may carry (pairs are compared exhaustively).
pub const MAX_RECEIPTS: usize = 64;
/// What a passing gate supports, and what it does not (spec §9).
pub const SCOPE: &str = "supports only the exact host-attested pinned matrix of the qualifying pair; not production readiness, a complete ecosystem or business effectiveness";

/// The eight atomic independence dimensions, as `(name, path)`.
pub const DIMENSIONS: [(&str, &[&str]); 8] = [
    ("runtimeFamily", &["runtime", "family"]),
    ("implementationId", &["runtime", "implementationId"]),
    ("runtimeInstance", &["runtime", "instanceId"]),
    ("runtimeIdentityDigest", &["runtime", "identityDigest"]),
    ("sourceRepository", &["sourceBinding", "repository"]),
    ("sourceTreeDigest", &["sourceBinding", "treeDigest"]),
    ("adapterId", &["adapter", "id"]),
    ("adapterDigest", &["adapter", "digest"]),
];

macro_rules! rules {
    ($( $(#[$doc:meta])* $name:ident = $code:literal, $rule:literal ),* $(,)?) => {
        /// One gate rule that can fail.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Rule {
            $( $(#[$doc])* $name, )*
        }

        impl Rule {
            /// Every rule.
            pub const ALL: &'static [Rule] = &[$(Rule::$name),*];

            /// Its code.
            pub const fn code(self) -> &'static str {
                match self { $(Rule::$name => $code,)* }
            }

            /// The §9 rule it belongs to.
            pub const fn rule(self) -> &'static str {
                match self { $(Rule::$name => $rule,)* }
            }
        }
    };
}

rules! {
    /// The receipt does not satisfy `portability-receipt.schema.json`.
    SchemaInvalid = "PORTABILITY_RECEIPT_SCHEMA_INVALID", "receipt-shape",
    /// Its declared digest is not its record digest.
    DigestMismatch = "PORTABILITY_RECEIPT_DIGEST_MISMATCH", "receipt-shape",
    /// Another receipt in the input has the same id.
    Duplicate = "PORTABILITY_RECEIPT_DUPLICATE", "receipt-shape",
    /// Not `runtime-observation` / `live-runtime` / `fixtureDerived: false`: fixture or synthetic.
    NotLiveRuntime = "PORTABILITY_NOT_LIVE_RUNTIME", "structural-eligibility",
    /// Issued at or beyond the policy's maximum age.
    Stale = "PORTABILITY_RECEIPT_STALE", "freshness",
    /// Issued, or its timing ending, after `evaluatedAt`, or timing after issuance.
    Future = "PORTABILITY_RECEIPT_FUTURE", "freshness",
    /// `timing.finishedAt` before `timing.startedAt`.
    TimingInvalid = "PORTABILITY_TIMING_INVALID", "freshness",
    /// Another protocol version than the policy's.
    ProtocolMismatch = "PORTABILITY_PROTOCOL_MISMATCH", "same-protocol",
    /// Another schema bundle digest than the policy's.
    SchemaBundleMismatch = "PORTABILITY_SCHEMA_BUNDLE_MISMATCH", "same-schema-bundle",
    /// Another fixture set id or digest than the policy's.
    FixtureSetMismatch = "PORTABILITY_FIXTURE_SET_MISMATCH", "same-fixture-set",
    /// Another acceptance-policy digest than the policy's.
    AcceptancePolicyMismatch = "PORTABILITY_ACCEPTANCE_POLICY_MISMATCH", "same-acceptance-policy",
    /// Another normalized semantic case-results digest than the policy's.
    ResultDigestMismatch = "PORTABILITY_RESULT_DIGEST_MISMATCH", "same-result-digest",
    /// The receipt reports failed cases.
    CasesFailed = "PORTABILITY_CASES_FAILED", "same-result-digest",
    /// No host registry entry binds the exact tuple: a self-declared verification.
    NotHostVerified = "PORTABILITY_NOT_HOST_VERIFIED", "host-registry",
    /// The registry entry names a verifier the policy does not trust.
    VerifierUntrusted = "PORTABILITY_VERIFIER_UNTRUSTED", "host-registry",
    /// No explicit limitations.
    LimitationsMissing = "PORTABILITY_LIMITATIONS_MISSING", "explicit-limitations",
    /// Fewer than two qualifying receipts.
    TooFewQualifying = "PORTABILITY_TOO_FEW_QUALIFYING", "qualifying-count",
    /// No pair of qualifying receipts differs in all eight dimensions.
    NoIndependentPair = "PORTABILITY_NO_INDEPENDENT_PAIR", "independent-pair",
}

/// An input the gate cannot read at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateInputError(pub String);

impl fmt::Display for GateInputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PORTABILITY_INPUT_INVALID {}", self.0)
    }
}

impl std::error::Error for GateInputError {}

/// The verdict on one receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptVerdict {
    /// Position in `receipts`.
    pub index: usize,
    /// Its `id`, when it has one.
    pub id: Option<String>,
    /// Every rule that failed for it (empty: qualifying).
    pub failures: Vec<Rule>,
}

/// Two qualifying receipts and the dimensions they share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairVerdict {
    /// Receipt indexes.
    pub pair: (usize, usize),
    /// Dimensions on which they are equal (empty: independent).
    pub shared: Vec<&'static str>,
}

/// The gate's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateReport {
    /// The binding digest of the acceptance policy.
    pub acceptance_policy_digest: Digest,
    /// One verdict per receipt, in input order.
    pub receipts: Vec<ReceiptVerdict>,
    /// Every pair of qualifying receipts.
    pub pairs: Vec<PairVerdict>,
    /// Gate-level failures (count, independence).
    pub gate_failures: Vec<Rule>,
}

impl GateReport {
    /// Whether the gate passed.
    pub fn passed(&self) -> bool {
        self.gate_failures.is_empty()
    }

    /// Indexes of the qualifying receipts.
    pub fn qualifying(&self) -> Vec<usize> {
        self.receipts
            .iter()
            .filter(|r| r.failures.is_empty())
            .map(|r| r.index)
            .collect()
    }

    /// The first independent pair, if any.
    pub fn independent_pair(&self) -> Option<(usize, usize)> {
        self.pairs
            .iter()
            .find(|p| p.shared.is_empty())
            .map(|p| p.pair)
    }

    /// The first gate failure's code, else the first receipt failure's.
    pub fn first_code(&self) -> Option<&'static str> {
        self.gate_failures
            .first()
            .or_else(|| self.receipts.iter().find_map(|r| r.failures.first()))
            .map(|r| r.code())
    }

    /// The report as JSON.
    pub fn to_value(&self) -> Value {
        let rule = |r: &Rule| {
            let mut m = Map::new();
            m.insert("rule", r.rule().into());
            m.insert("code", r.code().into());
            Value::Object(m)
        };
        let id_of = |i: usize| {
            self.receipts
                .get(i)
                .and_then(|r| r.id.as_deref())
                .map_or(Value::Null, Value::from)
        };
        let receipts = self
            .receipts
            .iter()
            .map(|r| {
                let mut m = Map::new();
                m.insert("index", int(r.index));
                m.insert("id", id_of(r.index));
                m.insert("qualifying", r.failures.is_empty().into());
                m.insert(
                    "failures",
                    Value::Array(r.failures.iter().map(rule).collect()),
                );
                Value::Object(m)
            })
            .collect();
        let pairs = self
            .pairs
            .iter()
            .map(|p| {
                let mut m = Map::new();
                m.insert(
                    "receipts",
                    Value::Array(vec![id_of(p.pair.0), id_of(p.pair.1)]),
                );
                m.insert("indexes", Value::Array(vec![int(p.pair.0), int(p.pair.1)]));
                m.insert(
                    "sharedDimensions",
                    Value::Array(p.shared.iter().map(|s| Value::from(*s)).collect()),
                );
                m.insert("independent", p.shared.is_empty().into());
                Value::Object(m)
            })
            .collect();
        let mut m = Map::new();
        m.insert("format", REPORT_FORMAT.into());
        m.insert("passed", self.passed().into());
        m.insert(
            "acceptancePolicyDigest",
            self.acceptance_policy_digest.render().into(),
        );
        m.insert("receipts", Value::Array(receipts));
        m.insert(
            "qualifying",
            Value::Array(self.qualifying().into_iter().map(id_of).collect()),
        );
        m.insert("pairs", Value::Array(pairs));
        m.insert(
            "independentPair",
            self.independent_pair()
                .map_or(Value::Null, |(a, b)| Value::Array(vec![id_of(a), id_of(b)])),
        );
        m.insert(
            "gateFailures",
            Value::Array(self.gate_failures.iter().map(rule).collect()),
        );
        m.insert("scope", SCOPE.into());
        Value::Object(m)
    }

    /// Canonical JSON of the report.
    pub fn to_json(&self) -> String {
        canon::to_canonical_string(&self.to_value())
            .unwrap_or_else(|e| format!("{{\"error\":\"{}\"}}", e.code()))
    }
}

fn int(n: usize) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn s<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path).and_then(Value::as_str)
}

fn ts(v: &Value, path: &[&str]) -> Option<Millis> {
    s(v, path).and_then(parse_timestamp)
}

/// The acceptance policy, read.
struct Policy<'a> {
    value: &'a Value,
    max_age: Millis,
    verifiers: Vec<&'a str>,
}

const POLICY_MEMBERS: [&str; 8] = [
    "id",
    "protocolVersion",
    "schemaBundleDigest",
    "fixtureSetId",
    "fixtureSetDigest",
    "semanticCaseResultsDigest",
    "maxReceiptAgeMs",
    "trustedVerifiers",
];
const REGISTRY_MEMBERS: [&str; 5] = [
    "receiptId",
    "receiptDigest",
    "runtimeIdentityDigest",
    "producerVerificationReceiptDigest",
    "verifierId",
];

fn exact_members(v: &Value, members: &[&str], what: &str) -> Result<(), GateInputError> {
    let m = v
        .as_object()
        .ok_or_else(|| GateInputError(format!("{what} is not an object")))?;
    if m.len() != members.len() || members.iter().any(|k| !m.contains_key(k)) {
        return Err(GateInputError(format!(
            "{what} must have exactly {}",
            members.join(" ")
        )));
    }
    Ok(())
}

/// Parses and runs the gate.
pub fn gate_bytes(bytes: &[u8]) -> Result<GateReport, GateInputError> {
    let v = parse(bytes).map_err(|e| GateInputError(e.to_string()))?;
    gate(&v)
}

/// Runs the gate over a parsed input.
pub fn gate(input: &Value) -> Result<GateReport, GateInputError> {
    exact_members(
        input,
        &[
            "format",
            "evaluatedAt",
            "acceptancePolicy",
            "receipts",
            "registry",
        ],
        "input",
    )?;
    if s(input, &["format"]) != Some(INPUT_FORMAT) {
        return Err(GateInputError(format!("format is not {INPUT_FORMAT}")));
    }
    let now = ts(input, &["evaluatedAt"])
        .ok_or_else(|| GateInputError("evaluatedAt is not a timestamp".into()))?;
    let pv = input.get("acceptancePolicy").unwrap_or(&Value::Null);
    exact_members(pv, &POLICY_MEMBERS, "acceptancePolicy")?;
    let policy = Policy {
        value: pv,
        max_age: pv
            .get("maxReceiptAgeMs")
            .and_then(Value::as_i64)
            .filter(|n| *n > 0)
            .ok_or_else(|| GateInputError("maxReceiptAgeMs is not a positive integer".into()))?,
        verifiers: pv
            .get("trustedVerifiers")
            .and_then(Value::as_array)
            .ok_or_else(|| GateInputError("trustedVerifiers is not an array".into()))?
            .iter()
            .map(|x| x.as_str().unwrap_or(""))
            .filter(|x| !x.is_empty())
            .collect(),
    };
    for k in &POLICY_MEMBERS[..6] {
        if pv.get(k).and_then(Value::as_str).is_none() {
            return Err(GateInputError(format!(
                "acceptancePolicy.{k} is not a string"
            )));
        }
    }
    let policy_digest = binding_digest(pv).map_err(|e| GateInputError(e.to_string()))?;
    let receipts = input
        .get("receipts")
        .and_then(Value::as_array)
        .ok_or_else(|| GateInputError("receipts is not an array".into()))?;
    if receipts.len() > MAX_RECEIPTS {
        return Err(GateInputError(format!("more than {MAX_RECEIPTS} receipts")));
    }
    let registry = input
        .get("registry")
        .and_then(Value::as_array)
        .ok_or_else(|| GateInputError("registry is not an array".into()))?;
    for e in registry {
        exact_members(e, &REGISTRY_MEMBERS, "registry entry")?;
    }
    let mut verdicts = Vec::new();
    for (i, r) in receipts.iter().enumerate() {
        let mut f = judge(r, &policy, &policy_digest, now, registry);
        let id = s(r, &["id"]).map(str::to_owned);
        if id.is_some() && receipts[..i].iter().any(|p| s(p, &["id"]) == id.as_deref()) {
            f.push(Rule::Duplicate);
        }
        f.sort();
        f.dedup();
        verdicts.push(ReceiptVerdict {
            index: i,
            id,
            failures: f,
        });
    }
    let qualifying: Vec<usize> = verdicts
        .iter()
        .filter(|v| v.failures.is_empty())
        .map(|v| v.index)
        .collect();
    let mut pairs = Vec::new();
    for (n, &a) in qualifying.iter().enumerate() {
        for &b in &qualifying[n + 1..] {
            let shared = DIMENSIONS
                .iter()
                .filter(|(_, path)| at(&receipts[a], path) == at(&receipts[b], path))
                .map(|(name, _)| *name)
                .collect();
            pairs.push(PairVerdict {
                pair: (a, b),
                shared,
            });
        }
    }
    let mut gate_failures = Vec::new();
    if qualifying.len() < 2 {
        gate_failures.push(Rule::TooFewQualifying);
    }
    if !pairs.iter().any(|p| p.shared.is_empty()) {
        gate_failures.push(Rule::NoIndependentPair);
    }
    Ok(GateReport {
        acceptance_policy_digest: policy_digest,
        receipts: verdicts,
        pairs,
        gate_failures,
    })
}

/// Every rule that fails for one receipt.
fn judge(
    r: &Value,
    p: &Policy<'_>,
    policy_digest: &Digest,
    now: Millis,
    registry: &[Value],
) -> Vec<Rule> {
    let mut f = Vec::new();
    let limitations = r.get("limitations").and_then(Value::as_array);
    if limitations.is_none_or(|l| l.is_empty()) {
        f.push(Rule::LimitationsMissing);
    }
    if !is_valid_value(Shape::PortabilityReceipt, r) {
        // Limitations and versions are reported under their own rules.
        let mut relaxed = r.clone();
        if let Value::Object(m) = &mut relaxed {
            m.insert("limitations", Value::Array(vec!["-".into()]));
            m.insert("protocolVersion", crate::PROTOCOL_VERSION.into());
            m.insert("schemaVersion", crate::PROTOCOL_VERSION.into());
        }
        if !is_valid_value(Shape::PortabilityReceipt, &relaxed) {
            f.push(Rule::SchemaInvalid);
        }
    }
    let declared = s(r, &["digest"]);
    if declared.is_none() || record_digest(r).ok().map(|d| d.render()).as_deref() != declared {
        f.push(Rule::DigestMismatch);
    }
    if s(r, &["evidenceClass"]) != Some("runtime-observation")
        || s(r, &["observationMode"]) != Some("live-runtime")
        || r.get("fixtureDerived").and_then(Value::as_bool) != Some(false)
    {
        f.push(Rule::NotLiveRuntime);
    }
    let issued = ts(r, &["issuedAt"]);
    let started = ts(r, &["timing", "startedAt"]);
    let finished = ts(r, &["timing", "finishedAt"]);
    match issued {
        Some(t) if t > now => f.push(Rule::Future),
        Some(t) if now - t >= p.max_age => f.push(Rule::Stale),
        Some(_) => {}
        None => f.push(Rule::Stale),
    }
    match (started, finished) {
        (Some(a), Some(b)) if b < a => f.push(Rule::TimingInvalid),
        (Some(_), Some(b)) if issued.is_some_and(|t| b > t) || b > now => f.push(Rule::Future),
        (Some(_), Some(_)) => {}
        _ => f.push(Rule::TimingInvalid),
    }
    let pol = |k: &str| p.value.get(k).and_then(Value::as_str);
    if s(r, &["protocolVersion"]) != pol("protocolVersion")
        || s(r, &["schemaVersion"]) != Some(crate::PROTOCOL_VERSION)
    {
        f.push(Rule::ProtocolMismatch);
    }
    if s(r, &["schemaBundleDigest"]) != pol("schemaBundleDigest") {
        f.push(Rule::SchemaBundleMismatch);
    }
    if s(r, &["fixtureSetId"]) != pol("fixtureSetId")
        || s(r, &["fixtureSetDigest"]) != pol("fixtureSetDigest")
    {
        f.push(Rule::FixtureSetMismatch);
    }
    if s(r, &["acceptancePolicyDigest"]) != Some(policy_digest.render().as_str()) {
        f.push(Rule::AcceptancePolicyMismatch);
    }
    if s(r, &["caseResults", "digest"]) != pol("semanticCaseResultsDigest") {
        f.push(Rule::ResultDigestMismatch);
    }
    if at(r, &["caseResults", "failureCount"]).and_then(Value::as_i64) != Some(0) {
        f.push(Rule::CasesFailed);
    }
    let tuple = [
        s(r, &["id"]),
        declared,
        s(r, &["runtime", "identityDigest"]),
        s(r, &["producerVerification", "receiptDigest"]),
        s(r, &["producerVerification", "verifierId"]),
    ];
    let entry = registry.iter().find(|e| {
        tuple.iter().all(Option::is_some)
            && REGISTRY_MEMBERS
                .iter()
                .zip(tuple)
                .all(|(k, want)| e.get(k).and_then(Value::as_str) == want)
    });
    match entry {
        None => f.push(Rule::NotHostVerified),
        Some(e) => {
            let verifier = e.get("verifierId").and_then(Value::as_str).unwrap_or("");
            if !p.verifiers.contains(&verifier) {
                f.push(Rule::VerifierUntrusted);
            }
        }
    }
    f.sort_by(|a, b| cmp_utf16(a.code(), b.code()));
    f
}
