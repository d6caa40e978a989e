//! Runs as durable resources: a start recorded at once (idempotent per owner and request id),
//! reads scoped to the owner (or every owner for a reader of all), cancellation through the
//! control FSM only, and the run's transitions in order.
//!
//! The step loop that drives a run past `CREATED` is `service::driver`. Every state change
//! this module makes is an edge of the FSM, committed under the run's version and lease
//! generation.

use uuid::Uuid;

use super::Service;
use crate::domain::budgets::Budgets;
use crate::domain::checkpoint::{Checkpoint, Envelope, Snapshot};
use crate::domain::progress::Progress;
use crate::domain::run::{STATE_SCHEMA_VERSION, request_digest, request_digest_with, sha256};
use crate::domain::tree;
use crate::domain::workflow::Workflow;
use crate::error::RunnerError;
use crate::store::releases;
use crate::store::runs::{self, NewRun, NewTransition, Started};
pub use crate::store::runs::{RunRow, TransitionRow};
use crate::store::starts;
use crate::store::tree as store_tree;

/// A start request, decoded and valid.
pub struct StartRun {
    pub request_id: String,
    pub workflow_bytes: Vec<u8>,
    pub workflow: Workflow,
    pub input: Vec<u8>,
    pub budgets: Budgets,
    /// The caller's timeout in seconds (at most the run's `max_wall_seconds`), if any.
    pub timeout_seconds: Option<u32>,
    /// The run to start this one under (a descendant run), if any.
    pub parent: Option<Uuid>,
}

/// Whose runs a reader sees.
#[derive(Debug, Clone, Copy)]
pub enum Reader<'a> {
    /// Every principal's.
    All,
    /// Those this principal started.
    Own(&'a str),
}

impl<'a> Reader<'a> {
    pub(super) fn owner(self) -> Option<&'a str> {
        match self {
            Reader::All => None,
            Reader::Own(p) => Some(p),
        }
    }
}

/// The FSM event a caller's cancellation is.
pub const CANCEL_EVENT: &str = "cancel";

impl Service {
    /// Record the run `cmd` asks for, owned by `owner`; `(run, replayed)`.
    pub async fn start(&self, owner: &str, cmd: &StartRun) -> Result<(RunRow, bool), RunnerError> {
        let workflow_sha256 = sha256(&cmd.workflow_bytes);
        let input_sha256 = sha256(&cmd.input);
        let digest = request_digest_with(
            request_digest(&workflow_sha256, &input_sha256, &cmd.budgets),
            cmd.timeout_seconds,
            cmd.parent.map(|p| p.hyphenated().to_string()).as_deref(),
        );
        let id = Uuid::new_v4();
        let started = match cmd.parent {
            None => {
                let (n, first) = self.new_run(
                    id,
                    owner,
                    cmd,
                    &digest,
                    &workflow_sha256,
                    &input_sha256,
                    cmd.budgets,
                    None,
                );
                starts::start(&self.pool, &n, &first).await?
            }
            Some(parent) => {
                self.start_child(
                    id,
                    owner,
                    cmd,
                    parent,
                    &digest,
                    &workflow_sha256,
                    &input_sha256,
                )
                .await?
            }
        };
        match started {
            Started::New(run) => Ok((run, false)),
            Started::Seen(run) if run.request_sha256 == digest => Ok((run, true)),
            Started::Seen(_) => Err(RunnerError::StartConflict),
        }
    }

