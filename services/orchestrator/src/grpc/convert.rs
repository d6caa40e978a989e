//! Proto <-> typed conversions of the Orchestrator's gRPC surface: decoding requests into
//! typed commands (each bad field a field violation), encoding plans, outcomes, events,
//! containments and the topology. Invariant: no I/O and no decision here — a phase, a plan
//! or a settlement is encoded as the service decided it.

use std::time::Duration;

use lychd_proto::orchestrator::v1 as pb;
use lychd_registry::key::parse_v1;
use lychd_runtime::refusal::Violations;
use tonic::Status;

use crate::config::Settings;
use crate::domain::memory::Arithmetic;
use crate::domain::phase::{PRIORITY_MAX, TransitionPhase};
use crate::domain::plan::{Action, Decline, Plan};
use crate::error::reasons::{
    ADMISSION_TIMEOUT_INVALID, CAPABILITY_KEY_MALFORMED, PRIORITY_OUT_OF_RANGE,
    TRANSITION_ID_MALFORMED, WAIT_OUT_OF_BOUNDS,
};
use crate::error::{OrchestratorError, Result};
use crate::service::containment::ContainmentRow;
use crate::service::lease::{LeaseView, Standing};
use crate::service::resources::{self, EventRow, Listed, View};
use crate::service::transition::{Outcome, Settled};

/// The host lease as `Describe` shows it.
pub(super) fn lease_pb(v: LeaseView) -> pb::HostLease {
    let standing = match v.standing {
        Standing::Holding => pb::HostLeaseStanding::Holding,
        Standing::Standby => pb::HostLeaseStanding::Standby,
        Standing::Lost => pb::HostLeaseStanding::Lost,
    };
    pb::HostLease {
        host_id: v.host_id,
        standing: standing as i32,
        this_holder: v.this_holder,
        holder: v.holder.unwrap_or_default(),
        generation: v.generation.map_or(0, |g| u64::try_from(g).unwrap_or(0)),
        expires_at: v.expires_at.map(ts),
    }
}

/// The longest admission timeout accepted, in seconds (one year).
const ADMISSION_TIMEOUT_MAX_S: f64 = 365.0 * 86_400.0;

/// A decoded `RequestTransition`.
pub(super) struct TransitionCommand {
    pub(super) key: String,
    pub(super) priority: u8,
    /// The admission timeout, converted once at entry.
    pub(super) timeout: Option<Duration>,
}

pub(super) fn decode_transition(req: &pb::RequestTransitionRequest) -> Result<TransitionCommand> {
    let mut v = Violations::new();
    if let Err(e) = parse_v1(&req.capability_key) {
        v.push("capability_key", CAPABILITY_KEY_MALFORMED, e.describe());
    }
    let priority = u8::try_from(req.priority)
        .ok()
        .filter(|p| u32::from(*p) <= PRIORITY_MAX);
    if priority.is_none() {
        v.push(
            "priority",
            PRIORITY_OUT_OF_RANGE,
            "must be between 0 and 100",
        );
    }
    let timeout = match req.admission_timeout_s {
        None => None,
        Some(s) if s.is_finite() && (0.0..=ADMISSION_TIMEOUT_MAX_S).contains(&s) => {
            Some(Duration::from_secs_f64(s))
        }
        Some(_) => {
            v.push(
                "admission_timeout_s",
                ADMISSION_TIMEOUT_INVALID,
                "must be a finite number of seconds between 0 and one year",
            );
            None
        }
    };
    Ok(v.finish(|| TransitionCommand {
        key: req.capability_key.clone(),
        priority: priority.unwrap_or(0),
        timeout,
    })?)
}

pub(super) fn err(e: OrchestratorError) -> Status {
    e.into()
}

pub(super) fn ts(t: time::OffsetDateTime) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.unix_timestamp(),
        nanos: i32::try_from(t.nanosecond()).unwrap_or(0),
    }
}

