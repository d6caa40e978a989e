//! An operator's side of effects: inspecting a run's effect and its ledger, and settling an
//! unknown outcome (`ResolveUnknownOutcome`) from `HUMAN_RECONCILIATION` — confirmed (with the
//! receipt digest the operator saw), not applied (the run fails) or abandoned
//! (`EFFECT_OUTCOME_UNKNOWN`). The operator names the ledger digest they inspected: a ledger
//! that changed since is stale and nothing is applied.

use uuid::Uuid;

use super::Service;
use super::runs::{RunRow, progress_of_row};
use crate::domain::effect::{Pending, Resolution};
use crate::domain::progress::effects as rules;
use crate::error::RunnerError;
use crate::store::effects as ledger;
use crate::store::runs::{self, NewTransition};

/// The state an unknown outcome waits in.
pub const HUMAN_RECONCILIATION: &str = "HUMAN_RECONCILIATION";

/// A run's effect as inspected.
pub struct Inspected {
    pub run: RunRow,
    pub effect: Pending,
    pub sequence: u32,
    pub idempotency_key: String,
    pub ledger: Vec<ledger::Entry>,
    pub ledger_digest: String,
}

impl Service {
    /// The run's effect in flight (or its last one) and its ledger.
    pub async fn inspect_effect(&self, id: Uuid) -> Result<Inspected, RunnerError> {
        let run = runs::get(&self.pool, id, None)
            .await?
            .ok_or(RunnerError::RunNotFound)?;
        let p = progress_of_row(&run);
        if p.effects == 0 {
            return Err(RunnerError::NoEffect);
        }
        let sequence = p.effect.as_ref().map_or(p.effects, |e| e.sequence);
        let entries = ledger::entries(&self.pool, id, sequence).await?;
        // No effect in flight: the last one, from its intent and its ledger's receipt.
        let effect = match p.effect.clone() {
            Some(e) => e,
            None => {
                let (action_digest, consent_id) = ledger::intent_of(&self.pool, id, sequence)
                    .await?
                    .unwrap_or_default();
                let receipt_digest = entries
                    .iter()
                    .rev()
                    .filter(|e| e.kind == "receipt" || e.kind == "acknowledgement")
                    .find_map(|e| {
                        serde_json::from_str::<serde_json::Value>(&e.detail)
                            .ok()?
                            .get("receipt_digest")?
                            .as_str()
                            .map(str::to_owned)
                    })
                    .unwrap_or_default();
                Pending {
                    sequence,
                    action_digest,
                    consent_id,
                    receipt_digest,
                    ..Pending::default()
                }
            }
        };
        let digest = ledger::ledger_digest(&self.pool, id, sequence).await?;
        let key = ledger::find_key(&self.pool, id, sequence)
            .await?
            .unwrap_or_default();
        Ok(Inspected {
            run,
            effect,
            sequence,
            idempotency_key: key,
            ledger: entries,
            ledger_digest: digest,
        })
    }

    /// Settle run `id`'s unknown outcome as `principal` (checked in one transaction, the run
    /// row locked first: two resolutions serialize; the second finds the run moved on).
    pub async fn resolve(
        &self,
        principal: &str,
        id: Uuid,
        resolution: &Resolution,
        evidence_digest: &str,
    ) -> Result<RunRow, RunnerError> {
        let mut tx = self.pool.begin().await?;
        match self
            .resolve_in(&mut tx, principal, id, resolution, evidence_digest)
            .await
        {
            Ok(after) => {
                tx.commit().await?;
                tracing::info!(run_id = %id, actor = principal, "unknown effect outcome resolved");
                Ok(after)
            }
            Err(e) => {
                // A refusal releases the run's row at once, not when the pooled connection
                // is next used.
                tx.rollback().await?;
                Err(e)
            }
        }
    }

    async fn resolve_in(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
        principal: &str,
        id: Uuid,
        resolution: &Resolution,
        evidence_digest: &str,
    ) -> Result<RunRow, RunnerError> {
        let run = runs::lock(tx, id, None)
            .await?
            .ok_or(RunnerError::RunNotFound)?;
        if run.state != HUMAN_RECONCILIATION {
            return Err(RunnerError::NotReconciling);
        }
        let p = progress_of_row(&run);
        let Some(e) = p.effect.clone() else {
            return Err(RunnerError::NotReconciling);
        };
        if ledger::ledger_digest(&mut **tx, id, e.sequence).await? != evidence_digest {
            return Err(RunnerError::EvidenceStale);
        }
        let event = resolution.event();
        let to = self
            .fsm
            .next(&run.state, event)
            .map(|edge| edge.to.clone())
            .ok_or(RunnerError::NotReconciling)?;
        let mut q = rules::resolved(&p, resolution);
        // The wait for a person is suspended time (from the committed entry into the state,
        // the row's `updated_at`), charged by the commit that ends it.
        let waited = (time::OffsetDateTime::now_utc() - run.updated_at).whole_milliseconds();
        q.used.suspended_ms = q
            .used
            .suspended_ms
            .saturating_add(u64::try_from(waited).unwrap_or(0));
        let checkpoint = self.checkpoint_with(&run, run.version + 1, &to, &q);
        let after = runs::commit_with(
            &mut **tx,
            &run,
            &NewTransition {
                source_state: &run.state,
                target_state: &to,
                trigger: event,
                actor: principal,
                capability: "",
            },
            self.fsm.category(&to),
            &checkpoint,
            Some(&q),
            None,
        )
        .await?
        .ok_or(RunnerError::Fenced)?;
        let detail = match resolution {
            Resolution::Confirmed { receipt_digest } => {
                serde_json::json!({"resolution": "confirmed", "receipt_digest": receipt_digest,
                                   "evidence_digest": evidence_digest})
            }
            Resolution::NotApplied => serde_json::json!({"resolution": "not_applied",
                                                         "evidence_digest": evidence_digest}),
            Resolution::Abandon => serde_json::json!({"resolution": "abandon",
                                                      "evidence_digest": evidence_digest}),
        };
        ledger::append(
            &mut **tx,
            id,
            e.sequence,
            "reconciliation",
            0,
            principal,
            &detail,
        )
        .await?;
        if let Some(key) = ledger::find_key(&mut **tx, id, e.sequence).await? {
            ledger::settle(&mut **tx, &key).await?;
        }
        // The step loop gave the waiting run back until a budget or its deadline: it takes
        // the run again at once (a runner holding it meanwhile is fenced).
        crate::store::leases::wake(tx, id).await?;
        Ok(after)
    }
}
