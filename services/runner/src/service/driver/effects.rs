//! The driver's effect path (loop-contract v1 `action_types.ExternalEffect`): it asks Ward
//! (`consent.rs`) and the adapter (`adapter.rs`), and commits each edge with its ledger
//! entries in one transaction; the rules are pure (`domain::progress::effects`).
//!
//! - `PLAN_EFFECTS`: propose the exact call in Ward → `approval_requested` (ledger `proposal`,
//!   and `policy_verdict` when a standing rule settled it at once).
//! - `WAIT_APPROVAL`: read the verdict (an exact replay of the proposal); pending → the run is
//!   given back (a typed wait, its time suspended); granted → **consume first** (Ward's
//!   `ConsumeConsent`), then the fenced commit `approval_consumed` (ledger
//!   `approval_consumption`). A crash between the two leaves the run in `WAIT_APPROVAL` with a
//!   consumed approval: the next holder consumes again — Ward answers the same consumer
//!   presenting the same digest with the same success — and commits; nothing is dispatched
//!   before the intent exists, so nothing is sent twice and no intent is lost. Revoked,
//!   expired, or consumed by another → `approval_stale` (back to `PLAN_EFFECTS`, a new
//!   proposal with a new nonce); denied → `approval_denied` (the step closes nothing).
//! - `COMMIT_INTENT`: `intent_committed` with the intent row, the outbox row and the ledger's
//!   `intent` in the commit's transaction (`intent_persisted_with_outbox`).
//! - `EXECUTE`: effect-time authority (`runner:effect_http` on `destination:<host>`), the outbox
//!   claimed at this generation (a row claimed before — a crash after dispatch — is never sent
//!   blind: `transport_uncertain`), delivery with the idempotency key (again while the
//!   destination says "not applied", up to `effect_attempts`), then `response_received` or
//!   `transport_uncertain`.
//! - `RECONCILE`: a known receipt confirms; else the status query by key: applied → confirmed;
//!   not applied → delivered again with the same key (at-least-once); unknown →
//!   `outcome_unknown` (`HUMAN_RECONCILIATION`: `ResolveUnknownOutcome`).
//! - `HONOR_PENDING_INTERRUPT`: a cancel recorded meanwhile (or a deadline or wall budget that
//!   passed) ends the run; else `no_interrupt` re-ingests the receipt as the step's result.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::actions;
use crate::consent::{Call, Refused, Verdict};
use crate::domain::effect::{self, Delivery, EffectSpec, Pending, Risk};
use crate::domain::progress::effects as rules;
use crate::store::effects as ledger;

/// What the effect path did.
pub(super) enum Effected {
    /// It committed (the run after, `None` when the fence moved).
    Committed(Option<Box<RunRow>>),
    /// Nothing to commit now: give the run back for this many ms.
    Wait(u64),
}

/// The actor of the effect path's transitions.
pub const EFFECT_ACTOR: &str = "runner-effects";

