//! Decoding requests into validated domain values (every bad field reported with a stable
//! reason) and encoding answers. No business rule lives here.

use std::collections::BTreeSet;

use lychd_proto::dispatcher::v1 as pb;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::demand::Demand;
use crate::domain::key::{Family, check_label, check_slug, parse_v1};
use crate::domain::lease::{LeaseState, TtlPolicy, check_priority};
use crate::domain::observation::{Observed, Phase};
use crate::domain::registry::{Animator, Capability, Dialect, Modality, Registry, SourceKind};
use lychd_runtime::refusal::{Reason, Violations};

use crate::error::DispatcherError;
use crate::error::reasons::*;
use crate::service::LeaseCommand;
use crate::store::admission::AdmissionRow;
use crate::store::leases::{Cursor, EventRow, LeaseRow, Lookup};
use crate::store::observations::Cached;

type Decoded<T> = Result<T, DispatcherError>;

/// Most animators one request may name (`ObserveAnimators`, `CloseAdmission`, `AwaitDrain`,
/// the `ListLeases` filter): a longer list is refused whole before any name is looked at, so
/// neither the answer nor the work (Ward is asked per distinct name at worst) grows with it.
pub const ANIMATORS_MAX: usize = 256;

fn finish<T>(v: Violations, value: impl FnOnce() -> T) -> Decoded<T> {
    Ok(v.finish(value)?)
}

pub fn ts(t: OffsetDateTime) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.unix_timestamp(),
        nanos: i32::try_from(t.nanosecond()).unwrap_or(0),
    }
}

fn family_from_pb(v: i32) -> Result<Option<Family>, ()> {
    Ok(Some(match pb::Family::try_from(v).map_err(|_| ())? {
        pb::Family::Unspecified => return Ok(None),
        pb::Family::Chat => Family::Chat,
        pb::Family::Vision => Family::Vision,
        pb::Family::Embedding => Family::Embedding,
        pb::Family::Stt => Family::Stt,
        pb::Family::Tts => Family::Tts,
        pb::Family::ToolExecution => Family::ToolExecution,
        pb::Family::Rerank => Family::Rerank,
    }))
}

pub fn family_to_pb(f: Family) -> pb::Family {
    match f {
        Family::Chat => pb::Family::Chat,
        Family::Vision => pb::Family::Vision,
        Family::Embedding => pb::Family::Embedding,
        Family::Stt => pb::Family::Stt,
        Family::Tts => pb::Family::Tts,
        Family::ToolExecution => pb::Family::ToolExecution,
        Family::Rerank => pb::Family::Rerank,
    }
}

fn modality_from_pb(v: i32) -> Option<Modality> {
    match pb::InputModality::try_from(v).ok()? {
        pb::InputModality::Unspecified => None,
        pb::InputModality::Text => Some(Modality::Text),
        pb::InputModality::Image => Some(Modality::Image),
        pb::InputModality::Audio => Some(Modality::Audio),
        pb::InputModality::Video => Some(Modality::Video),
    }
}

fn modality_to_pb(m: Modality) -> pb::InputModality {
    match m {
        Modality::Text => pb::InputModality::Text,
        Modality::Image => pb::InputModality::Image,
        Modality::Audio => pb::InputModality::Audio,
        Modality::Video => pb::InputModality::Video,
    }
}

pub fn phase_to_pb(p: Phase) -> pb::Phase {
    match p {
        Phase::Cold => pb::Phase::Cold,
        Phase::Activatable => pb::Phase::Activatable,
        Phase::Warming => pb::Phase::Warming,
        Phase::Warm => pb::Phase::Warm,
        Phase::Error => pb::Phase::Error,
        Phase::Unknown => pb::Phase::Unknown,
    }
}

fn dialect_to_pb(d: Dialect) -> pb::Dialect {
    match d {
        Dialect::LlamaCpp => pb::Dialect::LlamaCpp,
        Dialect::OpenaiModelsV1 => pb::Dialect::OpenaiModelsV1,
    }
}

