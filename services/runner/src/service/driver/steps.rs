//! A step's call: a model step under a Dispatcher lease (leased for the attempt in flight,
//! released after the call whether or not it answered), a task step's deterministic no-op.

use std::time::Duration;

use super::Driver;
use crate::domain::progress::{self, Outcome, Progress};
use crate::domain::replay::Input;
use crate::domain::workflow::Workflow;
use crate::model::{Failure, Held, Leased};
use crate::service::runs::RunRow;
use crate::store::leases;

impl Driver {
    /// Give back a Dispatcher lease this loop holds and will not use.
    pub(super) async fn give_back(&self, held: &mut Option<Held>) {
        if let Some(h) = held.take() {
            self.models.release(&h).await;
        }
    }

    /// Lease the capability of model step `index` for the attempt in flight.
    pub(super) async fn lease(
        &self,
        run: &RunRow,
        w: &Workflow,
        index: usize,
        p: &Progress,
    ) -> Leased {
        let Some((family, model)) = progress::model_of(w, index) else {
            return Leased::Failed(Failure::Permanent);
        };
        let run_id = run.id.hyphenated().to_string();
        // One request id per attempt and generation: a retry of a lost answer gets the same
        // grant, never a second lease.
        let request_id = format!("{run_id}.{index}.{}.{}", p.attempt, run.generation);
        let attempt_id = format!("{}.{}", w.steps[index].id, p.attempt);
        self.models
            .lease(
                family,
                model,
                &self.holder,
                &run_id,
                &attempt_id,
                &request_id,
            )
            .await
    }

    /// Call step `index` of `w` for `run` (a model step under a Dispatcher lease: `held`, or
    /// one leased now, always released after the call).
    pub(super) async fn call(
        &self,
        run: &RunRow,
        w: &Workflow,
        index: usize,
        p: &Progress,
        held: Option<Held>,
    ) -> Called {
        let step = &w.steps[index];
        let Some((family, _)) = progress::model_of(w, index) else {
            if self.settings.task_step_ms > 0 {
                tokio::time::sleep(Duration::from_millis(self.settings.task_step_ms)).await;
            }
            let run_id = run.id.hyphenated().to_string();
            let digest = progress::task_digest(&run_id, &step.id, &run.input_sha256);
            let input = Input::task_result(&digest);
            return Called::Done(Outcome::task(digest), input);
        };
        let price = self.settings.price(family);
        let held = match held {
            Some(h) => h,
            None => match self.lease(run, w, index, p).await {
                Leased::Granted(h) => h,
                Leased::Cold { wait_ms } => return Called::Cold { wait_ms },
                Leased::Failed(f) => return Called::Failed(f),
            },
        };
        let input = match leases::input(&self.service.pool, run.id).await {
            Ok(input) => input,
            Err(e) => {
                tracing::warn!(run = %run.id, error = %e, "reading the run's input failed");
                self.models.release(&held).await;
                return Called::Failed(Failure::Transient);
            }
        };
        let answer = self.models.chat(&held, &step.id, p.round(), &input).await;
        self.models.release(&held).await;
        match answer {
            Ok(a) => Called::Done(
                Outcome::model(
                    a.digest,
                    a.tokens,
                    progress::cost_milli(a.tokens, price),
                    a.empty,
                ),
                Input::model_response(a.body.to_vec(), &held.lease_id, price),
            ),
            Err(f) => Called::Failed(f),
        }
    }
}

/// What a step's call came to.
pub(super) enum Called {
    /// The step's outcome, and the input it is recorded as (its result or the answer's body).
    Done(Outcome, Input),
    Cold {
        wait_ms: u64,
    },
    Failed(Failure),
}
