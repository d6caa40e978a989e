//! The HelmLoop v0.1 reducer (spec §3–§7, resolutions §D–§F).
//!
//! `reduce(&EvaluationInput) -> ReductionResult` is pure: no clock, no I/O,
//! no randomness, deterministic, and it never panics on input. Its stages
//! follow the twelve steps of spec §6, one module each, and every stage only
//! consumes what earlier stages produced:
//!
//! | § 6 step | module | produces |
//! | --- | --- | --- |
//! | 1 strict parse at the boundary | [`EvaluationInput::parse`], [`frame`] | the input value, the evaluation frame (context controls, policy digest, transition) |
//! | 2 schema + digest of every raw record | [`verify`] | distinct bodies with their validity |
//! | 3 replay folding, equivocation | [`verify`] | folded records, `RECORD_EQUIVOCATION` |
//! | 4 as-of filtering | [`scope::as_of`] | `LATER_FACT` records |
//! | 5 trust classification | [`scope::trust`] | untrusted observation records |
//! | 6 exact reference resolution | [`scope::references`] | reference type/digest/missing verdicts |
//! | 7 subject/revision/policy, lineage | [`scope::bindings`], [`lineage`] | the contract head, supersession, grant and promotion lineages |
//! | 8 authority consumption, action binding | [`authority`] | `execution`, `authority` |
//! | 9 evidence and assurance | [`evidence`] | `evidence`, the recomputed sufficient assurance set |
//! | 10 promotion, reconciliation, outcome | [`decisions`] | `promotion`, `reconciliation`, `observedOutcome`, learning codes |
//! | 11 sorting | [`result`] | UTF-16-sorted codes, records, producers |
//! | 12 disposition, `inputDigest` | [`result`] | the [`ReductionResult`] |
//!
//! See `docs/helmloop-reducer.md` for the rules and the design-inference
//! decisions taken where the spec and the resolutions are silent.

mod authority;
pub mod axes;
pub mod codes;
mod decisions;
mod evidence;
mod frame;
mod lineage;
pub mod result;
mod scope;
mod verify;

use std::collections::{BTreeSet, HashMap, HashSet};

/// Timestamps (moved to [`crate::time`], shared with the schema programs; kept here by name).
pub use crate::time;
pub use axes::Axes;
pub use codes::ReasonCode;
pub use result::{Disposition, RecordResult, RecordStatus, ReductionResult};

use crate::digest::Digest;
use crate::error::C14nError;
use crate::schema::RecordType;
use crate::value::Value;
use crate::{ParseOptions, RecordRoots, parse_records};
use frame::Frame;
use time::{Millis, parse_timestamp};

/// A strictly parsed evaluation input `{protocolVersion, context, records}`
/// (spec §6 step 1). Its shape is checked by the reducer, not here, so that a
/// malformed input still yields a result with reason codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvaluationInput {
    value: Value,
}

impl EvaluationInput {
    /// Strict HL-C14N-1 parse at the boundary (default size cap).
    pub fn parse(bytes: &[u8]) -> Result<EvaluationInput, C14nError> {
        EvaluationInput::parse_with(bytes, ParseOptions::default())
    }

    /// Strict HL-C14N-1 parse at the boundary. The nesting limit is counted
    /// inside each element of `records` (resolutions §H.8): a record
    /// accepted on its own is accepted inside an evaluation input.
    pub fn parse_with(bytes: &[u8], options: ParseOptions) -> Result<EvaluationInput, C14nError> {
        parse_records(bytes, options, RecordRoots::InputRecords).map(EvaluationInput::from_value)
    }

    /// Wraps a value that is already in the profile (e.g. built in memory).
    pub fn from_value(value: Value) -> EvaluationInput {
        EvaluationInput { value }
    }

    /// The input value.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The canonical HL-C14N-1 bytes of the input, with the nesting limit
    /// counted inside each record as at the boundary (resolutions §H.8), so
    /// an input assembled from stored records serializes whenever each
    /// record does. Fails only for a value outside the profile.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, C14nError> {
        crate::canon::to_canonical_vec_records(&self.value, RecordRoots::InputRecords)
    }
}

/// `context.policy.digest` as resolutions §D defines it: the binding digest
/// of the policy controls of `context` (scope, required evidence IDs and
/// trusted producers sorted by UTF-16 code units). For hosts that build an
/// evaluation context; the reducer compares it with the declared one.
pub fn policy_digest(context: &Value) -> Result<Digest, C14nError> {
    crate::digest::binding_digest(&frame::policy_body(context))
}

