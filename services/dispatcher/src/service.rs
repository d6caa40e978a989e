//! The office's use cases, composing the pure rules (`domain`), the probes and the store.
//! Handlers in `grpc` decode, authorize, call these and encode.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::config::Settings;
use crate::domain::decision::{Decision, Fresh, Record, Unavailable, decide, precheck};
use crate::domain::demand::{Demand, Matched, matching, order};
use crate::domain::observation::{Observed, Phase, settle};
use crate::domain::registry::{Animator, Capability};
use crate::error::{DispatcherError, Result};
use crate::store::admission::{self, AdmissionRow};
use crate::store::leases::{self, NewLease, Registered};
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
}

/// An issued lease.
#[derive(Debug, Clone)]
pub struct Granted {
    pub lease_id: Uuid,
    pub capability: Capability,
    pub animator: Animator,
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

/// Fresh observations of one animator.
#[derive(Debug, Clone)]
pub struct AnimatorObserved {
    pub animator: String,
    pub observations: BTreeMap<String, observations::Cached>,
    pub failure: Option<String>,
    pub admission: Option<AdmissionRow>,
}

/// The office's state: settings (with the registry) and the database pool.
pub struct Service {
    pub settings: Settings,
    pub pool: PgPool,
}

impl Service {
    pub fn new(settings: Settings, pool: PgPool) -> Arc<Self> {
        Arc::new(Service { settings, pool })
    }