pub(super) fn containment_pb(r: &ContainmentRow) -> pb::Containment {
    pb::Containment {
        containment_id: r.id,
        transition_id: r.transition_id.clone(),
        cause: r.cause.clone(),
        affected: r.affected.clone(),
        expected_active: r.expected_active.clone(),
        target_animator: r.target_animator.clone(),
        capability_key: r.capability_key.clone(),
        recorded_at: Some(ts(r.recorded_at)),
        recovered_at: r.recovered_at.map(ts),
        runtime_guard_armed: r.guard_armed,
    }
}

/// A settled cohort as a caller's answer: its outcome, or the refusal every member receives.
pub(super) fn settled_pb(
    settled: Settled,
    joined: bool,
) -> std::result::Result<pb::TransitionOutcome, Status> {
    match settled {
        Settled::Outcome(o) => Ok(outcome_pb(&o, joined)),
        Settled::AdmissionExpired => Err(err(OrchestratorError::AdmissionExpired)),
        Settled::Contained => Err(err(OrchestratorError::Contained)),
        Settled::Database(failure) => Err(err(OrchestratorError::DatabaseFailed(failure))),
        Settled::LeaseLost => Err(err(OrchestratorError::HostLeaseNotHeld)),
    }
}

/// Decode a transition id (32 lowercase hex digits).
pub(super) fn transition_id(field: &str, s: &str) -> Result<String> {
    let mut v = Violations::new();
    if !crate::domain::intent::is_transition_id(s) {
        v.push(
            field,
            TRANSITION_ID_MALFORMED,
            "must be 32 lowercase hex digits",
        );
    }
    Ok(v.finish(|| s.to_owned())?)
}

pub(super) fn phase_pb(p: TransitionPhase) -> pb::TransitionPhase {
    match p {
        TransitionPhase::Requested => pb::TransitionPhase::Requested,
        TransitionPhase::Arbitrating => pb::TransitionPhase::Arbitrating,
        TransitionPhase::Draining => pb::TransitionPhase::Draining,
        TransitionPhase::Actuating => pb::TransitionPhase::Actuating,
        TransitionPhase::Verifying => pb::TransitionPhase::Verifying,
        TransitionPhase::Compensating => pb::TransitionPhase::Compensating,
        TransitionPhase::Completed => pb::TransitionPhase::Completed,
        TransitionPhase::DeclinedNoEffect => pb::TransitionPhase::DeclinedNoEffect,
        TransitionPhase::FailedRestored => pb::TransitionPhase::FailedRestored,
        TransitionPhase::CancelledRestored => pb::TransitionPhase::CancelledRestored,
        TransitionPhase::ContainedUncertain => pb::TransitionPhase::ContainedUncertain,
        TransitionPhase::Failed => pb::TransitionPhase::Failed,
    }
}

pub(super) fn outcome_pb(o: &Outcome, joined: bool) -> pb::TransitionOutcome {
    pb::TransitionOutcome {
        transition_id: o.transition_id.clone(),
        phase: phase_pb(o.phase) as i32,
        plan: o.plan.as_ref().map(plan_pb),
        detail: o.detail.clone(),
        joined,
    }
}

/// Decode a capability key (the v1 grammar of the shared registry).
pub(super) fn capability_key(field: &str, s: &str) -> Result<String> {
    let mut v = Violations::new();
    if let Err(e) = parse_v1(s) {
        v.push(field, CAPABILITY_KEY_MALFORMED, e.describe());
    }
    Ok(v.finish(|| s.to_owned())?)
}

