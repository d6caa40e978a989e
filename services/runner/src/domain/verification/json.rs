//! Building HelmLoop JSON for the drafted records (pure): values, timestamps, digests and
//! sealing (HL-C14N-1 via `lychd-canon`).

use lychd_canon::{Value, binding_digest, record_digest};

/// An exact reference `{recordType, id, digest}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    pub record_type: String,
    pub id: String,
    pub digest: String,
}

/// A drafted record: its canonical body and its exact reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drafted {
    pub body: Vec<u8>,
    pub reference: Ref,
}

pub(super) fn s(x: impl Into<String>) -> Value {
    Value::String(x.into())
}

pub(super) fn obj(members: Vec<(&str, Value)>) -> Value {
    let mut m = lychd_canon::Map::new();
    for (k, v) in members {
        m.insert(k, v);
    }
    Value::Object(m)
}

pub(super) fn arr(items: impl IntoIterator<Item = Value>) -> Value {
    Value::Array(items.into_iter().collect())
}

/// `YYYY-MM-DDTHH:MM:SS.sssZ` of `ms` since the epoch (HelmLoop resolutions §B).
pub fn timestamp(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

pub(super) fn digest_of(v: &Value) -> String {
    // A value built here from strings, integers and arrays always canonicalizes.
    binding_digest(v).map(|d| d.render()).unwrap_or_default()
}

/// Seal `body` (a record without `digest`): its record digest added, its canonical bytes.
pub(super) fn seal(mut body: Value) -> Drafted {
    let digest = record_digest(&body).map(|d| d.render()).unwrap_or_default();
    let (record_type, id) = (
        body.get("recordType")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        body.get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    );
    if let Value::Object(m) = &mut body {
        m.insert("digest", s(digest.clone()));
    }
    Drafted {
        body: lychd_canon::to_canonical_vec(&body).unwrap_or_default(),
        reference: Ref {
            record_type,
            id,
            digest,
        },
    }
}

pub(super) fn reference(r: &Ref) -> Value {
    obj(vec![
        ("recordType", s(&r.record_type)),
        ("id", s(&r.id)),
        ("digest", s(&r.digest)),
    ])
}

/// HelmLoop resolutions §D: the binding digest of the policy controls (the lists sorted).
pub(super) fn policy_digest(body: &Value) -> String {
    let pick = |k: &str| body.get(k).cloned().unwrap_or(Value::Null);
    digest_of(&obj(vec![
        ("policyId", pick("policyId")),
        ("policyRevision", pick("policyRevision")),
        ("subject", pick("subject")),
        ("revision", pick("revision")),
        ("targetTransition", pick("targetTransition")),
        ("expectedAction", pick("expectedAction")),
        ("expectedParameters", pick("expectedParameters")),
        ("expectedScope", pick("expectedScope")),
        (
            "executionAuthorityRequired",
            pick("executionAuthorityRequired"),
        ),
        ("requiredEvidenceIds", pick("requiredEvidenceIds")),
        ("requiredAssuranceLevel", pick("requiredAssuranceLevel")),
        ("outcomeClaimId", pick("outcomeClaimId")),
        ("evidenceMaxAgeMs", pick("evidenceMaxAgeMs")),
        ("reconciliationMaxAgeMs", pick("reconciliationMaxAgeMs")),
        ("trustedProducers", pick("trustedProducers")),
    ]))
}
