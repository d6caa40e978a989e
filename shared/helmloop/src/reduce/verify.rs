//! Steps 2–3: schema and digest verification of every raw record, replay
//! folding and equivocation.
//!
//! Validation is a pure function of a record's body, so it runs once per
//! distinct canonical body: byte-identical replays get the same verdict by
//! construction. Distinct bodies are then ordered by their body digest, so
//! input order cannot influence any later stage.

use std::collections::{BTreeMap, BTreeSet};

use super::codes::ReasonCode;
use super::result::RecordStatus;
use super::time::parse_timestamp;
use super::{Rec, Work};
use crate::digest::{Digest, binding_and_record_digest};
use crate::schema::{self, RecordType, Shape};
use crate::validate::{self, Channel};
use crate::value::{Map, Value};

/// Reference slots whose missing `recordType`/`digest` is `REF_ID_ONLY`.
const REF_SLOTS: [&str; 5] = [
    "contractRef",
    "grantRef",
    "receiptRef",
    "assuranceRef",
    "consumedBy",
];
const REF_LISTS: [&str; 2] = ["evidenceRefs", "supersedes"];

/// Timestamp members a verified record may carry, by their path.
const TIMESTAMPS: [&[&str]; 12] = [
    &["issuedAt"],
    &["startedAt"],
    &["finishedAt"],
    &["observedAt"],
    &["validUntil"],
    &["decidedAt"],
    &["horizon", "start"],
    &["horizon", "end"],
    &["validity", "notBefore"],
    &["validity", "notAfter"],
    &["query", "observedAt"],
    &["evaluatedAt"],
];

pub(crate) fn verify_and_fold(w: &mut Work<'_>) {
    // Step 3a: fold byte-identical bodies (binding digest of the complete body).
    // Each body is serialized once; the same bytes give its record digest.
    let mut distinct: BTreeMap<Digest, (&Value, Digest)> = BTreeMap::new();
    let mut unhashable = false;
    let mut scratch = Vec::new();
    for raw in w.raw_records {
        match binding_and_record_digest(raw, &mut scratch) {
            Ok((body, record)) => {
                distinct.entry(body).or_insert((raw, record));
            }
            // Parsed values are always in the profile; a value built in memory
            // may not be, and is then refused as a whole.
            Err(_) => unhashable = true,
        }
    }
    if unhashable {
        w.emit(ReasonCode::RecordSchemaInvalid);
    } else {
        w.body_digests = Some(distinct.keys().copied().collect());
    }
    // Step 2: validate every distinct body.
    for (body_digest, (raw, record_digest)) in distinct {
        let mut rec = Rec {
            raw,
            body_digest,
            rtype: None,
            type_text: None,
            id: None,
            digest: None,
            declared: None,
            status: RecordStatus::Eligible,
            reasons: BTreeSet::new(),
            superseded: false,
            f: super::Fields::of(raw),
        };
        let type_text = raw.get("recordType").and_then(Value::as_str);
        rec.type_text = type_text.filter(|t| RecordType::from_name(t).is_some());
        rec.rtype = type_text.and_then(RecordType::from_name);
        rec.id = raw.get("id").and_then(Value::as_str);
        rec.digest = raw.get("digest").and_then(Value::as_str);
        rec.declared = rec.digest.and_then(Digest::parse);
        for code in verdict(raw, rec.declared, record_digest) {
            rec.reasons.insert(code);
            if code.is_reject() {
                rec.status = RecordStatus::Invalid;
            } else if rec.status == RecordStatus::Eligible {
                rec.status = RecordStatus::Ineligible;
            }
        }
        w.codes.extend(rec.reasons.iter().copied());
        w.recs.push(rec);
    }
    // Step 3b: one identity, several bodies, is equivocation.
    let mut by_identity: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for (i, r) in w.recs.iter().enumerate() {
        let t = r.raw.get("recordType").and_then(Value::as_str);
        if let (Some(t), Some(id)) = (t, r.id) {
            by_identity.entry((t, id)).or_default().push(i);
        }
    }
    for group in by_identity.into_values().filter(|g| g.len() > 1) {
        for i in group {
            w.flag(i, ReasonCode::RecordEquivocation);
        }
    }
    w.build_index();
}

