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
use crate::domain::kinds::CredentialKind;
use crate::domain::{lifetime, secret};
use crate::error::{Entity, Result, WardError};
use lychd_auth::grammar::Audiences;

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
    /// Seconds from the exchange to `expires_at`, by the database clock (rounded down).
    pub lifetime_secs: u32,
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
    insert_as(conn, Uuid::new_v4(), principal_id, kind, ttl_secs).await
}

/// [`insert`] under a chosen id.
async fn insert_as(
    conn: &mut PgConnection,
    id: Uuid,
    principal_id: Uuid,
    kind: CredentialKind,
    ttl_secs: u32,
) -> Result<IssuedCredential> {
    let minted = secret::mint_credential()?;
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
    lychd_runtime::refusal::commit(tx).await?;
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

/// The id of the credential that the rotation of `credential_id` named `request_id` creates:
/// derived from the two, so a repeated rotation recognises the credential it made.
pub fn rotation_id(credential_id: Uuid, request_id: &str) -> Uuid {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"lychd-ward-rotation-v1\0");
    h.update(credential_id.as_bytes());
    h.update(request_id.as_bytes());
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// Replace a credential: a new one of the same kind and lifetime, the old one and its sessions
/// revoked. Lock order: the principal row, then the credential.
///
/// Under a `request_id` the new credential's id is [`rotation_id`] of the old one and the
/// request id. Repeating the rotation after it took effect (its answer lost:
/// `OUTCOME_UNKNOWN`) finds the old credential revoked and replaced by exactly that id; while
/// that new credential was never exchanged and is neither revoked nor expired, the repeat
/// rotates *it* in turn (under the same request id) and answers the result — a fresh secret,
/// the lost one revoked with the credential it opened. Digests stay immutable and Ward keeps
/// no secret. A chain of repeats is followed at most [`MAX_REPEATS`] links.
pub async fn rotate(
    pool: &PgPool,
    actor: Option<Uuid>,
    credential_id: Uuid,
    request_id: Option<&str>,
) -> Result<IssuedCredential> {
    let mut tx = begin(pool).await?;
    let principal_id = owner_of(&mut tx, credential_id).await?;
    lock_live_principal(&mut tx, principal_id).await?;
    // Read after the lock: sees every change committed while this transaction waited.
    let mut target = credential_id;
    let mut links = 0;
    let (kind, lifetime_secs) = loop {
        let (kind, revoked, exchanged, expired, lifetime_secs, replaced_by): (
            String,
            bool,
            bool,
            bool,
            f64,
            Option<Uuid>,
        ) = sqlx::query_as(
            "SELECT kind, revoked_at IS NOT NULL, exchanged_at IS NOT NULL,
                    expires_at <= statement_timestamp(),
                    extract(epoch FROM expires_at - created_at)::float8, replaced_by
             FROM ward.credentials WHERE id = $1 AND principal_id = $2",
        )
        .bind(target)
        .bind(principal_id)
        .fetch_one(&mut *tx)
        .await?;
        if !revoked {
            // A repeat may only rotate a successor nobody has used.
            if links > 0 && (exchanged || expired) {
                return Err(WardError::CredentialRevoked);
            }
            break (kind, lifetime_secs);
        }
        // Revoked: the same rotation repeated, or refused.
        match (request_id, replaced_by) {
            (Some(r), Some(next)) if next == rotation_id(target, r) && links < MAX_REPEATS => {
                target = next;
                links += 1;
            }
            _ => return Err(WardError::CredentialRevoked),
        }
    };
    let kind = CredentialKind::parse(&kind).ok_or_else(|| {
        WardError::Database(sqlx::Error::Decode(
            format!("unknown credential kind in ward.credentials {target}").into(),
        ))
    })?;
    // The stored lifetime is whole seconds of at most the kind's cap.
    let ttl = (lifetime_secs.round() as u32).max(1);
    let new_id = request_id.map_or_else(Uuid::new_v4, |r| rotation_id(target, r));
    let issued = insert_as(&mut tx, new_id, principal_id, kind, ttl).await?;
    let sessions = revoke_locked(&mut tx, target).await?.unwrap_or(0);
    sqlx::query("UPDATE ward.credentials SET replaced_by = $2 WHERE id = $1")
        .bind(target)
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
            "credential_id": target,
            "replaced_by": issued.id,
            "kind": kind.as_str(),
            "sessions_revoked": sessions,
            "revocation_generation": generation,
            "repeated_from": (links > 0).then_some(credential_id),
        }),
    )
    .await?;
    lychd_runtime::refusal::commit(tx).await?;
    Ok(issued)
}

/// How many links of repeated rotations [`rotate`] follows at most.
pub const MAX_REPEATS: usize = 16;

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
    lychd_runtime::refusal::commit(tx).await?;
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
    exchange_decoded(pool, credential, ttl_secs, Ok(audiences.clone())).await
}

/// [`exchange`] with the audiences as they decoded: bad ones (`Err`, the refusal to answer) are
/// answered only once the credential is known good, so a caller whose credential
/// authenticates nobody hears the refusal of its credential whatever else it sent. Nothing
/// changes either way (an enrollment credential stays unused).
pub async fn exchange_decoded(
    pool: &PgPool,
    credential: &str,
    ttl_secs: u32,
    audiences: std::result::Result<Audiences, WardError>,
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
    let audiences = &match audiences {
        Ok(audiences) => audiences,
        Err(invalid) => {
            tx.rollback().await?;
            return Err(invalid);
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
    let (session_expires_at, lifetime_secs): (OffsetDateTime, i64) = sqlx::query_as(
        "INSERT INTO ward.sessions (id, digest, principal_id, credential_id, expires_at, audiences)
         VALUES ($1, $2, $3, $4, least(statement_timestamp() + make_interval(secs => $5), $6), $7)
         RETURNING expires_at,
             floor(extract(epoch FROM expires_at - statement_timestamp()))::bigint",
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
    lychd_runtime::refusal::commit(tx).await?;
    Ok(NewSession {
        id: session_id,
        token: minted.secret,
        expires_at: session_expires_at,
        lifetime_secs: u32::try_from(lifetime_secs.max(0)).unwrap_or(u32::MAX),
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
