//! The exact call an effect proposes to Ward (the contract's approval binding mapped onto
//! Ward's), and the ledger entries of an adapter's answer.

use serde_json::json;

use super::super::{Driver, RunRow};
use super::Entries;
use crate::domain::effect::{self, Delivery, EffectSpec, Pending, Risk};
use crate::domain::progress::Progress;
use crate::domain::workflow::Workflow;

impl Driver {
    /// The exact call Ward binds (see `docs/runner.md`, "Approvals through Ward").
    pub(super) fn exact_call(
        &self,
        w: &Workflow,
        run: &RunRow,
        spec: &EffectSpec,
        e: &Pending,
    ) -> CallParts {
        let run_id = run.id.hyphenated().to_string();
        let step = &w.steps[e.step].id;
        let action: serde_json::Value =
            serde_json::from_slice(&spec.action).unwrap_or(serde_json::Value::Null);
        let arguments = json!({
            "adapter": spec.adapter, "destination": spec.destination, "step": step,
            "action": action,
        });
        let expiry = run.created_at + time::Duration::seconds(i64::from(run.budgets[3]).max(1));
        CallParts {
            effect_id: format!("{run_id}.{}", e.sequence),
            deferred_call_id: format!("{run_id}.{}.{}", e.sequence, e.proposal),
            tool: match spec.risk {
                Risk::High => "runner.effect.http.high",
                Risk::Low => "runner.effect.http.low",
            },
            arguments: serde_json::to_vec(&arguments).unwrap_or_default(),
            binding: lychd_proto::ward::v1::ConsentBinding {
                workflow_version: run.workflow_version.clone(),
                action_hash: spec.action_digest.clone(),
                artifact_hash: format!("sha256:{}", run.workflow_sha256),
                destination_hash: spec.destination_hash(),
                visibility: format!("owner:{}", run.owner),
                scope: format!("destination:{}", spec.host),
                actor: run.owner.clone(),
                expiry: Some(prost_types::Timestamp {
                    seconds: expiry.unix_timestamp(),
                    nanos: 0,
                }),
                nonce: effect::nonce(&run_id, e.sequence, e.proposal),
                rationale: format!(
                    "effect step {step} of workflow {} {}",
                    run.workflow_name, run.workflow_version
                ),
            },
            run_id,
        }
    }
}

/// The parts of a proposal ([`Call`] borrows them).
pub(super) struct CallParts {
    pub(super) run_id: String,
    pub(super) effect_id: String,
    pub(super) deferred_call_id: String,
    pub(super) tool: &'static str,
    pub(super) arguments: Vec<u8>,
    pub(super) binding: lychd_proto::ward::v1::ConsentBinding,
}

pub(super) fn with_key(mut q: Progress, key: &str) -> Progress {
    if let Some(e) = q.effect.as_mut() {
        e.idempotency_key = key.to_owned();
    }
    q
}

pub(super) fn kind(d: &Delivery) -> &'static str {
    match d {
        Delivery::Applied { .. } => "applied",
        Delivery::Rejected { .. } => "rejected",
        Delivery::NotApplied => "not_applied",
        Delivery::Unknown => "unknown",
    }
}

/// The ledger entries of an answer: `response` (its kind and status) and, when applied,
/// `receipt` (its digest).
pub(super) fn response(d: &Delivery) -> Entries {
    let mut out = vec![(
        "response",
        match d {
            Delivery::Rejected { status } => json!({"outcome": kind(d), "status": status}),
            _ => json!({"outcome": kind(d)}),
        },
    )];
    if let Delivery::Applied { receipt_digest } = d {
        out.push(("receipt", json!({"receipt_digest": receipt_digest})));
    }
    out
}