type Entries = Vec<(&'static str, serde_json::Value)>;

impl Driver {
    pub(super) async fn effect_step(
        &self,
        w: &Workflow,
        run: &RunRow,
        p: &Progress,
        open_wait: u64,
    ) -> Result<Effected, RunnerError> {
        let (Some(spec), Some(pending)) = (rules::spec(w, p), p.effect.clone()) else {
            tracing::error!(run = %run.id, state = %run.state, "an effect state without a pending effect; not driving it");
            return Ok(Effected::Wait(u64::MAX / 4));
        };
        match run.state.as_str() {
            "PLAN_EFFECTS" => self.propose(w, run, p, spec, &pending).await,
            "WAIT_APPROVAL" => self.approval(w, run, p, spec, &pending, open_wait).await,
            "COMMIT_INTENT" => {
                self.fault("before_intent");
                let intent = ledger::Intent {
                    run_id: run.id,
                    sequence: pending.sequence,
                    version: run.version + 1,
                    step: &w.steps[pending.step].id,
                    adapter: &spec.adapter,
                    adapter_version: spec.adapter_version(),
                    destination: &spec.destination,
                    action: &spec.action,
                    action_digest: &spec.action_digest,
                    consent_id: &pending.consent_id,
                    binding_digest: &pending.binding_digest,
                };
                let done = self
                    .commit_effect(run, "intent_committed", p, Vec::new(), Some(&intent), None)
                    .await?;
                self.fault("after_intent");
                Ok(done)
            }
            "EXECUTE" => self.execute(run, p, spec, &pending).await,
            "RECONCILE" => self.reconcile(run, p, spec, &pending).await,
            _ => {
                let now = time::OffsetDateTime::now_utc();
                let budgets = Budgets(run.budgets.map(|b| u64::try_from(b).unwrap_or(0)));
                let interrupt = if run.interrupt_pending {
                    Some("interrupt_cancel")
                } else if run.deadline_at.is_some_and(|d| now >= d) {
                    Some("interrupt_timeout")
                } else if progress::wall_exhausted(&budgets, ms_between(run.created_at, now)) {
                    Some("interrupt_budget")
                } else {
                    None
                };
                let (event, q) = rules::honored(w, p, interrupt);
                self.commit_effect(run, event, &q, Vec::new(), None, None)
                    .await
            }
        }
    }

    async fn proposed(
        &self,
        w: &Workflow,
        run: &RunRow,
        spec: &EffectSpec,
        e: &Pending,
    ) -> Result<crate::consent::Proposed, Refused> {
        let c = self.exact_call(w, run, spec, e);
        self.consents
            .propose(&Call {
                run_id: &c.run_id,
                effect_id: &c.effect_id,
                deferred_call_id: &c.deferred_call_id,
                tool: c.tool,
                arguments: c.arguments,
                binding: c.binding,
            })
            .await
    }

    async fn propose(
        &self,
        w: &Workflow,
        run: &RunRow,
        p: &Progress,
        spec: &EffectSpec,
        e: &Pending,
    ) -> Result<Effected, RunnerError> {
        let Ok(c) = self.proposed(w, run, spec, e).await else {
            return Ok(Effected::Wait(self.settings.effects.approval_poll_ms));
        };
        let mut entries: Entries = vec![(
            "proposal",
            json!({"consent_id": c.consent_id, "binding_digest": c.binding_digest,
                   "proposal": e.proposal, "action_digest": spec.action_digest,
                   "destination_hash": spec.destination_hash(), "risk": spec.risk}),
        )];
        if let Verdict::Granted { by_rule } = &c.verdict {
            entries.push((
                "policy_verdict",
                json!({"verdict": "preauthorized", "rule": by_rule}),
            ));
        }
        let q = rules::proposed(p, &c.consent_id, &c.binding_digest);
        self.commit_effect(run, "approval_requested", &q, entries, None, None)
            .await
    }

    async fn approval(
        &self,
        w: &Workflow,
        run: &RunRow,
        p: &Progress,
        spec: &EffectSpec,
        e: &Pending,
        open_wait: u64,
    ) -> Result<Effected, RunnerError> {
        let poll = self.settings.effects.approval_poll_ms;
        let Ok(c) = self.proposed(w, run, spec, e).await else {
            return Ok(Effected::Wait(poll));
        };
        let waited = rules::waited(p, open_wait);
        let verdict = |v: &str, extra: serde_json::Value| {
            vec![(
                "policy_verdict",
                json!({"verdict": v, "consent_id": c.consent_id, "detail": extra}),
            )]
        };
        // The exact hash: the consent Ward answers must be the one proposed.
        if c.consent_id != e.consent_id || c.binding_digest != e.binding_digest {
            let q = rules::stale(&waited);
            let v = verdict("stale", json!("binding changed"));
            return self
                .commit_effect(run, "approval_stale", &q, v, None, None)
                .await;
        }
        let by_rule = match &c.verdict {
            Verdict::Pending => return Ok(Effected::Wait(poll)),
            Verdict::Denied => {
                let q = rules::denied(w, &waited);
                let v = verdict("denied", json!(null));
                return self
                    .commit_effect(run, "approval_denied", &q, v, None, None)
                    .await;
            }
            Verdict::Granted { by_rule } => by_rule.clone(),
        };
        if spec.risk == Risk::High && !by_rule.is_empty() {
            // A high-risk effect needs a live human verdict: a standing rule's grant is none.
            let q = rules::denied(w, &waited);
            let v = verdict("rule_grant_refused_for_high_risk", json!(by_rule));
            return self
                .commit_effect(run, "approval_denied", &q, v, None, None)
                .await;
        }
        if c.revoked {
            let q = rules::stale(&waited);
            let v = verdict("stale", json!("CONSENT_REVOKED"));
            return self
                .commit_effect(run, "approval_stale", &q, v, None, None)
                .await;
        }
        match self
            .consents
            .consume(&c.consent_id, &c.binding_digest)
            .await
        {
            Ok(()) => {
                self.fault("after_consume");
                let entries = vec![
                    (
                        "policy_verdict",
                        json!({"verdict": "granted", "consent_id": c.consent_id, "rule": by_rule}),
                    ),
                    (
                        "approval_consumption",
                        json!({"consent_id": c.consent_id, "binding_digest": c.binding_digest}),
                    ),
                ];
                self.commit_effect(run, "approval_consumed", &waited, entries, None, None)
                    .await
            }
            Err(Refused::Stale(reason)) => {
                let q = rules::stale(&waited);
                let v = verdict("stale", json!(reason));
                self.commit_effect(run, "approval_stale", &q, v, None, None)
                    .await
            }
            Err(Refused::Unavailable) => Ok(Effected::Wait(poll)),
        }
    }

    /// Deliver (again) under `key` while the destination says "not applied", at most until
    /// the outbox row has `effect_attempts` attempts; every attempt is a ledger entry.
    async fn deliver(
        &self,
        run: &RunRow,
        e: &Pending,
        spec: &EffectSpec,
        key: &str,
        first: bool,
    ) -> Result<Option<Delivery>, RunnerError> {
        let s = &self.service;
        // Effect-time authority, asked of Ward immediately before the dispatch.
        match self
            .consents
            .authorize(
                actions::EFFECT_HTTP.name,
                &format!("destination:{}", spec.host),
            )
            .await
        {
            Ok(true) => {}
            Ok(false) => return Ok(Some(Delivery::Rejected { status: 0 })),
            Err(_) => return Ok(None),
        }
        let mut last = Delivery::Unknown;
        for i in 0..self.settings.effects.attempts {
            let exclusive = first && i == 0;
            let Some(claimed) =
                ledger::claim(&s.pool, run.id, key, run.generation, exclusive).await?
            else {
                // Claimed before (a dispatch may have left) or fenced: never sent blind.
                return Ok(Some(Delivery::Unknown));
            };
            ledger::append(
                &s.pool,
                run.id,
                e.sequence,
                "attempt",
                run.generation,
                EFFECT_ACTOR,
                &json!({"attempt": claimed.attempts, "idempotency_key": key}),
            )
            .await?;
            last = self
                .adapter
                .deliver(&claimed.destination, key, &claimed.action)
                .await;
            if last != Delivery::NotApplied
                || claimed.attempts >= i32::try_from(self.settings.effects.attempts).unwrap_or(1)
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50u64 << claimed.attempts.clamp(0, 6))).await;
        }
        Ok(Some(last))
    }

    async fn execute(
        &self,
        run: &RunRow,
        p: &Progress,
        spec: &EffectSpec,
        e: &Pending,
    ) -> Result<Effected, RunnerError> {
        let key = ledger::key_of(&self.service.pool, run.id, e.sequence).await?;
        let Some(d) = self.deliver(run, e, spec, &key, true).await? else {
            return Ok(Effected::Wait(self.settings.effects.approval_poll_ms));
        };
        self.fault("after_response");
        let (event, q) = rules::answered(p, &d);
        let q = with_key(q, &key);
        self.commit_effect(run, event, &q, response(&d), None, None)
            .await
    }

    async fn reconcile(
        &self,
        run: &RunRow,
        p: &Progress,
        spec: &EffectSpec,
        e: &Pending,
    ) -> Result<Effected, RunnerError> {
        let key = ledger::key_of(&self.service.pool, run.id, e.sequence).await?;
        let known = !e.receipt_digest.is_empty() || e.rejected;
        let mut entries = Entries::new();
        let d = if known {
            None
        } else {
            let mut d = self.adapter.status(&spec.destination, &key).await;
            entries.push(("reconciliation", json!({"status_query": kind(&d)})));
            if d == Delivery::NotApplied {
                // Known not applied: delivered again with the same key (at-least-once).
                d = self
                    .deliver(run, e, spec, &key, false)
                    .await?
                    .unwrap_or(Delivery::Unknown);
                entries.extend(response(&d));
            }
            Some(d)
        };
        let (event, q) = rules::reconciled(p, d.as_ref());
        if let Some(receipt) = q.effect.as_ref().map(|e| e.receipt_digest.clone())
            && event == "outcome_confirmed"
        {
            entries.push(("acknowledgement", json!({"receipt_digest": receipt})));
        }
        let settle = (event != "outcome_unknown").then_some(key.as_str());
        self.commit_effect(run, event, &q, entries, None, settle)
            .await
    }

    /// Commit `event` with `progress`, the ledger `entries`, the intent (and its outbox row)
    /// and the outbox row `settle` settled, in one transaction after the fenced update.
    pub(super) async fn commit_effect(
        &self,
        run: &RunRow,
        event: &str,
        progress: &Progress,
        entries: Entries,
        intent: Option<&ledger::Intent<'_>>,
        settle: Option<&str>,
    ) -> Result<Effected, RunnerError> {
        let s = &self.service;
        let Some(edge) = s.fsm.next(&run.state, event) else {
            tracing::error!(run = %run.id, state = %run.state, event, "no FSM edge; not committing");
            return Err(RunnerError::Fenced);
        };
        let to = edge.to.clone();
        let checkpoint = s.checkpoint_with(run, run.version + 1, &to, progress);
        let t = NewTransition {
            source_state: &run.state,
            target_state: &to,
            trigger: event,
            actor: EFFECT_ACTOR,
            capability: "",
        };
        let sequence = progress
            .effect
            .as_ref()
            .or(progress_of_row(run).effect.as_ref())
            .map_or(0, |e| e.sequence);
        let mut tx = s.pool.begin().await?;
        let after = runs::commit_with(
            &mut *tx,
            run,
            &t,
            s.fsm.category(&to),
            &checkpoint,
            Some(progress),
            Some(Holder {
                renew_ms: self.ttl(),
                desc: None,
                // Decided on Ward's, the adapter's or an operator's answer: a replay takes it as
                // recorded (its answers are in the effect ledger), so no input is read back.
                inputs: &[],
            }),
        )
        .await?;
        if let Some(a) = &after {
            if let Some(i) = intent {
                let tid = ledger::transition_id(&mut tx, a.id, a.version).await?;
                let tuple = effect::idempotency_tuple(
                    &a.id.hyphenated().to_string(),
                    &tid.hyphenated().to_string(),
                    i.sequence,
                    i.action_digest,
                    i.adapter_version,
                );
                let key = effect::idempotency_key(&tuple);
                ledger::intend(&mut tx, i, tid, &tuple, &key, a.generation).await?;
            }
            for (kind, detail) in &entries {
                ledger::append(
                    &mut *tx,
                    run.id,
                    sequence,
                    kind,
                    run.generation,
                    EFFECT_ACTOR,
                    detail,
                )
                .await?;
            }
            if let Some(key) = settle {
                ledger::settle(&mut *tx, key).await?;
            }
        }
        tx.commit().await?;
        super::commit::log_committed(run, after.as_ref(), event, EFFECT_ACTOR);
        Ok(Effected::Committed(after.map(Box::new)))
    }

    /// A test-only fault point (`[office] fault_points`): the process ends at once, as kill -9
    /// would (no lease given back, nothing flushed).
    fn fault(&self, point: &str) {
        if self
            .settings
            .effects
            .fault_points
            .iter()
            .any(|f| f == point)
        {
            tracing::warn!(point, "fault point reached; aborting (test only)");
            std::process::abort();
        }
    }
}

mod call;
use call::{kind, response, with_key};
