//! The `better-workflows` mapping: an export of workflow run events,
//! `better-workflows-run-events/v0`. No Better Workflows runtime is available
//! to observe, so this export shape is this project's own and labelled
//! `design-inference` (resolutions §G); the mapping code is
//! `implemented-here`, Better Workflows runtime conformance is not claimed.
//!
//! ```text
//! { "exportFormat": "better-workflows-run-events/v0",
//!   "runtime": {"name": "better-workflows", "version": "0.4"},
//!   "run": {"workflowId", "runId", "locator"},
//!   "helmloop": {"contract": {recordType, id, digest, subject, revision, policy}},
//!   "events": [ {"seq", "type", "recordedAt", "occurredAt"?, "producer", "stepId"?, "data": {...}} ] }
//! ```
//!
//! Event types: `step.started` opens an attempt `(stepId, data.attemptId)`;
//! `step.completed` / `step.failed` / `step.lost` close it into one receipt
//! (`succeeded` / `failed` / `unknown`); `evidence.recorded` is one evidence
//! record; `provider.queried` is one reconciliation naming its attempt. Times
//! are microsecond UTC; a time with sub-millisecond digits cannot be carried
//! into a v0.1 record without loss and is HOLD.

use std::collections::{HashMap, HashSet};

use super::sdk::{AdapterCode, ContractCapability, Draft, ObservationType};
use super::standalone::sealed_or_hold;
use super::{Collect, MappingIdentity, MappingResult, copy, table_digest};
use crate::time::parse_timestamp;
use crate::value::{Map, Value};

/// The one export format this mapping reads.
pub const SOURCE_FORMAT: &str = "better-workflows-run-events/v0";
/// The runtime name the export must declare.
pub const RUNTIME_NAME: &str = "better-workflows";
/// Runtime versions whose exports this mapping reads.
pub const SUPPORTED_RUNTIME_VERSIONS: [&str; 1] = ["0.4"];
/// `source.system` of every candidate.
pub const SYSTEM: &str = "better-workflows";

/// The mapping's declared field table; its binding digest is the mapping digest.
pub const MAPPING_TABLE: &str = include_str!("better-workflows.mapping.json");

/// `{adapterId: helmloop-better-workflows, mappingId: better-workflows, ...}`.
pub fn identity() -> MappingIdentity {
    MappingIdentity {
        adapter_id: "helmloop-better-workflows",
        mapping_id: "better-workflows",
        source_format: SOURCE_FORMAT,
        mapping_version: "0",
        mapping_digest: table_digest(MAPPING_TABLE),
    }
}

/// A microsecond time `YYYY-MM-DDTHH:MM:SS.ffffffZ` as the v0.1 millisecond
/// form, when that loses nothing.
enum Micros {
    Exact(String),
    Lossy,
    Malformed,
}

fn micros(s: Option<&Value>) -> Micros {
    let Some(s) = s.and_then(Value::as_str) else {
        return Micros::Malformed;
    };
    let b = s.as_bytes();
    if b.len() != 27 || b[19] != b'.' || b[26] != b'Z' || !b[20..26].iter().all(u8::is_ascii_digit)
    {
        return Micros::Malformed;
    }
    let ms = format!("{}Z", &s[..23]);
    if parse_timestamp(&ms).is_none() {
        return Micros::Malformed;
    }
    if &s[23..26] != "000" {
        return Micros::Lossy;
    }
    Micros::Exact(ms)
}

fn time(v: Option<&Value>, path: &str, c: &mut Collect) -> Option<String> {
    match micros(v) {
        Micros::Exact(t) => Some(t),
        Micros::Lossy => {
            c.hold(AdapterCode::LossyInput, path);
            None
        }
        Micros::Malformed => {
            c.hold(AdapterCode::ValueUnsupported, path);
            None
        }
    }
}

struct Started<'a> {
    data: &'a Map,
    started_at: String,
    path: String,
}

