//! An ended run's pending consents released at Ward (issue 28, Runner II): the commit that
//! ends a run out of a state in which a consent may be pending (`domain::release`: a cancel,
//! a budget or deadline ending of `WAIT_APPROVAL` or `WAIT_VERIFICATION`, a verdict, a
//! review that fails a quarantined run…) marks the release in its own transaction, and
//! Ward's `CancelForRun` is asked after it commits — at once by the `CancelRun` handler, and
//! by every step loop for any release still due (a failed or lost ask: Ward unreachable, the
//! process killed between the commit and the ask). The mark is cleared only when Ward answered, so a release is retried
//! until done, never lost; asking twice is harmless (Ward settles only what is still pending).

use uuid::Uuid;

use super::Service;
use crate::consent::Consents;
use crate::error::RunnerError;
use crate::store::releases;

/// How long a taken release waits before it is asked again when the ask failed (ms).
pub const RELEASE_RETRY_MS: i64 = 2_000;

impl Service {
    /// Release run `id`'s pending consents at Ward if its cancel marked them: whether Ward
    /// answered (`false`: nothing marked, or the ask failed and stays due).
    pub async fn release(&self, consents: &Consents, id: Uuid) -> Result<bool, RunnerError> {
        if !releases::take(&self.pool, id, RELEASE_RETRY_MS).await? {
            return Ok(false);
        }
        self.ask(consents, id).await
    }

    /// Release one due run's pending consents (the step loop's retry): whether one was due.
    pub async fn release_due(&self, consents: &Consents) -> Result<bool, RunnerError> {
        // Without a Ward nothing could be released: the marks stay for a runner that has one
        // (and are not pushed out and asked in vain on every idle poll).
        if !consents.has_ward() {
            return Ok(false);
        }
        let Some(id) = releases::take_due(&self.pool, RELEASE_RETRY_MS).await? else {
            return Ok(false);
        };
        self.ask(consents, id).await?;
        Ok(true)
    }

    async fn ask(&self, consents: &Consents, id: Uuid) -> Result<bool, RunnerError> {
        match consents.cancel_for_run(&id.hyphenated().to_string()).await {
            Ok(cancelled) => {
                releases::done(&self.pool, id).await?;
                tracing::info!(run = %id, cancelled, "an ended run's pending consents released");
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }
}