/// Version check, entry schema and record digest (`declared`, as parsed,
/// against `recomputed`) of one body.
fn verdict(raw: &Value, declared: Option<Digest>, recomputed: Digest) -> Vec<ReasonCode> {
    // Fast path: a current-version record of a known type that its entry
    // schema accepts needs only the digest and timestamp checks; anything
    // else goes through `validate_record` for the complete issue list.
    let version_ok =
        raw.get("schemaVersion").and_then(Value::as_str) == Some(crate::PROTOCOL_VERSION);
    let shape = raw
        .get("recordType")
        .and_then(Value::as_str)
        .and_then(RecordType::from_name);
    if let (true, Some(t)) = (version_ok, shape)
        && schema::is_valid_value(Shape::Record(t), raw)
    {
        let mut out = Vec::new();
        if declared != Some(recomputed) {
            out.push(ReasonCode::RecordDigestMismatch);
        }
        if bad_timestamp(raw) {
            out.push(ReasonCode::RecordSchemaInvalid);
        }
        return out;
    }
    // An invalid record without any reference that carries an `id` but
    // lacks its type or digest can only be `RECORD_SCHEMA_INVALID` (plus a
    // digest verdict): decided without listing every schema issue, which a
    // hostile record with a million malformed items would make slow
    // (resolutions §H.7). Tested to agree with the issue list.
    if let Some(codes) = verdict_without_issue_list(raw, declared, recomputed, shape) {
        return codes;
    }
    let issues = validate::validate_record(raw, "");
    let mut out = Vec::new();
    for issue in &issues {
        let code = match issue.code.as_str() {
            validate::PROTOCOL_VERSION_UNSUPPORTED => ReasonCode::ProtocolVersionUnsupported,
            validate::RECORD_DIGEST_MISMATCH => ReasonCode::RecordDigestMismatch,
            _ if is_id_only_ref(raw, &issue.path, issue.keyword.as_deref()) => {
                ReasonCode::RefIdOnly
            }
            _ => match issue.channel {
                Channel::Reject => ReasonCode::RecordSchemaInvalid,
                Channel::Hold => ReasonCode::ProtocolVersionUnsupported,
            },
        };
        out.push(code);
    }
    if issues.is_empty() && bad_timestamp(raw) {
        out.push(ReasonCode::RecordSchemaInvalid);
    }
    // A record without a digest member fails the schema (`required`), so
    // `validate_record` has reported it; nothing else to add here.
    out
}

/// The verdict of a schema-invalid record with no id-only reference
/// candidate, or `None` (then the caller lists the issues). It is what
/// [`validate::validate_record`] leads to: another version string is only
/// `PROTOCOL_VERSION_UNSUPPORTED`; otherwise every schema issue maps to
/// `RECORD_SCHEMA_INVALID` unless it is a missing type or digest of a
/// reference carrying an `id` (`REF_ID_ONLY`), which needs a candidate; and a
/// string `digest` is compared with the recomputed one.
fn verdict_without_issue_list(
    raw: &Value,
    declared: Option<Digest>,
    recomputed: Digest,
    shape: Option<RecordType>,
) -> Option<Vec<ReasonCode>> {
    if let Some(Value::String(v)) = raw.get("schemaVersion")
        && v != crate::PROTOCOL_VERSION
    {
        return Some(vec![ReasonCode::ProtocolVersionUnsupported]);
    }
    let shape = shape.map_or(Shape::AnyRecord, Shape::Record);
    let (ref_id_only, valid) = if has_id_only_candidate(raw, None, false) {
        // Another issue exists exactly when the record is still invalid with
        // every candidate completed by a placeholder type and digest. Whether
        // a candidate's missing member is reported is asked of the
        // interpreter, on a copy whose arrays keep only their first element
        // and the elements holding a candidate (scalars, which conditions
        // read, are kept), stopping at the first such report.
        let own = raw.get("recordType").and_then(Value::as_str).unwrap_or("");
        let completed = complete_candidates(raw, None, false, own).0;
        let valid = schema::structural_is_valid(shape, &completed)?;
        let pruned = prune(raw, None, false).0;
        let reported = schema::reports_missing(shape, &pruned.to_serde(), |pointer| {
            is_id_only_ref(&pruned, pointer, Some("required"))
        });
        (reported, valid)
    } else {
        (false, schema::structural_is_valid(shape, raw)?)
    };
    let mismatch =
        raw.get("digest").and_then(Value::as_str).is_some() && declared != Some(recomputed);
    let mut out = Vec::new();
    if !valid {
        out.push(ReasonCode::RecordSchemaInvalid);
    }
    if ref_id_only {
        out.push(ReasonCode::RefIdOnly);
    }
    if mismatch {
        out.push(ReasonCode::RecordDigestMismatch);
    }
    if valid && !ref_id_only && !mismatch && bad_timestamp(raw) {
        out.push(ReasonCode::RecordSchemaInvalid);
    }
    Some(out)
}

