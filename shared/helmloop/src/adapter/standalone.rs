//! The `standalone` mapping: a plain JSON observation log,
//! `helmloop-standalone-observation/v1` (resolutions §G; the format is this
//! project's, `design-inference`; see `docs/helmloop-adapters.md`).
//!
//! ```text
//! { "format": "helmloop-standalone-observation/v1",
//!   "log": {"id", "locator"},
//!   "contract": {recordType, id, digest, subject, revision, policy},
//!   "entries": [ {"kind": "execution" | "evidence" | "reconciliation",
//!                 "id", "recordedAt", "system", "producer", <kind>: {...}} ] }
//! ```
//!
//! Each entry maps to one candidate: `id` → `id`, `recordedAt` → `issuedAt`,
//! `system`/`producer` → `source`, `locator` = `log.locator#id`, and the
//! kind's object → the record body, member for member. A reconciliation names
//! its receipt by entry id (`receipt`); the mapping turns that into the exact
//! reference of the receipt candidate it mapped.

use std::collections::HashMap;

use super::sdk::{AdapterCode, Candidate, ContractCapability, Draft, ObservationType, seal};
use super::{Collect, MappingIdentity, MappingResult, copy, table_digest};
use crate::value::{Map, Value};

/// The one source format this mapping reads.
pub const SOURCE_FORMAT: &str = "helmloop-standalone-observation/v1";

/// The mapping's declared field table; its binding digest is the mapping digest.
pub const MAPPING_TABLE: &str = include_str!("standalone.mapping.json");

/// `{adapterId: helmloop-standalone, mappingId: standalone, ...}`.
pub fn identity() -> MappingIdentity {
    MappingIdentity {
        adapter_id: "helmloop-standalone",
        mapping_id: "standalone",
        source_format: SOURCE_FORMAT,
        mapping_version: "1",
        mapping_digest: table_digest(MAPPING_TABLE),
    }
}

const ENTRY: [&str; 5] = ["kind", "id", "recordedAt", "system", "producer"];
const EXECUTION_REQUIRED: [&str; 10] = [
    "executionId",
    "attemptId",
    "executor",
    "action",
    "actionParameters",
    "scope",
    "authority",
    "status",
    "startedAt",
    "resourceOwnership",
];
const EXECUTION_OPTIONAL: [&str; 2] = ["finishedAt", "providerReport"];
const EVIDENCE_REQUIRED: [&str; 8] = [
    "claim",
    "criterionResult",
    "status",
    "observedAt",
    "validUntil",
    "provenance",
    "dependencyRevisions",
    "limitations",
];
const RECONCILIATION_REQUIRED: [&str; 7] = [
    "receipt",
    "correlation",
    "query",
    "requestedState",
    "providerState",
    "observedState",
    "reconciledState",
];

fn text<'a>(m: &'a Map, k: &str, path: &str, c: &mut Collect) -> Option<&'a str> {
    let s = m.get(k).and_then(Value::as_str);
    if s.is_none() {
        c.hold(AdapterCode::ValueUnsupported, &format!("{path}/{k}"));
    }
    s
}