/// Parses and reduces an evaluation input; a parse failure is the boundary
/// refusal of spec §6 step 1 (the CLI exits 1 with the `C14N_*` code).
pub fn reduce_bytes(bytes: &[u8]) -> Result<ReductionResult, C14nError> {
    EvaluationInput::parse(bytes).map(|i| reduce(&i))
}

/// Reduces an evaluation input to its result (spec §6).
pub fn reduce(input: &EvaluationInput) -> ReductionResult {
    let raw = &input.value;
    let raw_records: &[Value] = raw.get("records").and_then(Value::as_array).unwrap_or(&[]);
    // Step 1 (after the boundary parse): the evaluation frame.
    let frame = frame::evaluate(raw);
    // Steps 2–3 run on every record whatever the frame, except for an input
    // in another protocol version, which is not evaluated as v0.1 at all.
    let mut w = Work::new(frame, raw_records);
    if !w.frame.version_unsupported() {
        verify::verify_and_fold(&mut w);
    }
    let mut outcome = Outcome::unevaluated();
    if w.frame.usable().is_some() {
        scope::as_of(&mut w); // step 4
        scope::trust(&mut w); // step 5
        scope::references(&mut w); // step 6
        scope::bindings(&mut w); // step 7
        let grants = lineage::grant_lineages(&mut w);
        let promotions = lineage::promotion_lineages(&mut w);
        let exec = authority::evaluate(&mut w, &grants); // step 8
        let ev = evidence::evaluate(&mut w, exec.receipt); // step 9
        outcome = decisions::evaluate(&mut w, &grants, &promotions, &exec, &ev); // step 10
    } else {
        w.mark_unevaluated();
    }
    result::finish(raw, &w, outcome) // steps 11–12
}

/// The axes and pass qualifiers produced by steps 8–10.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outcome {
    pub axes: Axes,
    pub authority_not_required: bool,
    pub reconciliation_not_required: bool,
}

impl Outcome {
    fn unevaluated() -> Outcome {
        Outcome {
            axes: Axes::UNEVALUATED,
            authority_not_required: false,
            reconciliation_not_required: false,
        }
    }
}

/// How a reference resolved (spec §3): by type and ID, then by digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// The record with that type, ID and digest (whatever its status).
    Found(usize),
    /// No record with that type and ID in the input (a record with the
    /// same ID under another type does not count, resolutions §H.3).
    Missing,
    /// The reference declares another type than its slot requires.
    TypeMismatch,
    /// A record of that type and ID exists with another digest.
    DigestMismatch,
}

/// One distinct raw record body and what the stages found about it.
#[derive(Debug)]
pub(crate) struct Rec<'a> {
    pub raw: &'a Value,
    pub body_digest: Digest,
    /// The record type, when `recordType` names one of the eight.
    pub rtype: Option<RecordType>,
    pub type_text: Option<&'a str>,
    pub id: Option<&'a str>,
    pub digest: Option<&'a str>,
    /// `digest` parsed, when it is a well-formed digest.
    pub declared: Option<Digest>,
    pub status: RecordStatus,
    pub reasons: BTreeSet<ReasonCode>,
    /// Replaced by an eligible successor (generic supersession).
    pub superseded: bool,
    /// The members most stages read, looked up once in step 2.
    pub f: Fields<'a>,
}

/// Members of a record that several stages read, found in one pass over the
/// record's members while it is being verified (step 2), so later stages do
/// not walk the value tree again for them. Each is exactly what the
/// corresponding path lookup gives: `""` for an absent or non-string
/// string, `Millis::MAX` for an absent or unparsable timestamp.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fields<'a> {
    pub subject: Option<&'a Value>,
    pub contract_ref: Option<&'a Value>,
    /// The single `supersedes` predecessor reference (the first entry).
    pub supersedes: Option<&'a Value>,
    /// `status`.
    pub status: &'a str,
    pub revision_id: &'a str,
    pub revision_digest: &'a str,
    pub policy_id: &'a str,
    pub policy_revision: &'a str,
    pub policy_digest: &'a str,
    /// `source.producer`.
    pub producer: &'a str,
    /// `criterionResult.id`, `.digest` and `.conclusion`.
    pub criterion_id: &'a str,
    pub criterion_digest: &'a str,
    pub criterion_conclusion: &'a str,
    pub issued: Millis,
    pub observed: Millis,
    pub valid_until: Millis,
}

