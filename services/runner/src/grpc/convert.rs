//! Proto ↔ typed conversions of `lychd.runner.v1`: requests decoded into commands with every
//! bad field named (never its value), rows encoded into messages.

use lychd_proto::runner::v1 as pb;
use lychd_runtime::refusal::Violations;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::budgets::{Budgets, CONTRACT};
use crate::domain::recovery::{self, Decision};
use crate::domain::run::{BadTimeout, MAX_INPUT_BYTES, request_id_ok, timeout};
use crate::domain::workflow::Workflow;
use crate::error::RunnerError;
use crate::error::reasons::{
    BUDGET_ABOVE_CONTRACT, CHECKSUM_MALFORMED, INPUT_TOO_LARGE, RATIONALE_INVALID,
    REQUEST_ID_INVALID, REVIEW_DECISION_INVALID, RUN_ID_MALFORMED, TIMEOUT_INVALID,
    VERSION_OUT_OF_RANGE, WORKFLOW_INVALID,
};
use crate::service::checkpoints::CheckpointRow;
use crate::service::checkpoints::SnapshotRow;
use crate::service::recovery::{Review, ReviewRow};
use crate::service::runs::{RunRow, StartRun, TransitionRow};

/// A `StartRun` request as a command; every bad field named.
pub fn start(body: pb::StartRunRequest) -> Result<StartRun, RunnerError> {
    let mut v = Violations::new();
    if !request_id_ok(&body.request_id) {
        v.push(
            "request_id",
            REQUEST_ID_INVALID,
            "must be 1 to 128 of A-Z a-z 0-9 . _ : -",
        );
    }
    let workflow = match Workflow::parse(&body.workflow) {
        Ok(w) => Some(w),
        Err(bad) => {
            v.push("workflow", WORKFLOW_INVALID, bad.to_string());
            None
        }
    };
    if body.input.len() > MAX_INPUT_BYTES {
        v.push("input", INPUT_TOO_LARGE, "is larger than 64 KiB");
    }
    let b = body.budgets.unwrap_or_default();
    let values = [
        b.max_steps,
        b.max_tool_calls,
        b.max_retries_per_transition,
        b.max_wall_seconds,
        b.max_suspended_seconds,
        b.max_tokens,
        b.max_cost_milli,
        b.max_recursion_depth,
        b.max_parallelism,
    ];
    let budgets = match Budgets::requested(values) {
        Ok(b) => Some(b),
        Err(above) => {
            for a in above {
                v.push(
                    format!("budgets.{}", a.field),
                    BUDGET_ABOVE_CONTRACT,
                    format!("is above the contract's maximum ({})", a.max),
                );
            }
            None
        }
    };
    // Bounded by the run's wall budget (the contract's when the budgets are refused).
    let wall = budgets.map_or(CONTRACT[3].max, |b| b.0[3]);
    let timeout_seconds = match timeout(body.timeout_seconds, wall) {
        Ok(t) => t,
        Err(BadTimeout::Negative) => {
            v.push("timeout_seconds", TIMEOUT_INVALID, "must not be negative");
            None
        }
        Err(BadTimeout::AboveWall) => {
            v.push(
                "timeout_seconds",
                TIMEOUT_INVALID,
                "must be at most the run's max_wall_seconds",
            );
            None
        }
    };
    let parent = match body.parent_run_id.as_str() {
        "" => None,
        p => match run_id("parent_run_id", p) {
            Ok(id) => Some(id),
            Err(RunnerError::InvalidArgument(bad)) => {
                v.extend(bad);
                None
            }
            Err(e) => return Err(e),
        },
    };
    match (workflow, budgets) {
        (Some(workflow), Some(budgets)) if v.is_empty() => Ok(StartRun {
            request_id: body.request_id,
            workflow_bytes: body.workflow,
            workflow,
            input: body.input,
            budgets,
            timeout_seconds,
            parent,
        }),
        _ => Err(v.into()),
    }
}

/// A run id (`field`): a UUID.
pub fn run_id(field: &str, s: &str) -> Result<Uuid, RunnerError> {
    match Uuid::parse_str(s) {
        Ok(id) if id.hyphenated().to_string() == s => Ok(id),
        _ => Err(RunnerError::invalid(
            field,
            RUN_ID_MALFORMED,
            "must be a lowercase hyphenated UUID",
        )),
    }
}

pub(super) fn timestamp(t: OffsetDateTime) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.unix_timestamp(),
        nanos: i32::try_from(t.nanosecond()).unwrap_or(0),
    }
}