    /// Record a descendant run of `parent` (one transaction: the parent locked, its children
    /// counted under the lock, the root read, the child's budgets within the root's remaining).
    #[allow(clippy::too_many_arguments)] // the parts of one start request, computed once above
    async fn start_child(
        &self,
        id: Uuid,
        owner: &str,
        cmd: &StartRun,
        parent: Uuid,
        digest: &str,
        workflow_sha256: &str,
        input_sha256: &str,
    ) -> Result<Started, RunnerError> {
        // A replay answers the run it started, whatever its tree looks like now.
        if let Some(seen) = starts::find(&self.pool, owner, &cmd.request_id).await? {
            return Ok(Started::Seen(seen));
        }
        let mut tx = self.pool.begin().await?;
        let p = store_tree::lock_parent(&mut tx, parent, owner)
            .await?
            .ok_or(RunnerError::ParentNotFound)?;
        if p.finished {
            return Err(RunnerError::ParentFinished);
        }
        let root = store_tree::root(&mut tx, p.root, false)
            .await?
            .ok_or(RunnerError::ParentNotFound)?;
        let u = |x: i64| u64::try_from(x).unwrap_or(0);
        let root_budgets = Budgets(root.budgets.map(|b| u64::try_from(b).unwrap_or(0)));
        let used = tree::add(root.own.map(u), root.desc.map(u));
        let elapsed =
            u64::try_from((time::OffsetDateTime::now_utc() - root.created_at).whole_seconds())
                .unwrap_or(0);
        let (budgets, depth) = tree::child(
            cmd.budgets,
            &root_budgets,
            used,
            elapsed,
            tree::Parent {
                depth: u(i64::from(p.depth)),
                max_parallelism: u(i64::from(p.max_parallelism)),
                live_children: u(p.live_children),
            },
        )
        .map_err(|r| match r {
            tree::Refused::TooDeep => RunnerError::RecursionTooDeep,
            tree::Refused::Parallelism => RunnerError::ParallelismReached,
            tree::Refused::RootSpent => RunnerError::RootBudgetSpent,
        })?;
        if cmd
            .timeout_seconds
            .is_some_and(|t| u64::from(t) > budgets.0[3])
        {
            return Err(RunnerError::TimeoutBeyondRoot);
        }
        let tree_of = (p.id, p.root, i32::try_from(depth).unwrap_or(i32::MAX));
        let (n, first) = self.new_run(
            id,
            owner,
            cmd,
            digest,
            workflow_sha256,
            input_sha256,
            budgets,
            Some(tree_of),
        );
        match starts::start_in(&mut tx, &n, &first).await? {
            Some(created) => {
                tx.commit().await?;
                Ok(Started::New(created))
            }
            None => {
                tx.rollback().await?;
                Ok(Started::Seen(
                    starts::seen(&self.pool, owner, &cmd.request_id).await?,
                ))
            }
        }
    }

