//! SQL of runs (`runner.runs`) and their transitions (`runner.run_transitions`). Every state
//! commit is a guarded `UPDATE … RETURNING` on the run's state, aggregate version and lease
//! generation (the fence) that writes its transition row and checkpoint in the same statement
//! (one round trip); a writer holds its transaction id before the feed's sequence number is
//! taken (the gap rule's premise, `lychd_runtime::feed`).

use sqlx::{PgPool, Postgres, Row, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

use super::transitions::{Made, Traced};
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
    /// The caller's timeout (seconds), if it set one, and the deadline it makes (its creation
    /// plus the timeout, the database's clock).
    pub timeout_seconds: Option<i32>,
    pub deadline_at: Option<OffsetDateTime>,
    /// The run it was started under, its tree's root (`None` for a root) and its depth.
    pub parent_run_id: Option<Uuid>,
    pub root_run_id: Option<Uuid>,
    pub depth: i32,
    /// What a root's descendants consumed (steps, tokens, tool calls, cost); zeros for a child.
    pub desc: [i64; 4],
}

impl RunRow {
    /// The root of the run's tree (itself for a root).
    pub fn root(&self) -> Uuid {
        self.root_run_id.unwrap_or(self.id)
    }
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
     lease_holder, lease_expires_at, created_at, updated_at, timeout_seconds, deadline_at, \
     parent_run_id, root_run_id, depth, desc_steps, desc_tokens, desc_tool_calls, \
     desc_cost_milli";

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
        timeout_seconds: r.try_get("timeout_seconds")?,
        deadline_at: r.try_get("deadline_at")?,
        parent_run_id: r.try_get("parent_run_id")?,
        root_run_id: r.try_get("root_run_id")?,
        depth: r.try_get("depth")?,
        desc: [
            r.try_get("desc_steps")?,
            r.try_get("desc_tokens")?,
            r.try_get("desc_tool_calls")?,
            r.try_get("desc_cost_milli")?,
        ],
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
    /// The caller's timeout in seconds (its deadline is the creation plus it).
    pub timeout_seconds: Option<i32>,
    /// For a descendant run: its parent, its root and its depth.
    pub tree: Option<(Uuid, Uuid, i32)>,
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
    commit_with(
        &mut **tx,
        current,
        t,
        terminal_category,
        checkpoint,
        None,
        None,
    )
    .await
}

/// What a holder's commit adds to the fence and the lease (see [`commit_with`]).
#[derive(Debug, Clone, Copy)]
pub struct Holder<'a> {
    /// The lease is extended to this many ms from the commit.
    pub renew_ms: i64,
    /// The root's descendants' totals the commit's gate read (`None`: not fenced on them).
    pub desc: Option<[i64; 4]>,
    /// The nondeterministic inputs the commit's rules read, in order (`runner.run_inputs`,
    /// written by the same statement under the version it makes: only when the fence held).
    pub inputs: &'a [crate::domain::replay::Input],
}

