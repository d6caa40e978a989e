//! SQL of a run's start (`runner.runs`): the insert of a new run with its creation transition
//! and first checkpoint in the caller's transaction (a root's start or a descendant's, whose
//! parent the caller has locked), and the run an owner's request id started already.

use sqlx::{PgPool, Postgres, Transaction};

use super::runs::{
    BUDGETS, INPUT_PARSER, NewRun, NewTransition, RUN, RunRow, Started, insert_checkpoint, made,
    progress_of, run,
};
use super::transitions::append;
use crate::domain::checkpoint::Checkpoint;
use crate::domain::progress::Progress;

/// Record `n` (one transaction, with its creation transition and its first checkpoint), or
/// find the run its owner's request id started already.
pub async fn start(
    pool: &PgPool,
    n: &NewRun<'_>,
    checkpoint: &Checkpoint,
) -> Result<Started, sqlx::Error> {
    let mut tx = pool.begin().await?;
    match start_in(&mut tx, n, checkpoint).await? {
        Some(created) => {
            tx.commit().await?;
            Ok(Started::New(created))
        }
        None => {
            tx.rollback().await?;
            Ok(Started::Seen(seen(pool, n.owner, n.request_id).await?))
        }
    }
}

/// The run `owner`'s `request_id` started.
pub async fn seen(pool: &PgPool, owner: &str, request_id: &str) -> Result<RunRow, sqlx::Error> {
    let row = sqlx::query(&format!(
        "SELECT {RUN} FROM runner.runs WHERE owner = $1 AND request_id = $2"
    ))
    .bind(owner)
    .bind(request_id)
    .fetch_one(pool)
    .await?;
    run(&row)
}

/// The run `owner`'s `request_id` started, if any.
pub async fn find(
    pool: &PgPool,
    owner: &str,
    request_id: &str,
) -> Result<Option<RunRow>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "SELECT {RUN} FROM runner.runs WHERE owner = $1 AND request_id = $2"
    ))
    .bind(owner)
    .bind(request_id)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(run).transpose()
}

/// Record `n` in `tx` (with its creation transition and first checkpoint); `None` when its
/// owner's request id is taken (nothing written; roll back and read it with [`seen`]).
pub async fn start_in(
    tx: &mut Transaction<'_, Postgres>,
    n: &NewRun<'_>,
    checkpoint: &Checkpoint,
) -> Result<Option<RunRow>, sqlx::Error> {
    sqlx::query("SELECT pg_current_xact_id()::text")
        .execute(&mut **tx)
        .await?;
    let sql = format!(
        "INSERT INTO runner.runs (id, owner, request_id, request_sha256, workflow, \
         workflow_sha256, workflow_name, workflow_version, state_schema_version, fsm_sha256, \
         input, input_sha256, {budgets}, state, version, generation, timeout_seconds, \
         deadline_at, parent_run_id, root_run_id, depth) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
                 $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, 1, 1, $23, \
                 now() + make_interval(secs => $23::double precision), $24, $25, $26) \
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
    let Some(row) = q
        .bind(n.state)
        .bind(n.timeout_seconds)
        .bind(n.tree.map(|t| t.0))
        .bind(n.tree.map(|t| t.1))
        .bind(n.tree.map_or(0, |t| t.2))
        .fetch_optional(&mut **tx)
        .await?
    else {
        return Ok(None);
    };
    let created = run(&row)?;
    append(
        tx,
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
        tx,
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
    insert_checkpoint(tx, &created, checkpoint).await?;
    Ok(Some(created))
}
