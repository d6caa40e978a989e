//! The adapter SDK (spec §8, resolutions §G).
//!
//! A host hands over its complete, digest-valid `OutcomeContractV1` and the
//! exact reference it evaluates under; [`ContractCapability::validate`] checks
//! both and returns an opaque capability. Nothing else can build one: its
//! fields and constructor are private to this module. [`seal`] turns a
//! [`Draft`] into a [`Candidate`] only with that capability, so a caller can
//! never seal a candidate against raw bindings it made up:
//!
//! ```compile_fail,E0308
//! use lychd_helmloop::Value;
//! use lychd_helmloop::adapter::sdk::{seal, Draft};
//! // A raw exact reference is not a capability: mismatched types (E0308).
//! fn raw(reference: &Value, draft: Draft) {
//!     let _ = seal(reference, draft);
//! }
//! ```
//!
//! ```compile_fail,E0599
//! use lychd_helmloop::Value;
//! use lychd_helmloop::adapter::sdk::ContractCapability;
//! // There is no public constructor: only `validate` (E0599, no such function).
//! fn forge(contract: Value, reference: Value) -> ContractCapability {
//!     ContractCapability::new(contract, reference)
//! }
//! ```
//!
//! ```compile_fail,E0451
//! use lychd_helmloop::Value;
//! use lychd_helmloop::adapter::sdk::ContractCapability;
//! // Its fields are private (E0451), so it cannot be built from raw bindings either.
//! fn forge(contract: Value, reference: Value) -> ContractCapability {
//!     let criteria = std::collections::HashMap::new();
//!     ContractCapability { contract, reference, criteria }
//! }
//! ```
//!
//! Nor can a mapping result be edited after the fact, so a REJECT cannot be
//! laundered into a READY result for the host (its fields are private, E0616):
//!
//! ```compile_fail,E0616
//! use lychd_helmloop::adapter::MappingResult;
//! fn launder(mut m: MappingResult) -> MappingResult {
//!     m.reasons.clear();
//!     m
//! }
//! ```
//!
//! Stable rustdoc runs these as `compile_fail` only; the error codes are
//! checked by nightly rustdoc (or `RUSTC_BOOTSTRAP=1`). Each snippet was also
//! compiled with `rustc` against the crate and fails with exactly the code
//! named (E0308 mismatched types, E0599 no associated function `new`, E0451
//! private fields, E0616 private field); see `docs/helmloop-adapters.md`.
//!
//! The same calls made through the capability compile and run:
//!
//! ```
//! use lychd_helmloop::adapter::sdk::{seal, ContractCapability, Draft, ObservationType};
//! # fn demo(contract: &lychd_helmloop::Value, reference: &lychd_helmloop::Value, draft: Draft) {
//! if let Ok(cap) = ContractCapability::validate(contract, reference) {
//!     let _ = seal(&cap, draft);
//! }
//! # }
//! ```
//!
//! [`check_collection`] looks for contradictions inside one mapped
//! collection (one identity with two digests, a provider query before its
//! receipt's terminal boundary, an evidence criterion the contract does not
//! have, a status that contradicts its conclusion, a receipt that finished
//! before it started) and reports each with both the raw protocol code and a
//! scoped adapter code; the candidates themselves are never dropped.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::digest::{Digest, binding_digest, record_digest};
use crate::reduce::ReasonCode;
use crate::schema::{RecordType, Shape, is_valid_value};
use crate::time::parse_timestamp;
use crate::validate::Channel;
use crate::value::{Map, Value};

/// The only label a mapped candidate ever carries (spec §8): the host alone
/// verifies and classifies it.
pub const UNVERIFIED_OBSERVATION: &str = "unverified-observation";

