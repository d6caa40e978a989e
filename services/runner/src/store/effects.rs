//! SQL of effects (`runner.effects`, `runner.effect_outbox`, `runner.effect_ledger`): the
//! intent and its outbox row (written in the transaction of the fenced commit entering
//! `EXECUTE`), the outbox claim (fenced on the run's lease generation), and the append-only
//! ledger. Digests, ids and statuses only: never an action's content in the ledger.

use sqlx::{PgExecutor, PgPool, Postgres, Row, Transaction};
use uuid::Uuid;

/// An intent to record.
pub struct Intent<'a> {
    pub run_id: Uuid,
    pub sequence: u32,
    pub version: i64,
    pub step: &'a str,
    pub adapter: &'a str,
    pub adapter_version: &'a str,
    pub destination: &'a str,
    pub action: &'a [u8],
    pub action_digest: &'a str,
    pub consent_id: &'a str,
    pub binding_digest: &'a str,
}

/// The id of the transition that made run `run_id`'s version `version`.
pub async fn transition_id(
    tx: &mut Transaction<'_, Postgres>,
    run_id: Uuid,
    version: i64,
) -> Result<Uuid, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT transition_id FROM runner.run_transitions WHERE run_id = $1 AND version = $2",
    )
    .bind(run_id)
    .bind(version)
    .fetch_one(&mut **tx)
    .await
}

/// Write the intent, its outbox row and its `intent` ledger entry (in the commit's
/// transaction, after its fenced update).
pub async fn intend(
    tx: &mut Transaction<'_, Postgres>,
    i: &Intent<'_>,
    transition_id: Uuid,
    tuple: &str,
    key: &str,
    generation: i64,
) -> Result<(), sqlx::Error> {
    let seq = i32::try_from(i.sequence).unwrap_or(i32::MAX);
    sqlx::query(
        "INSERT INTO runner.effects (run_id, effect_sequence, transition_id, step, adapter, \
                adapter_version, destination, action_digest, idempotency_tuple, idempotency_key, \
                consent_id, binding_digest, version) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(i.run_id)
    .bind(seq)
    .bind(transition_id)
    .bind(i.step)
    .bind(i.adapter)
    .bind(i.adapter_version)
    .bind(i.destination)
    .bind(i.action_digest)
    .bind(tuple)
    .bind(key)
    .bind(i.consent_id)
    .bind(i.binding_digest)
    .bind(i.version)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "INSERT INTO runner.effect_outbox (idempotency_key, run_id, effect_sequence, destination, \
                action) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(key)
    .bind(i.run_id)
    .bind(seq)
    .bind(i.destination)
    .bind(i.action)
    .execute(&mut **tx)
    .await?;
    let detail = serde_json::json!({
        "idempotency_key": key, "transition_id": transition_id.to_string(),
        "action_digest": i.action_digest, "adapter_version": i.adapter_version,
        "version": i.version,
    });
    append(
        &mut **tx, i.run_id, i.sequence, "intent", generation, "runner", &detail,
    )
    .await
}

/// An outbox row claimed for delivery.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub destination: String,
    pub action: Vec<u8>,
    pub attempts: i32,
}

/// Claim the outbox row of `key` for the holder of run `run_id`'s lease at `generation`
/// (fenced: `None` when the run's generation moved or the row is settled), counting one
/// attempt. An `exclusive` claim (the first dispatch after the intent) also needs the row
/// never claimed: a row claimed before may have been dispatched, and is reconciled instead.
pub async fn claim(
    pool: &PgPool,
    run_id: Uuid,
    key: &str,
    generation: i64,
    exclusive: bool,
) -> Result<Option<Claimed>, sqlx::Error> {
    let row = sqlx::query(
        "UPDATE runner.effect_outbox o SET claimed_generation = $3, attempts = o.attempts + 1 \
           FROM runner.runs r \
          WHERE o.idempotency_key = $2 AND o.run_id = $1 AND o.settled_at IS NULL \
            AND r.id = o.run_id AND r.generation = $3 \
            AND (NOT $4 OR o.claimed_generation IS NULL) \
         RETURNING o.destination, o.action, o.attempts",
    )
    .bind(run_id)
    .bind(key)
    .bind(generation)
    .bind(exclusive)
    .fetch_optional(pool)
    .await?;
    row.map(|r| {
        Ok(Claimed {
            destination: r.try_get("destination")?,
            action: r.try_get("action")?,
            attempts: r.try_get("attempts")?,
        })
    })
    .transpose()
}

/// The idempotency key of run `run_id`'s effect `sequence` (its intent must exist).
pub async fn key_of(pool: &PgPool, run_id: Uuid, sequence: u32) -> Result<String, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT idempotency_key FROM runner.effects WHERE run_id = $1 AND effect_sequence = $2",
    )
    .bind(run_id)
    .bind(i32::try_from(sequence).unwrap_or(i32::MAX))
    .fetch_one(pool)
    .await
}

