//! Measured footprints (`footprints`, migration 0006): one row per (animator, model, context
//! size), replaced by each new measurement.

use sqlx::{PgPool, Row};

use crate::domain::memory::FootprintKey;

/// Every measured footprint.
pub async fn footprints(pool: &PgPool) -> Result<Vec<(FootprintKey, u64)>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT animator, model_id, context_tokens, memory_mib FROM orchestrator.footprints",
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| {
            let ctx: i32 = r.try_get("context_tokens")?;
            let mib: i64 = r.try_get("memory_mib")?;
            Ok((
                FootprintKey {
                    animator: r.try_get("animator")?,
                    model_id: r.try_get("model_id")?,
                    context_tokens: u32::try_from(ctx).unwrap_or(0),
                },
                u64::try_from(mib).unwrap_or(0),
            ))
        })
        .collect()
}

/// Record a measurement (replacing the previous one of the same key).
pub async fn record(pool: &PgPool, key: &FootprintKey, mib: u64) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO orchestrator.footprints (animator, model_id, context_tokens, memory_mib) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (animator, model_id, context_tokens) \
         DO UPDATE SET memory_mib = EXCLUDED.memory_mib, measured_at = now()",
    )
    .bind(&key.animator)
    .bind(&key.model_id)
    .bind(i32::try_from(key.context_tokens).unwrap_or(i32::MAX))
    .bind(i64::try_from(mib).unwrap_or(i64::MAX))
    .execute(pool)
    .await?;
    Ok(())
}
