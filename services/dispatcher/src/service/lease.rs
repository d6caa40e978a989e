//! Issuing a lease: the read-only preparation on the cached snapshot, then (in its own task) a
//! fresh probe, the decision table, Ward asked again and the registration; under a request id
//! the answer is kept and a retry replays it.

use std::collections::BTreeMap;
use std::sync::Arc;

use time::OffsetDateTime;
use uuid::Uuid;

use super::{Recheck, Service};
use crate::domain::decision::{Decision, Fresh, Record, Unavailable, decide, precheck};
use crate::domain::demand::{Admission, Demand, Matched, matching, order};
use crate::domain::observation::{Observed, Phase};
use crate::domain::registry::{Animator, Capability};
use crate::error::{DispatcherError, Result};
use crate::store::leases::{self, Answer, Kept, NewLease, OutcomeKind, Registered};
use crate::store::observations;

/// A validated lease request.
#[derive(Debug, Clone)]
pub struct LeaseCommand {
    pub demand: Demand,
    pub holder: String,
    pub run_id: String,
    pub attempt_id: String,
    pub priority: u32,
    pub ttl_seconds: u32,
    /// The caller's idempotency key (scoped to the calling principal).
    pub request_id: Option<String>,
}

impl LeaseCommand {
    /// The request in canonical form (every field but the request id, the TTL resolved): what
    /// a retry under the same request id must equal.
    pub fn canonical(&self) -> String {
        let d = &self.demand;
        serde_json::json!({
            "family": d.family.map(|f| f.as_str()),
            "capability_key": d.key.as_ref().map(ToString::to_string),
            "model_id": d.model,
            "input_modalities": d.modalities.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
            "tools_required": d.tools_required,
            "holder": self.holder,
            "run_id": self.run_id,
            "attempt_id": self.attempt_id,
            "priority": self.priority,
            "ttl_seconds": self.ttl_seconds,
        })
        .to_string()
    }
}

/// An issued lease.
#[derive(Debug, Clone)]
pub struct Granted {
    pub lease_id: Uuid,
    pub capability_key: String,
    pub animator_name: String,
    /// The declared capability and its animator (the route). Absent only when a grant kept
    /// under a request id names a capability the registry no longer declares.
    pub declared: Option<(Animator, Capability)>,
    pub issued_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub generation: i64,
    pub holder: String,
    pub priority: u32,
}

/// The in-band answer to a lease request.
#[derive(Debug, Clone)]
pub enum LeaseOutcome {
    Granted(Box<Granted>),
    TransitionRequired {
        capability_key: String,
        animator: String,
        ready_estimate_seconds: Option<u32>,
    },
    Unavailable {
        reason: Unavailable,
        capability_key: String,
        animator: String,
        observed: Option<Observed>,
    },
}

/// The read-only half of a lease request, done.
#[derive(Debug, Clone)]
pub enum Prepared {
    /// Answered without a probe (no candidate, unknown or incompatible key, precheck).
    Answered(LeaseOutcome),
    /// The chosen record and its animator's admission as captured before the probe.
    Chosen {
        key: String,
        captured: Option<Admission>,
    },
}

fn unavailable(
    reason: Unavailable,
    cap: Option<&Capability>,
    observed: Option<Observed>,
) -> LeaseOutcome {
    LeaseOutcome::Unavailable {
        reason,
        capability_key: cap.map(|c| c.key_text.clone()).unwrap_or_default(),
        animator: cap.map(|c| c.animator().to_owned()).unwrap_or_default(),
        observed,
    }
}

/// A broken invariant of the stored state (answered `INTERNAL`, logged).
fn broken(what: &'static str) -> DispatcherError {
    DispatcherError::Database(sqlx::Error::Protocol(what.into()))
}

impl Service {
    /// The read-only half of a lease request: typed demand → candidates → deterministic order
    /// on the cached snapshot → the chosen record (with the admission generation captured
    /// before its probe), or an answer that needs no probe. It probes and writes nothing, so it
    /// may overlap the caller's authorization.
    pub async fn prepare(&self, demand: &Demand) -> Result<Prepared> {
        let reg = &self.settings.registry;
        let answered = |reason, cap| Ok(Prepared::Answered(unavailable(reason, cap, None)));
        let candidates = match matching(reg, demand) {
            Matched::Candidates(c) => c,
            Matched::ExactUnknown => return answered(Unavailable::CapabilityUnknown, None),
            Matched::ExactIncompatible(c) => {
                return answered(Unavailable::CapabilityIncompatible, Some(c));
            }
            Matched::None => return answered(Unavailable::NoCandidate, None),
        };
        let mut animators: Vec<String> =
            candidates.iter().map(|c| c.animator().to_owned()).collect();
        animators.sort();
        animators.dedup();
        let snap = observations::snapshot(&self.pool, &animators).await?;
        let chosen = order(reg, &snap, candidates)[0];
        if let Some(u) = precheck(self.record_of(chosen)) {
            return answered(u, Some(chosen));
        }
        Ok(Prepared::Chosen {
            key: chosen.key_text.clone(),
            captured: snap.admission_of(chosen.animator()),
        })
    }

