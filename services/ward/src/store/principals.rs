//! Principals (and the user account of a human principal): enrollment, revocation, listing.

use serde_json::json;
use sqlx::postgres::PgPool;
use uuid::Uuid;

use super::{
    PRINCIPAL_COLUMNS, Page, PrincipalRecord, PrincipalRow, audit, begin,
    bump_revocation_generation, lock_principal, paginate,
};
use crate::domain::kinds::PrincipalKind;
use crate::domain::paging::{self, List};
use crate::error::Result;
use lychd_auth::grammar::{DisplayName, PrincipalName};

/// What [`enroll`] creates.
#[derive(Debug, Clone)]
pub struct Enrollment {
    pub kind: PrincipalKind,
    pub name: PrincipalName,
    /// A human's user account name (default: the principal's name); ignored for other kinds,
    /// which have no user account.
    pub display_name: Option<DisplayName>,
}

/// Outcome of a revocation: `changed` is false when it was already revoked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revoked {
    pub changed: bool,
    /// The principal's revocation generation after the call.
    pub revocation_generation: i64,
}

/// Enroll a principal. It starts with no power: no assignment, no credential.
pub async fn enroll(pool: &PgPool, actor: Option<Uuid>, e: &Enrollment) -> Result<PrincipalRecord> {
    // A new row: nothing to serialize with but the name's uniqueness (23505 → already exists).
    let mut tx = begin(pool).await?;
    let principal = insert(&mut tx, e).await?;
    audit::record(
        &mut tx,
        "principal.enrolled",
        actor,
        Some(principal.id),
        json!({ "kind": e.kind.as_str(), "name": e.name.as_str() }),
    )
    .await?;
    lychd_runtime::refusal::commit(tx).await?;
    Ok(principal)
}

/// Insert the principal (and a human's user) inside the caller's transaction.
pub(crate) async fn insert(
    conn: &mut sqlx::PgConnection,
    e: &Enrollment,
) -> Result<PrincipalRecord> {
    let row: PrincipalRow = sqlx::query_as(&format!(
        "INSERT INTO ward.principals (id, kind, name) VALUES ($1, $2, $3) RETURNING {PRINCIPAL_COLUMNS}"
    ))
    .bind(Uuid::new_v4())
    .bind(e.kind.as_str())
    .bind(e.name.as_str())
    .fetch_one(&mut *conn)
    .await?;
    let principal = PrincipalRecord::from_row(row)?;
    if e.kind.has_user_account() {
        let display_name = match &e.display_name {
            Some(d) => d.clone(),
            None => DisplayName::parse(e.name.as_str()).map_err(|d| {
                super::invalid("name", crate::error::reasons::PRINCIPAL_NAME_INVALID, d)
            })?,
        };
        sqlx::query("INSERT INTO ward.users (principal_id, display_name) VALUES ($1, $2)")
            .bind(principal.id)
            .bind(display_name.as_str())
            .execute(&mut *conn)
            .await?;
    }
    Ok(principal)
}

/// Revoke a principal, and with it every live credential and session of it. Monotonic and
/// idempotent. Lock order: the principal row, then its credentials and sessions.
pub async fn revoke(pool: &PgPool, actor: Option<Uuid>, id: Uuid) -> Result<Revoked> {
    let mut tx = begin(pool).await?;
    let principal = lock_principal(&mut tx, id).await?;
    if principal.revoked_at.is_some() {
        return Ok(Revoked {
            changed: false,
            revocation_generation: principal.revocation_generation,
        });
    }
    sqlx::query("UPDATE ward.principals SET revoked_at = statement_timestamp() WHERE id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    let credentials = sqlx::query(
        "UPDATE ward.credentials SET revoked_at = statement_timestamp()
         WHERE principal_id = $1 AND revoked_at IS NULL",
    )
    .bind(id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    let sessions = sqlx::query(
        "UPDATE ward.sessions SET revoked_at = statement_timestamp()
         WHERE principal_id = $1 AND revoked_at IS NULL",
    )
    .bind(id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    let generation = bump_revocation_generation(&mut tx, id).await?;
    audit::record(
        &mut tx,
        "principal.revoked",
        actor,
        Some(id),
        json!({
            "revocation_generation": generation,
            "credentials_revoked": credentials,
            "sessions_revoked": sessions,
        }),
    )
    .await?;
    lychd_runtime::refusal::commit(tx).await?;
    Ok(Revoked {
        changed: true,
        revocation_generation: generation,
    })
}

/// Principals by id, after `after`.
pub async fn list(pool: &PgPool, size: u32, after: Option<Uuid>) -> Result<Page<PrincipalRecord>> {
    let rows: Vec<PrincipalRow> = sqlx::query_as(&format!(
        "SELECT {PRINCIPAL_COLUMNS} FROM ward.principals
         WHERE ($1::uuid IS NULL OR id > $1) ORDER BY id LIMIT $2"
    ))
    .bind(after)
    .bind(i64::from(size) + 1)
    .fetch_all(pool)
    .await?;
    let records = rows
        .into_iter()
        .map(PrincipalRecord::from_row)
        .collect::<Result<Vec<_>>>()?;
    Ok(paginate(records, size, |p| {
        paging::uuid_token(List::Principals, p.id)
    }))
}