macro_rules! adapter_codes {
    ($( $(#[$doc:meta])* $name:ident = $text:literal : $channel:ident ),* $(,)?) => {
        /// An adapter-scoped reason code. Each has one fixed channel.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum AdapterCode {
            $( $(#[$doc])* $name, )*
        }

        impl AdapterCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [AdapterCode] = &[$(AdapterCode::$name),*];

            /// The stable code text.
            pub const fn as_str(self) -> &'static str {
                match self { $(AdapterCode::$name => $text,)* }
            }

            /// The channel this code always belongs to.
            pub const fn channel(self) -> Channel {
                match self { $(AdapterCode::$name => Channel::$channel,)* }
            }
        }
    };
}

adapter_codes! {
    // ---- hold: missing, unknown, stale, drifted, unsupported or lossy input ----
    /// A contract member or the contract itself is missing (from the host or the source projection).
    ContractIncomplete = "ADAPTER_CONTRACT_INCOMPLETE": Hold,
    /// The host contract is `draft` or `retired`.
    ContractNotActive = "ADAPTER_CONTRACT_NOT_ACTIVE": Hold,
    /// The source projection names another revision or policy revision than the contract (drift).
    ContractDrift = "ADAPTER_CONTRACT_DRIFT": Hold,
    /// A version this mapping does not know (contract, source format or runtime).
    VersionUnsupported = "ADAPTER_VERSION_UNSUPPORTED": Hold,
    /// A required source member is missing.
    RequiredInputMissing = "ADAPTER_REQUIRED_INPUT_MISSING": Hold,
    /// A source member, entry kind or event type the mapping does not support.
    UnsupportedField = "ADAPTER_UNSUPPORTED_FIELD": Hold,
    /// A source value that cannot be carried without loss (e.g. sub-millisecond time).
    LossyInput = "ADAPTER_LOSSY_INPUT": Hold,
    /// A source value of the wrong type or outside the mapped vocabulary.
    ValueUnsupported = "ADAPTER_VALUE_UNSUPPORTED": Hold,
    /// A source reference to another observation that the source does not contain.
    ReferenceUnresolved = "ADAPTER_REFERENCE_UNRESOLVED": Hold,
    /// An attempt the source shows started but not at a terminal or unknown state.
    AttemptNotTerminal = "ADAPTER_ATTEMPT_NOT_TERMINAL": Hold,
    // ---- reject: a mapped or source-observed semantic violation ----
    /// The host contract or its reference is malformed, tampered or self-contradictory.
    ContractInvalid = "ADAPTER_CONTRACT_INVALID": Reject,
    /// The source projection contradicts the host contract (type, id, digest, subject, binding digest).
    ContractContradiction = "ADAPTER_CONTRACT_CONTRADICTION": Reject,
    /// One candidate identity mapped to two digests.
    IdentityTwoDigests = "ADAPTER_IDENTITY_TWO_DIGESTS": Reject,
    /// A provider query observed before its receipt's terminal boundary.
    QueryBeforeTerminal = "ADAPTER_QUERY_BEFORE_TERMINAL": Reject,
    /// Evidence on a criterion id/digest the contract does not have.
    CriterionContradictsContract = "ADAPTER_CRITERION_CONTRADICTS_CONTRACT": Reject,
    /// Evidence whose status contradicts its criterion conclusion.
    StatusContradictsConclusion = "ADAPTER_STATUS_CONTRADICTS_CONCLUSION": Reject,
    /// A receipt whose attempt finished before it started.
    FinishedBeforeStarted = "ADAPTER_FINISHED_BEFORE_STARTED": Reject,
}

impl AdapterCode {
    /// The code named by `s`.
    pub fn from_code(s: &str) -> Option<AdapterCode> {
        AdapterCode::ALL.iter().copied().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for AdapterCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reason a mapping is not READY: the scoped adapter code, the raw
/// protocol code where one applies (always in the same channel), and the
/// JSON Pointer into the source (or host input) it concerns.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AdapterReason {
    /// The adapter-scoped code.
    pub adapter: AdapterCode,
    /// The raw protocol code (resolutions §F) when the violation has one.
    pub protocol: Option<ReasonCode>,
    /// Where: a JSON Pointer into the source document, or `host:/...`.
    pub path: String,
}

impl AdapterReason {
    /// A reason; `protocol`, when given, must be in the adapter code's channel.
    pub fn new(
        adapter: AdapterCode,
        protocol: Option<ReasonCode>,
        path: impl Into<String>,
    ) -> Self {
        debug_assert!(protocol.is_none_or(|p| p.channel() == adapter.channel()));
        AdapterReason {
            adapter,
            protocol,
            path: path.into(),
        }
    }

    /// The reason's channel (that of its adapter code).
    pub fn channel(&self) -> Channel {
        self.adapter.channel()
    }

    /// `{adapterCode, path, protocolCode}` (protocolCode `null` when none).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("adapterCode", self.adapter.as_str().into());
        m.insert(
            "protocolCode",
            self.protocol.map_or(Value::Null, |p| p.as_str().into()),
        );
        m.insert("path", self.path.as_str().into());
        Value::Object(m)
    }
}

fn reason(adapter: AdapterCode, protocol: Option<ReasonCode>, path: &str) -> AdapterReason {
    AdapterReason::new(adapter, protocol, path)
}

/// The opaque in-process capability of spec §8: proof that the host's
/// complete contract and exact reference were validated. It has no public
/// constructor and no public fields; only [`ContractCapability::validate`]
/// returns one.
#[derive(Debug)]
pub struct ContractCapability {
    contract: Value,
    reference: Value,
    criteria: HashMap<String, String>,
}

const REF_MEMBERS: [&str; 3] = ["recordType", "id", "digest"];
const CONTRACT: &str = "OutcomeContractV1";

impl ContractCapability {
    /// Validates the host's contract record and the exact reference it is
    /// evaluated under. Purely missing members are HOLD
    /// (`ADAPTER_CONTRACT_INCOMPLETE`); a wrong type, a wrong digest, a
    /// reference that does not match, or a contract that contradicts itself is
    /// REJECT. A draft or retired contract is HOLD.
    pub fn validate(
        contract: &Value,
        reference: &Value,
    ) -> Result<ContractCapability, Vec<AdapterReason>> {
        use AdapterCode as A;
        use ReasonCode as R;
        let mut out = Vec::new();
        // The reference: exactly {recordType, id, digest}, all strings.
        match reference.as_object() {
            None => out.push(reason(
                A::ContractIncomplete,
                Some(R::ContractMissing),
                "host:/contractRef",
            )),
            Some(m) => {
                for k in m.keys() {
                    if !REF_MEMBERS.contains(&k) {
                        out.push(reason(
                            A::ContractInvalid,
                            None,
                            &format!("host:/contractRef/{k}"),
                        ));
                    }
                }
                let has = |k: &str| m.get(k).and_then(Value::as_str).is_some();
                if has("id") && !(has("recordType") && has("digest")) {
                    out.push(reason(
                        A::ContractInvalid,
                        Some(R::RefIdOnly),
                        "host:/contractRef",
                    ));
                } else if !has("id") {
                    out.push(reason(
                        A::ContractIncomplete,
                        Some(R::ContractMissing),
                        "host:/contractRef/id",
                    ));
                }
                if has("recordType")
                    && m.get("recordType").and_then(Value::as_str) != Some(CONTRACT)
                {
                    out.push(reason(
                        A::ContractInvalid,
                        Some(R::RefTypeMismatch),
                        "host:/contractRef/recordType",
                    ));
                }
            }
        }
        let Some(body) = contract.as_object() else {
            out.push(reason(
                A::ContractIncomplete,
                Some(R::ContractMissing),
                "host:/contract",
            ));
            return Err(out);
        };
        match body.get("schemaVersion") {
            Some(Value::String(v)) if v != crate::PROTOCOL_VERSION => {
                out.push(reason(
                    A::VersionUnsupported,
                    Some(R::ProtocolVersionUnsupported),
                    "host:/contract/schemaVersion",
                ));
                return Err(out);
            }
            _ => {}
        }
        if body.get("recordType").and_then(Value::as_str) != Some(CONTRACT)
            && body.contains_key("recordType")
        {
            out.push(reason(
                A::ContractInvalid,
                Some(R::RefTypeMismatch),
                "host:/contract/recordType",
            ));
            return Err(out);
        }
        if !is_valid_value(Shape::Record(RecordType::OutcomeContract), contract) {
            let issues = crate::schema::validate(
                Shape::Record(RecordType::OutcomeContract),
                &contract.to_serde(),
            );
            if !issues.is_empty() && issues.iter().all(|i| i.keyword == "required") {
                for i in &issues {
                    out.push(reason(
                        A::ContractIncomplete,
                        Some(R::ContractMissing),
                        &format!("host:/contract{}", i.instance_path),
                    ));
                }
            } else {
                out.push(reason(
                    A::ContractInvalid,
                    Some(R::RecordSchemaInvalid),
                    "host:/contract",
                ));
            }
            return Err(out);
        }
        let declared = contract.get("digest").and_then(Value::as_str);
        let actual = record_digest(contract).ok().map(|d| d.render());
        if declared.is_none() || declared != actual.as_deref() {
            out.push(reason(
                A::ContractInvalid,
                Some(R::RecordDigestMismatch),
                "host:/contract/digest",
            ));
        }
        if let Some(m) = reference.as_object() {
            if let (Some(id), Some(cid)) = (
                m.get("id").and_then(Value::as_str),
                contract.get("id").and_then(Value::as_str),
            ) && id != cid
            {
                out.push(reason(
                    A::ContractInvalid,
                    Some(R::RefDigestMismatch),
                    "host:/contractRef/id",
                ));
            }
            if let Some(d) = m.get("digest").and_then(Value::as_str)
                && Some(d) != declared
            {
                out.push(reason(
                    A::ContractInvalid,
                    Some(R::RefDigestMismatch),
                    "host:/contractRef/digest",
                ));
            }
        }
        // The contract's own invariants (spec §4.1).
        let s = |path: &[&str]| -> Option<&str> {
            let mut v = contract;
            for p in path {
                v = v.get(p)?;
            }
            v.as_str()
        };
        if s(&["accountableOwnerId"]) != s(&["subject", "ownerId"]) {
            out.push(reason(
                A::ContractInvalid,
                Some(R::ContractInvalid),
                "host:/contract/accountableOwnerId",
            ));
        }
        let start = s(&["horizon", "start"]).and_then(parse_timestamp);
        let end = s(&["horizon", "end"]).and_then(parse_timestamp);
        if !matches!((start, end), (Some(a), Some(b)) if a < b) {
            out.push(reason(
                A::ContractInvalid,
                Some(R::ContractInvalid),
                "host:/contract/horizon",
            ));
        }
        let mut criteria = HashMap::new();
        for (i, c) in contract
            .get("criteria")
            .and_then(Value::as_array)
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            let id = c.get("id").and_then(Value::as_str).unwrap_or_default();
            let mut bound = Map::new();
            bound.insert("id", c.get("id").cloned().unwrap_or(Value::Null));
            bound.insert(
                "description",
                c.get("description").cloned().unwrap_or(Value::Null),
            );
            let want = binding_digest(&Value::Object(bound))
                .ok()
                .map(|d| d.render());
            let got = c.get("digest").and_then(Value::as_str);
            if want.as_deref() != got
                || criteria
                    .insert(id.to_owned(), got.unwrap_or_default().to_owned())
                    .is_some()
            {
                out.push(reason(
                    A::ContractInvalid,
                    Some(R::ContractInvalid),
                    &format!("host:/contract/criteria/{i}"),
                ));
            }
        }
        if out.iter().all(|r| r.channel() == Channel::Hold) && s(&["status"]) != Some("active") {
            out.push(reason(
                A::ContractNotActive,
                Some(R::ContractNotActive),
                "host:/contract/status",
            ));
        }
        if !out.is_empty() {
            return Err(out);
        }
        Ok(ContractCapability {
            contract: contract.clone(),
            reference: reference.clone(),
            criteria,
        })
    }

    /// The validated contract record.
    pub fn contract(&self) -> &Value {
        &self.contract
    }

    /// The exact `{recordType, id, digest}` reference every candidate binds.
    pub fn reference(&self) -> &Value {
        &self.reference
    }

    /// Checks a source's projection of the contract at JSON Pointer `path`:
    /// it must carry `recordType id digest subject revision policy`, each
    /// exactly equal to the contract's. A missing member (or a missing
    /// projection) is HOLD; another revision id or policy revision is drift
    /// (HOLD); any other difference is REJECT; unknown members are unsupported
    /// (HOLD, listed in `unsupported`).
    pub fn check_projection(
        &self,
        projection: Option<&Value>,
        path: &str,
        unsupported: &mut Vec<String>,
    ) -> Vec<AdapterReason> {
        use AdapterCode as A;
        use ReasonCode as R;
        let mut out = Vec::new();
        let Some(p) = projection.and_then(Value::as_object) else {
            out.push(reason(
                A::ContractIncomplete,
                Some(R::ContractMissing),
                path,
            ));
            return out;
        };
        const MEMBERS: [&str; 6] = [
            "recordType",
            "id",
            "digest",
            "subject",
            "revision",
            "policy",
        ];
        for k in p.keys() {
            if !MEMBERS.contains(&k) {
                unsupported.push(format!("{path}/{k}"));
                out.push(reason(A::UnsupportedField, None, &format!("{path}/{k}")));
            }
        }
        for k in MEMBERS {
            let at = format!("{path}/{k}");
            let want = match k {
                "recordType" | "id" | "digest" => self.reference.get(k),
                _ => self.contract.get(k),
            };
            let Some(got) = p.get(k) else {
                out.push(reason(A::ContractIncomplete, Some(R::ContractMissing), &at));
                continue;
            };
            if Some(got) == want {
                continue;
            }
            let drift =
                |sub: &str| got.get(sub).is_some() && got.get(sub) != want.and_then(|w| w.get(sub));
            let (code, protocol) = match k {
                "recordType" => (A::ContractContradiction, R::RefTypeMismatch),
                "id" | "digest" => (A::ContractContradiction, R::RefDigestMismatch),
                "subject" => (A::ContractContradiction, R::RefSubjectMismatch),
                "revision" if drift("id") => (A::ContractDrift, R::BindingStale),
                "policy" if drift("id") || drift("revision") => (A::ContractDrift, R::BindingStale),
                _ => (A::ContractContradiction, R::BindingDigestMismatch),
            };
            out.push(reason(code, Some(protocol), &at));
        }
        out
    }
}

