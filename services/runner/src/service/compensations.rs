//! The compensation job (issue 28, Runner II; the rules in `domain::compensation`): a run that
//! ended in a failure or a cancel after an effect began was marked due by its ending's own
//! statement; every step loop, when it finds nothing to claim, takes one due run and
//! compensates its confirmed effects that declare a compensating action, last first — each
//! the effect's way: its intent row and `compensation` ledger entry written before any
//! dispatch, Ward's adapter permission (`runner:effect_http` on `destination:<host>`) asked
//! immediately before it, delivered with its own idempotency key, an attempt after an earlier
//! one preceded by a status query (never sent blind), and its outcome settled with a ledger
//! entry. An outcome nobody can tell is settled `unknown`, never `compensated`. The run stays
//! due until every compensation is settled (Ward unreachable, "not applied, try later").

use serde_json::json;
use uuid::Uuid;

use super::Service;
use crate::actions;
use crate::adapter::HttpAdapter;
use crate::consent::Consents;
use crate::domain::compensation::{self, Outcome};
use crate::domain::effect::{Compensation, Delivery};
use crate::domain::workflow::{StepKind, Workflow};
use crate::error::RunnerError;
use crate::store::compensations::{self as store, Confirmed, Intent};
use crate::store::effects as ledger;
use crate::store::leases;

/// How long a taken run waits before the job looks at it again (ms).
pub const COMPENSATION_RETRY_MS: i64 = 2_000;

/// The actor of the job's ledger entries (generation 0: it holds no run lease; the run ended).
pub const COMPENSATOR: &str = "runner-compensation";

impl Service {
    /// Compensate one due run: whether one was due.
    pub async fn compensate_due(
        &self,
        consents: &Consents,
        adapter: &HttpAdapter,
    ) -> Result<bool, RunnerError> {
        // Without a Ward the permission cannot be asked: the marks stay for a runner with one.
        if !consents.has_ward() {
            return Ok(false);
        }
        let Some(id) = store::take_due(&self.pool, COMPENSATION_RETRY_MS).await? else {
            return Ok(false);
        };
        if self.compensate(consents, adapter, id).await? {
            store::done(&self.pool, id).await?;
        }
        Ok(true)
    }

    /// Compensate run `id`'s confirmed effects, last first: whether every one is settled (a
    /// compensation still pending stops the ones before it until the next look).
    async fn compensate(
        &self,
        consents: &Consents,
        adapter: &HttpAdapter,
        id: Uuid,
    ) -> Result<bool, RunnerError> {
        let Ok(w) = Workflow::parse(&leases::workflow(&self.pool, id).await?) else {
            // Validated at start: a stored document that no longer parses declares nothing.
            return Ok(true);
        };
        for c in store::confirmed(&self.pool, id).await? {
            let Some(comp) = w
                .steps
                .iter()
                .find(|s| s.id == c.step)
                .and_then(|s| match &s.kind {
                    StepKind::Effect(spec) => spec.compensation.as_deref(),
                    _ => None,
                })
            else {
                continue;
            };
            let key = compensation::key(&c.key);
            store::intend(
                &self.pool,
                &Intent {
                    run_id: id,
                    sequence: c.sequence,
                    key: &key,
                    destination: &comp.destination,
                    action: &comp.action,
                    action_digest: &comp.action_digest,
                },
                COMPENSATOR,
            )
            .await?;
            if !self.attempt(consents, adapter, id, &c, comp, &key).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One attempt at the compensation of `c` under `key`: whether it is settled.
    async fn attempt(
        &self,
        consents: &Consents,
        adapter: &HttpAdapter,
        id: Uuid,
        c: &Confirmed,
        comp: &Compensation,
        key: &str,
    ) -> Result<bool, RunnerError> {
        if store::outcome(&self.pool, id, c.sequence)
            .await?
            .is_some_and(|o| o != "pending")
        {
            return Ok(true);
        }
        let settle = |outcome: Outcome, detail: serde_json::Value| async move {
            let mut detail = detail;
            detail["phase"] = json!("outcome");
            detail["outcome"] = json!(outcome.name());
            detail["idempotency_key"] = json!(key);
            store::settle(
                &self.pool,
                id,
                c.sequence,
                key,
                outcome.name(),
                COMPENSATOR,
                &detail,
            )
            .await
        };
        // Effect-time authority, asked of Ward immediately before the dispatch.
        match consents
            .authorize(
                actions::EFFECT_HTTP.name,
                &format!("destination:{}", comp.host),
            )
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                settle(Outcome::Denied, json!({})).await?;
                return Ok(true);
            }
            Err(_) => return Ok(false),
        }
        let Some(before) = store::claim(&self.pool, key).await? else {
            return Ok(true);
        };
        // An earlier attempt may have been sent: asked first, never sent blind.
        let mut d = if before > 0 {
            adapter.status(&comp.destination, key).await
        } else {
            Delivery::NotApplied
        };
        if d == Delivery::NotApplied {
            ledger::append(
                &self.pool,
                id,
                c.sequence,
                "compensation",
                0,
                COMPENSATOR,
                &json!({"phase": "attempt", "attempt": before + 1, "idempotency_key": key}),
            )
            .await?;
            d = adapter.deliver(&comp.destination, key, &comp.action).await;
            if d == Delivery::Unknown {
                // No answer: the status query reconciles it.
                d = adapter.status(&comp.destination, key).await;
            }
        }
        let (outcome, detail) = match d {
            Delivery::Applied { receipt_digest } => (
                Outcome::Compensated,
                json!({"receipt_digest": receipt_digest}),
            ),
            Delivery::Rejected { status } => (Outcome::Rejected, json!({"status": status})),
            Delivery::Unknown => (Outcome::Unknown, json!({})),
            // Not applied (yet): the next look asks the status, then delivers again.
            Delivery::NotApplied => return Ok(false),
        };
        settle(outcome, detail).await?;
        tracing::info!(run = %id, effect_sequence = c.sequence, outcome = outcome.name(), "compensation settled");
        Ok(true)
    }
}
