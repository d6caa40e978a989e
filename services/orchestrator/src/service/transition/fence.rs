//! The engine under the host lease: the lease itself, the check before every write and
//! effect, the judgement of a fenced write (refused by the database: the lease is lost), and
//! recording a containment — latched first, retried while the lease is held, left to the
//! next holder once it is not.
//!
//! Invariant: nothing is written or actuated for a transition except at the generation it
//! was recorded under.

use std::sync::Arc;
use std::time::Duration;

use super::engine::{Latch, Transitions};
use super::request::LeaseLost;
use crate::domain::phase::TransitionPhase;
use crate::service::lease::{Fence, HostLease};
use crate::store;

impl Transitions {
    /// This process's host lease.
    pub fn lease(&self) -> &Arc<HostLease> {
        &self.lease
    }

    /// Whether this process holds the host lease (it records and actuates).
    pub fn holds_lease(&self) -> bool {
        self.lease.fence().is_some()
    }

    /// Before a write or an effect under `fence`: the lease still held at its generation.
    pub(super) fn check(&self, fence: &Fence) -> Result<(), LeaseLost> {
        if self.lease.valid(fence) {
            Ok(())
        } else {
            Err(LeaseLost)
        }
    }

    /// A fenced write's result: refused by the fence (the lease is lost: [`LeaseLost`]), or
    /// as it was.
    pub(super) fn judge<T>(
        &self,
        fence: &Fence,
        r: Result<T, sqlx::Error>,
    ) -> Result<Result<T, sqlx::Error>, LeaseLost> {
        match r {
            Err(e) if store::lease::not_held(&e) => {
                self.lease.refused(fence);
                Err(LeaseLost)
            }
            other => Ok(other),
        }
    }

    /// Contain transition `id` (ending in `phase`, with `cause`): latched in this process
    /// first, so no transition actuates from this instant; then written; a write that fails is
    /// retried (with backoff, in the background) until the containment is durably recorded,
    /// and only then does it leave the latch. The write is idempotent (one containment per
    /// transition), so a retry after an unknown outcome records it once. Under a lost lease it
    /// leaves the latch unwritten: the next holder contains the transition when it takes the
    /// host over (and this process actuates nothing under that generation).
    pub(super) async fn record_containment(
        &self,
        id: &str,
        fence: &Fence,
        phase: TransitionPhase,
        cause: &str,
    ) {
        let latch = self.latch.clone();
        let release = move |latch: &Latch, id: &str| {
            latch
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(id);
        };
        latch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.to_owned(), (phase, cause.to_owned()));
        let first = if self.check(fence).is_ok() {
            store::contain_as(&self.pool, fence, id, phase, cause).await
        } else {
            release(&latch, id);
            return;
        };
        match self.judge(fence, first) {
            Ok(Ok(())) | Err(LeaseLost) => release(&latch, id),
            Ok(Err(e)) => {
                // Admission stays closed and this process refuses to actuate until it is written.
                tracing::error!(error = %e, cause, "recording containment failed; latched, retrying");
                let pool = self.pool.clone();
                let lease = self.lease.clone();
                let (id, cause, fence) = (id.to_owned(), cause.to_owned(), fence.clone());
                tokio::spawn(async move {
                    let mut wait = Duration::from_millis(200);
                    loop {
                        tokio::time::sleep(wait).await;
                        if !lease.valid(&fence) {
                            tracing::warn!(cause = %cause, "host lease lost: the latched containment is the holder's to record");
                            release(&latch, &id);
                            return;
                        }
                        match store::contain_as(&pool, &fence, &id, phase, &cause).await {
                            Ok(()) => {
                                tracing::info!(cause = %cause, "latched containment recorded");
                                release(&latch, &id);
                                return;
                            }
                            Err(e) if store::lease::not_held(&e) => {
                                lease.refused(&fence);
                                release(&latch, &id);
                                return;
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "recording latched containment failed");
                                wait = (wait * 2).min(Duration::from_secs(5));
                            }
                        }
                    }
                });
            }
        }
    }
}
