//! Credentials: issue, rotate, revoke, and exchange for a session.
//!
//! A credential row keeps only the SHA-256 digest of its secret, with its kind, protocol,
//! issuer (this Ward's installation id), audience (`ward`) and lifetime.

use secrecy::SecretString;
use serde_json::json;
use sqlx::postgres::{PgConnection, PgPool};
use time::OffsetDateTime;
use uuid::Uuid;

use super::principals::Revoked;
use super::{
    PrincipalRecord, audit, begin, bump_revocation_generation, lock_live_principal, lock_principal,
};
use crate::domain::decision::{self, CredentialFacts, ExchangeRefusal};
use crate::domain::grammar::Audiences;
use crate::domain::kinds::CredentialKind;
use crate::domain::{lifetime, secret};
use crate::error::{Entity, Result, WardError};

/// The protocol of every credential Ward issues: an opaque secret checked by SHA-256 digest.
pub const PROTOCOL: &str = "lychd-opaque-sha256-v1";
/// The audience of every credential Ward issues: Ward's own `ExchangeCredential`.
pub const AUDIENCE: &str = "ward";

/// A credential just issued; its secret is shown this once.
#[derive(Debug)]
pub struct IssuedCredential {
    pub id: Uuid,
    pub principal_id: Uuid,
    pub kind: CredentialKind,
    pub secret: SecretString,
    pub expires_at: OffsetDateTime,
}

/// A session just created by an exchange; its token is shown this once.
#[derive(Debug)]
pub struct NewSession {
    pub id: Uuid,
    pub token: SecretString,
    pub expires_at: OffsetDateTime,
    /// The audiences the session is bound to (sorted).
    pub audiences: Vec<String>,
    pub principal: PrincipalRecord,
}

/// Insert a credential for a principal whose row this transaction has locked.
pub(crate) async fn insert(
    conn: &mut PgConnection,
    principal_id: Uuid,
    kind: CredentialKind,
    ttl_secs: u32,
) -> Result<IssuedCredential> {
    let minted = secret::mint_credential()?;
    let id = Uuid::new_v4();
    let expires_at: OffsetDateTime = sqlx::query_scalar(
        "INSERT INTO ward.credentials (id, principal_id, digest, kind, protocol, issuer, audience, expires_at)
         SELECT $1, $2, $3, $4, $5, issuer.id, $6, now() + make_interval(secs => $7)
         FROM ward.issuer
         RETURNING expires_at",
    )
    .bind(id)
    .bind(principal_id)
    .bind(&minted.digest[..])
    .bind(kind.as_str())
    .bind(PROTOCOL)
    .bind(AUDIENCE)
    .bind(f64::from(ttl_secs))
    .fetch_one(&mut *conn)
    .await?;
    Ok(IssuedCredential {
        id,
        principal_id,
        kind,
        secret: minted.secret,
        expires_at,
    })
}

/// Issue a credential to a live principal. `ttl_secs` is already resolved by
/// [`lifetime::credential_ttl`]. Lock order: the principal row.
pub async fn issue(
    pool: &PgPool,
    actor: Option<Uuid>,
    principal_id: Uuid,
    kind: CredentialKind,
    ttl_secs: u32,
) -> Result<IssuedCredential> {
    let mut tx = begin(pool).await?;
    let principal = lock_live_principal(&mut tx, principal_id).await?;
    let issued = insert(&mut tx, principal.id, kind, ttl_secs).await?;
    audit::record(
        &mut tx,
        "credential.issued",
        actor,
        Some(principal.id),
        json!({ "credential_id": issued.id, "kind": kind.as_str(), "ttl_seconds": ttl_secs }),
    )
    .await?;
    tx.commit().await?;
    Ok(issued)
}