/// [`commit`] writing `progress` with the state, on any executor: **one statement** (one
/// round trip, atomic on its own, so a caller holding no lock needs no transaction).
///
/// The fenced `UPDATE` is the statement's first write and the transition and checkpoint rows
/// are inserted from its `RETURNING` row, so the transaction id is assigned before the
/// transition's feed sequence is taken (the gap rule's premise) and nothing is written when
/// the fence moved. The checkpoint needs no fence of its own: it is written from the row the
/// fenced update returned. The transition's trace fields are computed before the statement
/// (what it makes is known: the next version under the same generation), and its span wraps
/// the statement. A holder's commit (`holder`) also extends the run's lease to its `renew_ms`
/// from the commit, as `leases::renew` would (a terminal commit gives it up), and may fence on
/// a root's descendants' totals (`desc`) as it read them: a descendant's charge since then
/// fails the commit like any other moved fence.
///
/// A commit that ends the run out of a state in which a consent of the run may be pending at
/// Ward (`domain::release`) marks the release in the same statement (`store::releases`: the
/// step loop asks Ward's `CancelForRun` until it answers). A commit that ends it in a failure
/// or a cancel after an effect began marks it due for compensation (`domain::compensation`).
pub async fn commit_with<'e>(
    ex: impl sqlx::PgExecutor<'e>,
    current: &RunRow,
    t: &NewTransition<'_>,
    terminal_category: Option<&str>,
    checkpoint: &Checkpoint,
    progress: Option<&Progress>,
    holder: Option<Holder<'_>>,
) -> Result<Option<RunRow>, sqlx::Error> {
    use tracing::Instrument as _;

    let before = progress_of(current);
    let traced = Traced::new(
        &Made {
            version: current.version + 1,
            ..made(current)
        },
        t,
        &before,
        progress.unwrap_or(&before),
    );
    let json = progress.map(|p| p.to_json().to_string());
    let inputs = holder.map_or(&[][..], |h| h.inputs);
    let row = sqlx::query(&format!(
        "WITH u AS (\
           UPDATE runner.runs SET state = $5, terminal_category = $6, version = version + 1, \
                  progress = COALESCE($7::jsonb, progress), updated_at = now(), \
                  lease_holder = CASE WHEN $6::text IS NULL THEN lease_holder END, \
                  lease_expires_at = CASE WHEN $6::text IS NULL THEN COALESCE(now() + \
                      make_interval(secs => $13::double precision / 1000), lease_expires_at) END, \
                  consent_release_due = CASE WHEN $25 THEN now() ELSE consent_release_due END, \
                  compensation_due = CASE WHEN $26 THEN now() ELSE compensation_due END \
            WHERE id = $1 AND state = $2 AND version = $3 AND generation = $4 \
              AND ($20::bigint[] IS NULL OR \
                   ARRAY[desc_steps, desc_tokens, desc_tool_calls, desc_cost_milli] = $20) \
            RETURNING {RUN}), \
         t AS (\
           INSERT INTO runner.run_transitions (transition_id, run_id, version, generation, \
                  workflow_version, state_schema_version, source_state, target_state, trigger, \
                  actor, cycle_id, capability, evidence_hashes, budget_delta, trace_id, \
                  span_id) \
           SELECT $8, id, version, generation, workflow_version, state_schema_version, $2, \
                  state, $9, $10, $14, $15, $16, $17::jsonb, $18, $19 FROM u \
           RETURNING recorded_at), \
         c AS (\
           INSERT INTO runner.run_checkpoints (run_id, version, generation, state, body, \
                  checksum) \
           SELECT id, version, generation, state, $11, $12 FROM u), \
         i AS (\
           INSERT INTO runner.run_inputs (run_id, version, seq, kind, meta, body, rules_version) \
           SELECT u.id, u.version, x.seq, x.kind, x.meta::jsonb, x.body, $24 \
             FROM u, unnest($21::text[], $22::text[], $23::bytea[]) WITH ORDINALITY \
                  AS x(kind, meta, body, seq)) \
         SELECT u.*, t.recorded_at AS transition_recorded_at FROM u, t"
    ))
    .bind(current.id)
    .bind(t.source_state)
    .bind(current.version)
    .bind(current.generation)
    .bind(t.target_state)
    .bind(terminal_category)
    .bind(json)
    .bind(traced.transition_id)
    .bind(t.trigger)
    .bind(t.actor)
    .bind(&checkpoint.body)
    .bind(&checkpoint.checksum)
    .bind(holder.map(|h| h.renew_ms))
    .bind(traced.cycle_id)
    .bind(t.capability)
    .bind(&traced.evidence_hashes)
    .bind(&traced.budget_delta)
    .bind(&traced.trace_id)
    .bind(&traced.span_id)
    .bind(holder.and_then(|h| h.desc).map(Vec::from))
    .bind(inputs.iter().map(|i| i.kind.name()).collect::<Vec<_>>())
    .bind(
        inputs
            .iter()
            .map(|i| i.meta.to_string())
            .collect::<Vec<_>>(),
    )
    .bind(inputs.iter().map(|i| i.body.as_slice()).collect::<Vec<_>>())
    .bind(crate::domain::replay::RULES_VERSION)
    .bind(crate::domain::release::releases(
        t.source_state,
        terminal_category,
    ))
    .bind(crate::domain::compensation::due(
        terminal_category,
        progress.unwrap_or(&before).effects,
    ))
    .fetch_optional(ex)
    .instrument(traced.span.clone())
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    traced.recorded(row.try_get("transition_recorded_at")?);
    run(&row).map(Some)
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
    let row = sqlx::query(&format!(
        "SELECT {CHECKPOINT} FROM runner.run_checkpoints \
          WHERE run_id = $1 AND ($2::bigint IS NULL OR version = $2) ORDER BY version DESC LIMIT 1"
    ))
    .bind(id)
    .bind(version)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(checkpoint_row).transpose()
}

/// The columns of a [`CheckpointRow`].
pub(super) const CHECKPOINT: &str =
    "run_id, version, generation, state, body, checksum, created_at";

pub(super) fn checkpoint_row(r: &sqlx::postgres::PgRow) -> Result<CheckpointRow, sqlx::Error> {
    Ok(CheckpointRow {
        run_id: r.try_get("run_id")?,
        version: r.try_get("version")?,
        generation: r.try_get("generation")?,
        state: r.try_get("state")?,
        body: r.try_get("body")?,
        checksum: r.try_get("checksum")?,
        created_at: r.try_get("created_at")?,
    })
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

/// The checkpoint `c` of `run`, a row this transaction has just written (inserted, or moved
/// by its fenced update: the fence held, so the checkpoint needs none of its own).
pub(super) async fn insert_checkpoint(
    tx: &mut Transaction<'_, Postgres>,
    run: &RunRow,
    c: &Checkpoint,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO runner.run_checkpoints (run_id, version, generation, state, body, checksum) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(run.id)
    .bind(run.version)
    .bind(run.generation)
    .bind(&run.state)
    .bind(&c.body)
    .bind(&c.checksum)
    .execute(&mut **tx)
    .await?;
    Ok(())
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
