//! Observation adapters (spec §8, resolutions §G): the SDK, the two versioned
//! mappings, the host path and the adapter conformance suites.
//!
//! An adapter maps a source document into `ExecutionReceiptV1`,
//! `EvidenceRecordV1` and `ReconciliationRecordV1` candidates labelled
//! `unverified-observation`, with explicit gaps, unsupported fields and
//! reasons. It never creates owner records, sets trust, infers authority,
//! freshness or provider state, or executes anything: it reads one JSON value
//! and returns another. Its result is READY, HOLD (missing, unknown, stale,
//! drifted, unsupported or lossy input) or REJECT (a mapped semantic
//! violation; the candidates are preserved). The host ([`host`]) honours a
//! REJECT as terminal and reduces only a READY result.

pub mod better_workflows;
pub mod host;
pub mod sdk;
pub mod standalone;
pub mod suite;

use crate::digest::{Digest, binding_digest};
use crate::utf16::cmp_utf16;
use crate::validate::Channel;
use crate::value::{Map, Value};
use sdk::{AdapterCode, AdapterReason, Candidate, ContractCapability, UNVERIFIED_OBSERVATION};

/// The two mappings of this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Adapter {
    /// `helmloop-standalone-observation/v1`.
    Standalone,
    /// `better-workflows-run-events/v0`.
    BetterWorkflows,
}

impl Adapter {
    /// Both adapters.
    pub const ALL: [Adapter; 2] = [Adapter::Standalone, Adapter::BetterWorkflows];

    /// The CLI name (`standalone`, `better-workflows`).
    pub const fn name(self) -> &'static str {
        match self {
            Adapter::Standalone => "standalone",
            Adapter::BetterWorkflows => "better-workflows",
        }
    }

    /// The adapter named `s`.
    pub fn from_name(s: &str) -> Option<Adapter> {
        Adapter::ALL.into_iter().find(|a| a.name() == s)
    }

    /// Its mapping identity.
    pub fn identity(self) -> MappingIdentity {
        match self {
            Adapter::Standalone => standalone::identity(),
            Adapter::BetterWorkflows => better_workflows::identity(),
        }
    }

    /// Maps `source` under the validated contract.
    pub fn map(self, cap: &ContractCapability, source: &Value) -> MappingResult {
        match self {
            Adapter::Standalone => standalone::map(cap, source),
            Adapter::BetterWorkflows => better_workflows::map(cap, source),
        }
    }
}

/// Who mapped: `{adapterId, mappingId, sourceFormat, mappingVersion,
/// mappingDigest}`. The digest is the binding digest of the mapping's
/// declared field table (embedded in the crate), so a change to the table is
/// a new mapping identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingIdentity {
    /// `helmloop-standalone` or `helmloop-better-workflows`.
    pub adapter_id: &'static str,
    /// `standalone` or `better-workflows`.
    pub mapping_id: &'static str,
    /// The one source format (and version) the mapping reads.
    pub source_format: &'static str,
    /// The mapping's own version.
    pub mapping_version: &'static str,
    /// Binding digest of the mapping table.
    pub mapping_digest: Digest,
}

impl MappingIdentity {
    /// The identity as a JSON object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("adapterId", self.adapter_id.into());
        m.insert("mappingId", self.mapping_id.into());
        m.insert("sourceFormat", self.source_format.into());
        m.insert("mappingVersion", self.mapping_version.into());
        m.insert("mappingDigest", self.mapping_digest.render().into());
        Value::Object(m)
    }
}

/// Binding digest of an embedded mapping table (a compile-time constant that
/// must parse; a broken table yields the all-zero digest and fails its test).
pub(crate) fn table_digest(table: &str) -> Digest {
    crate::parse(table.as_bytes())
        .ok()
        .and_then(|v| binding_digest(&v).ok())
        .unwrap_or(Digest::from_bytes([0; 32]))
}

/// READY, HOLD or REJECT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MappingStatus {
    /// Every required input was mapped without loss or contradiction.
    Ready,
    /// Missing, unknown, stale, drifted, unsupported or lossy input.
    Hold,
    /// A mapped semantic violation: terminal for this input.
    Reject,
}

impl MappingStatus {
    /// `READY`, `HOLD` or `REJECT`.
    pub const fn as_str(self) -> &'static str {
        match self {
            MappingStatus::Ready => "READY",
            MappingStatus::Hold => "HOLD",
            MappingStatus::Reject => "REJECT",
        }
    }
}

/// What a mapping returns. Candidates are kept whatever the status (a REJECT
/// preserves the mapped facts, spec §8). Only the mappings of this crate make
/// one, and nothing can change it afterwards: a REJECT cannot be edited into a
/// READY result that the host would reduce.
#[derive(Debug, Clone)]
pub struct MappingResult {
    mapping: MappingIdentity,
    candidates: Vec<Candidate>,
    gaps: Vec<String>,
    unsupported_fields: Vec<String>,
    reasons: Vec<AdapterReason>,
}

impl MappingResult {
    /// Who mapped.
    pub fn mapping(&self) -> &MappingIdentity {
        &self.mapping
    }

    /// Sealed candidates (the order is the mapping's, not meaningful).
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// JSON Pointers of required source members that are missing, sorted.
    pub fn gaps(&self) -> &[String] {
        &self.gaps
    }

    /// JSON Pointers of source members, kinds or types the mapping does not support, sorted.
    pub fn unsupported_fields(&self) -> &[String] {
        &self.unsupported_fields
    }