/// The principal a credential belongs to (immutable, so read without a lock).
async fn owner_of(conn: &mut PgConnection, credential_id: Uuid) -> Result<Uuid> {
    sqlx::query_scalar("SELECT principal_id FROM ward.credentials WHERE id = $1")
        .bind(credential_id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(WardError::NotFound(Entity::Credential))
}

/// Revoke the credential and its live sessions (the principal row is locked by the caller).
/// Returns how many sessions were revoked, or `None` if the credential was already revoked.
async fn revoke_locked(conn: &mut PgConnection, credential_id: Uuid) -> Result<Option<u64>> {
    let changed = sqlx::query(
        "UPDATE ward.credentials SET revoked_at = statement_timestamp()
         WHERE id = $1 AND revoked_at IS NULL",
    )
    .bind(credential_id)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1;
    if !changed {
        return Ok(None);
    }
    let sessions = sqlx::query(
        "UPDATE ward.sessions SET revoked_at = statement_timestamp()
         WHERE credential_id = $1 AND revoked_at IS NULL",
    )
    .bind(credential_id)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    Ok(Some(sessions))
}

/// Replace a credential: a new one of the same kind and lifetime, the old one and its sessions
/// revoked. Lock order: the principal row, then the credential.
pub async fn rotate(
    pool: &PgPool,
    actor: Option<Uuid>,
    credential_id: Uuid,
) -> Result<IssuedCredential> {
    let mut tx = begin(pool).await?;
    let principal_id = owner_of(&mut tx, credential_id).await?;
    lock_live_principal(&mut tx, principal_id).await?;
    // Read after the lock: sees every change committed while this transaction waited.
    let (kind, revoked, lifetime_secs): (String, bool, f64) = sqlx::query_as(
        "SELECT kind, revoked_at IS NOT NULL, extract(epoch FROM expires_at - created_at)::float8
         FROM ward.credentials WHERE id = $1",
    )
    .bind(credential_id)
    .fetch_one(&mut *tx)
    .await?;
    if revoked {
        return Err(WardError::CredentialRevoked);
    }
    let kind = CredentialKind::parse(&kind).ok_or_else(|| {
        WardError::Database(sqlx::Error::Decode(
            format!("unknown credential kind in ward.credentials {credential_id}").into(),
        ))
    })?;
    // The stored lifetime is whole seconds of at most the kind's cap.
    let ttl = (lifetime_secs.round() as u32).max(1);
    let issued = insert(&mut tx, principal_id, kind, ttl).await?;
    let sessions = revoke_locked(&mut tx, credential_id).await?.unwrap_or(0);
    sqlx::query("UPDATE ward.credentials SET replaced_by = $2 WHERE id = $1")
        .bind(credential_id)
        .bind(issued.id)
        .execute(&mut *tx)
        .await?;
    let generation = bump_revocation_generation(&mut tx, principal_id).await?;
    audit::record(
        &mut tx,
        "credential.rotated",
        actor,
        Some(principal_id),
        json!({
            "credential_id": credential_id,
            "replaced_by": issued.id,
            "kind": kind.as_str(),
            "sessions_revoked": sessions,
            "revocation_generation": generation,
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(issued)
}

/// Revoke a credential and its sessions. Monotonic and idempotent. Lock order: the principal
/// row, then the credential and its sessions.
pub async fn revoke(pool: &PgPool, actor: Option<Uuid>, credential_id: Uuid) -> Result<Revoked> {
    let mut tx = begin(pool).await?;
    let principal_id = owner_of(&mut tx, credential_id).await?;
    let principal = lock_principal(&mut tx, principal_id).await?;
    let Some(sessions) = revoke_locked(&mut tx, credential_id).await? else {
        return Ok(Revoked {
            changed: false,
            revocation_generation: principal.revocation_generation,
        });
    };
    let generation = bump_revocation_generation(&mut tx, principal_id).await?;
    audit::record(
        &mut tx,
        "credential.revoked",
        actor,
        Some(principal_id),
        json!({
            "credential_id": credential_id,
            "sessions_revoked": sessions,
            "revocation_generation": generation,
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(Revoked {
        changed: true,
        revocation_generation: generation,
    })
}

/// Exchange a credential secret for a session of `ttl_secs` (already resolved by
/// [`lifetime::session_ttl`]; the credential's expiry caps it), bound to `audiences`.
/// Enrollment credentials work once. Lock order: the principal row, then the credential.
///
/// A refused exchange changes nothing and writes nothing: its caller counts it
/// ([`super::strangers`]), so a flood of junk credentials cannot grow the audit.
pub async fn exchange(
    pool: &PgPool,
    credential: &str,
    ttl_secs: u32,
    audiences: &Audiences,
) -> Result<NewSession> {
    let ttl_secs = lifetime::session_ttl(ttl_secs);
    // Not a credential's shape: unknown, without any database work.
    if !secret::well_formed(secret::CREDENTIAL_PREFIX, credential) {
        return Err(WardError::Refused(ExchangeRefusal::CredentialUnknown));
    }
    let mut tx = begin(pool).await?;
    let found: Option<(Uuid, Uuid)> =
        sqlx::query_as("SELECT id, principal_id FROM ward.credentials WHERE digest = $1")
            .bind(&secret::digest(credential)[..])
            .fetch_optional(&mut *tx)
            .await?;
    let Some((credential_id, principal_id)) = found else {
        return refuse(tx, ExchangeRefusal::CredentialUnknown).await;
    };
    let principal = lock_principal(&mut tx, principal_id).await?;
    // Read after the lock (a fresh statement snapshot): a revocation or exchange committed
    // while we waited is seen.
    let (kind, ours, revoked, expired, exchanged, expires_at): (
        String,
        bool,
        bool,
        bool,
        bool,
        OffsetDateTime,
    ) = sqlx::query_as(
        "SELECT c.kind,
                c.protocol = $2 AND c.audience = $3 AND c.issuer = (SELECT id FROM ward.issuer),
                c.revoked_at IS NOT NULL,
                c.expires_at <= statement_timestamp(),
                c.exchanged_at IS NOT NULL,
                c.expires_at
         FROM ward.credentials c WHERE c.id = $1",
    )
    .bind(credential_id)
    .bind(PROTOCOL)
    .bind(AUDIENCE)
    .fetch_one(&mut *tx)
    .await?;
    let facts = CredentialKind::parse(&kind).map(|kind| CredentialFacts {
        kind,
        ours,
        revoked,
        expired,
        exchanged,
        principal_revoked: principal.revoked_at.is_some(),
    });
    let kind = match (decision::exchange(facts.as_ref()), facts) {
        (Ok(()), Some(facts)) => facts.kind,
        (Err(refusal), _) => {
            return refuse(tx, refusal).await;
        }
        (Ok(()), None) => {
            return refuse(tx, ExchangeRefusal::CredentialUnknown).await;
        }
    };
    sqlx::query(
        "UPDATE ward.credentials SET exchanged_at = statement_timestamp()
         WHERE id = $1 AND exchanged_at IS NULL",
    )
    .bind(credential_id)
    .execute(&mut *tx)
    .await?;
    let minted = secret::mint_session()?;
    let session_id = Uuid::new_v4();
    let session_expires_at: OffsetDateTime = sqlx::query_scalar(
        "INSERT INTO ward.sessions (id, digest, principal_id, credential_id, expires_at, audiences)
         VALUES ($1, $2, $3, $4, least(statement_timestamp() + make_interval(secs => $5), $6), $7)
         RETURNING expires_at",
    )
    .bind(session_id)
    .bind(&minted.digest[..])
    .bind(principal_id)
    .bind(credential_id)
    .bind(f64::from(ttl_secs))
    .bind(expires_at)
    .bind(audiences.as_slice())
    .fetch_one(&mut *tx)
    .await?;
    audit::record(
        &mut tx,
        "session.exchanged",
        Some(principal_id),
        Some(principal_id),
        json!({
            "credential_id": credential_id,
            "credential_kind": kind.as_str(),
            "session_id": session_id,
            "audiences": audiences.as_slice(),
            "policy_generation": principal.policy_generation,
            "revocation_generation": principal.revocation_generation,
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(NewSession {
        id: session_id,
        token: minted.secret,
        expires_at: session_expires_at,
        audiences: audiences.as_slice().to_vec(),
        principal,
    })
}

/// Refuse, changing nothing (the transaction rolls back when dropped).
async fn refuse<T>(
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    refusal: ExchangeRefusal,
) -> Result<T> {
    tx.rollback().await?;
    Err(WardError::Refused(refusal))
}