impl<'a> Fields<'a> {
    pub(crate) fn of(raw: &'a Value) -> Fields<'a> {
        let mut f = Fields {
            subject: None,
            contract_ref: None,
            supersedes: None,
            status: "",
            revision_id: "",
            revision_digest: "",
            policy_id: "",
            policy_revision: "",
            policy_digest: "",
            producer: "",
            criterion_id: "",
            criterion_digest: "",
            criterion_conclusion: "",
            issued: Millis::MAX,
            observed: Millis::MAX,
            valid_until: Millis::MAX,
        };
        let Some(m) = raw.as_object() else {
            return f;
        };
        let s = |v: &'a Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
        let t = |v: &'a Value| v.as_str().and_then(parse_timestamp).unwrap_or(Millis::MAX);
        for (k, v) in m.iter() {
            match k {
                "subject" => f.subject = Some(v),
                "contractRef" => f.contract_ref = Some(v),
                "supersedes" => f.supersedes = v.as_array().and_then(|a| a.first()),
                "status" => f.status = v.as_str().unwrap_or(""),
                "revision" => (f.revision_id, f.revision_digest) = (s(v, "id"), s(v, "digest")),
                "policy" => {
                    (f.policy_id, f.policy_revision, f.policy_digest) =
                        (s(v, "id"), s(v, "revision"), s(v, "digest"))
                }
                "source" => f.producer = s(v, "producer"),
                "criterionResult" => {
                    (f.criterion_id, f.criterion_digest, f.criterion_conclusion) =
                        (s(v, "id"), s(v, "digest"), s(v, "conclusion"))
                }
                "issuedAt" => f.issued = t(v),
                "observedAt" => f.observed = t(v),
                "validUntil" => f.valid_until = t(v),
                _ => {}
            }
        }
        f
    }
}

impl<'a> Rec<'a> {
    /// The value at `path` (object members only).
    pub fn at(&self, path: &[&str]) -> Option<&'a Value> {
        at(self.raw, path)
    }

    /// The string at `path`, `""` when absent (schema-valid records have it).
    pub fn s(&self, path: &[&str]) -> &'a str {
        self.at(path).and_then(Value::as_str).unwrap_or("")
    }

    /// The timestamp at `path`. Verified records have every timestamp they
    /// declare parsed in step 2; `Millis::MAX` stands for an absent one, which
    /// is never "no later than" anything.
    pub fn t(&self, path: &[&str]) -> Millis {
        self.at(path)
            .and_then(Value::as_str)
            .and_then(parse_timestamp)
            .unwrap_or(Millis::MAX)
    }

    pub fn issued(&self) -> Millis {
        self.f.issued
    }

    pub fn is(&self, t: RecordType) -> bool {
        self.rtype == Some(t)
    }

    /// Whether `r` is an exact reference to this record.
    pub fn is_referenced_by(&self, r: &Value) -> bool {
        let field = |k: &str| r.get(k).and_then(Value::as_str);
        r.as_object().is_some_and(|m| m.len() == 3)
            && field("recordType") == self.type_text
            && field("id") == self.id
            && field("digest") == self.digest
            && self.id.is_some()
    }
}

/// The value at `path` inside `v`.
pub(crate) fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    Some(cur)
}

/// The working state of one reduction.
pub(crate) struct Work<'a> {
    pub frame: Frame<'a>,
    pub raw_records: &'a [Value],
    pub recs: Vec<Rec<'a>>,
    pub codes: BTreeSet<ReasonCode>,
    /// Whether some distinct record has this `(recordType, id)`.
    index: HashSet<(RecordType, &'a str)>,
    /// The first distinct record (in body-digest order) with this exact
    /// `(recordType, id, digest)`: one lookup per reference, whatever the
    /// number of bodies sharing an identity (resolutions §H.7).
    exact: HashMap<(RecordType, &'a str, &'a str), usize>,
    /// `shared[i]`: another distinct body carries record `i`'s exact
    /// `(recordType, id, digest)`, so a reference to it names several bodies.
    shared: Vec<bool>,
    /// The single usable outcome contract head (step 7).
    pub contract: Option<usize>,
    /// Its accountable owner.
    pub owner: &'a str,
    /// Producers of observation records outside `trustedProducers` (step 5).
    pub untrusted: BTreeSet<&'a str>,
    /// Sorted distinct body digests (step 3), reused for `inputDigest`.
    pub body_digests: Option<Vec<Digest>>,
}