fn budgets(b: &[i32; 9]) -> pb::Budgets {
    let u = |i: usize| u64::try_from(b[i]).unwrap_or(0);
    debug_assert_eq!(CONTRACT[6].field, "max_cost_milli");
    pb::Budgets {
        max_steps: u(0),
        max_tool_calls: u(1),
        max_retries_per_transition: u(2),
        max_wall_seconds: u(3),
        max_suspended_seconds: u(4),
        max_tokens: u(5),
        max_cost_milli: u(6),
        max_recursion_depth: u(7),
        max_parallelism: u(8),
    }
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

pub fn run(r: &RunRow) -> pb::Run {
    pb::Run {
        run_id: r.id.hyphenated().to_string(),
        request_id: r.request_id.clone(),
        owner: r.owner.clone(),
        state: r.state.clone(),
        terminal_category: r.terminal_category.clone().unwrap_or_default(),
        workflow_name: r.workflow_name.clone(),
        workflow_version: r.workflow_version.clone(),
        state_schema_version: r.state_schema_version.clone(),
        fsm_sha256: r.fsm_sha256.clone(),
        workflow_sha256: r.workflow_sha256.clone(),
        input_sha256: r.input_sha256.clone(),
        budgets: Some(budgets(&r.budgets)),
        version: count(r.version),
        generation: count(r.generation),
        interrupt_pending: r.interrupt_pending,
        created_at: Some(timestamp(r.created_at)),
        updated_at: Some(timestamp(r.updated_at)),
        timeout_seconds: r.timeout_seconds.map_or(0, i64::from),
        deadline_at: r.deadline_at.map(timestamp),
        parent_run_id: r
            .parent_run_id
            .map(|p| p.hyphenated().to_string())
            .unwrap_or_default(),
        root_run_id: r
            .root_run_id
            .map(|p| p.hyphenated().to_string())
            .unwrap_or_default(),
        depth: u32::try_from(r.depth).unwrap_or(0),
        verification: verification(r),
    }
}

/// A run's verification, from its progress.
fn verification(r: &RunRow) -> Option<pb::RunVerification> {
    let p = crate::service::runs::progress_of_row(r);
    let round = p.round();
    let v = p.verification?;
    let id = r.id.hyphenated().to_string();
    let subject = crate::domain::verification::subject_id(&id);
    Some(pb::RunVerification {
        disposition: v.disposition,
        reasons: v.reasons,
        axes: v.axes.iter().map(|(k, x)| format!("{k}={x}")).collect(),
        input_digest: v.input_digest,
        asked: v.asked,
        revision_id: crate::domain::verification::revision_id(&id, round),
        subject_id: subject,
        obligations_closed: v.predicate.obligations_closed,
        independent_pass: v.predicate.independent_pass,
        no_unknown_effect: v.predicate.no_unknown_effect,
        terminal_edge_legal: v.predicate.terminal_edge_legal,
    })
}

pub fn transition(t: &TransitionRow) -> pb::RunTransition {
    pb::RunTransition {
        sequence: count(t.sequence),
        transition_id: t.transition_id.hyphenated().to_string(),
        run_id: t.run_id.hyphenated().to_string(),
        version: count(t.version),
        generation: count(t.generation),
        source_state: t.source_state.clone(),
        target_state: t.target_state.clone(),
        trigger: t.trigger.clone(),
        actor: t.actor.clone(),
        workflow_version: t.workflow_version.clone(),
        state_schema_version: t.state_schema_version.clone(),
        recorded_at: Some(timestamp(t.recorded_at)),
        cycle_id: count(t.cycle_id),
        capability: t.capability.clone(),
        evidence_hashes: t.evidence_hashes.clone(),
        budget_delta: t.budget_delta.clone(),
        trace_id: t.trace_id.clone(),
        span_id: t.span_id.clone(),
        checkpoint_id: format!("{}:{}", t.run_id.hyphenated(), t.version),
    }
}

/// A `ReviewQuarantine` request as a review; every bad field named (never the rationale).
pub fn review(body: &pb::ReviewQuarantineRequest) -> Result<Review, RunnerError> {
    let mut v = Violations::new();
    let id = match run_id("run_id", &body.run_id) {
        Ok(id) => Some(id),
        Err(RunnerError::InvalidArgument(bad)) => {
            v.extend(bad);
            None
        }
        Err(e) => return Err(e),
    };
    let decision = match pb::ReviewDecision::try_from(body.decision) {
        Ok(pb::ReviewDecision::Resume) => Some(Decision::Resume),
        Ok(pb::ReviewDecision::Reconcile) => Some(Decision::Reconcile),
        Ok(pb::ReviewDecision::Fail) => Some(Decision::Fail),
        Ok(pb::ReviewDecision::Cancel) => Some(Decision::Cancel),
        _ => {
            v.push(
                "decision",
                REVIEW_DECISION_INVALID,
                "must be RESUME, RECONCILE, FAIL or CANCEL",
            );
            None
        }
    };
    if !recovery::checksum_ok(&body.recovery_checksum) {
        v.push(
            "recovery_checksum",
            CHECKSUM_MALFORMED,
            "must be empty or 64 lowercase hex digits",
        );
    }
    if !recovery::rationale_ok(&body.rationale) {
        v.push(
            "rationale",
            RATIONALE_INVALID,
            "must be 1 to 1024 characters, not only whitespace, without control characters but newline and tab",
        );
    }
    match (id, decision) {
        (Some(run_id), Some(decision)) if v.is_empty() => Ok(Review {
            run_id,
            decision,
            recovery_checksum: body.recovery_checksum.clone(),
            rationale: body.rationale.clone(),
        }),
        _ => Err(v.into()),
    }
}

fn decision(name: &str) -> i32 {
    let d = match Decision::parse(name) {
        Some(Decision::Resume) => pb::ReviewDecision::Resume,
        Some(Decision::Reconcile) => pb::ReviewDecision::Reconcile,
        Some(Decision::Fail) => pb::ReviewDecision::Fail,
        Some(Decision::Cancel) => pb::ReviewDecision::Cancel,
        None => pb::ReviewDecision::Unspecified,
    };
    d as i32
}

pub fn quarantine_review(r: &ReviewRow) -> pb::QuarantineReview {
    pb::QuarantineReview {
        run_id: r.run_id.hyphenated().to_string(),
        quarantined_version: count(r.quarantined_version),
        decision: decision(&r.decision),
        reviewer: r.reviewer.clone(),
        recovery_version: count(r.recovery_version.unwrap_or(0)),
        recovery_checksum: r.recovery_checksum.clone(),
        version: count(r.version),
        generation: count(r.generation),
        reviewed_at: Some(timestamp(r.reviewed_at)),
    }
}

pub fn snapshot(s: &SnapshotRow) -> pb::ProvenanceSnapshot {
    pb::ProvenanceSnapshot {
        source: s.source.clone(),
        step: s.step.clone(),
        retrieved_at: Some(timestamp(s.retrieved_at)),
        content_sha256: s.content_sha256.clone(),
        parser_version: s.parser_version.clone(),
        responsibility: s.responsibility.clone(),
        version: count(s.version),
    }
}

/// A `ReplayRun` answer.
pub fn replayed(id: Uuid, r: crate::service::replay::Replayed) -> pb::ReplayRunResponse {
    let n = |x: usize| u64::try_from(x).unwrap_or(u64::MAX);
    pb::ReplayRunResponse {
        run_id: id.hyphenated().to_string(),
        transitions_replayed: n(r.report.replayed),
        transitions_total: n(r.report.total),
        divergence: r.report.divergence.map(|d| pb::ReplayDivergence {
            transition_index: n(d.index),
            version: count(d.version),
            expected_trigger: d.expected_trigger,
            replayed_trigger: d.replayed_trigger,
            expected_target_state: d.expected_target_state,
            replayed_target_state: d.replayed_target_state,
            expected_checkpoint_sha256: d.expected_checkpoint_sha256,
            replayed_checkpoint_sha256: d.replayed_checkpoint_sha256,
            reason: d.reason,
        }),
        inputs_read: n(r.report.inputs_read),
        workflow_version: r.workflow_version,
        state_schema_version: r.state_schema_version,
        fsm_sha256: r.fsm_sha256,
        rules_version: r.rules_version.to_owned(),
        declared_nondeterminism: crate::domain::replay::DECLARED_NONDETERMINISM
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
    }
}

/// An `InspectCheckpoint` request: the run and the version (`None`: the latest).
pub fn inspect(body: &pb::InspectCheckpointRequest) -> Result<(Uuid, Option<i64>), RunnerError> {
    let mut v = Violations::new();
    let id = match run_id("run_id", &body.run_id) {
        Ok(id) => Some(id),
        Err(RunnerError::InvalidArgument(bad)) => {
            v.extend(bad);
            None
        }
        Err(e) => return Err(e),
    };
    let version = match body.version {
        0 => None,
        n => match i64::try_from(n) {
            Ok(n) => Some(n),
            Err(_) => {
                v.push("version", VERSION_OUT_OF_RANGE, "must be at most 2^63 - 1");
                None
            }
        },
    };
    match id {
        Some(id) if v.is_empty() => Ok((id, version)),
        _ => Err(v.into()),
    }
}

pub fn checkpoint(c: &CheckpointRow) -> pb::Checkpoint {
    pb::Checkpoint {
        run_id: c.run_id.hyphenated().to_string(),
        version: count(c.version),
        generation: count(c.generation),
        state: c.state.clone(),
        body: c.body.clone(),
        checksum: c.checksum.clone(),
        created_at: Some(timestamp(c.created_at)),
    }
}
