//! SQL of deterministic replay: a finished run's whole record — its row and workflow bytes,
//! every transition with its checkpoint, every recorded input (`runner.run_inputs`) — read in
//! one read-only, repeatable-read transaction (a read-only sandbox: the database refuses any
//! write in it; one snapshot, so the three reads agree), three statements for the whole run
//! (no round trip per transition). Inputs are written by the state commit's own statement
//! (`runs::commit_with`), never here.

use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::runs::{RUN, RunRow, run};

/// A transition with its checkpoint, as recorded.
#[derive(Debug, Clone)]
pub struct Step {
    pub version: i64,
    pub generation: i64,
    pub trigger: String,
    pub actor: String,
    pub target_state: String,
    /// Its checkpoint's checksum and body (`None` when the version has no checkpoint).
    pub checkpoint: Option<(String, Vec<u8>)>,
}

/// A recorded input, as stored.
#[derive(Debug, Clone)]
pub struct InputRow {
    pub version: i64,
    pub kind: String,
    /// JSON text.
    pub meta: String,
    pub body: Vec<u8>,
    pub rules_version: String,
}

/// A run's record.
pub struct Record {
    pub run: RunRow,
    pub workflow: Vec<u8>,
    /// Whether the run was started with its inputs recorded (`None`: before migration 0009).
    pub inputs_recorded: Option<bool>,
    /// How many checkpoints the run has (a version without a transition — a state-schema
    /// migration — makes one more than its transitions).
    pub checkpoints: i64,
    pub steps: Vec<Step>,
    pub inputs: Vec<InputRow>,
}

/// The record of run `id`, if `owner` started it (any owner's when `None`).
pub async fn load(
    pool: &PgPool,
    id: Uuid,
    owner: Option<&str>,
) -> Result<Option<Record>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(&mut *tx)
        .await?;
    let Some(row) = sqlx::query(&format!(
        "SELECT {RUN}, workflow, inputs_recorded, \
                (SELECT count(*) FROM runner.run_checkpoints c WHERE c.run_id = r.id) AS checkpoints \
           FROM runner.runs r WHERE id = $1 AND ($2::text IS NULL OR owner = $2)"
    ))
    .bind(id)
    .bind(owner)
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(None);
    };
    let steps = sqlx::query(
        "SELECT t.version, t.generation, t.trigger, t.actor, t.target_state, c.checksum, c.body \
           FROM runner.run_transitions t \
           LEFT JOIN runner.run_checkpoints c ON c.run_id = t.run_id AND c.version = t.version \
          WHERE t.run_id = $1 ORDER BY t.version",
    )
    .bind(id)
    .fetch_all(&mut *tx)
    .await?
    .iter()
    .map(|r| {
        let checksum: Option<String> = r.try_get("checksum")?;
        let body: Option<Vec<u8>> = r.try_get("body")?;
        Ok(Step {
            version: r.try_get("version")?,
            generation: r.try_get("generation")?,
            trigger: r.try_get("trigger")?,
            actor: r.try_get("actor")?,
            target_state: r.try_get("target_state")?,
            checkpoint: checksum.zip(body),
        })
    })
    .collect::<Result<Vec<_>, sqlx::Error>>()?;
    let inputs = sqlx::query(
        "SELECT version, kind, meta::text AS meta, body, rules_version FROM runner.run_inputs \
          WHERE run_id = $1 ORDER BY version, seq",
    )
    .bind(id)
    .fetch_all(&mut *tx)
    .await?
    .iter()
    .map(|r| {
        Ok(InputRow {
            version: r.try_get("version")?,
            kind: r.try_get("kind")?,
            meta: r.try_get("meta")?,
            body: r.try_get("body")?,
            rules_version: r.try_get("rules_version")?,
        })
    })
    .collect::<Result<Vec<_>, sqlx::Error>>()?;
    tx.commit().await?;
    Ok(Some(Record {
        run: run(&row)?,
        workflow: row.try_get("workflow")?,
        inputs_recorded: row.try_get("inputs_recorded")?,
        checkpoints: row.try_get("checkpoints")?,
        steps,
        inputs,
    }))
}