    /// Every reason, sorted.
    pub fn reasons(&self) -> &[AdapterReason] {
        &self.reasons
    }

    /// REJECT if any reason is in the reject channel, else HOLD if there is
    /// any reason, else READY.
    pub fn status(&self) -> MappingStatus {
        if self.reasons.iter().any(|r| r.channel() == Channel::Reject) {
            MappingStatus::Reject
        } else if self.reasons.is_empty() {
            MappingStatus::Ready
        } else {
            MappingStatus::Hold
        }
    }

    /// The codes of one channel, adapter and protocol codes together, sorted
    /// and de-duplicated.
    pub fn codes(&self, channel: Channel) -> Vec<String> {
        let mut v: Vec<String> = self
            .reasons
            .iter()
            .filter(|r| r.channel() == channel)
            .flat_map(|r| {
                std::iter::once(r.adapter.as_str().to_owned())
                    .chain(r.protocol.map(|p| p.as_str().to_owned()))
            })
            .collect();
        v.sort_by(|a, b| cmp_utf16(a, b));
        v.dedup();
        v
    }

    /// The result as JSON: `{candidates, gaps, label, mapping, reasons {reject,
    /// hold}, status, unsupportedFields}`.
    pub fn to_value(&self) -> Value {
        let strings = |v: &[String]| Value::Array(v.iter().map(|s| s.as_str().into()).collect());
        let mut reasons = Map::new();
        for ch in [Channel::Reject, Channel::Hold] {
            reasons.insert(
                ch.as_str(),
                Value::Array(
                    self.reasons
                        .iter()
                        .filter(|r| r.channel() == ch)
                        .map(AdapterReason::to_value)
                        .collect(),
                ),
            );
        }
        let mut m = Map::new();
        m.insert("mapping", self.mapping.to_value());
        m.insert("status", self.status().as_str().into());
        m.insert("label", UNVERIFIED_OBSERVATION.into());
        m.insert(
            "candidates",
            Value::Array(self.candidates.iter().map(|c| c.record().clone()).collect()),
        );
        m.insert("gaps", strings(&self.gaps));
        m.insert("unsupportedFields", strings(&self.unsupported_fields));
        m.insert("reasons", Value::Object(reasons));
        Value::Object(m)
    }
}

/// What a mapping collects while it reads a source.
#[derive(Debug, Default)]
pub(crate) struct Collect {
    pub gaps: Vec<String>,
    pub unsupported: Vec<String>,
    pub reasons: Vec<AdapterReason>,
}

impl Collect {
    pub fn gap(&mut self, path: String) {
        self.reasons.push(AdapterReason::new(
            AdapterCode::RequiredInputMissing,
            None,
            path.as_str(),
        ));
        self.gaps.push(path);
    }

    pub fn unsupported(&mut self, path: String) {
        self.reasons.push(AdapterReason::new(
            AdapterCode::UnsupportedField,
            None,
            path.as_str(),
        ));
        self.unsupported.push(path);
    }

    /// Adds the contract projection's reasons; its missing members are gaps.
    pub fn projection(&mut self, reasons: Vec<AdapterReason>) {
        for r in &reasons {
            if r.adapter == AdapterCode::ContractIncomplete {
                self.gaps.push(r.path.clone());
            }
        }
        self.reasons.extend(reasons);
    }

    pub fn hold(&mut self, code: AdapterCode, path: &str) {
        self.reasons.push(AdapterReason::new(code, None, path));
    }

    /// The object at `path` with every `required` member present and no
    /// member outside `required` and `optional`. Missing members are gaps,
    /// unknown ones unsupported; `None` when any of that happened (the item
    /// is then not mapped: fail closed) or when `v` is not an object.
    pub fn object<'a>(
        &mut self,
        v: Option<&'a Value>,
        path: &str,
        required: &[&str],
        optional: &[&str],
    ) -> Option<&'a Map> {
        let Some(v) = v else {
            self.gap(path.to_owned());
            return None;
        };
        let Some(m) = v.as_object() else {
            self.hold(AdapterCode::ValueUnsupported, path);
            return None;
        };
        let mut ok = true;
        for k in m.keys() {
            if !required.contains(&k) && !optional.contains(&k) {
                self.unsupported(format!("{path}/{}", escape_pointer(k)));
                ok = false;
            }
        }
        for k in required {
            if !m.contains_key(k) {
                self.gap(format!("{path}/{k}"));
                ok = false;
            }
        }
        ok.then_some(m)
    }

    /// Finishes a mapping: collection contradictions are added, lists sorted.
    pub fn finish(
        mut self,
        mapping: MappingIdentity,
        cap: &ContractCapability,
        candidates: Vec<Candidate>,
    ) -> MappingResult {
        self.reasons.extend(sdk::check_collection(cap, &candidates));
        self.reasons.sort();
        self.reasons.dedup();
        self.gaps.sort_by(|a, b| cmp_utf16(a, b));
        self.gaps.dedup();
        self.unsupported.sort_by(|a, b| cmp_utf16(a, b));
        self.unsupported.dedup();
        MappingResult {
            mapping,
            candidates,
            gaps: self.gaps,
            unsupported_fields: self.unsupported,
            reasons: self.reasons,
        }
    }
}

/// A member name as a JSON Pointer token (RFC 6901).
pub(crate) fn escape_pointer(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// Copies `keys` of `from` (those present) into `to`.
pub(crate) fn copy(from: &Map, to: &mut Map, keys: &[&str]) {
    for k in keys {
        if let Some(v) = from.get(k) {
            to.insert(*k, v.clone());
        }
    }
}