/// The three record types an observation adapter may emit (spec §8). Owner
/// records (contract, grant, assurance, promotion, learning) are not
/// representable here, so no adapter can seal one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObservationType {
    /// `ExecutionReceiptV1`
    ExecutionReceipt,
    /// `EvidenceRecordV1`
    EvidenceRecord,
    /// `ReconciliationRecordV1`
    ReconciliationRecord,
}

impl ObservationType {
    /// The record type.
    pub const fn record_type(self) -> RecordType {
        match self {
            ObservationType::ExecutionReceipt => RecordType::ExecutionReceipt,
            ObservationType::EvidenceRecord => RecordType::EvidenceRecord,
            ObservationType::ReconciliationRecord => RecordType::ReconciliationRecord,
        }
    }

    /// The `recordType` text.
    pub fn as_str(self) -> &'static str {
        self.record_type().as_str()
    }
}

/// What a mapping observed for one candidate, before sealing. The envelope
/// members bound to the contract (`schemaVersion recordType subject revision
/// policy contractRef digest`) come from the capability, never from here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    /// Which of the three observation records.
    pub record_type: ObservationType,
    /// Record `id`.
    pub id: String,
    /// `source.system`.
    pub system: String,
    /// `source.producer`, as the source names it (trust is the host's).
    pub producer: String,
    /// `source.locator`.
    pub locator: String,
    /// `issuedAt`.
    pub issued_at: String,
    /// The record body beyond the envelope.
    pub body: Map,
    /// JSON Pointer of the source item this draft came from.
    pub origin: String,
}