    /// The row and first checkpoint of a new run.
    #[allow(clippy::too_many_arguments)] // the parts of one start request, computed once above
    fn new_run<'a>(
        &'a self,
        id: Uuid,
        owner: &'a str,
        cmd: &'a StartRun,
        digest: &'a str,
        workflow_sha256: &'a str,
        input_sha256: &'a str,
        budgets: Budgets,
        tree_of: Option<(Uuid, Uuid, i32)>,
    ) -> (NewRun<'a>, Checkpoint) {
        let run_id = id.hyphenated().to_string();
        let first = Snapshot {
            run_id: &run_id,
            version: 1,
            generation: 1,
            state: self.fsm.initial(),
            budgets,
            interrupt_pending: false,
            progress: &Progress::default(),
            envelope: Envelope {
                workflow_name: &cmd.workflow.name,
                workflow_version: &cmd.workflow.version,
                workflow_sha256,
                state_schema_version: STATE_SCHEMA_VERSION,
                fsm_sha256: self.fsm.sha256(),
            },
        }
        .checkpoint();
        let n = NewRun {
            id,
            owner,
            request_id: &cmd.request_id,
            request_sha256: digest,
            workflow: &cmd.workflow_bytes,
            workflow_sha256,
            workflow_name: &cmd.workflow.name,
            workflow_version: &cmd.workflow.version,
            state_schema_version: STATE_SCHEMA_VERSION,
            fsm_sha256: self.fsm.sha256(),
            input: &cmd.input,
            input_sha256,
            budgets: budgets.0.map(|b| i32::try_from(b).unwrap_or(i32::MAX)),
            state: self.fsm.initial(),
            timeout_seconds: cmd
                .timeout_seconds
                .map(|t| i32::try_from(t).unwrap_or(i32::MAX)),
            tree: tree_of,
        };
        (n, first)
    }

    /// Run `id` as `reader` may see it.
    pub async fn get(&self, id: Uuid, reader: Reader<'_>) -> Result<RunRow, RunnerError> {
        runs::get(&self.pool, id, reader.owner())
            .await?
            .ok_or(RunnerError::RunNotFound)
    }

    /// Runs `reader` sees, newest first, listed before `before` (`None`: from the newest).
    pub async fn list(
        &self,
        reader: Reader<'_>,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<RunRow>, RunnerError> {
        Ok(runs::list(
            &self.pool,
            reader.owner(),
            before.unwrap_or(i64::MAX),
            limit,
        )
        .await?)
    }

    /// Transitions of run `id` (as `reader` may see it) after aggregate version `after`.
    pub async fn transitions(
        &self,
        id: Uuid,
        reader: Reader<'_>,
        after: Option<i64>,
        limit: i64,
    ) -> Result<Vec<TransitionRow>, RunnerError> {
        self.get(id, reader).await?;
        Ok(runs::transitions(&self.pool, id, after.unwrap_or(0), limit).await?)
    }

    /// Cancel run `id` of `owner`: the FSM's `cancel` edge from its state, or a durable
    /// interrupt where the FSM has none (effect-critical states, recovery review); a canceled
    /// run answers as it is, a run that ended otherwise is refused. A cancel that ends the run
    /// marks, in its own transaction, the run's pending consents at Ward to be released
    /// (`store::releases`; Ward's `CancelForRun` is asked after the commit, [`Service::release`]).
    pub async fn cancel(&self, id: Uuid, owner: &str) -> Result<RunRow, RunnerError> {
        let mut tx = self.pool.begin().await?;
        let run = runs::lock(&mut tx, id, Some(owner))
            .await?
            .ok_or(RunnerError::RunNotFound)?;
        let after = match self.fsm.next(&run.state, CANCEL_EVENT) {
            Some(edge) => {
                let taken = self
                    .take(&mut tx, &run, &edge.to, CANCEL_EVENT, owner)
                    .await?;
                if taken.is_some() {
                    releases::mark(&mut tx, id).await?;
                }
                taken
            }
            None if run.terminal_category.as_deref() == Some("canceled") => Some(run),
            None if self.fsm.is_terminal(&run.state) => return Err(RunnerError::RunFinished),
            // Effect-critical (or under recovery review): the interrupt is recorded, honoured
            // where the FSM can honour it.
            None if run.interrupt_pending => Some(run),
            None => runs::interrupt(&mut tx, &run).await?,
        };
        let after = after.ok_or(RunnerError::Fenced)?;
        tx.commit().await?;
        Ok(after)
    }

    /// Commit the FSM edge `event` → `to` on `run` (locked in `tx`) with its checkpoint, under
    /// the fence; `None` when the fence moved (nothing written).
    pub(super) async fn take(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
        run: &RunRow,
        to: &str,
        event: &str,
        actor: &str,
    ) -> Result<Option<RunRow>, RunnerError> {
        let checkpoint = self.checkpoint_of(run, run.version + 1, to);
        Ok(runs::commit(
            tx,
            run,
            &NewTransition {
                source_state: &run.state,
                target_state: to,
                trigger: event,
                actor,
                capability: "",
            },
            self.fsm.category(to),
            &checkpoint,
        )
        .await?)
    }

    /// The checkpoint of `run` at `version` in `state` (with the progress the run row holds).
    pub(super) fn checkpoint_of(&self, run: &RunRow, version: i64, state: &str) -> Checkpoint {
        let progress = progress_of_row(run);
        self.checkpoint_with(run, version, state, &progress)
    }

    /// The checkpoint of `run` at `version` in `state` with `progress`.
    pub(super) fn checkpoint_with(
        &self,
        run: &RunRow,
        version: i64,
        state: &str,
        progress: &Progress,
    ) -> Checkpoint {
        let run_id = run.id.hyphenated().to_string();
        Snapshot {
            run_id: &run_id,
            version,
            generation: run.generation,
            state,
            budgets: Budgets(run.budgets.map(|b| u64::try_from(b).unwrap_or(0))),
            interrupt_pending: run.interrupt_pending,
            progress,
            envelope: Envelope {
                workflow_name: &run.workflow_name,
                workflow_version: &run.workflow_version,
                workflow_sha256: &run.workflow_sha256,
                state_schema_version: &run.state_schema_version,
                fsm_sha256: &run.fsm_sha256,
            },
        }
        .checkpoint()
    }
}

/// The progress a run row holds (a row the office wrote always parses; anything else reads as
/// a fresh run, which a resume's checkpoint comparison then refuses).
pub(crate) fn progress_of_row(run: &RunRow) -> Progress {
    runs::progress_of(run)
}