/// Whether `m` (sitting under `key`, directly inside a list or not) is an
/// id-only reference candidate.
fn is_candidate(m: &Map, key: Option<&str>, in_list: bool) -> bool {
    let slot = in_list || key.is_some_and(|k| REF_SLOTS.contains(&k));
    slot && m.get("id").is_some() && (m.get("recordType").is_none() || m.get("digest").is_none())
}

/// A well-formed digest that names nothing.
const PLACEHOLDER_DIGEST: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The record type a reference slot names (`supersedes`: the record's own
/// type `own`), used as a placeholder.
fn slot_type<'a>(key: Option<&str>, own: &'a str) -> &'a str {
    match key {
        Some("grantRef") => "AuthorityGrantV1",
        Some("receiptRef" | "consumedBy") => "ExecutionReceiptV1",
        Some("assuranceRef") => "AssuranceDecisionV1",
        Some("evidenceRefs") => "EvidenceRecordV1",
        Some("supersedes") if RecordType::from_name(own).is_some() => own,
        _ => "OutcomeContractV1",
    }
}

/// `v` with every candidate given a placeholder `recordType` (the type its
/// slot names) and `digest` where it lacks them; and whether it held a
/// candidate.
fn complete_candidates(v: &Value, key: Option<&str>, in_list: bool, own: &str) -> (Value, bool) {
    let list = key.is_some_and(|k| REF_LISTS.contains(&k));
    match v {
        Value::Object(m) => {
            let this = is_candidate(m, key, in_list);
            let mut found = this;
            let mut members: Vec<(String, Value)> = Vec::with_capacity(m.len() + 2);
            for (k, x) in m.iter() {
                let (x, c) = complete_candidates(x, Some(k), list, own);
                found |= c;
                members.push((k.to_owned(), x));
            }
            if this {
                if m.get("recordType").is_none() {
                    members.push(("recordType".to_owned(), Value::from(slot_type(key, own))));
                }
                if m.get("digest").is_none() {
                    members.push(("digest".to_owned(), Value::from(PLACEHOLDER_DIGEST)));
                }
            }
            (Value::Object(members.into_iter().collect()), found)
        }
        Value::Array(items) => {
            let mut found = false;
            let items = items
                .iter()
                .map(|x| {
                    let (x, c) = complete_candidates(x, key, list, own);
                    found |= c;
                    x
                })
                .collect();
            (Value::Array(items), found)
        }
        other => (other.clone(), false),
    }
}

/// `v` with every array cut to its first element and the elements that hold
/// a candidate; and whether it held a candidate.
fn prune(v: &Value, key: Option<&str>, in_list: bool) -> (Value, bool) {
    let list = key.is_some_and(|k| REF_LISTS.contains(&k));
    match v {
        Value::Object(m) => {
            let mut found = is_candidate(m, key, in_list);
            let mut members: Vec<(String, Value)> = Vec::with_capacity(m.len());
            for (k, x) in m.iter() {
                let (x, c) = prune(x, Some(k), list);
                found |= c;
                members.push((k.to_owned(), x));
            }
            (Value::Object(members.into_iter().collect()), found)
        }
        Value::Array(items) => {
            let mut found = false;
            let mut kept = Vec::new();
            for (i, x) in items.iter().enumerate() {
                let (x, c) = prune(x, key, list);
                found |= c;
                if i == 0 || c {
                    kept.push(x);
                }
            }
            (Value::Array(kept), found)
        }
        other => (other.clone(), false),
    }
}

