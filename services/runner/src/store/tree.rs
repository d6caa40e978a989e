//! SQL of run trees (`runner.runs`' `parent_run_id`, `root_run_id`, `depth` and the root's
//! `desc_*` aggregates). Lock order: a root's row before any descendant's (a consuming commit
//! locks its root, then makes its fenced update); a child's start locks its parent only (and
//! reads the root without a lock), so no two transactions wait on each other in a cycle.

use sqlx::{Postgres, Row, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

/// What a tree's commit or start needs of its root: its budgets, its own consumption (from
/// its progress) and its descendants' (`desc_*`), in the order steps, tokens, tool calls,
/// cost.
#[derive(Debug, Clone)]
pub struct RootRow {
    pub budgets: [i32; 9],
    pub own: [i64; 4],
    pub desc: [i64; 4],
    pub created_at: OffsetDateTime,
}

const ROOT: &str = "max_steps, max_tool_calls, max_retries_per_transition, max_wall_seconds, \
     max_suspended_seconds, max_tokens, max_cost_milli, max_recursion_depth, max_parallelism, \
     COALESCE((progress->'used'->>'steps')::bigint, 0) AS own_steps, \
     COALESCE((progress->'used'->>'tokens')::bigint, 0) AS own_tokens, \
     COALESCE((progress->'used'->>'tool_calls')::bigint, 0) AS own_tool_calls, \
     COALESCE((progress->'used'->>'cost_milli')::bigint, 0) AS own_cost_milli, \
     desc_steps, desc_tokens, desc_tool_calls, desc_cost_milli, created_at";

fn root_row(r: &sqlx::postgres::PgRow) -> Result<RootRow, sqlx::Error> {
    let mut budgets = [0; 9];
    for (i, name) in super::runs::BUDGETS.iter().enumerate() {
        budgets[i] = r.try_get(*name)?;
    }
    let mut own = [0; 4];
    let mut desc = [0; 4];
    for (i, name) in ["steps", "tokens", "tool_calls", "cost_milli"]
        .iter()
        .enumerate()
    {
        own[i] = r.try_get(format!("own_{name}").as_str())?;
        desc[i] = r.try_get(format!("desc_{name}").as_str())?;
    }
    Ok(RootRow {
        budgets,
        own,
        desc,
        created_at: r.try_get("created_at")?,
    })
}

/// Root `id`'s row, locked (`FOR UPDATE`) when `lock`.
pub async fn root(
    tx: &mut Transaction<'_, Postgres>,
    id: Uuid,
    lock: bool,
) -> Result<Option<RootRow>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "SELECT {ROOT} FROM runner.runs WHERE id = $1 {}",
        if lock { "FOR UPDATE" } else { "" }
    ))
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    row.as_ref().map(root_row).transpose()
}

/// Add a descendant's consumption `delta` (steps, tokens, tool calls, cost) to root `id`.
pub async fn charge(
    tx: &mut Transaction<'_, Postgres>,
    id: Uuid,
    delta: [i64; 4],
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE runner.runs SET desc_steps = desc_steps + $2, desc_tokens = desc_tokens + $3, \
                desc_tool_calls = desc_tool_calls + $4, desc_cost_milli = desc_cost_milli + $5 \
          WHERE id = $1",
    )
    .bind(id)
    .bind(delta[0])
    .bind(delta[1])
    .bind(delta[2])
    .bind(delta[3])
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A parent as a child's start needs it (locked `FOR UPDATE`, so its children are counted
/// under the lock): its tree, depth, whether it ended, its parallelism budget and how many of
/// its children have not ended.
#[derive(Debug, Clone)]
pub struct ParentRow {
    pub id: Uuid,
    pub root: Uuid,
    pub depth: i32,
    pub finished: bool,
    pub max_parallelism: i32,
    pub live_children: i64,
}

/// Parent `id` of `owner`, locked; `None` when `owner` did not start it (or it does not exist).
pub async fn lock_parent(
    tx: &mut Transaction<'_, Postgres>,
    id: Uuid,
    owner: &str,
) -> Result<Option<ParentRow>, sqlx::Error> {
    let Some(r) = sqlx::query(
        "SELECT id, COALESCE(root_run_id, id) AS root, depth, terminal_category IS NOT NULL \
                AS finished, max_parallelism \
           FROM runner.runs WHERE id = $1 AND owner = $2 FOR UPDATE",
    )
    .bind(id)
    .bind(owner)
    .fetch_optional(&mut **tx)
    .await?
    else {
        return Ok(None);
    };
    let live_children: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM runner.runs WHERE parent_run_id = $1 AND terminal_category IS NULL",
    )
    .bind(id)
    .fetch_one(&mut **tx)
    .await?;
    Ok(Some(ParentRow {
        id: r.try_get("id")?,
        root: r.try_get("root")?,
        depth: r.try_get("depth")?,
        finished: r.try_get("finished")?,
        max_parallelism: r.try_get("max_parallelism")?,
        live_children,
    }))
}
