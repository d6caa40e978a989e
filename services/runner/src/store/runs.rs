//! SQL of runs (`runner.runs`) and their transitions (`runner.run_transitions`). Every state
//! commit is a guarded `UPDATE … RETURNING` on the run's state, aggregate version and lease
//! generation (the fence), and appends its transition row in the same transaction; a writer
//! holds its transaction id before the feed's sequence number is taken (the gap rule's
//! premise, `lychd_runtime::feed`).

use sqlx::{PgPool, Postgres, Row, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

use super::transitions::{Made, append};
pub use super::transitions::{NewTransition, TransitionRow, transitions};
use crate::domain::checkpoint::Checkpoint;
use crate::domain::progress::Progress;

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

const BUDGETS: [&str; 9] = [
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

/// A run to record.
pub struct NewRun<'a> {
    pub id: Uuid,
    pub owner: &'a str,
    pub request_id: &'a str,
    pub request_sha256: &'a str,
    pub workflow: &'a [u8],
    pub workflow_sha256: &'a str,
    pub workflow_name: &'a str,
    pub workflow_version: &'a str,
    pub state_schema_version: &'a str,
    pub fsm_sha256: &'a str,
    pub input: &'a [u8],
    pub input_sha256: &'a str,
    pub budgets: [i32; 9],
    pub state: &'a str,
}

/// What recording a start did.
pub enum Started {
    /// A new run (and its creation transition) was recorded.
    New(RunRow),
    /// The caller's request id had started this run already; nothing was written.
    Seen(RunRow),
}

/// The parser of a run's input: none, it is opaque bytes handed to model steps as data.
pub const INPUT_PARSER: &str = "lychd.runner.input/v1 (opaque bytes, never interpreted)";

/// Record `n` (one transaction, with its creation transition and its first checkpoint), or
/// find the run its owner's request id started already.
pub async fn start(
    pool: &PgPool,
    n: &NewRun<'_>,
    checkpoint: &Checkpoint,
) -> Result<Started, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_current_xact_id()::text")
        .execute(&mut *tx)
        .await?;
    let sql = format!(
        "INSERT INTO runner.runs (id, owner, request_id, request_sha256, workflow, \
         workflow_sha256, workflow_name, workflow_version, state_schema_version, fsm_sha256, \
         input, input_sha256, {budgets}, state, version, generation) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
                 $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, 1, 1) \
         ON CONFLICT (owner, request_id) DO NOTHING RETURNING {RUN}",
        budgets = BUDGETS.join(", ")
    );
    let mut q = sqlx::query(&sql)
        .bind(n.id)
        .bind(n.owner)
        .bind(n.request_id)
        .bind(n.request_sha256)
        .bind(n.workflow)
        .bind(n.workflow_sha256)
        .bind(n.workflow_name)
        .bind(n.workflow_version)
        .bind(n.state_schema_version)
        .bind(n.fsm_sha256)
        .bind(n.input)
        .bind(n.input_sha256);
    for b in n.budgets {
        q = q.bind(b);
    }
    let Some(row) = q.bind(n.state).fetch_optional(&mut *tx).await? else {
        tx.rollback().await?;
        let seen = sqlx::query(&format!(
            "SELECT {RUN} FROM runner.runs WHERE owner = $1 AND request_id = $2"
        ))
        .bind(n.owner)
        .bind(n.request_id)
        .fetch_one(pool)
        .await?;
        return Ok(Started::Seen(run(&seen)?));
    };
    let created = run(&row)?;
    append(
        &mut tx,
        &made(&created),
        &NewTransition {
            source_state: "",
            target_state: n.state,
            trigger: "created",
            actor: n.owner,
            capability: "",
        },
        &Progress::default(),
        &progress_of(&created),
    )
    .await?;
    super::provenance::record(
        &mut tx,
        &super::provenance::NewSnapshot {
            run_id: created.id,
            version: created.version,
            source: "input",
            step: "",
            content_sha256: n.input_sha256,
            parser_version: INPUT_PARSER,
            responsibility: n.owner,
        },
    )
    .await?;
    if !save_checkpoint(&mut tx, &created, checkpoint).await? {
        // The row was inserted in this transaction: a fence cannot have moved.
        return Err(sqlx::Error::RowNotFound);
    }
    tx.commit().await?;
    Ok(Started::New(created))
}

/// Run `id`, if `owner` started it (any owner's when `None`).
pub async fn get(
    pool: &PgPool,
    id: Uuid,
    owner: Option<&str>,
) -> Result<Option<RunRow>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "SELECT {RUN} FROM runner.runs WHERE id = $1 AND ($2::text IS NULL OR owner = $2)"
    ))
    .bind(id)
    .bind(owner)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(run).transpose()
}

/// Run `id` locked for a state commit (`FOR UPDATE`), if `owner` started it (any owner's
/// when `None`).
pub async fn lock(
    tx: &mut Transaction<'_, Postgres>,
    id: Uuid,
    owner: Option<&str>,
) -> Result<Option<RunRow>, sqlx::Error> {
    sqlx::query("SELECT pg_current_xact_id()::text")
        .execute(&mut **tx)
        .await?;
    let row = sqlx::query(&format!(
        "SELECT {RUN} FROM runner.runs WHERE id = $1 AND ($2::text IS NULL OR owner = $2) \
         FOR UPDATE"
    ))
    .bind(id)
    .bind(owner)
    .fetch_optional(&mut **tx)
    .await?;
    row.as_ref().map(run).transpose()
}