/// The idempotency key of run `run_id`'s effect `sequence`, if its intent exists.
pub async fn find_key(
    ex: impl PgExecutor<'_>,
    run_id: Uuid,
    sequence: u32,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT idempotency_key FROM runner.effects WHERE run_id = $1 AND effect_sequence = $2",
    )
    .bind(run_id)
    .bind(i32::try_from(sequence).unwrap_or(i32::MAX))
    .fetch_optional(ex)
    .await
}

/// The action digest and consent id of run `run_id`'s effect `sequence`, if its intent exists.
pub async fn intent_of(
    pool: &PgPool,
    run_id: Uuid,
    sequence: u32,
) -> Result<Option<(String, String)>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT action_digest, consent_id FROM runner.effects \
          WHERE run_id = $1 AND effect_sequence = $2",
    )
    .bind(run_id)
    .bind(i32::try_from(sequence).unwrap_or(i32::MAX))
    .fetch_optional(pool)
    .await?;
    row.map(|r| Ok((r.try_get("action_digest")?, r.try_get("consent_id")?)))
        .transpose()
}

/// A ledger entry as stored.
#[derive(Debug, Clone)]
pub struct Entry {
    pub kind: String,
    pub detail: String,
    pub generation: i64,
    pub actor: String,
    pub recorded_at: time::OffsetDateTime,
}

/// The ledger of run `run_id`'s effect `sequence`, in order.
pub async fn entries(
    pool: &PgPool,
    run_id: Uuid,
    sequence: u32,
) -> Result<Vec<Entry>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT kind, detail::text AS detail, generation, actor, recorded_at \
           FROM runner.effect_ledger WHERE run_id = $1 AND effect_sequence = $2 ORDER BY seq",
    )
    .bind(run_id)
    .bind(i32::try_from(sequence).unwrap_or(i32::MAX))
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(Entry {
                kind: r.try_get("kind")?,
                detail: r.try_get("detail")?,
                generation: r.try_get("generation")?,
                actor: r.try_get("actor")?,
                recorded_at: r.try_get("recorded_at")?,
            })
        })
        .collect()
}

/// Settle the outbox row of `key` (its outcome is known).
pub async fn settle(ex: impl PgExecutor<'_>, key: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE runner.effect_outbox SET settled_at = now() \
          WHERE idempotency_key = $1 AND settled_at IS NULL",
    )
    .bind(key)
    .execute(ex)
    .await?;
    Ok(())
}

/// Append a ledger entry.
pub async fn append(
    ex: impl PgExecutor<'_>,
    run_id: Uuid,
    sequence: u32,
    kind: &str,
    generation: i64,
    actor: &str,
    detail: &serde_json::Value,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO runner.effect_ledger (run_id, effect_sequence, kind, generation, actor, \
                detail) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(run_id)
    .bind(i32::try_from(sequence).unwrap_or(i32::MAX))
    .bind(kind)
    .bind(generation.max(0))
    .bind(actor)
    .bind(detail)
    .execute(ex)
    .await?;
    Ok(())
}

/// The evidence an operator must name to resolve run `run_id`'s unknown outcome: the digest
/// of its ledger so far (every entry's kind and detail in order). A resolution naming another
/// digest saw a ledger that has changed since (stale).
pub async fn ledger_digest(
    ex: impl PgExecutor<'_>,
    run_id: Uuid,
    sequence: u32,
) -> Result<String, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT kind, detail::text AS detail FROM runner.effect_ledger \
          WHERE run_id = $1 AND effect_sequence = $2 ORDER BY seq",
    )
    .bind(run_id)
    .bind(i32::try_from(sequence).unwrap_or(i32::MAX))
    .fetch_all(ex)
    .await?;
    let mut text = String::from("lychd.runner.effect-ledger/v1\n");
    for r in rows {
        text.push_str(&r.try_get::<String, _>("kind")?);
        text.push('\t');
        text.push_str(&r.try_get::<String, _>("detail")?);
        text.push('\n');
    }
    Ok(format!(
        "sha256:{}",
        crate::domain::run::sha256(text.as_bytes())
    ))
}

/// The ledger's kinds of run `run_id`'s effect `sequence`, in order (tests and inspection).
pub async fn kinds(pool: &PgPool, run_id: Uuid, sequence: u32) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT kind FROM runner.effect_ledger WHERE run_id = $1 AND effect_sequence = $2 \
          ORDER BY seq",
    )
    .bind(run_id)
    .bind(i32::try_from(sequence).unwrap_or(i32::MAX))
    .fetch_all(pool)
    .await
}