/// A sealed, digest-bound observation candidate, labelled
/// `unverified-observation`. Only [`seal`] makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    record: Value,
    digest: Digest,
    record_type: ObservationType,
    origin: String,
}

impl Candidate {
    /// The complete record, `digest` included.
    pub fn record(&self) -> &Value {
        &self.record
    }

    /// Its record digest.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// Its type.
    pub fn record_type(&self) -> ObservationType {
        self.record_type
    }

    /// Its record `id`.
    pub fn id(&self) -> &str {
        self.record.get("id").and_then(Value::as_str).unwrap_or("")
    }

    /// The source item it was mapped from (JSON Pointer).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Always [`UNVERIFIED_OBSERVATION`].
    pub fn label(&self) -> &'static str {
        UNVERIFIED_OBSERVATION
    }

    /// The exact `{recordType, id, digest}` reference to this candidate.
    pub fn exact_ref(&self) -> Value {
        let mut m = Map::new();
        m.insert("recordType", self.record_type.as_str().into());
        m.insert("id", self.id().into());
        m.insert("digest", self.digest.render().into());
        Value::Object(m)
    }
}

/// Why a draft could not be sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealError {
    /// The body carries an envelope member the capability owns.
    EnvelopeMember(String),
    /// The sealed record does not satisfy its entry schema.
    Schema,
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealError::EnvelopeMember(m) => write!(f, "body member {m} belongs to the envelope"),
            SealError::Schema => f.write_str("the sealed record fails its entry schema"),
        }
    }
}

