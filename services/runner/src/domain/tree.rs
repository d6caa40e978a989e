//! Descendant runs (pure): a child's depth, its parent's parallelism, its budgets within its
//! root's remaining, and the gate every consuming commit of a tree passes — the contract's
//! `budgets.aggregate_descendants: true` and `no_progress.scope` ("one bounded run and all
//! descendant work"): steps, tokens, tool calls and cost are counted over the whole tree
//! against the root's budgets.

use super::budgets::Budgets;
use super::progress::{Progress, Used};

/// Index in [`Budgets`].
const STEPS: usize = 0;
const TOOL_CALLS: usize = 1;
const WALL: usize = 3;
const SUSPENDED: usize = 4;
const TOKENS: usize = 5;
const COST: usize = 6;
const DEPTH: usize = 7;
const PARALLELISM: usize = 8;

/// The aggregated consumption: steps, tokens, tool calls, cost (thousandths).
pub type Totals = [u64; 4];

/// What a run consumed, as [`Totals`].
pub fn totals(u: &Used) -> Totals {
    [u.steps, u.tokens, u.tool_calls, u.cost_milli]
}

/// `a + b`, saturating.
pub fn add(a: Totals, b: Totals) -> Totals {
    [0, 1, 2, 3].map(|i| a[i].saturating_add(b[i]))
}

/// What `after` consumed beyond `before`.
pub fn delta(before: &Used, after: &Used) -> Totals {
    let (b, a) = (totals(before), totals(after));
    [0, 1, 2, 3].map(|i| a[i].saturating_sub(b[i]))
}

/// Why a child is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its depth would be above the root's `max_recursion_depth`.
    TooDeep,
    /// Its parent has `max_parallelism` children that have not ended.
    Parallelism,
    /// The root has nothing left of a budget the child needs (steps, tool calls, tokens, cost,
    /// wall seconds).
    RootSpent,
}

/// A parent as a child's start sees it.
#[derive(Debug, Clone, Copy)]
pub struct Parent {
    pub depth: u64,
    pub max_parallelism: u64,
    pub live_children: u64,
}

/// The budgets of a child of `parent` that asked for `requested` (0s already the contract's),
/// in a tree whose root has `root` budgets, has consumed `used` over the whole tree and has
/// lived `root_elapsed_s` seconds: each aggregated budget at most the root's remaining, the
/// wall at most the root's remaining wall, suspended and parallelism at most the root's, the
/// recursion depth the root's; and the child's depth.
pub fn child(
    requested: Budgets,
    root: &Budgets,
    used: Totals,
    root_elapsed_s: u64,
    parent: Parent,
) -> Result<(Budgets, u64), Refused> {
    let depth = parent.depth + 1;
    if depth > root.0[DEPTH] {
        return Err(Refused::TooDeep);
    }
    if parent.live_children >= parent.max_parallelism {
        return Err(Refused::Parallelism);
    }
    let mut b = requested;
    for (i, u) in [
        (STEPS, used[0]),
        (TOKENS, used[1]),
        (TOOL_CALLS, used[2]),
        (COST, used[3]),
    ] {
        b.0[i] = b.0[i].min(root.0[i].saturating_sub(u));
    }
    b.0[WALL] = b.0[WALL].min(root.0[WALL].saturating_sub(root_elapsed_s));
    b.0[SUSPENDED] = b.0[SUSPENDED].min(root.0[SUSPENDED]);
    b.0[PARALLELISM] = b.0[PARALLELISM].min(root.0[PARALLELISM]);
    b.0[DEPTH] = root.0[DEPTH];
    if [STEPS, TOKENS, TOOL_CALLS, COST, WALL]
        .iter()
        .any(|i| b.0[*i] == 0)
    {
        return Err(Refused::RootSpent);
    }
    Ok((b, depth))
}

