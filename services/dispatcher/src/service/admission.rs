//! Admission: close and reopen it per animator, read closures, await a drain.

use std::time::Duration;

use uuid::Uuid;

use super::Service;
use crate::error::{DispatcherError, Result};
use crate::store::admission::{self, AdmissionRow};

impl Service {
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

    /// The closure `token` (its animators and closer), if there is one.
    pub async fn closure(&self, token: Uuid) -> Result<Option<admission::Closure>> {
        admission::closure(&self.pool, token).await
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

    /// Reopen `token` as `principal`, if `owner` closed it (`None`: whoever did).
    pub async fn reopen_admission(
        &self,
        token: Uuid,
        principal: &str,
        owner: Option<&str>,
    ) -> Result<admission::Reopened> {
        admission::reopen(&self.pool, token, principal, owner).await
    }
}