    /// The effectful half, once the caller is allowed: for a chosen record, a fresh probe →
    /// the decision table → Ward asked again ([`Recheck`]) when it is a grant → the
    /// observation recorded, together with the lease and its dispatch event when granted (one
    /// statement, under the generation captured before the probe). Under a request id the
    /// answer is kept (the first one written wins) and a retry gets the kept one. It runs in
    /// its own task, so a caller that goes away leaves nothing half-done: the probe is recorded
    /// either way, and a lease it no longer hears of expires with its TTL (or is found again by
    /// its request id).
    pub async fn lease(
        self: &Arc<Self>,
        principal_id: &str,
        cmd: &LeaseCommand,
        prepared: Prepared,
        recheck: Recheck,
    ) -> Result<LeaseOutcome> {
        let prepared = match prepared {
            // Nothing to probe, nothing to keep.
            Prepared::Answered(outcome) if cmd.request_id.is_none() => return Ok(outcome),
            p => p,
        };
        let this = self.clone();
        let principal_id = principal_id.to_owned();
        let cmd = cmd.clone();
        let task = tokio::spawn(async move {
            let outcome = match prepared {
                Prepared::Answered(outcome) => outcome,
                Prepared::Chosen { key, captured } => {
                    return this
                        .issue_now(&principal_id, &cmd, &key, captured, recheck)
                        .await;
                }
            };
            this.settle(&principal_id, &cmd, outcome).await
        });
        task.await.unwrap_or(Err(DispatcherError::Interrupted))
    }

    async fn issue_now(
        &self,
        principal_id: &str,
        cmd: &LeaseCommand,
        key: &str,
        captured: Option<Admission>,
        recheck: Recheck,
    ) -> Result<LeaseOutcome> {
        let reg = &self.settings.registry;
        let chosen = reg
            .capability(key)
            .expect("invariant: the chosen key is declared");
        let animator = reg
            .animator(chosen.animator())
            .expect("invariant: every capability's animator is declared");
        let record = self.record_of(chosen);
        let open = captured.is_some_and(|a| a.is_open());
        let mut reprobed = false;
        let (decision, observed) = loop {
            let (obs, failure) = self
                .probe_keys(animator, std::slice::from_ref(&chosen.key_text))
                .await;
            let observed = obs
                .get(&chosen.key_text)
                .cloned()
                .unwrap_or_else(|| Observed::with_reason(Phase::Unknown, "PROBE_MISSING_KEY"));
            let fresh = Fresh {
                phase: observed.phase,
                probe_failed: failure.is_some(),
                reprobed,
            };
            match decide(record, fresh, open) {
                Decision::Reprobe => {
                    observations::record(&self.pool, &animator.name, &obs).await?;
                    reprobed = true;
                }
                d => break (d, observed),
            }
        };
        let transition = || LeaseOutcome::TransitionRequired {
            capability_key: chosen.key_text.clone(),
            animator: animator.name.clone(),
            ready_estimate_seconds: animator.ready_estimate_seconds,
        };
        let one = || BTreeMap::from([(chosen.key_text.clone(), observed.clone())]);
        let captured = match (decision, captured) {
            (Decision::Grant, Some(captured)) => captured,
            _ => {
                observations::record(&self.pool, &animator.name, &one()).await?;
                let outcome = match decision {
                    Decision::Unavailable(u) => unavailable(u, Some(chosen), Some(observed)),
                    Decision::Grant | Decision::TransitionRequired => transition(),
                    Decision::Reprobe => {
                        unreachable!("invariant: the loop above never breaks on Reprobe")
                    }
                };
                return self.settle(principal_id, cmd, outcome).await;
            }
        };
        // The probe may have taken seconds: the caller's session, credential or assignment
        // may be gone. Ward is asked again now, before anything of the caller's is written.
        if let Err(refused) = recheck().await {
            observations::record(&self.pool, &animator.name, &one()).await?;
            tracing::info!(animator = %animator.name, "lease refused at the effect: authority changed during issue");
            return Err(refused);
        }
        let id = Uuid::new_v4();
        let canonical = cmd.canonical();
        let registered = leases::register(
            &self.pool,
            &NewLease {
                id,
                key: &chosen.key,
                key_text: &chosen.key_text,
                holder: &cmd.holder,
                principal_id,
                run_id: &cmd.run_id,
                attempt_id: &cmd.attempt_id,
                priority: i16::try_from(cmd.priority).unwrap_or(i16::MAX),
                ttl_seconds: i32::try_from(cmd.ttl_seconds).unwrap_or(i32::MAX),
                generation: captured.generation,
                observed: &observed,
                request: cmd.request_id.as_deref().map(|r| (r, canonical.as_str())),
            },
        )
        .await?;
        match registered {
            // A drain closed (or closed and reopened) during issue: only this race is
            // translated into the transition signal; no lease or event was written.
            Registered::Raced => {
                tracing::info!(animator = %animator.name, "admission changed during issue");
                self.settle(principal_id, cmd, transition()).await
            }
            Registered::Answered(kept) => self.replay(cmd, *kept),
            Registered::Granted {
                issued_at,
                expires_at,
                generation,
                sequence,
            } => {
                tracing::info!(animator = %animator.name, sequence, "lease granted");
                tracing::debug!(lease_id = %id, "lease granted");
                Ok(LeaseOutcome::Granted(Box::new(Granted {
                    lease_id: id,
                    capability_key: chosen.key_text.clone(),
                    animator_name: animator.name.clone(),
                    declared: Some((animator.clone(), chosen.clone())),
                    issued_at,
                    expires_at,
                    generation,
                    holder: cmd.holder.clone(),
                    priority: cmd.priority,
                })))
            }
        }
    }

