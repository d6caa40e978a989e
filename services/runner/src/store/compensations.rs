//! SQL of compensation (`runner.runs.compensation_due`, `runner.effect_compensations`,
//! migration `0011_compensation.sql`): the run marked due by the commit that ends it
//! (`runs::commit_with`), taken by the job (pushed out by a retry interval first, `FOR UPDATE
//! SKIP LOCKED`), its confirmed effects read, each compensation's intent written before any
//! dispatch, claimed (counting an attempt) and settled.

use sqlx::{PgPool, Row};
use uuid::Uuid;

/// Mark run `id` due for compensation at once (in the transaction of a commit that ended it
/// outside `runs::commit_with`: a recovery review).
pub async fn mark(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE runner.runs SET compensation_due = now() WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Take one run due for compensation (the oldest), pushing its next look out by `retry_ms`.
pub async fn take_due(pool: &PgPool, retry_ms: i64) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar(
        "UPDATE runner.runs \
            SET compensation_due = now() + make_interval(secs => $1::double precision / 1000) \
          WHERE id = (SELECT id FROM runner.runs \
                       WHERE compensation_due IS NOT NULL AND compensation_due <= now() \
                       ORDER BY compensation_due LIMIT 1 FOR UPDATE SKIP LOCKED) \
          RETURNING id",
    )
    .bind(retry_ms)
    .fetch_optional(pool)
    .await
}

/// Every compensation of run `id` is settled: it is no longer due.
pub async fn done(pool: &PgPool, id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE runner.runs SET compensation_due = NULL WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// A confirmed effect of a run: its sequence, step and idempotency key.
#[derive(Debug, Clone)]
pub struct Confirmed {
    pub sequence: u32,
    pub step: String,
    pub key: String,
}

/// Run `id`'s effects whose outcome was confirmed (a `receipt` or `acknowledgement` ledger
/// entry, or an operator's confirmed `reconciliation`), last first.
pub async fn confirmed(pool: &PgPool, id: Uuid) -> Result<Vec<Confirmed>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT e.effect_sequence, e.step, e.idempotency_key FROM runner.effects e \
          WHERE e.run_id = $1 AND EXISTS (\
                SELECT 1 FROM runner.effect_ledger l \
                 WHERE l.run_id = e.run_id AND l.effect_sequence = e.effect_sequence \
                   AND (l.kind IN ('receipt', 'acknowledgement') \
                        OR (l.kind = 'reconciliation' AND l.detail->>'resolution' = 'confirmed'))) \
          ORDER BY e.effect_sequence DESC",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(Confirmed {
                sequence: u32::try_from(r.try_get::<i32, _>("effect_sequence")?).unwrap_or(0),
                step: r.try_get("step")?,
                key: r.try_get("idempotency_key")?,
            })
        })
        .collect()
}

/// A compensation's intent to write.
pub struct Intent<'a> {
    pub run_id: Uuid,
    pub sequence: u32,
    pub key: &'a str,
    pub destination: &'a str,
    pub action: &'a [u8],
    pub action_digest: &'a str,
}

/// Write the compensation's intent and its `compensation` ledger entry (phase `intent`) in
/// one transaction, once (a second writer finds the row): whether it was written now.
pub async fn intend(pool: &PgPool, i: &Intent<'_>, actor: &str) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let seq = i32::try_from(i.sequence).unwrap_or(i32::MAX);
    let written = sqlx::query(
        "INSERT INTO runner.effect_compensations (idempotency_key, run_id, effect_sequence, \
                destination, action, action_digest) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT DO NOTHING",
    )
    .bind(i.key)
    .bind(i.run_id)
    .bind(seq)
    .bind(i.destination)
    .bind(i.action)
    .bind(i.action_digest)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if written {
        let detail = serde_json::json!({
            "phase": "intent", "idempotency_key": i.key, "action_digest": i.action_digest,
        });
        super::effects::append(
            &mut *tx,
            i.run_id,
            i.sequence,
            "compensation",
            0,
            actor,
            &detail,
        )
        .await?;
    }
    tx.commit().await?;
    Ok(written)
}

/// The compensation of `key`, still pending, claimed for one attempt: the attempts made
/// before this one (`None`: settled).
pub async fn claim(pool: &PgPool, key: &str) -> Result<Option<i32>, sqlx::Error> {
    sqlx::query_scalar(
        "UPDATE runner.effect_compensations SET attempts = attempts + 1 \
          WHERE idempotency_key = $1 AND outcome = 'pending' RETURNING attempts - 1",
    )
    .bind(key)
    .fetch_optional(pool)
    .await
}

/// Settle the compensation of `key` with `outcome` and its `compensation` ledger entry, in
/// one transaction (only a pending one: a second settler changes nothing).
pub async fn settle(
    pool: &PgPool,
    run_id: Uuid,
    sequence: u32,
    key: &str,
    outcome: &str,
    actor: &str,
    detail: &serde_json::Value,
) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let settled = sqlx::query(
        "UPDATE runner.effect_compensations SET outcome = $2, settled_at = now() \
          WHERE idempotency_key = $1 AND outcome = 'pending'",
    )
    .bind(key)
    .bind(outcome)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if settled {
        super::effects::append(&mut *tx, run_id, sequence, "compensation", 0, actor, detail)
            .await?;
    }
    tx.commit().await?;
    Ok(settled)
}

/// The outcome of run `id`'s compensation of effect `sequence`, if one was intended.
pub async fn outcome(
    pool: &PgPool,
    id: Uuid,
    sequence: u32,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT outcome FROM runner.effect_compensations WHERE run_id = $1 AND effect_sequence = $2",
    )
    .bind(id)
    .bind(i32::try_from(sequence).unwrap_or(i32::MAX))
    .fetch_optional(pool)
    .await
}