fn label(v: &mut Violations, field: &str, reason: Reason, s: &str, max: usize, optional: bool) {
    if let Err(e) = check_label(s, max, optional) {
        v.push(field, reason, e);
    }
}

/// Model ids or aliases in a demand: printable ASCII without whitespace, at most 256.
fn check_model(s: &str) -> Result<(), &'static str> {
    check_label(s, 256, false)?;
    if s.chars().all(|c| c.is_ascii_graphic()) {
        Ok(())
    } else {
        Err("must be printable ASCII without whitespace")
    }
}

/// `LeaseRequest` → command.
pub fn lease_request(req: pb::LeaseRequest, ttl: &TtlPolicy) -> Decoded<LeaseCommand> {
    let mut v = Violations::new();
    let has_demand = req.demand.is_some();
    let d = match req.demand {
        Some(d) => d,
        None => {
            v.push("demand", DEMAND_MISSING, "is required");
            pb::Demand::default()
        }
    };
    let family = match family_from_pb(d.family) {
        Ok(f) => f,
        Err(()) => {
            v.push("demand.family", FAMILY_UNKNOWN, "unknown family value");
            None
        }
    };
    let key = if d.capability_key.is_empty() {
        None
    } else {
        match parse_v1(&d.capability_key) {
            Ok(k) => Some(k),
            Err(e) => {
                v.push(
                    "demand.capability_key",
                    CAPABILITY_KEY_MALFORMED,
                    e.describe(),
                );
                None
            }
        }
    };
    if has_demand && d.family == pb::Family::Unspecified as i32 && d.capability_key.is_empty() {
        v.push(
            "demand.family",
            DEMAND_UNDERSPECIFIED,
            "give a family or a capability_key",
        );
    }
    let model = if d.model_id.is_empty() {
        None
    } else {
        if let Err(e) = check_model(&d.model_id) {
            v.push("demand.model_id", MODEL_ID_INVALID, e);
        }
        Some(d.model_id.clone())
    };
    let mut modalities = BTreeSet::new();
    for (i, m) in d.input_modalities.iter().enumerate() {
        match modality_from_pb(*m) {
            Some(m) => {
                modalities.insert(m);
            }
            None => v.push(
                format!("demand.input_modalities[{i}]"),
                MODALITY_UNKNOWN,
                "unknown or unspecified input modality",
            ),
        }
    }
    label(&mut v, "holder", HOLDER_INVALID, &req.holder, 128, false);
    label(&mut v, "run_id", RUN_ID_INVALID, &req.run_id, 128, true);
    label(
        &mut v,
        "attempt_id",
        ATTEMPT_ID_INVALID,
        &req.attempt_id,
        128,
        true,
    );
    label(
        &mut v,
        "request_id",
        REQUEST_ID_INVALID,
        &req.request_id,
        128,
        true,
    );
    if let Err(e) = check_priority(req.priority) {
        v.push("priority", PRIORITY_OUT_OF_RANGE, e);
    }
    let ttl_seconds = match ttl.resolve(req.ttl_seconds) {
        Ok(t) => t,
        Err(e) => {
            v.push("ttl_seconds", TTL_OUT_OF_BOUNDS, e);
            0
        }
    };
    finish(v, || LeaseCommand {
        demand: Demand {
            family,
            key,
            model,
            modalities,
            tools_required: d.tools_required,
        },
        holder: req.holder,
        run_id: req.run_id,
        attempt_id: req.attempt_id,
        priority: req.priority,
        ttl_seconds,
        request_id: (!req.request_id.is_empty()).then_some(req.request_id),
    })
}

fn lease_id(v: &mut Violations, s: &str) -> Uuid {
    match Uuid::parse_str(s) {
        Ok(u) => u,
        Err(_) => {
            v.push("lease_id", LEASE_ID_MALFORMED, "must be a UUID");
            Uuid::nil()
        }
    }
}