    /// Typed demand → candidates → deterministic order → fresh probe of the chosen record →
    /// decision table → registration under the admission generation captured before the probe.
    pub async fn lease(
        self: &Arc<Self>,
        principal_id: &str,
        cmd: &LeaseCommand,
    ) -> Result<LeaseOutcome> {
        let reg = &self.settings.registry;
        let unavailable = |reason, cap: Option<&Capability>, observed| LeaseOutcome::Unavailable {
            reason,
            capability_key: cap.map(|c| c.key_text.clone()).unwrap_or_default(),
            animator: cap.map(|c| c.animator().to_owned()).unwrap_or_default(),
            observed,
        };
        let candidates = match matching(reg, &cmd.demand) {
            Matched::Candidates(c) => c,
            Matched::ExactUnknown => {
                return Ok(unavailable(Unavailable::CapabilityUnknown, None, None));
            }
            Matched::ExactIncompatible(c) => {
                return Ok(unavailable(
                    Unavailable::CapabilityIncompatible,
                    Some(c),
                    None,
                ));
            }
            Matched::None => return Ok(unavailable(Unavailable::NoCandidate, None, None)),
        };
        let mut animators: Vec<String> =
            candidates.iter().map(|c| c.animator().to_owned()).collect();
        animators.sort();
        animators.dedup();
        let snap = observations::snapshot(&self.pool, &animators).await?;
        let chosen = order(reg, &snap, candidates)[0];
        let animator = reg
            .animator(chosen.animator())
            .expect("invariant: every capability's animator is declared");
        let record = Record {
            source: animator.source,
            dedicated: animator.dedicated,
            surface_executable: chosen.surface_executable(),
        };
        if let Some(u) = precheck(record) {
            return Ok(unavailable(u, Some(chosen), None));
        }
        // Captured before the probe; registration re-checks it under lock.
        let captured = snap.admission_of(chosen.animator());
        let open = captured.is_some_and(|a| a.is_open());
        let mut reprobed = false;
        let (decision, observed) = loop {
            let (obs, failure) = self
                .observe_keys(&animator.name, std::slice::from_ref(&chosen.key_text))
                .await?;
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
                Decision::Reprobe => reprobed = true,
                d => break (d, observed),
            }
        };
        let transition = || LeaseOutcome::TransitionRequired {
            capability_key: chosen.key_text.clone(),
            animator: animator.name.clone(),
            ready_estimate_seconds: animator.ready_estimate_seconds,
        };
        match decision {
            Decision::Unavailable(u) => Ok(unavailable(u, Some(chosen), Some(observed))),
            Decision::TransitionRequired => Ok(transition()),
            Decision::Reprobe => unreachable!("invariant: the loop above never breaks on Reprobe"),
            Decision::Grant => {
                let Some(captured) = captured else {
                    return Ok(transition());
                };
                let id = Uuid::new_v4();
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
                    },
                )
                .await?;
                match registered {
                    // A drain closed (or closed and reopened) during issue: only this race is
                    // translated into the transition signal; nothing was written.
                    Registered::Raced => {
                        tracing::info!(animator = %animator.name, "admission changed during issue");
                        Ok(transition())
                    }
                    Registered::Granted {
                        issued_at,
                        expires_at,
                        generation,
                        sequence,
                    } => {
                        tracing::info!(
                            lease_id = %id, animator = %animator.name, sequence, "lease granted"
                        );
                        Ok(LeaseOutcome::Granted(Box::new(Granted {
                            lease_id: id,
                            capability: chosen.clone(),
                            animator: animator.clone(),
                            issued_at,
                            expires_at,
                            generation,
                            holder: cmd.holder.clone(),
                            priority: cmd.priority,
                        })))
                    }
                }
            }
        }
    }

    /// Probe `keys` of `animator` and record the result (or the invalidation) before
    /// answering. The probe runs in its own task, so a caller that goes away does not leave a
    /// probe half-done: it completes and is recorded either way.
    async fn observe_keys(
        self: &Arc<Self>,
        animator: &str,
        keys: &[String],
    ) -> Result<(BTreeMap<String, Observed>, Option<String>)> {
        let this = self.clone();
        let animator = animator.to_owned();
        let keys = keys.to_vec();
        let task = tokio::spawn(async move {
            let reg = &this.settings.registry;
            let a = reg
                .animator(&animator)
                .expect("invariant: observed animators are declared");
            let caps: Vec<&Capability> = keys.iter().filter_map(|k| reg.capability(k)).collect();
            let result = crate::probe::probe(&this.settings.probe, a, &caps).await;
            let (obs, failure) = settle(&keys, result);
            if let Some(code) = &failure {
                tracing::warn!(animator = %animator, code = %code, "probe failed; observations invalidated");
            }
            observations::record(&this.pool, &animator, &obs).await?;
            Ok::<_, DispatcherError>((obs, failure))
        });
        match task.await {
            Ok(r) => r,
            Err(_) => Err(DispatcherError::Conflict),
        }
    }

    /// Probe every declared capability of each animator now (all animators when empty).
    pub async fn observe(self: &Arc<Self>, animators: &[String]) -> Result<Vec<AnimatorObserved>> {
        let reg = &self.settings.registry;
        let names: Vec<String> = if animators.is_empty() {
            reg.animators().map(|a| a.name.clone()).collect()
        } else {
            animators.to_vec()
        };
        let probes = names.iter().map(|name| {
            let keys = reg.keys_of(name).to_vec();
            async move {
                let (_, failure) = self.observe_keys(name, &keys).await?;
                Ok::<_, DispatcherError>((name.clone(), keys, failure))
            }
        });
        let done = futures::future::try_join_all(probes).await?;
        let all_keys: Vec<String> = done
            .iter()
            .flat_map(|(_, k, _)| k.iter().cloned())
            .collect();
        let cached = observations::of_keys(&self.pool, &all_keys).await?;
        let states = admission::states(&self.pool, &names).await?;
        Ok(done
            .into_iter()
            .map(|(name, keys, failure)| AnimatorObserved {
                observations: keys
                    .iter()
                    .filter_map(|k| cached.get(k).map(|c| (k.clone(), c.clone())))
                    .collect(),
                admission: states.iter().find(|s| s.animator == name).cloned(),
                animator: name,
                failure,
            })
            .collect())
    }

    /// Wait until no live lease remains on `animators` (admission closed on each), or `wait`
    /// runs out. Liveness is decided by the database clock at each look.
    pub async fn await_drain(
        &self,
        animators: &[String],
        wait: Duration,
    ) -> Result<(bool, Vec<AdmissionRow>)> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let states = admission::states(&self.pool, animators).await?;
            if states.len() != animators.len() || states.iter().any(|s| s.open_closures == 0) {
                return Err(DispatcherError::AdmissionOpen);
            }
            let drained = states.iter().all(|s| s.live_leases == 0);
            let now = tokio::time::Instant::now();
            if drained || now >= deadline {
                return Ok((drained, states));
            }
            tokio::time::sleep(self.settings.poll_interval.min(deadline - now)).await;
        }
    }
}
