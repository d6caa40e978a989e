//! A run row as stored (`runner.runs`): its columns and their decoding, shared by the store
//! modules that read runs.

use sqlx::Row;
use time::OffsetDateTime;
use uuid::Uuid;

/// A run as stored (its workflow and input bytes are not read back).
#[derive(Debug, Clone)]
pub struct RunRow {
    pub id: Uuid,
    pub listed: i64,
    pub owner: String,
    pub request_id: String,
    pub request_sha256: String,
    pub workflow_sha256: String,
    pub workflow_name: String,
    pub workflow_version: String,
    pub state_schema_version: String,
    pub fsm_sha256: String,
    pub input_sha256: String,
    pub budgets: [i32; 9],
    pub state: String,
    pub terminal_category: Option<String>,
    pub version: i64,
    pub generation: i64,
    pub interrupt_pending: bool,
    /// The run's progress (JSON of `domain::progress::Progress`; `{}` before its start).
    pub progress: String,
    /// The runner process holding the run's lease, if any.
    pub lease_holder: Option<String>,
    pub lease_expires_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

pub(super) const BUDGETS: [&str; 9] = [
    "max_steps",
    "max_tool_calls",
    "max_retries_per_transition",
    "max_wall_seconds",
    "max_suspended_seconds",
    "max_tokens",
    "max_cost_milli",
    "max_recursion_depth",
    "max_parallelism",
];

pub(super) const RUN: &str = "id, listed, owner, request_id, request_sha256, workflow_sha256, workflow_name, \
     workflow_version, state_schema_version, fsm_sha256, input_sha256, max_steps, \
     max_tool_calls, max_retries_per_transition, max_wall_seconds, max_suspended_seconds, \
     max_tokens, max_cost_milli, max_recursion_depth, max_parallelism, state, \
     terminal_category, version, generation, interrupt_pending, progress::text AS progress, \
     lease_holder, lease_expires_at, created_at, updated_at";

pub(super) fn run(r: &sqlx::postgres::PgRow) -> Result<RunRow, sqlx::Error> {
    let mut budgets = [0; 9];
    for (b, name) in budgets.iter_mut().zip(BUDGETS) {
        *b = r.try_get(name)?;
    }
    Ok(RunRow {
        id: r.try_get("id")?,
        listed: r.try_get("listed")?,
        owner: r.try_get("owner")?,
        request_id: r.try_get("request_id")?,
        request_sha256: r.try_get("request_sha256")?,
        workflow_sha256: r.try_get("workflow_sha256")?,
        workflow_name: r.try_get("workflow_name")?,
        workflow_version: r.try_get("workflow_version")?,
        state_schema_version: r.try_get("state_schema_version")?,
        fsm_sha256: r.try_get("fsm_sha256")?,
        input_sha256: r.try_get("input_sha256")?,
        budgets,
        state: r.try_get("state")?,
        terminal_category: r.try_get("terminal_category")?,
        version: r.try_get("version")?,
        generation: r.try_get("generation")?,
        interrupt_pending: r.try_get("interrupt_pending")?,
        progress: r.try_get("progress")?,
        lease_holder: r.try_get("lease_holder")?,
        lease_expires_at: r.try_get("lease_expires_at")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}