pub(super) fn topology(s: &Settings) -> pb::GetTopologyResponse {
    let g = &s.graph;
    pb::GetTopologyResponse {
        config_digest: g.digest().to_owned(),
        animators: g
            .nodes()
            .map(|n| pb::TopologyAnimator {
                name: n.name.clone(),
                managed: n.managed,
                resident: n.resident,
                conflict_domains: n.domains.iter().cloned().collect(),
                default_exclusive: n.default_exclusive,
                groups: n.groups.iter().cloned().collect(),
                capability_keys: s.registry.keys_of(&n.name).to_vec(),
                conflicts_with: g.neighbours(&n.name).cloned().collect(),
            })
            .collect(),
        edges: g
            .edges()
            .map(|(a, b)| pb::ConflictEdge {
                a: a.clone(),
                b: b.clone(),
            })
            .collect(),
        covens: g
            .covens()
            .iter()
            .map(|(name, members)| pb::Coven {
                name: name.clone(),
                members: members.iter().cloned().collect(),
            })
            .collect(),
    }
}

pub(super) fn plan_pb(p: &Plan) -> pb::Plan {
    pb::Plan {
        action: match p.action {
            Action::NoOp => pb::PlanAction::NoOp,
            Action::SoftSwap => pb::PlanAction::SoftSwap,
            Action::HardSwap => pb::PlanAction::HardSwap,
        } as i32,
        capability_key: p.capability_key.clone(),
        target_animator: p.target.clone(),
        evict: p.evict.clone(),
        launch: p.launch.clone(),
        cost: p.cost,
        expected_active: p.expected_active.clone(),
        config_digest: p.config_digest.clone(),
        affected: p.affected(),
        memory: p.memory.as_ref().map(arithmetic_pb),
    }
}

fn arithmetic_pb(a: &Arithmetic) -> pb::MemoryArithmetic {
    let freed_mib = a.freed_mib();
    let signed = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    pb::MemoryArithmetic {
        device: a.device.clone(),
        capacity_mib: a.capacity_mib,
        used_mib: a.used_mib,
        needed_mib: a.needed_mib,
        needed_source: a.needed_source.as_str().to_owned(),
        freed: a
            .freed
            .iter()
            .map(|f| pb::FreedMemory {
                animator: f.animator.clone(),
                mib: f.mib,
                cause: f.cause.as_str().to_owned(),
            })
            .collect(),
        freed_mib,
        free_after_mib: signed(a.capacity_mib)
            .saturating_sub(signed(a.used_mib))
            .saturating_add(signed(freed_mib))
            .saturating_sub(signed(a.needed_mib)),
    }
}

pub(super) fn declined_pb(d: &Decline) -> pb::PlanDeclined {
    pb::PlanDeclined {
        code: d.code().to_owned(),
        animator: d.animator().to_owned(),
        observed_phase: d.phase().map(|p| p.as_str().to_owned()).unwrap_or_default(),
        memory: d.memory().map(arithmetic_pb),
    }
}

pub(super) fn outcome(
    decided: std::result::Result<Plan, Decline>,
) -> pb::preview_plan_response::Outcome {
    use pb::preview_plan_response::Outcome;
    match decided {
        Ok(p) => Outcome::Plan(plan_pb(&p)),
        Err(d) => Outcome::Declined(declined_pb(&d)),
    }
}

// Transitions as resources.

