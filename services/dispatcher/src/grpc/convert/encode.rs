//! Answers into their protobuf messages.

use super::*;

pub fn next_page_token(last: &LeaseRow) -> String {
    paging::Tokens::Plain.token(&Cursor {
        issued_at: last.issued_at,
        id: last.id,
    })
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
