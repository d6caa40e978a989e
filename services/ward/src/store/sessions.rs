//! Sessions: revocation. (Sessions are created by `credentials::exchange` and resolved by
//! `decisions`.)

use serde_json::json;
use sqlx::postgres::PgPool;
use uuid::Uuid;

use super::principals::Revoked;
use super::{audit, begin, bump_revocation_generation, lock_principal};
use crate::error::{Entity, Result, WardError};

/// Revoke one session. Monotonic and idempotent. Lock order: the principal row, then the
/// session.
pub async fn revoke(pool: &PgPool, actor: Option<Uuid>, session_id: Uuid) -> Result<Revoked> {
    let mut tx = begin(pool).await?;
    // A session's principal never changes: read it without a lock, then lock the principal.
    let principal_id: Uuid =
        sqlx::query_scalar("SELECT principal_id FROM ward.sessions WHERE id = $1")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(WardError::NotFound(Entity::Session))?;
    let principal = lock_principal(&mut tx, principal_id).await?;
    let changed = sqlx::query(
        "UPDATE ward.sessions SET revoked_at = statement_timestamp()
         WHERE id = $1 AND revoked_at IS NULL",
    )
    .bind(session_id)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !changed {
        return Ok(Revoked {
            changed: false,
            revocation_generation: principal.revocation_generation,
        });
    }
    let generation = bump_revocation_generation(&mut tx, principal_id).await?;
    audit::record(
        &mut tx,
        "session.revoked",
        actor,
        Some(principal_id),
        json!({ "session_id": session_id, "revocation_generation": generation }),
    )
    .await?;
    lychd_runtime::refusal::commit(tx).await?;
    Ok(Revoked {
        changed: true,
        revocation_generation: generation,
    })
}