/// A `request_id`: 1..=128 of `A-Z a-z 0-9 . _ : -`.
pub(super) fn request_id_ok(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// A `wait_ms` within `max` (absent: no wait).
pub(super) fn wait(v: &mut Violations, wait_ms: Option<u32>, max: Duration) -> Duration {
    let w = Duration::from_millis(u64::from(wait_ms.unwrap_or(0)));
    if w > max {
        v.push(
            "wait_ms",
            WAIT_OUT_OF_BOUNDS,
            "must be at most the configured max_wait_ms",
        );
        return Duration::ZERO;
    }
    w
}

pub(super) fn event_pb(e: &EventRow) -> pb::TransitionEvent {
    pb::TransitionEvent {
        transition_id: e.transition_id.clone(),
        capability_key: e.capability_key.clone(),
        priority: u32::try_from(e.priority).unwrap_or(0),
        phase: TransitionPhase::parse(&e.phase).map_or(0, |p| phase_pb(p) as i32),
        detail: e.detail.clone(),
        plan: e
            .plan
            .as_deref()
            .and_then(resources::plan_from_json)
            .map(|p| plan_pb(&p)),
        sequence: u64::try_from(e.sequence).unwrap_or(0),
        recorded_at: Some(ts(e.recorded_at)),
    }
}

/// A transition from its first and last events (and every event, when `all` is given).
fn transition_pb(
    first: &EventRow,
    last: &EventRow,
    all: Vec<pb::TransitionEvent>,
    joined: bool,
) -> pb::Transition {
    let phase = TransitionPhase::parse(&last.phase);
    pb::Transition {
        transition_id: first.transition_id.clone(),
        capability_key: first.capability_key.clone(),
        priority: u32::try_from(first.priority).unwrap_or(0),
        phase: phase.map_or(0, |p| phase_pb(p) as i32),
        detail: last.detail.clone(),
        settled: phase.is_some_and(TransitionPhase::is_final),
        plan: all.iter().rev().find_map(|e| e.plan.clone()).or_else(|| {
            last.plan
                .as_deref()
                .and_then(resources::plan_from_json)
                .map(|p| plan_pb(&p))
        }),
        events: if all.is_empty() {
            vec![event_pb(last)]
        } else {
            all
        },
        requested_at: Some(ts(first.recorded_at)),
        joined,
    }
}

pub(super) fn view_pb(v: &View) -> Option<pb::Transition> {
    let (first, last) = (v.events.first()?, v.events.last()?);
    Some(transition_pb(
        first,
        last,
        v.events.iter().map(event_pb).collect(),
        v.joined,
    ))
}

pub(super) fn listed_pb(l: &Listed) -> pb::Transition {
    transition_pb(&l.requested, &l.last, Vec::new(), l.joined)
}

/// The final outcome a recorded transition shows, if settled.
pub(super) fn recorded_outcome(t: &pb::Transition) -> Option<pb::TransitionOutcome> {
    t.settled.then(|| pb::TransitionOutcome {
        transition_id: t.transition_id.clone(),
        phase: t.phase,
        plan: t.plan.clone(),
        detail: t.detail.clone(),
        joined: t.joined,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The proto's `TransitionPhase` values (but the never-sent `UNSPECIFIED`) are exactly
    /// [`TransitionPhase::ALL`], each encoded as the value of its name.
    #[test]
    fn the_protos_phases_are_the_domains() {
        let proto: Vec<pb::TransitionPhase> = (0..=64)
            .filter_map(|v| pb::TransitionPhase::try_from(v).ok())
            .filter(|p| *p != pb::TransitionPhase::Unspecified)
            .collect();
        let ours: Vec<pb::TransitionPhase> =
            TransitionPhase::ALL.into_iter().map(phase_pb).collect();
        assert_eq!(proto, ours);
        for p in TransitionPhase::ALL {
            assert_eq!(
                phase_pb(p).as_str_name(),
                format!("TRANSITION_PHASE_{}", p.as_str().to_uppercase())
            );
        }
    }

    #[test]
    fn request_ids_are_short_printable_names() {
        assert!(request_id_ok("retry-1:a_b.c"));
        assert!(!request_id_ok(""));
        assert!(!request_id_ok(&"x".repeat(129)));
        assert!(!request_id_ok("a b"));
        assert!(!request_id_ok("é"));
    }

    #[test]
    fn a_wait_beyond_the_maximum_is_a_violation() {
        let mut v = Violations::new();
        assert_eq!(
            wait(&mut v, Some(10), Duration::from_millis(10)),
            Duration::from_millis(10)
        );
        assert!(v.is_empty());
        wait(&mut v, Some(11), Duration::from_millis(10));
        assert!(!v.is_empty());
    }
}
