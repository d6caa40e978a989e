//! Proto ↔ typed conversions of the effect RPCs (`InspectEffect`, `ResolveUnknownOutcome`) and
//! the effect permission a `StartRun` of a workflow with effect steps needs of its caller.

use lychd_proto::runner::v1 as pb;
use lychd_runtime::refusal::Violations;
use uuid::Uuid;

use super::convert::{run, run_id, timestamp};
use crate::domain::effect::{Resolution, is_digest};
use crate::domain::workflow::{StepKind, Workflow};
use crate::error::RunnerError;
use crate::error::reasons::{DIGEST_MALFORMED, RESOLUTION_INVALID};
use crate::service::effects::Inspected;

/// A `ResolveUnknownOutcome` request: the run, the resolution and the evidence digest; every
/// bad field named.
pub fn resolve(
    body: &pb::ResolveUnknownOutcomeRequest,
) -> Result<(Uuid, Resolution, String), RunnerError> {
    let mut v = Violations::new();
    let id = match run_id("run_id", &body.run_id) {
        Ok(id) => Some(id),
        Err(RunnerError::InvalidArgument(bad)) => {
            v.extend(bad);
            None
        }
        Err(e) => return Err(e),
    };
    let resolution = match pb::EffectResolution::try_from(body.resolution) {
        Ok(pb::EffectResolution::Confirmed) if is_digest(&body.receipt_digest) => {
            Some(Resolution::Confirmed {
                receipt_digest: body.receipt_digest.clone(),
            })
        }
        Ok(pb::EffectResolution::Confirmed) => {
            v.push(
                "receipt_digest",
                DIGEST_MALFORMED,
                "must be sha256: and 64 lowercase hex digits for CONFIRMED",
            );
            None
        }
        Ok(pb::EffectResolution::NotApplied | pb::EffectResolution::Abandon)
            if !body.receipt_digest.is_empty() =>
        {
            v.push(
                "receipt_digest",
                DIGEST_MALFORMED,
                "must be empty unless the resolution is CONFIRMED",
            );
            None
        }
        Ok(pb::EffectResolution::NotApplied) => Some(Resolution::NotApplied),
        Ok(pb::EffectResolution::Abandon) => Some(Resolution::Abandon),
        _ => {
            v.push(
                "resolution",
                RESOLUTION_INVALID,
                "must be CONFIRMED, NOT_APPLIED or ABANDON",
            );
            None
        }
    };
    if !is_digest(&body.evidence_digest) {
        v.push(
            "evidence_digest",
            DIGEST_MALFORMED,
            "must be sha256: and 64 lowercase hex digits (InspectEffect's ledger_digest)",
        );
    }
    match (id, resolution) {
        (Some(id), Some(r)) if v.is_empty() => Ok((id, r, body.evidence_digest.clone())),
        _ => Err(v.into()),
    }
}

/// The answer of `InspectEffect`.
pub fn inspected(i: &Inspected) -> pb::InspectEffectResponse {
    pb::InspectEffectResponse {
        state: i.run.state.clone(),
        effect_sequence: i.sequence,
        action_digest: i.effect.action_digest.clone(),
        consent_id: i.effect.consent_id.clone(),
        idempotency_key: i.idempotency_key.clone(),
        receipt_digest: i.effect.receipt_digest.clone(),
        ledger: i
            .ledger
            .iter()
            .map(|e| pb::EffectLedgerEntry {
                kind: e.kind.clone(),
                detail_json: e.detail.clone(),
                generation: u64::try_from(e.generation).unwrap_or(0),
                actor: e.actor.clone(),
                recorded_at: Some(timestamp(e.recorded_at)),
            })
            .collect(),
        ledger_digest: i.ledger_digest.clone(),
    }
}

/// The answer of `ResolveUnknownOutcome`.
pub fn resolved(r: &crate::service::runs::RunRow) -> pb::ResolveUnknownOutcomeResponse {
    pb::ResolveUnknownOutcomeResponse { run: Some(run(r)) }
}

/// The objects (`destination:<host>`) of the effect permission a workflow's effect steps need.
pub fn destinations(w: &Workflow) -> Vec<String> {
    let mut out: Vec<String> = w
        .steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::Effect(e) => Some(format!("destination:{}", e.host)),
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}
