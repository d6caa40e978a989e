//! The recovery review of a quarantined run: an operator's decision (resume from the
//! recovery point, fail, cancel; reconcile only with a pending effect), checked against the
//! recovery point the operator inspected (`domain::recovery`), committed as the FSM's
//! `recovery_*` edge under a new lease generation and recorded with its rationale (never
//! logged).

use uuid::Uuid;

use super::Service;
use super::runs::{RunRow, progress_of_row};
use crate::domain::checkpoint::{progress_of, verifies};
use crate::domain::migration::version_of;
use crate::domain::recovery::{self, Candidate, Decision, Refused};
use crate::error::RunnerError;
pub use crate::store::recovery::ReviewRow;
use crate::store::recovery::{self as store, NewReview};
use crate::store::runs::{CheckpointRow, NewTransition};

/// The state a run under recovery review is in.
pub const QUARANTINED: &str = "QUARANTINED";

/// A review, decoded and valid in shape.
#[derive(Debug, Clone)]
pub struct Review {
    pub run_id: Uuid,
    pub decision: Decision,
    pub recovery_checksum: String,
    /// Kept with the review; never logged or echoed.
    pub rationale: String,
}

/// A review as answered.
pub struct Reviewed {
    pub review: ReviewRow,
    pub run: RunRow,
    pub replayed: bool,
}

impl From<Refused> for RunnerError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::NoPendingEffect => RunnerError::NoPendingEffect,
            Refused::Stale => RunnerError::RecoveryStale,
            Refused::NothingToRestore => RunnerError::NoVerifiedCheckpoint,
            Refused::CancelPending => RunnerError::RecoveryCancelPending,
        }
    }
}

impl Service {
    /// Whether checkpoint `c` may be restored: its checksum verifies, its body is ours and its
    /// state-schema version is understood by this process.
    pub fn restorable(&self, c: &CheckpointRow) -> bool {
        verifies(&c.body, &c.checksum)
            && progress_of(&c.body).is_some()
            && version_of(&c.body).is_some_and(|v| self.migrations.understands(&v))
    }

    /// The recovery point of run `run` (locked in `tx`): the newest checkpoint before its
    /// quarantine that may be restored and is in the run's state-schema version.
    async fn point_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
        run: &RunRow,
    ) -> Result<(i64, Option<CheckpointRow>), RunnerError> {
        let q = store::quarantined_version(tx, run.id)
            .await?
            .unwrap_or(run.version);
        let before = store::checkpoints_before(tx, run.id, q).await?;
        // A checkpoint written before a migration of the run is in another state-schema
        // version: not restorable as it is.
        let current = Some(run.state_schema_version.as_str());
        Ok((
            q,
            before
                .into_iter()
                .find(|c| self.restorable(c) && version_of(&c.body).as_deref() == current),
        ))
    }

    /// The recovery point of quarantined run `run` (`None` when it is not quarantined or no
    /// checkpoint may be restored).
    pub async fn recovery_point(&self, run: &RunRow) -> Result<Option<CheckpointRow>, RunnerError> {
        if run.state != QUARANTINED {
            return Ok(None);
        }
        let mut tx = self.pool.begin().await?;
        let (_, point) = self.point_in(&mut tx, run).await?;
        tx.rollback().await?;
        Ok(point)
    }

    /// Apply `r` by `reviewer` (any principal's run: the action is the authority).
    pub async fn review(&self, reviewer: &str, r: &Review) -> Result<Reviewed, RunnerError> {
        // Read committed; the run row is locked first (`FOR UPDATE`), so two reviews of one run
        // are serialized: the second finds it no longer quarantined. A refusal rolls back at
        // once, so the row lock is not held by a pooled connection until its next use.
        let mut tx = self.pool.begin().await?;
        match self.review_in(&mut tx, reviewer, r).await {
            Ok(reviewed) => {
                tx.commit().await?;
                if !reviewed.replayed {
                    tracing::info!(
                        run = %r.run_id,
                        decision = r.decision.name(),
                        reviewer,
                        recovery_version = reviewed.review.recovery_version,
                        generation = reviewed.run.generation,
                        "quarantine reviewed"
                    );
                }
                Ok(reviewed)
            }
            Err(e) => {
                tx.rollback().await?;
                Err(e)
            }
        }
    }

    async fn review_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
        reviewer: &str,
        r: &Review,
    ) -> Result<Reviewed, RunnerError> {
        let run = crate::store::runs::lock(tx, r.run_id, None)
            .await?
            .ok_or(RunnerError::RunNotFound)?;
        if run.state != QUARANTINED {
            let same = store::latest_review(tx, run.id, &r.rationale).await?;
            return match same {
                Some((prev, same_rationale))
                    if same_rationale
                        && prev.decision == r.decision.name()
                        && prev.recovery_checksum == r.recovery_checksum
                        && prev.reviewer == reviewer =>
                {
                    Ok(Reviewed {
                        review: prev,
                        run,
                        replayed: true,
                    })
                }
                _ => Err(RunnerError::NotQuarantined),
            };
        }
        let (quarantined_version, point) = self.point_in(tx, &run).await?;
        let candidate = point.as_ref().map(|c| Candidate {
            version: c.version,
            checksum: c.checksum.clone(),
            sound: true,
        });
        // Runner I records no effect: none is pending.
        recovery::check(
            r.decision,
            &r.recovery_checksum,
            candidate.as_ref(),
            false,
            run.interrupt_pending,
        )?;
        let event = r.decision.event();
        let to = self
            .fsm
            .next(&run.state, event)
            .map(|e| e.to.clone())
            .ok_or(RunnerError::NotQuarantined)?;
        let category = self.fsm.category(&to);
        let progress = match (r.decision, &point) {
            (Decision::Resume, Some(p)) => progress_of(&p.body).unwrap_or_default(),
            _ => progress_of_row(&run),
        };
        let mut next = run.clone();
        next.generation += 1;
        next.interrupt_pending = run.interrupt_pending && category.is_none();
        let checkpoint = self.checkpoint_with(&next, run.version + 1, &to, &progress);
        let json = progress.to_json().to_string();
        let after = store::commit(
            tx,
            &run,
            Some(&NewTransition {
                source_state: &run.state,
                target_state: &to,
                trigger: event,
                actor: reviewer,
                capability: "",
            }),
            category,
            &checkpoint,
            Some(&json),
            None,
        )
        .await?
        .ok_or(RunnerError::Fenced)?;
        if crate::domain::release::releases(&run.state, category) {
            // A review that ends the run (cancel or fail) leaves nobody to answer a consent
            // the run was waiting for when it was quarantined: it is released (the step loop
            // asks Ward; `service::releases`).
            crate::store::releases::mark(tx, run.id).await?;
        }
        if crate::domain::compensation::due(category, progress.effects) {
            // …and its confirmed effects are compensated as after any other failure or
            // cancel (`service::compensations`).
            crate::store::compensations::mark(tx, run.id).await?;
        }
        let review = store::record_review(
            tx,
            &NewReview {
                run_id: run.id,
                quarantined_version,
                decision: r.decision.name(),
                reviewer,
                recovery_version: point.as_ref().map(|p| p.version),
                recovery_checksum: &r.recovery_checksum,
                rationale: &r.rationale,
                version: after.version,
                generation: after.generation,
            },
        )
        .await?;
        Ok(Reviewed {
            review,
            run: after,
            replayed: false,
        })
    }
}
