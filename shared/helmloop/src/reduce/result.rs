//! Steps 11–12: UTF-16 sorting, disposition and `inputDigest`; the
//! [`ReductionResult`] and its canonical JSON form (resolutions §D).

use std::cmp::Ordering;

use super::axes::Axes;
use super::codes::ReasonCode;
use super::{Outcome, Work};
use crate::digest::{Digest, Domain, binding_digest, digest_canonical};
use crate::utf16::cmp_utf16;
use crate::validate::Channel;
use crate::value::{Map, Value};
use crate::{PROTOCOL_VERSION, canon};

/// The overall disposition of the requested transition (spec §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// Every axis in its pass state, no hold or reject reason.
    Pass,
    /// Missing, stale, unknown, ambiguous, unsupported or awaiting a decision.
    Hold,
    /// Tampered/invalid, unauthorized, revoked, failed or contradicted.
    Reject,
}

impl Disposition {
    /// `PASS`, `HOLD` or `REJECT`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Disposition::Pass => "PASS",
            Disposition::Hold => "HOLD",
            Disposition::Reject => "REJECT",
        }
    }

    /// The disposition named `s`.
    pub fn from_name(s: &str) -> Option<Disposition> {
        [Disposition::Pass, Disposition::Hold, Disposition::Reject]
            .into_iter()
            .find(|d| d.as_str() == s)
    }
}

/// What the reducer made of one distinct record body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordStatus {
    /// Took part in the evaluation.
    Eligible,
    /// Valid but unusable here (untrusted, stale binding, unresolved, dependency).
    Ineligible,
    /// Tampered, malformed or semantically invalid.
    Invalid,
    /// An event after `evaluatedAt`; kept in the commitment, not evaluated.
    LaterFact,
}

impl RecordStatus {
    /// `ELIGIBLE`, `INELIGIBLE`, `INVALID` or `LATER_FACT`.
    pub const fn as_str(self) -> &'static str {
        match self {
            RecordStatus::Eligible => "ELIGIBLE",
            RecordStatus::Ineligible => "INELIGIBLE",
            RecordStatus::Invalid => "INVALID",
            RecordStatus::LaterFact => "LATER_FACT",
        }
    }
}

/// One entry of `recordResults`. Identity members are `None` when the raw
/// record does not carry a well-formed one (design-inference: the entry is
/// still listed, keyed by `bodyDigest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordResult {
    /// `recordType`, when one of the eight.
    pub record_type: Option<String>,
    /// `id`, when an identifier.
    pub id: Option<String>,
    /// Declared `digest`, when a well-formed digest.
    pub digest: Option<String>,
    /// Binding digest of the complete raw body (the `inputDigest` member).
    pub body_digest: Digest,
    /// What the reducer made of it.
    pub status: RecordStatus,
    /// Codes reported against it, sorted.
    pub reasons: Vec<ReasonCode>,
}

/// The reducer's result (spec §6, resolutions §D).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReductionResult {
    /// Always `0.1`: the version this reducer evaluates.
    pub protocol_version: &'static str,
    /// `context.targetTransition` when it is an identifier.
    pub target_transition: Option<String>,
    /// PASS, HOLD or REJECT.
    pub disposition: Disposition,
    /// All six axes.
    pub axes: Axes,
    /// Reject channel, sorted.
    pub reject: Vec<ReasonCode>,
    /// Hold channel, sorted.
    pub hold: Vec<ReasonCode>,
    /// Binding digest of `{protocolVersion, context, records}` (resolutions §D).
    pub input_digest: Digest,
    /// One entry per distinct raw body, sorted.
    pub record_results: Vec<RecordResult>,
    /// Trusted producers of the context, sorted.
    pub trusted_producers: Vec<String>,
    /// Producers of observation records outside that set, sorted.
    pub untrusted_producers: Vec<String>,
}

fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._:-".contains(c))
}

fn cmp_opt(a: &Option<String>, b: &Option<String>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => cmp_utf16(x, y),
    }
}

fn sorted_codes(mut v: Vec<ReasonCode>) -> Vec<ReasonCode> {
    v.sort_by(|a, b| cmp_utf16(a.as_str(), b.as_str()));
    v.dedup();
    v
}

/// `inputDigest`: the binding digest of `{protocolVersion, context,
/// records}` where `records` is the sorted, de-duplicated list of binding
/// digests of each complete raw record body.
pub fn input_digest(input: &Value) -> Digest {
    input_digest_with(input, None)
}

