//! The soft boundary (`budgets.soft_boundary`): at [`SOFT_PERCENT`] of a budget — the run's
//! own, or its root's counted over the tree — a checkpoint carries the typed residual-work
//! handoff.

use super::{
    COST, Clocks, Handoff, Progress, SOFT_PERCENT, STEPS, SUSPENDED, TOKENS, TOOL_CALLS, WALL,
};
use crate::domain::budgets::Budgets;
use crate::domain::workflow::Workflow;

/// `p` with the residual-work handoff recorded when a budget (steps, tool calls, tokens, cost,
/// wall or suspended seconds) has reached [`SOFT_PERCENT`] and none is recorded yet;
/// `version` is the version the commit makes (its checkpoint carries the handoff).
pub fn soft_boundary(
    w: &Workflow,
    budgets: &Budgets,
    mut p: Progress,
    clocks: Clocks,
    version: i64,
) -> Progress {
    if p.handoff.is_some() {
        return p;
    }
    let reached = [
        ("max_steps", p.used.steps, budgets.0[STEPS]),
        ("max_tool_calls", p.used.tool_calls, budgets.0[TOOL_CALLS]),
        ("max_tokens", p.used.tokens, budgets.0[TOKENS]),
        ("max_cost_milli", p.used.cost_milli, budgets.0[COST]),
        (
            "max_wall_seconds",
            clocks.elapsed_ms / 1000,
            budgets.0[WALL],
        ),
        (
            "max_suspended_seconds",
            clocks.suspended_ms / 1000,
            budgets.0[SUSPENDED],
        ),
    ]
    .into_iter()
    .find(|(_, used, limit)| used.saturating_mul(100) >= limit.saturating_mul(SOFT_PERCENT));
    if let Some((budget, used, limit)) = reached {
        p.handoff = Some(handoff(w, &p, budget, used, limit, version));
    }
    p
}

/// `p` with the residual-work handoff recorded when its tree's totals after the commit
/// (`tree_after`: steps, tokens, tool calls, cost of the root and every descendant) have
/// reached [`SOFT_PERCENT`] of the root's budgets and `p` records none yet; the budget is
/// named `tree.<field>` (the root's budget, counted over the tree). Every run of the tree that
/// commits past that point records it once.
pub fn tree_boundary(
    w: &Workflow,
    root: &Budgets,
    tree_after: [u64; 4],
    mut p: Progress,
    version: i64,
) -> Progress {
    if p.handoff.is_some() {
        return p;
    }
    let reached = [
        ("tree.max_steps", tree_after[0], root.0[STEPS]),
        ("tree.max_tokens", tree_after[1], root.0[TOKENS]),
        ("tree.max_tool_calls", tree_after[2], root.0[TOOL_CALLS]),
        ("tree.max_cost_milli", tree_after[3], root.0[COST]),
    ]
    .into_iter()
    .find(|(_, used, limit)| used.saturating_mul(100) >= limit.saturating_mul(SOFT_PERCENT));
    if let Some((budget, used, limit)) = reached {
        p.handoff = Some(handoff(w, &p, budget, used, limit, version));
    }
    p
}

fn handoff(
    w: &Workflow,
    p: &Progress,
    budget: &str,
    used: u64,
    limit: u64,
    version: i64,
) -> Handoff {
    Handoff {
        schema: "lychd.runner.handoff/v1".into(),
        budget: budget.into(),
        used,
        limit,
        at_version: version,
        residual_steps: p.frontier(w).into_iter().map(str::to_owned).collect(),
        open_obligations: w
            .obligations
            .iter()
            .filter(|o| !p.closed(w, &o.id))
            .map(|o| o.id.clone())
            .collect(),
    }
}
