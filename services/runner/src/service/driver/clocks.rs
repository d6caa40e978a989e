//! The step loop's clocks and small parts: which states are waiting, milliseconds between a
//! committed timestamp and now, how long a wait may last before a deadline or a time budget
//! needs the run again, the tree's gate on a consuming commit (locked, or a root's fenced), a
//! fresh jitter seed, and the
//! heartbeat task's guard.

use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::RunRow;
use crate::domain::budgets::Budgets;
use crate::domain::progress::{self, Progress};
use crate::domain::replay::{Input, Tape};
use crate::domain::tree;
use crate::domain::workflow::Workflow;
use crate::store::tree as store_tree;

/// A commit of `event` with `progress` (from `before`) that consumes (steps, tokens, tool
/// calls, cost) counts against its tree's root: the root's row is locked first in `tx` (lock
/// order: root, then the run), and the tree's totals checked against the root's budgets
/// (`domain::tree::gate`); the event and progress to commit.
pub(super) async fn gate<'e>(
    tx: &mut Transaction<'_, Postgres>,
    w: &Workflow,
    run: &RunRow,
    before: &Progress,
    event: &'e str,
    progress: Progress,
    tape: &mut Tape,
) -> Result<(&'e str, Progress), sqlx::Error> {
    if tree::delta(&before.used, &progress.used) == [0; 4] {
        return Ok((event, progress));
    }
    let Some(root) = store_tree::root(tx, run.root(), true).await? else {
        return Ok((event, progress));
    };
    let tree_before = tree::add(unsigned(root.own), unsigned(root.desc));
    Ok(gated(
        w,
        run,
        root.budgets,
        tree_before,
        before,
        event,
        progress,
        tape,
    ))
}

/// [`gate`] of a root's own commit without a lock: its totals from the row as read (its own
/// progress and its descendants' `desc`), which the commit then fences on (a descendant's
/// charge since the read fails the commit, and the driver reads the row again).
pub(super) fn gate_root<'e>(
    w: &Workflow,
    run: &RunRow,
    before: &Progress,
    event: &'e str,
    progress: Progress,
    tape: &mut Tape,
) -> (&'e str, Progress) {
    let tree_before = tree::add(tree::totals(&before.used), unsigned(run.desc));
    gated(
        w,
        run,
        run.budgets,
        tree_before,
        before,
        event,
        progress,
        tape,
    )
}

fn unsigned(v: [i64; 4]) -> tree::Totals {
    v.map(|x| u64::try_from(x).unwrap_or(0))
}

/// The tree's gate on `event` (`domain::tree::gated`), its read recorded on `tape` (the root's
/// budgets and the tree's totals: other runs' work, an input of the decision).
#[allow(clippy::too_many_arguments)] // the gate's inputs, and the tape it records them on
fn gated<'e>(
    w: &Workflow,
    run: &RunRow,
    budgets: [i32; 9],
    tree_before: tree::Totals,
    before: &Progress,
    event: &'e str,
    progress: Progress,
    tape: &mut Tape,
) -> (&'e str, Progress) {
    let budgets = Budgets(budgets.map(|b| u64::try_from(b).unwrap_or(0)));
    tape.push(Input::tree(budgets.0, tree_before));
    tree::gated(
        w,
        run.version + 1,
        &budgets,
        tree_before,
        before,
        event,
        progress,
    )
}

pub(super) use crate::domain::progress::WAITING;

/// Milliseconds from `from` (a committed timestamp: the database's clock) to `to` (this
/// host's now); 0 when `to` is earlier.
pub(super) fn ms_between(from: time::OffsetDateTime, to: time::OffsetDateTime) -> u64 {
    u64::try_from((to - from).whole_milliseconds()).unwrap_or(0)
}

/// Milliseconds until the run's deadline, wall budget or suspended budget (whichever is
/// first) from `now`.
pub(super) fn time_left_ms(
    run: &RunRow,
    budgets: &Budgets,
    clocks: progress::Clocks,
    now: time::OffsetDateTime,
) -> u64 {
    let wall = budgets.0[3]
        .saturating_mul(1000)
        .saturating_sub(clocks.elapsed_ms);
    let suspended = budgets.0[4]
        .saturating_mul(1000)
        .saturating_sub(clocks.suspended_ms);
    let deadline = run.deadline_at.map_or(u64::MAX, |d| ms_between(now, d));
    wall.min(suspended).min(deadline)
}

/// A fresh jitter seed (recorded on the run at its first retry).
pub(super) fn fresh_seed() -> u64 {
    let bits = Uuid::new_v4().as_u128();
    (bits >> 64) as u64 ^ bits as u64
}

/// A task aborted when dropped (the heartbeat of a run no longer driven).
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