/// [`input_digest`] with the sorted distinct body digests already computed.
fn input_digest_with(input: &Value, known: Option<&[Digest]>) -> Digest {
    let mut bodies: Vec<String> = match known {
        // Sorted and distinct already: digest bytes order equals the order
        // of their lowercase hex renderings.
        Some(known) => known.iter().map(Digest::render).collect(),
        None => input
            .get("records")
            .and_then(Value::as_array)
            .unwrap_or(&[])
            .iter()
            .map(|r| {
                binding_digest(r)
                    .map_or_else(|e| format!("unhashable:{}", e.code()), |d| d.render())
            })
            .collect(),
    };
    if known.is_none() {
        bodies.sort_by(|a, b| cmp_utf16(a, b));
        bodies.dedup();
    }
    // The canonical bytes of `{context, protocolVersion, records}`, written
    // directly (members in canonical order) rather than through a cloned
    // map. Every member comes from a parsed input or is an ASCII string, so
    // the fallback only covers a value built in memory outside the profile.
    let member = |k: &str| input.get(k).unwrap_or(&Value::Null);
    let mut out = Vec::with_capacity(256 + 74 * bodies.len());
    let written = (|| {
        out.extend_from_slice(b"{\"context\":");
        canon::write_member(&mut out, member("context"))?;
        out.extend_from_slice(b",\"protocolVersion\":");
        canon::write_member(&mut out, member("protocolVersion"))?;
        out.extend_from_slice(b",\"records\":[");
        for (i, b) in bodies.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            canon::write_escaped(&mut out, b.as_bytes());
        }
        out.extend_from_slice(b"]}");
        Ok::<(), crate::error::C14nError>(())
    })();
    match written {
        Ok(()) => digest_canonical(Domain::Binding, &out),
        Err(_) => Digest::from_bytes([0; 32]),
    }
}

/// Steps 11–12.
pub(crate) fn finish(input: &Value, w: &Work<'_>, outcome: Outcome) -> ReductionResult {
    let mut reject = Vec::new();
    let mut hold = Vec::new();
    for &c in &w.codes {
        match c.channel() {
            Channel::Reject => reject.push(c),
            Channel::Hold => hold.push(c),
        }
    }
    let axes = outcome.axes;
    let all_pass = axes.all_pass(
        outcome.authority_not_required,
        outcome.reconciliation_not_required,
    );
    // Defensive: a non-pass axis is always explained by some code; should a
    // future change break that, the transition still cannot pass.
    if reject.is_empty() && hold.is_empty() && !all_pass {
        hold.push(ReasonCode::ExecutionUnknown);
    }
    let disposition = if !reject.is_empty() {
        Disposition::Reject
    } else if !hold.is_empty() {
        Disposition::Hold
    } else {
        Disposition::Pass
    };
    let mut record_results: Vec<RecordResult> = w
        .recs
        .iter()
        .map(|r| RecordResult {
            record_type: r.type_text.map(str::to_owned),
            id: r.id.filter(|s| is_identifier(s)).map(str::to_owned),
            digest: r.digest.filter(|_| r.declared.is_some()).map(str::to_owned),
            body_digest: r.body_digest,
            status: r.status,
            reasons: sorted_codes(r.reasons.iter().copied().collect()),
        })
        .collect();
    record_results.sort_by(|a, b| {
        cmp_opt(&a.record_type, &b.record_type)
            .then_with(|| cmp_opt(&a.id, &b.id))
            .then_with(|| cmp_opt(&a.digest, &b.digest))
            .then_with(|| a.body_digest.cmp(&b.body_digest))
    });
    let trusted: Vec<String> = w
        .frame
        .controls
        .as_ref()
        .map(|c| {
            c.trusted_producers
                .iter()
                .map(|s| (*s).to_owned())
                .collect()
        })
        .unwrap_or_default();
    let untrusted: Vec<String> = w.untrusted.iter().map(|s| (*s).to_owned()).collect();
    let sort = |mut v: Vec<String>| {
        v.sort_by(|a, b| cmp_utf16(a, b));
        v.dedup();
        v
    };
    ReductionResult {
        protocol_version: PROTOCOL_VERSION,
        target_transition: w
            .frame
            .target_transition
            .filter(|t| is_identifier(t))
            .map(str::to_owned),
        disposition,
        axes,
        reject: sorted_codes(reject),
        hold: sorted_codes(hold),
        input_digest: input_digest_with(input, w.body_digests.as_deref()),
        record_results,
        trusted_producers: sort(trusted),
        untrusted_producers: sort(untrusted),
    }
}

