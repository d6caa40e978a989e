//! SQL of runs (`runner.runs`) and their transitions (`runner.run_transitions`). Every state
//! commit is a guarded `UPDATE … RETURNING` on the run's state, aggregate version and lease
//! generation (the fence), and appends its transition row in the same transaction; a writer
//! holds its transaction id before the feed's sequence number is taken (the gap rule's
//! premise, `lychd_runtime::feed`).

use sqlx::{PgPool, Postgres, Row, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::checkpoint::Checkpoint;
use crate::domain::progress::Progress;
use crate::domain::trace;

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

/// A transition as stored.
#[derive(Debug, Clone)]
pub struct TransitionRow {
    pub sequence: i64,
    pub transition_id: Uuid,
    pub run_id: Uuid,
    pub version: i64,
    pub generation: i64,
    pub source_state: String,
    pub target_state: String,
    pub trigger: String,
    pub actor: String,
    pub workflow_version: String,
    pub state_schema_version: String,
    pub recorded_at: OffsetDateTime,
    /// The contract's trace fields (`trace.transition_fields`) beyond the above.
    pub cycle_id: i64,
    pub capability: String,
    pub evidence_hashes: Vec<String>,
    /// JSON: `{"steps": n, "tokens": n}`.
    pub budget_delta: String,
    pub trace_id: String,
    pub span_id: String,
}

/// A transition to append.
pub struct NewTransition<'a> {
    pub source_state: &'a str,
    pub target_state: &'a str,
    pub trigger: &'a str,
    pub actor: &'a str,
    /// The capability family of the step the transition concerns ('' for none).
    pub capability: &'a str,
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
        &created,
        &NewTransition {
            source_state: "",
            target_state: n.state,
            trigger: "created",
            actor: n.owner,
            capability: "",
        },
        &Progress::default(),
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
    append(tx, &after, t, &progress_of(current)).await?;
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

/// Append the transition `t` that made `after` (from a run whose progress was `before`): its
/// row carries every trace field of the contract, and the span that writes it
/// (`runner.transition`) carries them as attributes — digests and counts only, never the
/// input, an answer or a rationale.
pub(crate) async fn append(
    tx: &mut Transaction<'_, Postgres>,
    after: &RunRow,
    t: &NewTransition<'_>,
    before: &Progress,
) -> Result<(), sqlx::Error> {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing::Instrument as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    let transition_id = Uuid::new_v4();
    let derived = trace::derive(before, &progress_of(after));
    let evidence = derived.evidence_hashes.join(",");
    let delta = derived.budget_delta.to_string();
    let checkpoint_id = format!("{}:{}", after.id, after.version);
    let span = tracing::info_span!(
        "runner.transition",
        run_id = %after.id,
        cycle_id = derived.cycle_id,
        workflow_version = %after.workflow_version,
        state_schema_version = %after.state_schema_version,
        transition_id = %transition_id,
        source_state = t.source_state,
        target_state = t.target_state,
        trigger = t.trigger,
        actor = t.actor,
        capability = t.capability,
        evidence_hashes = %evidence,
        budget_delta = %delta,
        timestamp = tracing::field::Empty,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
        checkpoint_id = %checkpoint_id,
        generation = after.generation,
    );
    let (trace_id, span_id) = {
        let cx = span.context();
        let sc = cx.span().span_context().clone();
        if sc.is_valid() {
            (sc.trace_id().to_string(), sc.span_id().to_string())
        } else {
            (String::new(), String::new())
        }
    };
    span.record("trace_id", trace_id.as_str());
    span.record("span_id", span_id.as_str());
    let recorded_at: OffsetDateTime = sqlx::query_scalar(
        "INSERT INTO runner.run_transitions (transition_id, run_id, version, generation, \
         workflow_version, state_schema_version, source_state, target_state, trigger, actor, \
         cycle_id, capability, evidence_hashes, budget_delta, trace_id, span_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb, $15, $16) \
         RETURNING recorded_at",
    )
    .bind(transition_id)
    .bind(after.id)
    .bind(after.version)
    .bind(after.generation)
    .bind(&after.workflow_version)
    .bind(&after.state_schema_version)
    .bind(t.source_state)
    .bind(t.target_state)
    .bind(t.trigger)
    .bind(t.actor)
    .bind(derived.cycle_id)
    .bind(t.capability)
    .bind(&derived.evidence_hashes)
    .bind(&delta)
    .bind(&trace_id)
    .bind(&span_id)
    .fetch_one(&mut **tx)
    .instrument(span.clone())
    .await?;
    span.record("timestamp", tracing::field::display(recorded_at));
    Ok(())
}

pub(super) const TRANSITION: &str = "t.sequence, t.transition_id, t.run_id, t.version, t.generation, \
     t.source_state, t.target_state, t.trigger, t.actor, t.workflow_version, \
     t.state_schema_version, t.recorded_at, t.cycle_id, t.capability, t.evidence_hashes, \
     t.budget_delta::text AS budget_delta, t.trace_id, t.span_id";

pub(super) fn transition(r: &sqlx::postgres::PgRow) -> Result<TransitionRow, sqlx::Error> {
    Ok(TransitionRow {
        sequence: r.try_get("sequence")?,
        transition_id: r.try_get("transition_id")?,
        run_id: r.try_get("run_id")?,
        version: r.try_get("version")?,
        generation: r.try_get("generation")?,
        source_state: r.try_get("source_state")?,
        target_state: r.try_get("target_state")?,
        trigger: r.try_get("trigger")?,
        actor: r.try_get("actor")?,
        workflow_version: r.try_get("workflow_version")?,
        state_schema_version: r.try_get("state_schema_version")?,
        recorded_at: r.try_get("recorded_at")?,
        cycle_id: r.try_get("cycle_id")?,
        capability: r.try_get("capability")?,
        evidence_hashes: r.try_get("evidence_hashes")?,
        budget_delta: r.try_get("budget_delta")?,
        trace_id: r.try_get("trace_id")?,
        span_id: r.try_get("span_id")?,
    })
}

/// Transitions of run `id` after aggregate version `after`, in order (at most `limit`).
pub async fn transitions(
    pool: &PgPool,
    id: Uuid,
    after: i64,
    limit: i64,
) -> Result<Vec<TransitionRow>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "SELECT {TRANSITION} FROM runner.run_transitions t WHERE t.run_id = $1 AND t.version > $2 \
          ORDER BY t.version LIMIT $3"
    ))
    .bind(id)
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter().map(transition).collect()
}