/// Whether some object in a reference slot has an `id` but lacks its
/// `recordType` or `digest`: the only place a `REF_ID_ONLY` issue can be. A
/// slot is a member named in `REF_SLOTS`, or anything directly inside a
/// container named in `REF_LISTS` (conservatively wider than the paths
/// `is_id_only_ref` accepts). `key` is the member name `v` sits under (kept
/// through arrays); `in_list` whether `v` sits directly inside a container
/// named in `REF_LISTS`.
fn has_id_only_candidate(v: &Value, key: Option<&str>, in_list: bool) -> bool {
    let list = key.is_some_and(|k| REF_LISTS.contains(&k));
    match v {
        Value::Object(m) => {
            if is_candidate(m, key, in_list) {
                return true;
            }
            m.iter()
                .any(|(k, x)| has_id_only_candidate(x, Some(k), list))
        }
        Value::Array(items) => items.iter().any(|x| has_id_only_candidate(x, key, list)),
        _ => false,
    }
}

/// The schema asserts the date-time format; this is the reducer's own check
/// that every timestamp it will compare is a real instant.
fn bad_timestamp(raw: &Value) -> bool {
    let bad = |v: &Value| v.as_str().is_some_and(|s| parse_timestamp(s).is_none());
    // One pass over the members, each matched against the first segment of
    // the `TIMESTAMPS` paths (the same verdict as looking each path up).
    raw.as_object().is_some_and(|m| {
        m.iter().any(|(k, v)| {
            TIMESTAMPS
                .iter()
                .filter(|path| path[0] == k)
                .any(|path| super::at(v, &path[1..]).is_some_and(bad))
        })
    })
}