/// Maps a run-event export under the validated contract.
pub fn map(cap: &ContractCapability, source: &Value) -> MappingResult {
    let mut c = Collect::default();
    let mut candidates = Vec::new();
    let Some(top) = source.as_object() else {
        c.hold(AdapterCode::ValueUnsupported, "");
        return c.finish(identity(), cap, candidates);
    };
    match top.get("exportFormat").and_then(Value::as_str) {
        Some(SOURCE_FORMAT) => {}
        Some(_) => {
            c.hold(AdapterCode::VersionUnsupported, "/exportFormat");
            return c.finish(identity(), cap, candidates);
        }
        None => {
            c.gap("/exportFormat".into());
            return c.finish(identity(), cap, candidates);
        }
    }
    let runtime = top.get("runtime");
    let name = runtime.and_then(|r| r.get("name")).and_then(Value::as_str);
    let version = runtime
        .and_then(|r| r.get("version"))
        .and_then(Value::as_str);
    if name != Some(RUNTIME_NAME) {
        c.hold(AdapterCode::VersionUnsupported, "/runtime/name");
    }
    if !version.is_some_and(|v| SUPPORTED_RUNTIME_VERSIONS.contains(&v)) {
        c.hold(AdapterCode::VersionUnsupported, "/runtime/version");
    }
    if !c.reasons.is_empty() {
        return c.finish(identity(), cap, candidates);
    }
    let Some(top) = c.object(
        Some(source),
        "",
        &["exportFormat", "runtime", "run", "helmloop", "events"],
        &[],
    ) else {
        return c.finish(identity(), cap, candidates);
    };
    c.object(top.get("runtime"), "/runtime", &["name", "version"], &[]);
    if let Some(h) = c.object(top.get("helmloop"), "/helmloop", &["contract"], &[]) {
        let p = cap.check_projection(h.get("contract"), "/helmloop/contract", &mut c.unsupported);
        c.projection(p);
    }
    let run = c.object(
        top.get("run"),
        "/run",
        &["workflowId", "runId", "locator"],
        &[],
    );
    let run_id = run.and_then(|r| r.get("runId")).and_then(Value::as_str);
    let locator = run.and_then(|r| r.get("locator")).and_then(Value::as_str);
    let Some(events) = top.get("events").and_then(Value::as_array) else {
        c.hold(AdapterCode::ValueUnsupported, "/events");
        return c.finish(identity(), cap, candidates);
    };
    let (Some(run_id), Some(locator)) = (run_id, locator) else {
        if run.is_some() {
            c.hold(AdapterCode::ValueUnsupported, "/run");
        }
        return c.finish(identity(), cap, candidates);
    };

    let mut started: HashMap<(&str, &str), Option<Started>> = HashMap::new();
    let mut closed: HashSet<(&str, &str)> = HashSet::new();
    let mut queries = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let path = format!("/events/{i}");
        let ty = e.get("type").and_then(Value::as_str);
        let (optional, needs_step, needs_occurred): (&[&str], bool, bool) = match ty {
            Some("step.started" | "step.completed" | "step.failed") => {
                (&["occurredAt", "stepId"], true, true)
            }
            Some("step.lost") => (&["stepId"], true, false),
            Some("evidence.recorded" | "provider.queried") => (&["occurredAt"], false, true),
            Some(_) => {
                c.unsupported(format!("{path}/type"));
                continue;
            }
            None => {
                c.gap(format!("{path}/type"));
                continue;
            }
        };
        let Some(ev) = c.object(
            Some(e),
            &path,
            &["seq", "type", "recordedAt", "producer", "data"],
            optional,
        ) else {
            continue;
        };
        if needs_step && !ev.contains_key("stepId") {
            c.gap(format!("{path}/stepId"));
            continue;
        }
        if needs_step && ev.get("stepId").and_then(Value::as_str).is_none() {
            c.hold(AdapterCode::ValueUnsupported, &format!("{path}/stepId"));
            continue;
        }
        if needs_occurred && !ev.contains_key("occurredAt") {
            c.gap(format!("{path}/occurredAt"));
            continue;
        }
        let Some(seq) = ev.get("seq").and_then(Value::as_i64).filter(|n| *n >= 1) else {
            c.hold(AdapterCode::ValueUnsupported, &format!("{path}/seq"));
            continue;
        };
        let step = ev.get("stepId").and_then(Value::as_str).unwrap_or("");
        let producer = ev.get("producer").and_then(Value::as_str);
        let recorded = time(ev.get("recordedAt"), &format!("{path}/recordedAt"), &mut c);
        let occurred = if needs_occurred {
            time(ev.get("occurredAt"), &format!("{path}/occurredAt"), &mut c)
        } else {
            Some(String::new())
        };
        let (Some(producer), Some(recorded), Some(occurred)) = (producer, recorded, occurred)
        else {
            if producer.is_none() {
                c.hold(AdapterCode::ValueUnsupported, &format!("{path}/producer"));
            }
            continue;
        };
        let draft = |t: ObservationType| Draft {
            record_type: t,
            id: format!("bw.{run_id}.{seq}"),
            system: SYSTEM.to_owned(),
            producer: producer.to_owned(),
            locator: format!("{locator}/events/{seq}"),
            issued_at: recorded.clone(),
            body: Map::new(),
            origin: path.clone(),
        };
        let data_path = format!("{path}/data");
        match ty.unwrap_or_default() {
            "step.started" => {
                let data = c.object(
                    ev.get("data"),
                    &data_path,
                    &[
                        "executionId",
                        "attemptId",
                        "executor",
                        "action",
                        "authority",
                        "resource",
                    ],
                    &[],
                );
                let action = data.and_then(|d| {
                    c.object(
                        d.get("action"),
                        &format!("{data_path}/action"),
                        &["name", "parameters", "scope"],
                        &[],
                    )
                });
                let attempt = data
                    .and_then(|d| d.get("attemptId"))
                    .and_then(Value::as_str);
                let entry = match (data, action, attempt) {
                    (Some(d), Some(_), Some(_)) => Some(Started {
                        data: d,
                        started_at: occurred,
                        path: path.clone(),
                    }),
                    _ => None,
                };
                let key = (step, attempt.unwrap_or(""));
                if started.insert(key, entry).is_some() {
                    // Two starts of one attempt: which one the receipt binds is unknown.
                    started.insert(key, None);
                    c.hold(AdapterCode::ValueUnsupported, &path);
                }
            }
            kind @ ("step.completed" | "step.failed" | "step.lost") => {
                let Some(data) =
                    c.object(ev.get("data"), &data_path, &["attemptId"], &["provider"])
                else {
                    continue;
                };
                let Some(attempt) = data.get("attemptId").and_then(Value::as_str) else {
                    c.hold(
                        AdapterCode::ValueUnsupported,
                        &format!("{data_path}/attemptId"),
                    );
                    continue;
                };
                let mut d = draft(ObservationType::ExecutionReceipt);
                let status = match kind {
                    "step.completed" => "succeeded",
                    "step.failed" => "failed",
                    _ => "unknown",
                };
                d.body.insert("status", status.into());
                if kind != "step.lost" {
                    d.body.insert("finishedAt", occurred.into());
                }
                if let Some(p) = data.get("provider") {
                    d.body.insert("providerReport", p.clone());
                }
                closed.insert((step, attempt));
                queries.push(Pending::Receipt(d, (step, attempt)));
            }
            "evidence.recorded" => {
                let Some(data) = c.object(
                    ev.get("data"),
                    &data_path,
                    &[
                        "claim",
                        "criterion",
                        "status",
                        "validUntil",
                        "artifactDigest",
                        "dependencyRevisions",
                        "limitations",
                    ],
                    &[],
                ) else {
                    continue;
                };
                let Some(valid) = time(
                    data.get("validUntil"),
                    &format!("{data_path}/validUntil"),
                    &mut c,
                ) else {
                    continue;
                };
                let mut d = draft(ObservationType::EvidenceRecord);
                copy(
                    data,
                    &mut d.body,
                    &["claim", "status", "dependencyRevisions", "limitations"],
                );
                d.body.insert(
                    "criterionResult",
                    data.get("criterion").cloned().unwrap_or(Value::Null),
                );
                let mut prov = Map::new();
                prov.insert(
                    "artifactDigest",
                    data.get("artifactDigest").cloned().unwrap_or(Value::Null),
                );
                d.body.insert("provenance", Value::Object(prov));
                d.body.insert("observedAt", occurred.into());
                d.body.insert("validUntil", valid.into());
                candidates.extend(sealed_or_hold(cap, d, &path, &mut c));
            }
            _ => {
                let Some(data) = c.object(
                    ev.get("data"),
                    &data_path,
                    &[
                        "stepId",
                        "attemptId",
                        "correlation",
                        "query",
                        "requestedState",
                        "providerState",
                        "observedState",
                        "reconciledState",
                    ],
                    &[],
                ) else {
                    continue;
                };
                let Some(q) = c.object(
                    data.get("query"),
                    &format!("{data_path}/query"),
                    &["system", "locator"],
                    &[],
                ) else {
                    continue;
                };
                let key = (
                    data.get("stepId").and_then(Value::as_str).unwrap_or(""),
                    data.get("attemptId").and_then(Value::as_str).unwrap_or(""),
                );
                let mut d = draft(ObservationType::ReconciliationRecord);
                copy(
                    data,
                    &mut d.body,
                    &[
                        "correlation",
                        "requestedState",
                        "providerState",
                        "observedState",
                        "reconciledState",
                    ],
                );
                let mut query = q.clone();
                query.insert("observedAt", occurred.into());
                d.body.insert("query", Value::Object(query));
                queries.push(Pending::Query(d, key, format!("{data_path}/attemptId")));
            }
        }
    }
    // Close attempts into receipts, then bind queries to them.
    let mut receipt_refs: HashMap<(&str, &str), Option<Value>> = HashMap::new();
    for p in &queries {
        if let Pending::Receipt(d, key) = p {
            let Some(Some(s)) = started.get(key) else {
                c.gap(d.origin.clone());
                receipt_refs.insert(*key, None);
                continue;
            };
            let mut d = d.clone();
            copy(
                s.data,
                &mut d.body,
                &["executionId", "attemptId", "executor", "authority"],
            );
            let action = s.data.get("action");
            let part = |k: &str| {
                action
                    .and_then(|a| a.get(k))
                    .cloned()
                    .unwrap_or(Value::Null)
            };
            d.body.insert("action", part("name"));
            d.body.insert("actionParameters", part("parameters"));
            d.body.insert("scope", part("scope"));
            d.body.insert(
                "resourceOwnership",
                s.data.get("resource").cloned().unwrap_or(Value::Null),
            );
            d.body.insert("startedAt", s.started_at.clone().into());
            let path = d.origin.clone();
            let sealed = sealed_or_hold(cap, d, &path, &mut c);
            let r = sealed.as_ref().map(super::sdk::Candidate::exact_ref);
            if receipt_refs.insert(*key, r).is_some() {
                // Two terminal events for one attempt: a query cannot name one of them.
                receipt_refs.insert(*key, None);
            }
            candidates.extend(sealed);
        }
    }
    for (key, s) in &started {
        if let Some(s) = s
            && !closed.contains(key)
        {
            c.hold(AdapterCode::AttemptNotTerminal, &s.path);
        }
    }
    for p in queries {
        if let Pending::Query(mut d, key, at) = p {
            let Some(Some(r)) = receipt_refs.get(&key) else {
                c.hold(AdapterCode::ReferenceUnresolved, &at);
                continue;
            };
            d.body.insert("receiptRef", r.clone());
            let path = d.origin.clone();
            candidates.extend(sealed_or_hold(cap, d, &path, &mut c));
        }
    }
    c.finish(identity(), cap, candidates)
}

enum Pending<'a> {
    Receipt(Draft, (&'a str, &'a str)),
    Query(Draft, (&'a str, &'a str), String),
}