impl<'a> Work<'a> {
    fn new(frame: Frame<'a>, raw_records: &'a [Value]) -> Work<'a> {
        let mut codes = BTreeSet::new();
        codes.extend(frame.codes.iter().copied());
        Work {
            frame,
            raw_records,
            recs: Vec::new(),
            codes,
            index: HashSet::new(),
            exact: HashMap::new(),
            shared: Vec::new(),
            contract: None,
            owner: "",
            untrusted: BTreeSet::new(),
            body_digests: None,
        }
    }

    /// Builds the identity indexes once the distinct records are known.
    pub(crate) fn build_index(&mut self) {
        self.shared = vec![false; self.recs.len()];
        for (i, r) in self.recs.iter().enumerate() {
            if let (Some(id), Some(t)) = (r.id, r.rtype) {
                self.index.insert((t, id));
                if let Some(d) = r.digest {
                    let first = *self.exact.entry((t, id, d)).or_insert(i);
                    if first != i {
                        self.shared[first] = true;
                        self.shared[i] = true;
                    }
                }
            }
        }
    }

    /// Reports `code` in its channel and against record `i`. A reject code
    /// makes the record `INVALID`; a hold code makes an eligible record
    /// `INELIGIBLE`.
    pub fn flag(&mut self, i: usize, code: ReasonCode) {
        self.codes.insert(code);
        let r = &mut self.recs[i];
        r.reasons.insert(code);
        if code.is_reject() {
            r.status = RecordStatus::Invalid;
        } else if r.status == RecordStatus::Eligible {
            r.status = RecordStatus::Ineligible;
        }
    }

    /// Reports `code` against record `i` without changing its status.
    pub fn note(&mut self, i: usize, code: ReasonCode) {
        self.codes.insert(code);
        self.recs[i].reasons.insert(code);
    }

    /// Reports a transition-level code.
    pub fn emit(&mut self, code: ReasonCode) {
        self.codes.insert(code);
    }

    /// Marks an eligible record ineligible because something it depends on
    /// is unavailable; the dependency already carries its own code.
    pub fn drop_dependent(&mut self, i: usize) {
        if self.recs[i].status == RecordStatus::Eligible {
            self.recs[i].status = RecordStatus::Ineligible;
        }
    }

    /// Whether the fields of record `i` may be read through a reference:
    /// not when another body carries the same exact reference (equivocation),
    /// since which body resolution returns must not matter (resolutions §H.6).
    pub fn readable(&self, i: usize) -> bool {
        !self.shared.get(i).copied().unwrap_or(false)
    }

    pub fn eligible(&self, i: usize) -> bool {
        self.recs[i].status == RecordStatus::Eligible
    }

    /// Indexes of records of type `t` that are still eligible.
    pub fn eligible_of(&self, t: RecordType) -> Vec<usize> {
        (0..self.recs.len())
            .filter(|&i| self.recs[i].is(t) && self.eligible(i))
            .collect()
    }

    /// Indexes of eligible records of type `t` that no eligible successor replaced.
    pub fn heads_of(&self, t: RecordType) -> Vec<usize> {
        self.eligible_of(t)
            .into_iter()
            .filter(|&i| !self.recs[i].superseded)
            .collect()
    }

    /// Resolves an exact reference expected to name a record of type
    /// `expected`, by `(recordType, id, digest)` together (resolutions §H.3):
    /// a declared type other than the slot's is a type mismatch; a record
    /// with the same id under another type does not resolve it (missing);
    /// the same type and id under another digest is a digest mismatch.
    pub fn resolve(&self, r: &Value, expected: RecordType) -> Resolved {
        let field = |k: &str| r.get(k).and_then(Value::as_str);
        let (Some(t), Some(id), Some(digest)) = (field("recordType"), field("id"), field("digest"))
        else {
            return Resolved::Missing;
        };
        if t != expected.as_str() {
            return Resolved::TypeMismatch;
        }
        if let Some(&i) = self.exact.get(&(expected, id, digest)) {
            return Resolved::Found(i);
        }
        if self.index.contains(&(expected, id)) {
            Resolved::DigestMismatch
        } else {
            Resolved::Missing
        }
    }

    /// After an unusable frame: every record not already invalid or held by
    /// its own version is left unevaluated.
    fn mark_unevaluated(&mut self) {
        let frame_codes: Vec<ReasonCode> = self.frame.codes.clone();
        for r in &mut self.recs {
            if r.status == RecordStatus::Eligible {
                r.status = RecordStatus::Ineligible;
                r.reasons.extend(frame_codes.iter().copied());
            }
        }
    }
}

/// Results of step 8 that later stages consume.
pub(crate) struct ExecutionFacts {
    /// The single eligible receipt head, when there is exactly one.
    pub receipt: Option<usize>,
    /// More than one eligible receipt head.
    pub multiple: bool,
    /// An execution lineage reached `reserved` without an eligible receipt.
    pub reserved_without_receipt: bool,
    pub execution: axes::Execution,
    pub authority: axes::Authority,
    pub authority_not_required: bool,
}

/// Results of step 9 that later stages consume.
pub(crate) struct EvidenceFacts {
    pub evidence: axes::Evidence,
    /// Assurance decisions in the recomputed sufficient set.
    pub sufficient: BTreeSet<usize>,
}