/// `RenewLeaseRequest` → (id, holder, ttl).
pub fn renew_request(req: &pb::RenewLeaseRequest, ttl: &TtlPolicy) -> Decoded<(Uuid, String, u32)> {
    let mut v = Violations::new();
    let id = lease_id(&mut v, &req.lease_id);
    label(&mut v, "holder", HOLDER_INVALID, &req.holder, 128, false);
    let t = match ttl.resolve(req.ttl_seconds) {
        Ok(t) => t,
        Err(e) => {
            v.push("ttl_seconds", TTL_OUT_OF_BOUNDS, e);
            0
        }
    };
    finish(v, || (id, req.holder.clone(), t))
}

/// `ReleaseLeaseRequest` → (id, holder).
pub fn release_request(req: &pb::ReleaseLeaseRequest) -> Decoded<(Uuid, String)> {
    let mut v = Violations::new();
    let id = lease_id(&mut v, &req.lease_id);
    label(&mut v, "holder", HOLDER_INVALID, &req.holder, 128, false);
    finish(v, || (id, req.holder.clone()))
}

/// A list of animators longer than [`ANIMATORS_MAX`], refused as a whole.
fn too_many(v: &mut Violations, names: &[String]) -> bool {
    if names.len() <= ANIMATORS_MAX {
        return false;
    }
    v.push(
        "animators",
        ANIMATORS_TOO_MANY,
        format!("must name at most {ANIMATORS_MAX} animators"),
    );
    true
}

/// Declared, distinct animators (sorted), at most [`ANIMATORS_MAX`]. `allow_empty` for "all".
pub fn animators(reg: &Registry, names: &[String], allow_empty: bool) -> Decoded<Vec<String>> {
    let mut v = Violations::new();
    if too_many(&mut v, names) {
        return Err(v.into());
    }
    if names.is_empty() && !allow_empty {
        v.push("animators", ANIMATORS_EMPTY, "name at least one animator");
    }
    let mut seen = BTreeSet::new();
    for (i, n) in names.iter().enumerate() {
        let field = format!("animators[{i}]");
        if check_slug(n).is_err() {
            v.push(field, ANIMATOR_INVALID, "must be an animator name");
        } else if reg.animator(n).is_none() {
            v.push(field, ANIMATOR_UNKNOWN, "names no declared animator");
        } else if !seen.insert(n.clone()) {
            v.push(field, ANIMATOR_DUPLICATE, "named twice");
        }
    }
    finish(v, || seen.into_iter().collect())
}

