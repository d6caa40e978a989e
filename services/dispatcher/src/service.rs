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
use crate::domain::demand::{Admission, Demand, Matched, matching, order};
use crate::domain::events::Cursor as EventCursor;
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

    /// The effectful half, once the caller is allowed: a fresh probe of the chosen record →
    /// the decision table → the observation recorded, together with the lease and its dispatch
    /// event when granted (one statement, under the generation captured before the probe). It
    /// runs in its own task, so a caller that goes away leaves nothing half-done: the probe is
    /// recorded either way, and a lease it no longer hears of expires with its TTL.
    pub async fn issue(
        self: &Arc<Self>,
        principal_id: &str,
        cmd: &LeaseCommand,
        key: String,
        captured: Option<Admission>,
    ) -> Result<LeaseOutcome> {
        let this = self.clone();
        let principal_id = principal_id.to_owned();
        let cmd = cmd.clone();
        let task =
            tokio::spawn(async move { this.issue_now(&principal_id, &cmd, &key, captured).await });
        task.await.unwrap_or(Err(DispatcherError::Interrupted))
    }

    async fn issue_now(
        &self,
        principal_id: &str,
        cmd: &LeaseCommand,
        key: &str,
        captured: Option<Admission>,
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
        let captured = match (decision, captured) {
            (Decision::Grant, Some(captured)) => captured,
            _ => {
                let one = BTreeMap::from([(chosen.key_text.clone(), observed.clone())]);
                observations::record(&self.pool, &animator.name, &one).await?;
                return Ok(match decision {
                    Decision::Unavailable(u) => unavailable(u, Some(chosen), Some(observed)),
                    Decision::Grant | Decision::TransitionRequired => transition(),
                    Decision::Reprobe => {
                        unreachable!("invariant: the loop above never breaks on Reprobe")
                    }
                });
            }
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
                observed: &observed,
            },
        )
        .await?;
        match registered {
            // A drain closed (or closed and reopened) during issue: only this race is
            // translated into the transition signal; no lease or event was written.
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

    /// Probe `keys` of `animator` (nothing recorded).
    async fn probe_keys(
        &self,
        animator: &Animator,
        keys: &[String],
    ) -> (BTreeMap<String, Observed>, Option<String>) {
        let reg = &self.settings.registry;
        let caps: Vec<&Capability> = keys.iter().filter_map(|k| reg.capability(k)).collect();
        let result = crate::probe::probe(&self.settings.probe, animator, &caps).await;
        let (obs, failure) = settle(keys, result);
        if let Some(code) = &failure {
            tracing::warn!(animator = %animator.name, code = %code, "probe failed; observations invalidated");
        }
        (obs, failure)
    }

    /// Probe `keys` of `animator` and record the result (or the invalidation) before
    /// answering. The probe runs in its own task, so a caller that goes away does not leave a
    /// probe half-done: it completes and is recorded either way.
    async fn observe_keys(
        self: &Arc<Self>,
        animator: &str,
        keys: &[String],
    ) -> Result<Option<String>> {
        let this = self.clone();
        let animator = animator.to_owned();
        let keys = keys.to_vec();
        let task = tokio::spawn(async move {
            let a = this
                .settings
                .registry
                .animator(&animator)
                .expect("invariant: observed animators are declared");
            let (obs, failure) = this.probe_keys(a, &keys).await;
            observations::record(&this.pool, &animator, &obs).await?;
            Ok::<_, DispatcherError>(failure)
        });
        task.await.unwrap_or(Err(DispatcherError::Interrupted))
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
                let failure = self.observe_keys(name, &keys).await?;
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

/// What the gRPC layer needs that is one store call: kept here so handlers never touch the
/// store (they decode, call the service, encode).
impl Service {
    /// Every cached observation and every declared animator's admission state.
    pub async fn snapshot(
        &self,
    ) -> Result<(BTreeMap<String, observations::Cached>, Vec<AdmissionRow>)> {
        let cached = observations::all(&self.pool).await?;
        let states = admission::states(&self.pool, &self.animator_names()).await?;
        Ok((cached, states))
    }

    /// Every declared animator has an admission row (at start).
    pub async fn ensure_admission(&self) -> Result<()> {
        admission::ensure(&self.pool, &self.animator_names()).await
    }

    fn animator_names(&self) -> Vec<String> {
        self.settings
            .registry
            .animators()
            .map(|a| a.name.clone())
            .collect()
    }

    pub async fn renew(
        &self,
        id: Uuid,
        holder: &str,
        ttl_seconds: i32,
    ) -> Result<leases::LeaseRow> {
        leases::renew(&self.pool, id, holder, ttl_seconds).await
    }

    /// The released lease, and whether it was already over.
    pub async fn release(&self, id: Uuid, holder: &str) -> Result<(leases::LeaseRow, bool)> {
        leases::release(&self.pool, id, holder).await
    }

    pub async fn list_leases(
        &self,
        animators: &[String],
        include_inactive: bool,
        after: Option<leases::Cursor>,
        limit: i64,
    ) -> Result<Vec<leases::LeaseRow>> {
        leases::list(&self.pool, animators, include_inactive, after, limit).await
    }

    pub async fn close_admission(
        &self,
        request_id: &str,
        animators: &[String],
        reason: &str,
        principal: &str,
    ) -> Result<admission::Closed> {
        admission::close(&self.pool, request_id, animators, reason, principal).await
    }

    pub async fn reopen_admission(
        &self,
        token: Uuid,
        principal: &str,
    ) -> Result<admission::Reopened> {
        admission::reopen(&self.pool, token, principal).await
    }

    /// Send the dispatch events after `after` in sequence order (the gap rule of
    /// [`crate::domain::events`]); with `follow`, keep polling until the receiver goes away.
    pub async fn watch_events(
        &self,
        after: i64,
        follow: bool,
        tx: tokio::sync::mpsc::Sender<Result<leases::EventRow>>,
    ) {
        const BATCH: i64 = 256;
        let mut cursor = EventCursor::after(after);
        loop {
            let rows = match leases::events_after(&self.pool, cursor.delivered, BATCH).await {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            let full = rows.len() as i64 == BATCH;
            let mut held = false;
            for r in rows {
                if !cursor.admit(r.sequence, tokio::time::Instant::now().into_std()) {
                    held = true;
                    break;
                }
                if tx.send(Ok(r)).await.is_err() {
                    return;
                }
            }
            if !follow && !held && !full {
                return;
            }
            if full && !held {
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep(self.settings.poll_interval) => {}
                () = tx.closed() => return,
            }
        }
    }
}