/// The tree's gate on `event` (the hard boundary) for a commit making `version`, and when it
/// stands the tree's soft boundary (`progress::tree_boundary`): what the driver commits and
/// what a replay re-decides from the recorded tree read.
pub fn gated<'e>(
    w: &super::workflow::Workflow,
    version: i64,
    root: &Budgets,
    tree_before: Totals,
    before: &Progress,
    event: &'e str,
    progress: Progress,
) -> (&'e str, Progress) {
    let tree_after = add(tree_before, delta(&before.used, &progress.used));
    let handoff = progress.handoff.clone();
    let (gated, mut progress) = gate(root, tree_before, before, event, progress);
    if progress.handoff.is_none() {
        progress.handoff = handoff;
    }
    if gated == event {
        progress = super::progress::tree_boundary(w, root, tree_after, progress, version);
    }
    (gated, progress)
}

/// The gate of a commit of a run of a tree: `event` with `after` (from `before`) stands when
/// the tree's totals `tree_before` plus what it consumes stay within the root's budgets;
/// otherwise the commit is `budget_exhausted` — a step or tool call beyond the root's is not
/// taken (not charged), tokens or cost beyond it were spent and are charged, the result not
/// ingested.
pub fn gate<'e>(
    root: &Budgets,
    tree_before: Totals,
    before: &Progress,
    event: &'e str,
    after: Progress,
) -> (&'e str, Progress) {
    let total = add(tree_before, delta(&before.used, &after.used));
    if total[0] > root.0[STEPS] || total[2] > root.0[TOOL_CALLS] {
        return ("budget_exhausted", before.clone());
    }
    if total[1] > root.0[TOKENS] || total[3] > root.0[COST] {
        let mut spent = before.clone();
        spent.used.tokens = after.used.tokens;
        spent.used.cost_milli = after.used.cost_milli;
        return ("budget_exhausted", spent);
    }
    (event, after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(depth: u64, live: u64) -> Parent {
        Parent {
            depth,
            max_parallelism: 2,
            live_children: live,
        }
    }

    #[test]
    fn a_child_is_one_deeper_within_the_roots_remaining_and_its_parents_parallelism() {
        let mut root = Budgets::contract();
        root.0[STEPS] = 10;
        root.0[DEPTH] = 2;
        let (b, depth) =
            child(Budgets::contract(), &root, [4, 100, 1, 0], 30, parent(0, 1)).expect("child");
        assert_eq!(depth, 1);
        assert_eq!(b.0[STEPS], 6, "the root's remaining steps");
        assert_eq!(b.0[TOKENS], 100_000 - 100);
        assert_eq!(b.0[TOOL_CALLS], 23);
        assert_eq!(b.0[WALL], 570, "the root's remaining wall");
        assert_eq!(b.0[DEPTH], 2);
        let mut small = Budgets::contract();
        small.0[STEPS] = 2;
        assert_eq!(
            child(small, &root, [0; 4], 0, parent(1, 0))
                .expect("child")
                .0
                .0[STEPS],
            2,
            "asked for less"
        );
        assert_eq!(
            child(small, &root, [0; 4], 0, parent(2, 0)),
            Err(Refused::TooDeep)
        );
        assert_eq!(
            child(small, &root, [0; 4], 0, parent(0, 2)),
            Err(Refused::Parallelism)
        );
        assert_eq!(
            child(small, &root, [10, 0, 0, 0], 0, parent(0, 0)),
            Err(Refused::RootSpent)
        );
        assert_eq!(
            child(small, &root, [0; 4], 600, parent(0, 0)),
            Err(Refused::RootSpent)
        );
    }

    #[test]
    fn the_gate_counts_the_whole_tree_against_the_roots_budgets() {
        let mut root = Budgets::contract();
        root.0[STEPS] = 5;
        root.0[TOKENS] = 100;
        let before = Progress::default();
        let mut after = before.clone();
        after.used.steps = 1;
        assert_eq!(
            gate(&root, [4, 0, 0, 0], &before, "plan_step", after.clone()).0,
            "plan_step"
        );
        let (event, p) = gate(&root, [5, 0, 0, 0], &before, "plan_step", after);
        assert_eq!((event, p.used.steps), ("budget_exhausted", 0), "not taken");
        let mut answered = before.clone();
        answered.used.tokens = 30;
        answered.cursor = 1;
        let (event, p) = gate(&root, [1, 80, 0, 0], &before, "step_result", answered);
        assert_eq!(
            (event, p.used.tokens, p.cursor),
            ("budget_exhausted", 30, 0),
            "spent, not ingested"
        );
    }
}