fn codes_value(codes: &[ReasonCode]) -> Value {
    Value::Array(codes.iter().map(|c| Value::from(c.as_str())).collect())
}

fn opt(s: &Option<String>) -> Value {
    s.as_deref().map_or(Value::Null, Value::from)
}

impl ReductionResult {
    /// Whether every axis is in its pass state and both channels are empty.
    pub fn is_pass(&self) -> bool {
        self.disposition == Disposition::Pass
    }

    /// The result as a value (valid under `$defs/ReductionResult`).
    pub fn to_value(&self) -> Value {
        let mut axes = Map::new();
        for (k, v) in self.axes.pairs() {
            axes.insert(k, v.into());
        }
        let mut channels = Map::new();
        channels.insert("reject", codes_value(&self.reject));
        channels.insert("hold", codes_value(&self.hold));
        let records = self
            .record_results
            .iter()
            .map(|r| {
                let mut m = Map::new();
                m.insert("recordType", opt(&r.record_type));
                m.insert("id", opt(&r.id));
                m.insert("digest", opt(&r.digest));
                m.insert("bodyDigest", r.body_digest.render().into());
                m.insert("status", r.status.as_str().into());
                m.insert("reasons", codes_value(&r.reasons));
                Value::Object(m)
            })
            .collect();
        let strings =
            |v: &[String]| Value::Array(v.iter().map(|s| Value::from(s.as_str())).collect());
        let mut trust = Map::new();
        trust.insert("trustedProducers", strings(&self.trusted_producers));
        trust.insert("untrustedProducers", strings(&self.untrusted_producers));
        let mut m = Map::new();
        m.insert("protocolVersion", self.protocol_version.into());
        m.insert("targetTransition", opt(&self.target_transition));
        m.insert("disposition", self.disposition.as_str().into());
        m.insert("axes", Value::Object(axes));
        m.insert("reasonCodes", Value::Object(channels));
        m.insert("inputDigest", self.input_digest.render().into());
        m.insert("recordResults", Value::Array(records));
        m.insert("trust", Value::Object(trust));
        Value::Object(m)
    }

    /// Canonical JSON text of [`ReductionResult::to_value`].
    pub fn to_json(&self) -> String {
        // Every string is an identifier, a digest, a fixed code or comes from
        // a parsed (hence NFC) input, so the value is always canonical.
        canon::to_canonical_string(&self.to_value())
            .unwrap_or_else(|e| format!("{{\"error\":\"{}\"}}", e.code()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    /// `inputDigest` as a binding digest of the map, built the plain way.
    fn reference(input: &Value) -> Digest {
        let mut bodies: Vec<String> = input
            .get("records")
            .and_then(Value::as_array)
            .unwrap_or(&[])
            .iter()
            .map(|r| {
                binding_digest(r)
                    .map_or_else(|e| format!("unhashable:{}", e.code()), |d| d.render())
            })
            .collect();
        bodies.sort_by(|a, b| cmp_utf16(a, b));
        bodies.dedup();
        let mut m = Map::new();
        m.insert(
            "protocolVersion",
            input.get("protocolVersion").cloned().unwrap_or_default(),
        );
        m.insert("context", input.get("context").cloned().unwrap_or_default());
        m.insert(
            "records",
            Value::Array(bodies.into_iter().map(Value::from).collect()),
        );
        binding_digest(&Value::Object(m)).unwrap_or(Digest::from_bytes([0; 32]))
    }

    #[test]
    fn input_digest_writes_the_bytes_of_the_map() {
        for text in [
            r#"{"protocolVersion":"0.1","context":{"b":[1,"x"],"a":null},"records":[{"z":1},{"a":"\u0001"},{"z":1}]}"#,
            r#"{"context":{}}"#,
            r#"{"records":[]}"#,
            r#"[1,2]"#,
            r#"{"protocolVersion":7,"records":[1,"é",[],{}]}"#,
        ] {
            let v = parse(text.as_bytes()).unwrap();
            assert_eq!(input_digest(&v), reference(&v), "{text}");
        }
        // A value outside the profile (not NFC) in a record and in the context.
        let mut m = Map::new();
        m.insert("records", Value::Array(vec![Value::from("e\u{301}")]));
        let v = Value::Object(m.clone());
        assert_eq!(input_digest(&v), reference(&v));
        m.insert("context", Value::from("e\u{301}"));
        let v = Value::Object(m);
        assert_eq!(input_digest(&v), reference(&v));
        assert_eq!(input_digest(&v), Digest::from_bytes([0; 32]));
    }
}