impl std::error::Error for SealError {}

const ENVELOPE: [&str; 11] = [
    "schemaVersion",
    "recordType",
    "id",
    "subject",
    "source",
    "revision",
    "policy",
    "issuedAt",
    "digest",
    "supersedes",
    "contractRef",
];

/// Seals `draft` under the validated contract: the envelope's subject,
/// revision, policy and `contractRef` come from `cap`, the record digest is
/// computed, and the result must satisfy its entry schema.
pub fn seal(cap: &ContractCapability, draft: Draft) -> Result<Candidate, SealError> {
    if let Some(k) = draft.body.keys().find(|k| ENVELOPE.contains(k)) {
        return Err(SealError::EnvelopeMember(k.to_owned()));
    }
    let mut m = draft.body;
    m.insert("schemaVersion", crate::PROTOCOL_VERSION.into());
    m.insert("recordType", draft.record_type.as_str().into());
    m.insert("id", draft.id.into());
    let c = &cap.contract;
    m.insert("subject", c.get("subject").cloned().unwrap_or(Value::Null));
    m.insert(
        "revision",
        c.get("revision").cloned().unwrap_or(Value::Null),
    );
    m.insert("policy", c.get("policy").cloned().unwrap_or(Value::Null));
    let mut source = Map::new();
    source.insert("system", draft.system.into());
    source.insert("producer", draft.producer.into());
    source.insert("locator", draft.locator.into());
    m.insert("source", Value::Object(source));
    m.insert("issuedAt", draft.issued_at.into());
    m.insert("contractRef", cap.reference.clone());
    let mut record = Value::Object(m);
    let digest = record_digest(&record).map_err(|_| SealError::Schema)?;
    if let Value::Object(m) = &mut record {
        m.insert("digest", digest.render().into());
    }
    if !is_valid_value(Shape::Record(draft.record_type.record_type()), &record) {
        return Err(SealError::Schema);
    }
    Ok(Candidate {
        record,
        digest,
        record_type: draft.record_type,
        origin: draft.origin,
    })
}

