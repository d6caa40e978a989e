//! Assignments: exact grants of principal × action × object × audience × purpose, with an
//! optional end. Every change bumps the principal's policy generation under its row lock.
//! (An assignment reaching its `expires_at` changes decisions without a bump: decisions check
//! expiry with the database clock themselves.)

use serde_json::json;
use sqlx::postgres::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{
    Page, audit, begin, bump_policy_generation, lock_live_principal, lock_principal, paginate,
};
use crate::domain::paging::{self, List};
use crate::error::{Entity, Result, WardError};
use lychd_auth::grammar::Question;

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AssignmentRecord {
    pub id: Uuid,
    pub principal_id: Uuid,
    pub action: String,
    pub object: String,
    pub audience: String,
    pub purpose: String,
    pub expires_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

const COLUMNS: &str = "id, principal_id, action, object, audience, purpose, expires_at, created_at";

/// The outcome of [`assign`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigned {
    pub assignment: AssignmentRecord,
    pub policy_generation: i64,
}

/// The outcome of [`unassign`]: `changed` is false when it was already withdrawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unassigned {
    pub changed: bool,
    pub policy_generation: i64,
}

/// Grant `principal_id` the question's action on its object. Lock order: the principal row,
/// then its assignments. A live, unexpired identical assignment → already exists; an expired
/// identical one is closed first.
pub async fn assign(
    pool: &PgPool,
    actor: Option<Uuid>,
    principal_id: Uuid,
    grant: &Question,
    expires_at: Option<OffsetDateTime>,
) -> Result<Assigned> {
    let mut tx = begin(pool).await?;
    lock_live_principal(&mut tx, principal_id).await?;
    sqlx::query(
        "UPDATE ward.assignments SET revoked_at = statement_timestamp()
         WHERE principal_id = $1 AND action = $2 AND object = $3 AND audience = $4 AND purpose = $5
           AND revoked_at IS NULL AND expires_at <= statement_timestamp()",
    )
    .bind(principal_id)
    .bind(grant.action.as_str())
    .bind(grant.object.as_str())
    .bind(grant.audience.as_str())
    .bind(grant.purpose.as_str())
    .execute(&mut *tx)
    .await?;
    let assignment: Option<AssignmentRecord> = sqlx::query_as(&format!(
        "INSERT INTO ward.assignments (id, principal_id, action, object, audience, purpose, expires_at)
         SELECT $1, $2, $3, $4, $5, $6, $7
         WHERE $7::timestamptz IS NULL OR $7 > statement_timestamp()
         RETURNING {COLUMNS}"
    ))
    .bind(Uuid::new_v4())
    .bind(principal_id)
    .bind(grant.action.as_str())
    .bind(grant.object.as_str())
    .bind(grant.audience.as_str())
    .bind(grant.purpose.as_str())
    .bind(expires_at)
    .fetch_optional(&mut *tx)
    .await?;
    let assignment = assignment.ok_or_else(|| {
        super::invalid(
            "expires_at",
            crate::error::reasons::EXPIRES_AT_INVALID,
            "must be in the future",
        )
    })?;
    let generation = bump_policy_generation(&mut tx, principal_id).await?;
    audit::record(
        &mut tx,
        "assignment.granted",
        actor,
        Some(principal_id),
        json!({
            "assignment_id": assignment.id,
            "action": assignment.action,
            "object": assignment.object,
            "audience": assignment.audience,
            "purpose": assignment.purpose,
            "expires_at": assignment.expires_at.map(|t| t.unix_timestamp()),
            "policy_generation": generation,
        }),
    )
    .await?;
    lychd_runtime::refusal::commit(tx).await?;
    Ok(Assigned {
        assignment,
        policy_generation: generation,
    })
}

/// Withdraw an assignment. Monotonic and idempotent. Lock order: the principal row, then the
/// assignment.
pub async fn unassign(
    pool: &PgPool,
    actor: Option<Uuid>,
    assignment_id: Uuid,
) -> Result<Unassigned> {
    let mut tx = begin(pool).await?;
    let principal_id: Uuid =
        sqlx::query_scalar("SELECT principal_id FROM ward.assignments WHERE id = $1")
            .bind(assignment_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(WardError::NotFound(Entity::Assignment))?;
    let principal = lock_principal(&mut tx, principal_id).await?;
    let changed = sqlx::query(
        "UPDATE ward.assignments SET revoked_at = statement_timestamp()
         WHERE id = $1 AND revoked_at IS NULL",
    )
    .bind(assignment_id)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !changed {
        return Ok(Unassigned {
            changed: false,
            policy_generation: principal.policy_generation,
        });
    }
    let generation = bump_policy_generation(&mut tx, principal_id).await?;
    audit::record(
        &mut tx,
        "assignment.withdrawn",
        actor,
        Some(principal_id),
        json!({ "assignment_id": assignment_id, "policy_generation": generation }),
    )
    .await?;
    lychd_runtime::refusal::commit(tx).await?;
    Ok(Unassigned {
        changed: true,
        policy_generation: generation,
    })
}

/// Live (not withdrawn, not expired) assignments by id, optionally of one principal.
pub async fn list(
    pool: &PgPool,
    principal_id: Option<Uuid>,
    size: u32,
    after: Option<Uuid>,
) -> Result<Page<AssignmentRecord>> {
    let rows: Vec<AssignmentRecord> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM ward.assignments
         WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > statement_timestamp())
           AND ($1::uuid IS NULL OR principal_id = $1)
           AND ($2::uuid IS NULL OR id > $2)
         ORDER BY id LIMIT $3"
    ))
    .bind(principal_id)
    .bind(after)
    .bind(i64::from(size) + 1)
    .fetch_all(pool)
    .await?;
    Ok(paginate(rows, size, |a| {
        paging::uuid_token(List::Assignments, a.id)
    }))
}