    /// An answer that is not a grant: kept under the request id if there is one (unless one
    /// is kept already, which is then the answer).
    async fn settle(
        &self,
        principal_id: &str,
        cmd: &LeaseCommand,
        outcome: LeaseOutcome,
    ) -> Result<LeaseOutcome> {
        let Some(request_id) = cmd.request_id.as_deref() else {
            return Ok(outcome);
        };
        let canonical = cmd.canonical();
        let answer = match &outcome {
            LeaseOutcome::Granted(_) => {
                unreachable!("invariant: a grant is kept by its registration")
            }
            LeaseOutcome::TransitionRequired {
                capability_key,
                animator,
                ready_estimate_seconds,
            } => Answer {
                principal_id,
                request_id,
                demand: &canonical,
                outcome: OutcomeKind::TransitionRequired,
                capability_key,
                animator,
                ready_estimate_seconds: *ready_estimate_seconds,
                reason: "",
                observed: None,
            },
            LeaseOutcome::Unavailable {
                reason,
                capability_key,
                animator,
                observed,
            } => Answer {
                principal_id,
                request_id,
                demand: &canonical,
                outcome: OutcomeKind::Unavailable,
                capability_key,
                animator,
                ready_estimate_seconds: None,
                reason: reason.code(),
                observed: observed.as_ref(),
            },
        };
        match leases::keep(&self.pool, &answer).await? {
            None => Ok(outcome),
            Some(kept) => self.replay(cmd, kept),
        }
    }

    /// The answer kept under the command's request id, if the command asks for the same; a
    /// different request under the same id is refused.
    fn replay(&self, cmd: &LeaseCommand, kept: Kept) -> Result<LeaseOutcome> {
        if kept.demand != cmd.canonical() {
            return Err(DispatcherError::LeaseRequestConflict);
        }
        let reg = &self.settings.registry;
        Ok(match kept.outcome {
            OutcomeKind::Granted => {
                let lease = kept
                    .lease
                    .ok_or_else(|| broken("a kept grant without its lease"))?;
                let declared = reg
                    .capability(&lease.capability_key)
                    .and_then(|c| reg.animator(c.animator()).map(|a| (a.clone(), c.clone())));
                LeaseOutcome::Granted(Box::new(Granted {
                    lease_id: lease.id,
                    capability_key: lease.capability_key,
                    animator_name: lease.animator,
                    declared,
                    issued_at: lease.issued_at,
                    expires_at: lease.expires_at,
                    generation: kept.generation,
                    holder: lease.holder,
                    priority: u32::try_from(lease.priority).unwrap_or(0),
                }))
            }
            OutcomeKind::TransitionRequired => LeaseOutcome::TransitionRequired {
                capability_key: kept.capability_key,
                animator: kept.animator,
                ready_estimate_seconds: kept.ready_estimate_seconds,
            },
            OutcomeKind::Unavailable => LeaseOutcome::Unavailable {
                reason: Unavailable::parse(&kept.reason)
                    .ok_or_else(|| broken("a kept answer with an unknown reason"))?,
                capability_key: kept.capability_key,
                animator: kept.animator,
                observed: kept.observed,
            },
        })
    }

    fn record_of(&self, c: &Capability) -> Record {
        let animator = self
            .settings
            .registry
            .animator(c.animator())
            .expect("invariant: every capability's animator is declared");
        Record {
            source: animator.source,
            dedicated: animator.dedicated,
            surface_executable: c.surface_executable(),
        }
    }
}
