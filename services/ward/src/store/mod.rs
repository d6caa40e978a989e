//! SQL on the `ward` schema, one module per aggregate. Nothing here decides a rule the domain
//! owns: the store reads facts and applies changes; `domain` says what the facts mean.
//!
//! Isolation and lock order (every transaction that decides authority):
//! - Decisions (`decisions::authorize`, `decisions::authenticate`) are ONE statement in its own
//!   implicit READ COMMITTED transaction: one snapshot, the database clock, no lock, no cache —
//!   one statement per batch of questions asked together (`decisions::Resolver`, ADR 0006).
//!   Their audit records are queued on a `decision_log` before the answer and written in
//!   batches behind it (ADR 0004): the office's for decisions asked over gRPC, the verifier's
//!   own for Ward's own checks.
//! - Every administrative change, and every exchange, runs in an explicit READ COMMITTED
//!   transaction that first locks the principal row (`SELECT … FOR NO KEY UPDATE`), then reads and
//!   changes that principal's credentials, sessions or assignments, bumps its generation and
//!   appends to the audit, then commits. Child rows are read only after the principal lock is
//!   held, so each such read (a new statement snapshot) sees every change committed while the
//!   transaction waited. A decision's single snapshot therefore sees all of a change or none.
//! - Bootstrap takes `LOCK TABLE ward.principals IN EXCLUSIVE MODE` first: one wins.

pub mod assignments;
pub mod audit;
pub mod bootstrap;
pub mod consents;
pub mod credentials;
pub mod decision_log;
pub mod decisions;
pub mod metrics;
pub mod preauth;
pub mod principals;
pub mod promotions;
pub mod proposals;
pub mod retention;
pub mod sessions;
pub mod strangers;

use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{Postgres, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::kinds::PrincipalKind;
use crate::error::{Entity, Result, WardError};

/// Bad input naming one field with its field-specific `reason` (nothing was changed).
pub(crate) fn invalid(
    field: &str,
    reason: lychd_runtime::refusal::Reason,
    description: &'static str,
) -> WardError {
    let mut v = lychd_runtime::refusal::Violations::new();
    v.push(field, reason, description);
    WardError::InvalidArgument(v)
}

/// What every authority-deciding transaction starts with.
pub(crate) async fn begin(pool: &PgPool) -> Result<Transaction<'static, Postgres>> {
    Ok(pool
        .begin_with("BEGIN ISOLATION LEVEL READ COMMITTED")
        .await?)
}

/// A principal as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalRecord {
    pub id: Uuid,
    pub kind: PrincipalKind,
    pub name: String,
    pub policy_generation: i64,
    pub revocation_generation: i64,
    pub revoked_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

/// Columns of `ward.principals` in the order [`PrincipalRow`] reads them.
pub(crate) const PRINCIPAL_COLUMNS: &str =
    "id, kind, name, policy_generation, revocation_generation, revoked_at, created_at";

pub(crate) type PrincipalRow = (
    Uuid,
    String,
    String,
    i64,
    i64,
    Option<OffsetDateTime>,
    OffsetDateTime,
);

impl PrincipalRecord {
    pub(crate) fn from_row(row: PrincipalRow) -> Result<Self> {
        let (id, kind, name, policy_generation, revocation_generation, revoked_at, created_at) =
            row;
        let kind = PrincipalKind::parse(&kind).ok_or_else(|| {
            WardError::Database(sqlx::Error::Decode(
                format!("unknown principal kind in ward.principals {id}").into(),
            ))
        })?;
        Ok(PrincipalRecord {
            id,
            kind,
            name,
            policy_generation,
            revocation_generation,
            revoked_at,
            created_at,
        })
    }
}

/// Lock the principal row (the serialization point of every change to it) and read it.
///
/// `FOR NO KEY UPDATE`: it excludes every other change to the principal (they all take this
/// lock first, or update the row), but not the `FOR KEY SHARE` locks the foreign-key checks of
/// rows that merely name the principal take (a consent it proposes, a record it appends): those
/// never wait for an administrative change of the principal. A principal's key (its id) never
/// changes, so no stronger lock is needed.
pub(crate) async fn lock_principal(conn: &mut PgConnection, id: Uuid) -> Result<PrincipalRecord> {
    let row: Option<PrincipalRow> = sqlx::query_as(&format!(
        "SELECT {PRINCIPAL_COLUMNS} FROM ward.principals WHERE id = $1 FOR NO KEY UPDATE"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    PrincipalRecord::from_row(row.ok_or(WardError::NotFound(Entity::Principal))?)
}

/// Lock a principal that must not be revoked (to issue or assign to it).
pub(crate) async fn lock_live_principal(
    conn: &mut PgConnection,
    id: Uuid,
) -> Result<PrincipalRecord> {
    let p = lock_principal(conn, id).await?;
    if p.revoked_at.is_some() {
        return Err(WardError::PrincipalRevoked);
    }
    Ok(p)
}

/// Bump the revocation generation of a principal whose row this transaction has locked.
pub(crate) async fn bump_revocation_generation(conn: &mut PgConnection, id: Uuid) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "UPDATE ward.principals SET revocation_generation = revocation_generation + 1
         WHERE id = $1 RETURNING revocation_generation",
    )
    .bind(id)
    .fetch_one(&mut *conn)
    .await?)
}

/// Bump the policy generation of a principal whose row this transaction has locked.
pub(crate) async fn bump_policy_generation(conn: &mut PgConnection, id: Uuid) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "UPDATE ward.principals SET policy_generation = policy_generation + 1
         WHERE id = $1 RETURNING policy_generation",
    )
    .bind(id)
    .fetch_one(&mut *conn)
    .await?)
}

/// One page of a keyset-paginated list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Empty on the last page.
    pub next_page_token: String,
}

/// Fetch `size + 1` rows, keep `size`; the extra row only says whether a next page exists.
pub(crate) fn paginate<T>(mut rows: Vec<T>, size: u32, token: impl Fn(&T) -> String) -> Page<T> {
    let size = size as usize;
    let more = rows.len() > size;
    rows.truncate(size);
    let next_page_token = match (more, rows.last()) {
        (true, Some(last)) => token(last),
        _ => String::new(),
    };
    Page {
        items: rows,
        next_page_token,
    }
}
