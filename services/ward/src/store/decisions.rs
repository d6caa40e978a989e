//! Decisions: resolve a session token and, for authorization, answer one question — in one
//! statement (`sql/resolve.sql`), then record the decision in the audit.
//!
//! Two round trips on one connection: the resolving statement (a READ COMMITTED snapshot: a
//! revocation whose commit returned before it started is seen), then the audit insert with
//! asynchronous commit ([`audit::record_decision`]). The answer is given only after both.
//! Successful authentications are not audited (the authorization that follows records the
//! principal and generations); refused ones are.

use serde_json::json;
use sqlx::postgres::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{PrincipalRecord, audit};
use crate::domain::decision::{self, Reason, SessionFacts};
use crate::domain::grammar::Object;
use crate::domain::secret;
use crate::error::Result;

const RESOLVE_SQL: &str = include_str!("sql/resolve.sql");

/// One authorization question about a session token.
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    /// The session token (never logged, never stored: only its digest is looked up).
    pub token: &'a str,
    pub action: &'a str,
    pub object: &'a str,
    pub audience: &'a str,
    pub purpose: &'a str,
    /// Deny unless the principal's policy generation is still this one.
    pub expected_policy_generation: Option<i64>,
    /// The principal asking about the token (the `Authorize` caller); `None` when Ward decides
    /// for its own API.
    pub asked_by: Option<Uuid>,
}

/// The answer to a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRecord {
    pub reason: Reason,
    /// The principal, when the token authenticated it.
    pub principal: Option<PrincipalRecord>,
    pub policy_generation: i64,
    pub revocation_generation: i64,
}

impl DecisionRecord {
    pub fn allowed(&self) -> bool {
        self.reason.allowed()
    }
}

/// A session token that authenticates its principal now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub principal: PrincipalRecord,
    pub session_id: Uuid,
    pub session_expires_at: OffsetDateTime,
}

/// The answer to "who holds this token?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authentication {
    Authenticated(Resolved),
    /// An authentication failure reason (see [`Reason::is_authentication_failure`]).
    Refused(Reason),
}

#[derive(sqlx::FromRow)]
struct Row {
    session_id: Uuid,
    session_expires_at: OffsetDateTime,
    session_revoked: bool,
    session_expired: bool,
    credential_revoked: bool,
    credential_expired: bool,
    principal_id: Uuid,
    principal_kind: String,
    principal_name: String,
    policy_generation: i64,
    revocation_generation: i64,
    principal_revoked_at: Option<OffsetDateTime>,
    principal_created_at: OffsetDateTime,
    assigned: bool,
}

impl Row {
    fn facts(&self) -> SessionFacts {
        SessionFacts {
            session_revoked: self.session_revoked,
            session_expired: self.session_expired,
            credential_revoked: self.credential_revoked,
            credential_expired: self.credential_expired,
            principal_revoked: self.principal_revoked_at.is_some(),
            policy_generation: self.policy_generation,
        }
    }

    fn principal(&self) -> Result<PrincipalRecord> {
        PrincipalRecord::from_row((
            self.principal_id,
            self.principal_kind.clone(),
            self.principal_name.clone(),
            self.policy_generation,
            self.revocation_generation,
            self.principal_revoked_at,
            self.principal_created_at,
        ))
    }
}

/// Resolve `token` (and the question, when `action` is given) on `conn`.
async fn resolve(
    conn: &mut sqlx::PgConnection,
    token: &str,
    question: Option<(&str, &str, &str, &str)>,
) -> Result<Option<Row>> {
    // A malformed token is unknown without asking the database.
    if !secret::well_formed(secret::SESSION_PREFIX, token) {
        return Ok(None);
    }
    let (action, object, audience, purpose) = match question {
        Some((a, o, au, p)) => (Some(a), Some(o), Some(au), Some(p)),
        None => (None, None, None, None),
    };
    // Objects outside the grammar match no assignment (assignments are checked on the way in).
    let wildcard = object
        .and_then(|o| Object::parse(o).ok())
        .map(|o| o.type_wildcard());
    Ok(sqlx::query_as::<_, Row>(RESOLVE_SQL)
        .bind(&secret::digest(token)[..])
        .bind(action)
        .bind(object)
        .bind(wildcard)
        .bind(audience)
        .bind(purpose)
        .fetch_optional(&mut *conn)
        .await?)
}

/// Who holds `token`, now?
pub async fn authenticate(pool: &PgPool, token: &str) -> Result<Authentication> {
    let mut conn = pool.acquire().await?;
    let row = resolve(&mut conn, token, None).await?;
    let reason = decision::authenticate(row.as_ref().map(Row::facts).as_ref());
    match row {
        Some(row) if reason.allowed() => Ok(Authentication::Authenticated(Resolved {
            principal: row.principal()?,
            session_id: row.session_id,
            session_expires_at: row.session_expires_at,
        })),
        row => {
            audit::record_decision(
                &mut conn,
                "authenticate.refused",
                None,
                row.as_ref().map(|r| r.principal_id),
                json!({
                    "reason": reason.as_str(),
                    "session_id": row.as_ref().map(|r| r.session_id),
                }),
            )
            .await?;
            Ok(Authentication::Refused(reason))
        }
    }
}

/// May the holder of `q.token` do `q.action` on `q.object` for `q.audience` and `q.purpose`,
/// now? Every decision, allow or deny, is audited before it is returned.
pub async fn authorize(pool: &PgPool, q: &Question<'_>) -> Result<DecisionRecord> {
    let mut conn = pool.acquire().await?;
    let row = resolve(
        &mut conn,
        q.token,
        Some((q.action, q.object, q.audience, q.purpose)),
    )
    .await?;
    let reason = decision::authorize(
        row.as_ref().map(Row::facts).as_ref(),
        row.as_ref().is_some_and(|r| r.assigned),
        q.expected_policy_generation,
    );
    let (principal, policy_generation, revocation_generation) = match &row {
        Some(row) if !reason.is_authentication_failure() => (
            Some(row.principal()?),
            row.policy_generation,
            row.revocation_generation,
        ),
        _ => (None, 0, 0),
    };
    audit::record_decision(
        &mut conn,
        if reason.allowed() {
            "authorize.allow"
        } else {
            "authorize.deny"
        },
        q.asked_by,
        row.as_ref().map(|r| r.principal_id),
        json!({
            "reason": reason.as_str(),
            "action": q.action,
            "object": q.object,
            "audience": q.audience,
            "purpose": q.purpose,
            "session_id": row.as_ref().map(|r| r.session_id),
            "expected_policy_generation": q.expected_policy_generation,
            "policy_generation": row.as_ref().map(|r| r.policy_generation),
            "revocation_generation": row.as_ref().map(|r| r.revocation_generation),
        }),
    )
    .await?;
    Ok(DecisionRecord {
        reason,
        principal,
        policy_generation,
        revocation_generation,
    })
}