/// `CloseAdmissionRequest` → (request id, animators, reason).
pub fn close_request(
    reg: &Registry,
    req: &pb::CloseAdmissionRequest,
) -> Decoded<(String, Vec<String>, String)> {
    let mut v = Violations::new();
    label(
        &mut v,
        "request_id",
        REQUEST_ID_INVALID,
        &req.request_id,
        128,
        false,
    );
    let names = match animators(reg, &req.animators, false) {
        Ok(n) => n,
        Err(DispatcherError::InvalidArgument(more)) => {
            v.extend(more);
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    label(&mut v, "reason", REASON_INVALID, &req.reason, 256, false);
    finish(v, || (req.request_id.clone(), names, req.reason.clone()))
}

/// `AwaitDrainRequest` → (animators, wait in ms).
pub fn drain_request(
    reg: &Registry,
    req: &pb::AwaitDrainRequest,
    max_ms: u32,
) -> Decoded<(Vec<String>, u32)> {
    let mut v = Violations::new();
    let names = match animators(reg, &req.animators, false) {
        Ok(n) => n,
        Err(DispatcherError::InvalidArgument(more)) => {
            v.extend(more);
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    if req.wait_ms > max_ms {
        v.push(
            "wait_ms",
            WAIT_OUT_OF_BOUNDS,
            format!("must be at most {max_ms}"),
        );
    }
    finish(v, || (names, req.wait_ms))
}

/// A `ListLeases` request, decoded.
#[derive(Debug, Clone)]
pub struct ListCommand {
    /// Distinct animator names (sorted): a filter, so declared or not.
    pub animators: Vec<String>,
    pub include_inactive: bool,
    pub after: Option<Cursor>,
    pub request_id: Option<String>,
}

/// `ListLeasesRequest` → command: each filter an animator name (at most [`ANIMATORS_MAX`]),
/// the page token, the request id.
pub fn list_request(req: &pb::ListLeasesRequest) -> Decoded<ListCommand> {
    let mut v = Violations::new();
    let mut names = BTreeSet::new();
    if !too_many(&mut v, &req.animators) {
        for (i, a) in req.animators.iter().enumerate() {
            if check_slug(a).is_err() {
                v.push(
                    format!("animators[{i}]"),
                    ANIMATOR_INVALID,
                    "must be an animator name",
                );
            } else {
                names.insert(a.clone());
            }
        }
    }
    let page = req.page.clone().unwrap_or_default();
    let after = match page_token(&page.page_token) {
        Ok(a) => a,
        Err(DispatcherError::InvalidArgument(more)) => {
            v.extend(more);
            None
        }
        Err(e) => return Err(e),
    };
    label(
        &mut v,
        "request_id",
        REQUEST_ID_INVALID,
        &req.request_id,
        128,
        true,
    );
    finish(v, || ListCommand {
        animators: names.into_iter().collect(),
        include_inactive: req.include_inactive,
        after,
        request_id: (!req.request_id.is_empty()).then(|| req.request_id.clone()),
    })
}

/// `GetLeaseRequest` → which lease.
pub fn get_request(req: &pb::GetLeaseRequest) -> Decoded<Lookup<'_>> {
    use pb::get_lease_request::Lookup as L;
    let mut v = Violations::new();
    let lookup = match &req.lookup {
        Some(L::LeaseId(id)) => Lookup::Id(lease_id(&mut v, id)),
        Some(L::RequestId(r)) => {
            label(&mut v, "request_id", REQUEST_ID_INVALID, r, 128, false);
            Lookup::Request(r)
        }
        None => {
            v.push(
                "lookup",
                LEASE_LOOKUP_MISSING,
                "give a lease_id or a request_id",
            );
            Lookup::Id(Uuid::nil())
        }
    };
    finish(v, || lookup)
}

/// A closure token.
pub fn closure_token(s: &str) -> Decoded<Uuid> {
    Uuid::parse_str(s).map_err(|_| {
        DispatcherError::invalid("closure_token", CLOSURE_TOKEN_MALFORMED, "must be a UUID")
    })
}

/// Page token: `<issued_at unix nanos>.<lease uuid>`.
pub fn page_token(s: &str) -> Decoded<Option<Cursor>> {
    if s.is_empty() {
        return Ok(None);
    }
    let bad = || {
        DispatcherError::invalid(
            "page.page_token",
            PAGE_TOKEN_INVALID,
            "not a token this office issued",
        )
    };
    let (n, id) = s.split_once('.').ok_or_else(bad)?;
    let nanos: i128 = n.parse().map_err(|_| bad())?;
    let issued_at = OffsetDateTime::from_unix_timestamp_nanos(nanos).map_err(|_| bad())?;
    let id = Uuid::parse_str(id).map_err(|_| bad())?;
    Ok(Some(Cursor { issued_at, id }))
}

pub fn next_page_token(last: &LeaseRow) -> String {
    format!("{}.{}", last.issued_at.unix_timestamp_nanos(), last.id)
}

pub fn route(a: &Animator, c: &Capability) -> pb::Route {
    pb::Route {
        endpoint: a.endpoint.url.clone(),
        model: c.runtime_model.clone(),
        dialect: dialect_to_pb(a.dialect) as i32,
        family: family_to_pb(c.family()) as i32,
        context_tokens: c.context_tokens,
        input_modalities: c
            .input_modalities
            .iter()
            .map(|m| modality_to_pb(*m) as i32)
            .collect(),
        supports_tools: c.exposes_tools(),
        toolsets: c.toolsets.clone(),
        max_output_tokens: c.max_output_tokens,
    }
}

pub fn lease_info(l: &LeaseRow) -> pb::LeaseInfo {
    pb::LeaseInfo {
        lease_id: l.id.to_string(),
        capability_key: l.capability_key.clone(),
        animator: l.animator.clone(),
        holder: l.holder.clone(),
        run_id: l.run_id.clone(),
        attempt_id: l.attempt_id.clone(),
        priority: u32::try_from(l.priority).unwrap_or(0),
        issued_at: Some(ts(l.issued_at)),
        expires_at: Some(ts(l.expires_at)),
        released_at: l.released_at.map(ts),
        state: match l.state {
            LeaseState::Active => pb::LeaseState::Active,
            LeaseState::Expired => pb::LeaseState::Expired,
            LeaseState::Released => pb::LeaseState::Released,
        } as i32,
        principal_id: l.principal_id.clone(),
        request_id: l.request_id.clone().unwrap_or_default(),
    }
}

pub fn admission(s: &AdmissionRow) -> pb::AdmissionState {
    pb::AdmissionState {
        animator: s.animator.clone(),
        generation: u64::try_from(s.generation).unwrap_or(0),
        open_closures: u32::try_from(s.open_closures).unwrap_or(0),
        live_leases: u32::try_from(s.live_leases).unwrap_or(u32::MAX),
    }
}

pub fn observation(key: &str, c: Option<&Cached>) -> pb::Observation {
    match c {
        Some(c) => pb::Observation {
            capability_key: key.to_owned(),
            phase: phase_to_pb(c.observed.phase) as i32,
            reason: c.observed.reason.clone(),
            observed_at: Some(ts(c.observed_at)),
        },
        None => pb::Observation {
            capability_key: key.to_owned(),
            phase: pb::Phase::Unknown as i32,
            reason: String::new(),
            observed_at: None,
        },
    }
}

pub fn animator_info(a: &Animator) -> pb::AnimatorInfo {
    pb::AnimatorInfo {
        name: a.name.clone(),
        source_kind: match a.source {
            SourceKind::Soulstone => pb::SourceKind::Soulstone,
            SourceKind::Portal => pb::SourceKind::Portal,
        } as i32,
        dialect: dialect_to_pb(a.dialect) as i32,
        endpoint: a.endpoint.url.clone(),
        dedicated: a.dedicated,
        resident: a.resident,
        dynamic: a.dynamic,
        probe: a.probe,
        ready_estimate_seconds: a.ready_estimate_seconds,
    }
}

pub fn observed(o: &Observed) -> (i32, String) {
    (phase_to_pb(o.phase) as i32, o.reason.clone())
}

pub fn event(e: &EventRow) -> pb::DispatchEvent {
    pb::DispatchEvent {
        sequence: u64::try_from(e.sequence).unwrap_or(0),
        lease_id: e.lease_id.to_string(),
        capability_key: e.capability_key.clone(),
        animator: e.animator.clone(),
        holder: e.holder.clone(),
        run_id: e.run_id.clone(),
        attempt_id: e.attempt_id.clone(),
        priority: u32::try_from(e.priority).unwrap_or(0),
        admitted_at: Some(ts(e.admitted_at)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: TtlPolicy = TtlPolicy {
        default: 300,
        min: 1,
        max: 3600,
    };

    fn good() -> pb::LeaseRequest {
        pb::LeaseRequest {
            demand: Some(pb::Demand {
                family: pb::Family::Chat as i32,
                ..Default::default()
            }),
            holder: "worker-1".into(),
            priority: 50,
            ..Default::default()
        }
    }

    /// The (field, reason) of each violation of a decode that must have been refused.
    fn violations<T: std::fmt::Debug>(decoded: Decoded<T>) -> Vec<(String, &'static str)> {
        match decoded {
            Err(DispatcherError::InvalidArgument(v)) => {
                v.iter().map(|v| (v.field.clone(), v.reason.name)).collect()
            }
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    fn reasons(r: pb::LeaseRequest) -> Vec<(String, &'static str)> {
        violations(lease_request(r, &TTL))
    }

    #[test]
    fn a_good_request_decodes() {
        let c = lease_request(good(), &TTL).expect("valid");
        assert_eq!(c.demand.family, Some(Family::Chat));
        assert_eq!(c.ttl_seconds, 300);
    }

    #[test]
    fn every_bad_field_is_reported_with_its_reason() {
        let mut r = good();
        r.demand = Some(pb::Demand {
            family: 99,
            capability_key: "a:chat:b/c".into(),
            model_id: "has space".into(),
            input_modalities: vec![0, 42],
            tools_required: false,
        });
        r.holder = String::new();
        r.run_id = "x\n".into();
        r.priority = 101;
        r.ttl_seconds = 4000;
        let got = reasons(r);
        assert_eq!(
            got,
            vec![
                ("demand.family".into(), "FAMILY_UNKNOWN"),
                ("demand.capability_key".into(), "CAPABILITY_KEY_MALFORMED"),
                ("demand.model_id".into(), "MODEL_ID_INVALID"),
                ("demand.input_modalities[0]".into(), "MODALITY_UNKNOWN"),
                ("demand.input_modalities[1]".into(), "MODALITY_UNKNOWN"),
                ("holder".into(), "HOLDER_INVALID"),
                ("run_id".into(), "RUN_ID_INVALID"),
                ("priority".into(), "PRIORITY_OUT_OF_RANGE"),
                ("ttl_seconds".into(), "TTL_OUT_OF_BOUNDS"),
            ]
        );
        let mut r = good();
        r.demand = None;
        assert_eq!(reasons(r), vec![("demand".into(), "DEMAND_MISSING")]);
        let mut r = good();
        r.demand = Some(pb::Demand::default());
        assert_eq!(
            reasons(r),
            vec![("demand.family".into(), "DEMAND_UNDERSPECIFIED")]
        );
    }

    #[test]
    fn animator_lists_are_bounded_before_any_name_is_looked_at() {
        let reg = Registry::default();
        let names: Vec<String> = (0..10_000).map(|i| format!("Bad Name {i}")).collect();
        assert_eq!(
            violations(animators(&reg, &names, true)),
            [("animators".to_owned(), "ANIMATORS_TOO_MANY")]
        );
        let filter = pb::ListLeasesRequest {
            animators: names,
            ..Default::default()
        };
        match list_request(&filter) {
            Err(DispatcherError::InvalidArgument(v)) => assert_eq!(v.len(), 1),
            other => panic!("expected invalid, got {other:?}"),
        }
        // At the bound, each name is looked at: a bad one is named with its index.
        let mut names: Vec<String> = (0..ANIMATORS_MAX).map(|i| format!("a{i}")).collect();
        names[7] = "Bad Name".into();
        let filter = pb::ListLeasesRequest {
            animators: names,
            ..Default::default()
        };
        assert_eq!(
            violations(list_request(&filter)),
            [("animators[7]".to_owned(), "ANIMATOR_INVALID")]
        );
    }

    #[test]
    fn page_tokens_round_trip_and_refuse_garbage() {
        let l = LeaseRow {
            id: Uuid::new_v4(),
            capability_key: "a:chat:m".into(),
            animator: "a".into(),
            holder: "h".into(),
            principal_id: "p".into(),
            run_id: String::new(),
            attempt_id: String::new(),
            priority: 1,
            issued_at: OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_123_456_000)
                .expect("time"),
            expires_at: OffsetDateTime::UNIX_EPOCH,
            released_at: None,
            state: LeaseState::Active,
            request_id: None,
        };
        let t = next_page_token(&l);
        assert_eq!(
            page_token(&t).expect("ok"),
            Some(Cursor {
                issued_at: l.issued_at,
                id: l.id
            })
        );
        assert_eq!(page_token("").expect("ok"), None);
        for bad in [
            "x",
            "1.",
            "1.not-a-uuid",
            "abc.00000000-0000-0000-0000-000000000000",
        ] {
            assert!(page_token(bad).is_err(), "{bad}");
        }
    }
}