/// Whether a schema issue is a reference missing its type or digest while
/// carrying an `id` (resolutions §B: `REF_ID_ONLY`).
fn is_id_only_ref(raw: &Value, path: &str, keyword: Option<&str>) -> bool {
    if keyword != Some("required") {
        return false;
    }
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let Some((last, parent)) = segments.split_last() else {
        return false;
    };
    if *last != "recordType" && *last != "digest" {
        return false;
    }
    let in_slot = match parent {
        [.., slot] if REF_SLOTS.contains(slot) => true,
        [.., list, _] if REF_LISTS.contains(list) => true,
        _ => false,
    };
    let mut cur = raw;
    for seg in parent {
        cur = match cur {
            Value::Object(m) => match m.get(seg) {
                Some(v) => v,
                None => return false,
            },
            Value::Array(a) => match seg.parse::<usize>().ok().and_then(|i| a.get(i)) {
                Some(v) => v,
                None => return false,
            },
            _ => return false,
        };
    }
    in_slot && cur.get("id").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The path-by-path definition.
    fn reference(raw: &Value) -> bool {
        TIMESTAMPS.iter().any(|path| {
            super::super::at(raw, path)
                .and_then(Value::as_str)
                .is_some_and(|s| parse_timestamp(s).is_none())
        })
    }

    /// The verdict without an issue list equals the verdict from the
    /// complete issue list, on every record fixture under many mutations.
    #[test]
    fn verdict_without_issue_list_agrees_with_the_issue_list() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/helmloop/records"
        );
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .expect("records")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        let slow = |raw: &Value| {
            let mut out = BTreeSet::new();
            for issue in validate::validate_record(raw, "") {
                out.insert(match issue.code.as_str() {
                    validate::PROTOCOL_VERSION_UNSUPPORTED => {
                        ReasonCode::ProtocolVersionUnsupported
                    }
                    validate::RECORD_DIGEST_MISMATCH => ReasonCode::RecordDigestMismatch,
                    _ if is_id_only_ref(raw, &issue.path, issue.keyword.as_deref()) => {
                        ReasonCode::RefIdOnly
                    }
                    _ => match issue.channel {
                        Channel::Reject => ReasonCode::RecordSchemaInvalid,
                        Channel::Hold => ReasonCode::ProtocolVersionUnsupported,
                    },
                });
            }
            out
        };
        let values = [
            Value::Null,
            Value::Int(7),
            Value::from("x"),
            Value::from("0.2"),
            Value::Array(vec![Value::Int(1); 3]),
            Value::Object(crate::value::Map::new()),
        ];
        let mut checked = 0;
        for f in files {
            let record = crate::parse(&std::fs::read(&f).expect("read")).expect("parses");
            let Value::Object(m) = &record else { continue };
            let mut variants = vec![record.clone()];
            for (k, v) in m.iter() {
                for x in &values {
                    let mut n = m.clone();
                    n.insert(k, x.clone());
                    variants.push(Value::Object(n));
                }
                let mut n = m.clone();
                n.remove(k);
                variants.push(Value::Object(n));
                if let Value::Object(inner) = v {
                    for (ik, _) in inner.iter() {
                        for x in &values {
                            let mut i2 = inner.clone();
                            i2.insert(ik, x.clone());
                            let mut n = m.clone();
                            n.insert(k, Value::Object(i2));
                            variants.push(Value::Object(n));
                        }
                        // An inner member removed (an id-only reference when
                        // `k` is a reference slot), alone and beside another
                        // broken member and a long malformed array.
                        let mut i2 = inner.clone();
                        i2.remove(ik);
                        let mut n = m.clone();
                        n.insert(k, Value::Object(i2.clone()));
                        variants.push(Value::Object(n.clone()));
                        n.insert("limitations", Value::Array(vec![Value::Int(1); 50]));
                        variants.push(Value::Object(n.clone()));
                        n.insert("unknownMember", Value::Null);
                        variants.push(Value::Object(n));
                    }
                }
                // The first element of a reference list without its digest.
                if let Value::Array(items) = v
                    && let Some(Value::Object(first)) = items.first()
                {
                    for drop in ["digest", "recordType", "id"] {
                        let mut f = first.clone();
                        f.remove(drop);
                        let mut items = items.clone();
                        items[0] = Value::Object(f);
                        items.push(Value::Int(3));
                        let mut n = m.clone();
                        n.insert(k, Value::Array(items.clone()));
                        variants.push(Value::Object(n.clone()));
                        items.pop();
                        n.insert(k, Value::Array(items));
                        variants.push(Value::Object(n));
                    }
                }
            }
            for raw in variants {
                let (_, recomputed) =
                    crate::digest::binding_and_record_digest(&raw, &mut Vec::new())
                        .expect("hashable");
                let declared = raw
                    .get("digest")
                    .and_then(Value::as_str)
                    .and_then(Digest::parse);
                let shape = raw
                    .get("recordType")
                    .and_then(Value::as_str)
                    .and_then(RecordType::from_name);
                if let Some(fast) = verdict_without_issue_list(&raw, declared, recomputed, shape) {
                    let fast: BTreeSet<ReasonCode> = fast.into_iter().collect();
                    let mut want = slow(&raw);
                    if want.is_empty() && bad_timestamp(&raw) {
                        want.insert(ReasonCode::RecordSchemaInvalid);
                    }
                    assert_eq!(fast, want, "{raw:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 2000, "{checked}");
    }

    #[test]
    fn bad_timestamp_checks_every_path_in_one_pass() {
        let ok = "2025-01-22T10:00:00.000Z";
        let bad = "2025-02-30T10:00:00.000Z";
        let mut cases = vec![
            "1".to_owned(),
            "{}".to_owned(),
            format!(r#"{{"horizon":"{bad}","start":"{bad}"}}"#),
            format!(r#"{{"validity":{{"notAfter":7,"notBefore":"{ok}"}}}}"#),
            format!(r#"{{"query":[{{"observedAt":"{bad}"}}]}}"#),
        ];
        for path in TIMESTAMPS {
            for t in [ok, bad] {
                let mut text = format!("\"{t}\"");
                for seg in path.iter().rev() {
                    text = format!(r#"{{"a":1,"{seg}":{text},"z":null}}"#);
                }
                cases.push(text);
            }
        }
        for text in cases {
            let v = crate::parse(text.as_bytes()).unwrap();
            assert_eq!(bad_timestamp(&v), reference(&v), "{text}");
        }
    }
}
