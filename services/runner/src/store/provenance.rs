//! SQL of provenance snapshots (`runner.provenance_snapshots`): every retrieved source a run
//! used, digests only. Written in the transaction of the commit that first used the source.

use sqlx::{PgPool, Postgres, Row, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::progress::StepResult;

/// The parser of a model answer (a provenance snapshot's `parser_version`): the OpenAI-style
/// chat completion's `choices[0].message.content` (digested) and `usage.total_tokens`.
pub const ANSWER_PARSER: &str = "lychd.runner.chat-completion/v1";
/// Who produced a model answer (a provenance snapshot's `responsibility`): the runtime the
/// Dispatcher's lease named.
pub const ANSWER_RESPONSIBILITY: &str = "office:dispatcher (runtime of the leased capability)";

/// Record the model answer `result` of a step using capability family `capability`, first
/// used by run `run_id`'s `version` (nothing when there is no result).
pub async fn record_answer(
    tx: &mut Transaction<'_, Postgres>,
    run_id: Uuid,
    version: i64,
    capability: &str,
    result: Option<&StepResult>,
) -> Result<(), sqlx::Error> {
    let Some(r) = result else {
        return Ok(());
    };
    let source = format!("model:{capability}");
    record(
        tx,
        &NewSnapshot {
            run_id,
            version,
            source: &source,
            step: &r.step,
            content_sha256: &r.digest,
            parser_version: ANSWER_PARSER,
            responsibility: ANSWER_RESPONSIBILITY,
        },
    )
    .await
}

/// A source to record.
pub struct NewSnapshot<'a> {
    pub run_id: Uuid,
    pub version: i64,
    pub source: &'a str,
    pub step: &'a str,
    pub content_sha256: &'a str,
    pub parser_version: &'a str,
    pub responsibility: &'a str,
}

/// A snapshot as stored.
#[derive(Debug, Clone)]
pub struct SnapshotRow {
    pub version: i64,
    pub source: String,
    pub step: String,
    pub content_sha256: String,
    pub parser_version: String,
    pub responsibility: String,
    pub retrieved_at: OffsetDateTime,
}

/// Record `s`, retrieved now (the database's clock in this transaction); a second record of
/// the same source and digest at the same version is the same snapshot.
pub async fn record(
    tx: &mut Transaction<'_, Postgres>,
    s: &NewSnapshot<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO runner.provenance_snapshots (run_id, version, source, step, content_sha256, \
         parser_version, responsibility, retrieved_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, now()) ON CONFLICT DO NOTHING",
    )
    .bind(s.run_id)
    .bind(s.version)
    .bind(s.source)
    .bind(s.step)
    .bind(s.content_sha256)
    .bind(s.parser_version)
    .bind(s.responsibility)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The snapshots of run `id`, in the order the run used them.
pub async fn list(pool: &PgPool, id: Uuid) -> Result<Vec<SnapshotRow>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT version, source, step, content_sha256, parser_version, responsibility, \
                retrieved_at FROM runner.provenance_snapshots WHERE run_id = $1 \
          ORDER BY version, source, content_sha256",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(SnapshotRow {
                version: r.try_get("version")?,
                source: r.try_get("source")?,
                step: r.try_get("step")?,
                content_sha256: r.try_get("content_sha256")?,
                parser_version: r.try_get("parser_version")?,
                responsibility: r.try_get("responsibility")?,
                retrieved_at: r.try_get("retrieved_at")?,
            })
        })
        .collect()
}