/// Runs listed before `before` (newest first, at most `limit`): `owner`'s, or every one.
pub async fn list(
    pool: &PgPool,
    owner: Option<&str>,
    before: i64,
    limit: i64,
) -> Result<Vec<RunRow>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "SELECT {RUN} FROM runner.runs WHERE ($1::text IS NULL OR owner = $1) AND listed < $2 \
         ORDER BY listed DESC LIMIT $3"
    ))
    .bind(owner)
    .bind(before)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter().map(run).collect()
}

/// Commit `t` on `current` under the fence: the row must still be at `current`'s state,
/// version and generation (else `None`, nothing written). Its transition row and its
/// `checkpoint` (of the version it makes) are written with it, and the run's `progress`
/// (JSON; `None` keeps it). A run entering a terminal state gives up its lease. The run after
/// the commit.
pub async fn commit(
    tx: &mut Transaction<'_, Postgres>,
    current: &RunRow,
    t: &NewTransition<'_>,
    terminal_category: Option<&str>,
    checkpoint: &Checkpoint,
) -> Result<Option<RunRow>, sqlx::Error> {
    commit_with(tx, current, t, terminal_category, checkpoint, None).await
}

/// [`commit`] writing `progress` (JSON) with the state.
pub async fn commit_with(
    tx: &mut Transaction<'_, Postgres>,
    current: &RunRow,
    t: &NewTransition<'_>,
    terminal_category: Option<&str>,
    checkpoint: &Checkpoint,
    progress: Option<&str>,
) -> Result<Option<RunRow>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "UPDATE runner.runs SET state = $5, terminal_category = $6, version = version + 1, \
                progress = COALESCE($7::jsonb, progress), updated_at = now(), \
                lease_holder = CASE WHEN $6::text IS NULL THEN lease_holder END, \
                lease_expires_at = CASE WHEN $6::text IS NULL THEN lease_expires_at END \
          WHERE id = $1 AND state = $2 AND version = $3 AND generation = $4 RETURNING {RUN}"
    ))
    .bind(current.id)
    .bind(t.source_state)
    .bind(current.version)
    .bind(current.generation)
    .bind(t.target_state)
    .bind(terminal_category)
    .bind(progress)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let after = run(&row)?;
    append(
        tx,
        &made(&after),
        t,
        &progress_of(current),
        &progress_of(&after),
    )
    .await?;
    if !save_checkpoint(tx, &after, checkpoint).await? {
        return Ok(None);
    }
    Ok(Some(after))
}

/// Write `c` as the checkpoint of `run`'s version, only while the run row is still at that
/// version, generation and state (the fence); `false` when it is not (nothing written).
pub(crate) async fn save_checkpoint(
    tx: &mut Transaction<'_, Postgres>,
    run: &RunRow,
    c: &Checkpoint,
) -> Result<bool, sqlx::Error> {
    let r = sqlx::query(
        "INSERT INTO runner.run_checkpoints (run_id, version, generation, state, body, checksum) \
         SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM runner.runs \
                WHERE id = $1 AND version = $2 AND generation = $3 AND state = $4)",
    )
    .bind(run.id)
    .bind(run.version)
    .bind(run.generation)
    .bind(&run.state)
    .bind(&c.body)
    .bind(&c.checksum)
    .execute(&mut **tx)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// A checkpoint as stored.
#[derive(Debug, Clone)]
pub struct CheckpointRow {
    pub run_id: Uuid,
    pub version: i64,
    pub generation: i64,
    pub state: String,
    pub body: Vec<u8>,
    pub checksum: String,
    pub created_at: OffsetDateTime,
}

/// Checkpoint `version` of run `id` (the latest when `None`).
pub async fn checkpoint(
    pool: &PgPool,
    id: Uuid,
    version: Option<i64>,
) -> Result<Option<CheckpointRow>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT run_id, version, generation, state, body, checksum, created_at \
           FROM runner.run_checkpoints WHERE run_id = $1 AND ($2::bigint IS NULL OR version = $2) \
          ORDER BY version DESC LIMIT 1",
    )
    .bind(id)
    .bind(version)
    .fetch_optional(pool)
    .await?;
    row.map(|r| {
        Ok(CheckpointRow {
            run_id: r.try_get("run_id")?,
            version: r.try_get("version")?,
            generation: r.try_get("generation")?,
            state: r.try_get("state")?,
            body: r.try_get("body")?,
            checksum: r.try_get("checksum")?,
            created_at: r.try_get("created_at")?,
        })
    })
    .transpose()
}

/// Record a durable interrupt on `current` (fenced as [`commit`]); the run after it.
pub async fn interrupt(
    tx: &mut Transaction<'_, Postgres>,
    current: &RunRow,
) -> Result<Option<RunRow>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "UPDATE runner.runs SET interrupt_pending = true, updated_at = now() \
          WHERE id = $1 AND version = $2 AND generation = $3 RETURNING {RUN}"
    ))
    .bind(current.id)
    .bind(current.version)
    .bind(current.generation)
    .fetch_optional(&mut **tx)
    .await?;
    row.as_ref().map(run).transpose()
}

/// The progress a run row holds (a fresh one when it does not parse).
pub(crate) fn progress_of(run: &RunRow) -> Progress {
    serde_json::from_str::<serde_json::Value>(&run.progress)
        .ok()
        .and_then(|v| Progress::from_json(&v).ok())
        .unwrap_or_default()
}

/// What a transition made of `after` (its row names it).
pub(crate) fn made(after: &RunRow) -> Made<'_> {
    Made {
        run_id: after.id,
        version: after.version,
        generation: after.generation,
        workflow_version: &after.workflow_version,
        state_schema_version: &after.state_schema_version,
    }
}