/// Maps a standalone observation log under the validated contract.
pub fn map(cap: &ContractCapability, source: &Value) -> MappingResult {
    let mut c = Collect::default();
    let mut candidates = Vec::new();
    let Some(top) = source.as_object() else {
        c.hold(AdapterCode::ValueUnsupported, "");
        return c.finish(identity(), cap, candidates);
    };
    // The format first: an unknown format or version is not interpreted at all.
    match top.get("format").and_then(Value::as_str) {
        Some(SOURCE_FORMAT) => {}
        Some(_) => {
            c.hold(AdapterCode::VersionUnsupported, "/format");
            return c.finish(identity(), cap, candidates);
        }
        None => {
            c.gap("/format".into());
            return c.finish(identity(), cap, candidates);
        }
    }
    let Some(top) = c.object(
        Some(source),
        "",
        &["format", "log", "contract", "entries"],
        &[],
    ) else {
        return c.finish(identity(), cap, candidates);
    };
    let projection = cap.check_projection(top.get("contract"), "/contract", &mut c.unsupported);
    c.projection(projection);
    let log = c.object(top.get("log"), "/log", &["id", "locator"], &[]);
    let locator = log.and_then(|l| text(l, "locator", "/log", &mut c));
    let Some(entries) = top.get("entries").and_then(Value::as_array) else {
        c.hold(AdapterCode::ValueUnsupported, "/entries");
        return c.finish(identity(), cap, candidates);
    };
    let Some(locator) = locator else {
        return c.finish(identity(), cap, candidates);
    };
    // Receipts first, so a reconciliation can name one by entry id.
    let mut receipts: HashMap<&str, Option<Value>> = HashMap::new();
    let mut pending = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let path = format!("/entries/{i}");
        let kind = e.get("kind").and_then(Value::as_str);
        let (body_key, required, optional, t): (&str, &[&str], &[&str], _) = match kind {
            Some("execution") => (
                "execution",
                &EXECUTION_REQUIRED,
                &EXECUTION_OPTIONAL,
                ObservationType::ExecutionReceipt,
            ),
            Some("evidence") => (
                "evidence",
                &EVIDENCE_REQUIRED,
                &[],
                ObservationType::EvidenceRecord,
            ),
            Some("reconciliation") => (
                "reconciliation",
                &RECONCILIATION_REQUIRED,
                &[],
                ObservationType::ReconciliationRecord,
            ),
            // Any other kind (an owner record included) is not mapped.
            Some(_) => {
                c.unsupported(format!("{path}/kind"));
                continue;
            }
            None => {
                c.gap(format!("{path}/kind"));
                continue;
            }
        };
        let mut entry_members: Vec<&str> = ENTRY.to_vec();
        entry_members.push(body_key);
        let Some(entry) = c.object(Some(e), &path, &entry_members, &[]) else {
            if t == ObservationType::ExecutionReceipt
                && let Some(id) = e.get("id").and_then(Value::as_str)
            {
                receipts.insert(id, None);
            }
            continue;
        };
        let body_path = format!("{path}/{body_key}");
        let Some(body) = c.object(entry.get(body_key), &body_path, required, optional) else {
            if let (ObservationType::ExecutionReceipt, Some(id)) =
                (t, entry.get("id").and_then(Value::as_str))
            {
                receipts.insert(id, None);
            }
            continue;
        };
        if t == ObservationType::ExecutionReceipt
            && body.get("status").and_then(Value::as_str) != Some("unknown")
            && !body.contains_key("finishedAt")
        {
            c.gap(format!("{body_path}/finishedAt"));
            if let Some(id) = entry.get("id").and_then(Value::as_str) {
                receipts.insert(id, None);
            }
            continue;
        }
        let (Some(id), Some(recorded), Some(system), Some(producer)) = (
            text(entry, "id", &path, &mut c),
            text(entry, "recordedAt", &path, &mut c),
            text(entry, "system", &path, &mut c),
            text(entry, "producer", &path, &mut c),
        ) else {
            continue;
        };
        let draft = Draft {
            record_type: t,
            id: id.to_owned(),
            system: system.to_owned(),
            producer: producer.to_owned(),
            locator: format!("{locator}#{id}"),
            issued_at: recorded.to_owned(),
            body: Map::new(),
            origin: path.clone(),
        };
        if t == ObservationType::ReconciliationRecord {
            pending.push((draft, body, body_path));
            continue;
        }
        let mut draft = draft;
        copy(body, &mut draft.body, required);
        copy(body, &mut draft.body, optional);
        let sealed = sealed_or_hold(cap, draft, &path, &mut c);
        if t == ObservationType::ExecutionReceipt {
            let r = sealed.as_ref().map(Candidate::exact_ref);
            // Two different execution entries with one id: the reference is ambiguous
            // (an exact replay of one entry is not).
            let before = receipts.insert(id, r.clone());
            if before.is_some_and(|b| b != r) {
                receipts.insert(id, None);
            }
        }
        candidates.extend(sealed);
    }
    for (mut draft, body, body_path) in pending {
        let named = body.get("receipt").and_then(Value::as_str);
        let Some(receipt_ref) = named.and_then(|n| receipts.get(n).cloned().flatten()) else {
            c.hold(
                AdapterCode::ReferenceUnresolved,
                &format!("{body_path}/receipt"),
            );
            continue;
        };
        copy(body, &mut draft.body, &RECONCILIATION_REQUIRED[1..]);
        draft.body.insert("receiptRef", receipt_ref);
        let path = draft.origin.clone();
        candidates.extend(sealed_or_hold(cap, draft, &path, &mut c));
    }
    c.finish(identity(), cap, candidates)
}

/// Seals a draft; a record that fails its schema carries a value outside the
/// mapped vocabulary (HOLD, not mapped).
pub(crate) fn sealed_or_hold(
    cap: &ContractCapability,
    draft: Draft,
    path: &str,
    c: &mut Collect,
) -> Option<Candidate> {
    match seal(cap, draft) {
        Ok(s) => Some(s),
        Err(_) => {
            c.hold(AdapterCode::ValueUnsupported, path);
            None
        }
    }
}