fn time(c: &Candidate, member: &str) -> Option<i64> {
    c.record
        .get(member)
        .and_then(Value::as_str)
        .and_then(parse_timestamp)
}

/// Contradictions inside one mapped collection, each as a REJECT reason with
/// both codes; the candidates are not touched (the caller keeps them).
/// O(n log n) in the number of candidates.
pub fn check_collection(cap: &ContractCapability, candidates: &[Candidate]) -> Vec<AdapterReason> {
    use AdapterCode as A;
    use ReasonCode as R;
    let mut out = Vec::new();
    // One identity, two digests.
    let mut by_identity: BTreeMap<(ObservationType, &str), (Digest, &str)> = BTreeMap::new();
    for c in candidates {
        match by_identity.get(&(c.record_type, c.id())) {
            Some((d, _)) if *d != c.digest => out.push(reason(
                A::IdentityTwoDigests,
                Some(R::RecordEquivocation),
                &c.origin,
            )),
            Some(_) => {}
            None => {
                by_identity.insert((c.record_type, c.id()), (c.digest, &c.origin));
            }
        }
    }
    let receipts: HashMap<(&str, Digest), &Candidate> = candidates
        .iter()
        .filter(|c| c.record_type == ObservationType::ExecutionReceipt)
        .map(|c| ((c.id(), c.digest), c))
        .collect();
    for c in candidates {
        let at = |member: &str| format!("{}{member}", c.origin);
        match c.record_type {
            ObservationType::ExecutionReceipt => {
                if let (Some(s), Some(f)) = (time(c, "startedAt"), time(c, "finishedAt"))
                    && f < s
                {
                    out.push(reason(
                        A::FinishedBeforeStarted,
                        Some(R::ExecutionFinishedBeforeStarted),
                        &c.origin,
                    ));
                }
            }
            ObservationType::EvidenceRecord => {
                let cr = c.record.get("criterionResult");
                let id = cr.and_then(|x| x.get("id")).and_then(Value::as_str);
                let digest = cr.and_then(|x| x.get("digest")).and_then(Value::as_str);
                if id.and_then(|i| cap.criteria.get(i)).map(String::as_str) != digest {
                    out.push(reason(
                        A::CriterionContradictsContract,
                        Some(R::EvidenceCriterionMismatch),
                        &c.origin,
                    ));
                }
                let status = c.record.get("status").and_then(Value::as_str);
                let conclusion = cr.and_then(|x| x.get("conclusion")).and_then(Value::as_str);
                let agree = matches!(
                    (status, conclusion),
                    (Some("supports"), Some("MET"))
                        | (Some("contradicts"), Some("NOT_MET"))
                        | (Some("unknown"), Some("UNKNOWN"))
                );
                if !agree {
                    out.push(reason(
                        A::StatusContradictsConclusion,
                        Some(R::EvidenceStatusConclusionMismatch),
                        &c.origin,
                    ));
                }
            }
            ObservationType::ReconciliationRecord => {
                let r = c.record.get("receiptRef");
                let key = r.and_then(|r| {
                    let id = r.get("id")?.as_str()?;
                    let d = Digest::parse(r.get("digest")?.as_str()?)?;
                    Some((id, d))
                });
                let Some(receipt) = key.and_then(|k| receipts.get(&k)) else {
                    continue;
                };
                let query = c
                    .record
                    .get("query")
                    .and_then(|q| q.get("observedAt"))
                    .and_then(Value::as_str)
                    .and_then(parse_timestamp);
                let unknown =
                    receipt.record.get("status").and_then(Value::as_str) == Some("unknown");
                let boundary = if unknown {
                    time(receipt, "startedAt")
                } else {
                    time(receipt, "finishedAt")
                };
                if let (Some(q), Some(b)) = (query, boundary)
                    && q < b
                {
                    out.push(reason(
                        A::QueryBeforeTerminal,
                        Some(R::ReconciliationPremature),
                        &at(""),
                    ));
                }
            }
        }
    }
    out
}
