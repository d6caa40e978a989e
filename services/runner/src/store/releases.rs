//! SQL of an ended run's pending consent release (`runner.runs.consent_release_due`,
//! migration `0010_consent_release.sql`): marked in the transaction of the commit that ends
//! the run (a cancel, or `runs::commit_with` by `domain::release`), taken by whoever asks
//! Ward (`CancelForRun`) — pushed out by a retry interval before the ask, in one statement
//! (`FOR UPDATE SKIP LOCKED`), so two replicas do not ask at once — and cleared once Ward
//! answered. A failed ask leaves the mark: it is taken again when due.

use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

/// Mark run `id`'s pending consents to be released at once (in the cancel's transaction).
pub async fn mark(tx: &mut Transaction<'_, Postgres>, id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE runner.runs SET consent_release_due = now() WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Take run `id`'s release if it is marked (due or not: the caller's own cancel asks at once),
/// pushing the next ask out by `retry_ms`; whether it was marked.
pub async fn take(pool: &PgPool, id: Uuid, retry_ms: i64) -> Result<bool, sqlx::Error> {
    let r = sqlx::query(
        "UPDATE runner.runs \
            SET consent_release_due = now() + make_interval(secs => $2::double precision / 1000) \
          WHERE id = $1 AND consent_release_due IS NOT NULL",
    )
    .bind(id)
    .bind(retry_ms)
    .execute(pool)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Take one due release (the oldest), pushing its next ask out by `retry_ms`: the run's id.
pub async fn take_due(pool: &PgPool, retry_ms: i64) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar(
        "UPDATE runner.runs \
            SET consent_release_due = now() + make_interval(secs => $1::double precision / 1000) \
          WHERE id = (SELECT id FROM runner.runs \
                       WHERE consent_release_due IS NOT NULL AND consent_release_due <= now() \
                       ORDER BY consent_release_due LIMIT 1 FOR UPDATE SKIP LOCKED) \
          RETURNING id",
    )
    .bind(retry_ms)
    .fetch_optional(pool)
    .await
}

/// Ward answered: run `id`'s pending consents are released.
pub async fn done(pool: &PgPool, id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE runner.runs SET consent_release_due = NULL WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Whether run `id`'s release is still marked.
pub async fn pending(pool: &PgPool, id: Uuid) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query_scalar::<_, Option<time::OffsetDateTime>>(
        "SELECT consent_release_due FROM runner.runs WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?
    .flatten()
    .is_some())
}
