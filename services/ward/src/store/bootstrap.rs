//! The first operator: created once, with `ward:administer` on `principal:*` and a standing
//! credential shown once.

use secrecy::ExposeSecret;
use serde_json::json;
use sqlx::postgres::PgPool;
use uuid::Uuid;

use super::{audit, begin, bump_policy_generation, credentials, principals};
use crate::domain::kinds::{CredentialKind, PrincipalKind};
use crate::domain::lifetime;
use crate::error::{Result, WardError};
use lychd_auth::grammar::PrincipalName;

/// The operator Ward was bootstrapped with.
pub struct Bootstrapped {
    pub principal_id: Uuid,
    pub credential_id: Uuid,
    /// The operator's standing credential (shown once; only its digest is kept). Redacted in
    /// `Debug`.
    pub credential: String,
    pub expires_at: time::OffsetDateTime,
}

impl std::fmt::Debug for Bootstrapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bootstrapped")
            .field("principal_id", &self.principal_id)
            .field("credential_id", &self.credential_id)
            .field("credential", &"[redacted]")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The administration grant of the first operator.
pub const ADMINISTER: (&str, &str, &str, &str) = (
    crate::actions::ADMINISTER.name,
    "principal:*",
    crate::OFFICE.name(),
    "administer",
);

/// Create the first operator, a human principal named `name`, unless any principal exists.
///
/// One READ COMMITTED transaction that first takes `LOCK TABLE ward.principals IN EXCLUSIVE
/// MODE` (conflicts with every insert and row lock on principals, not with plain reads): of two
/// concurrent bootstraps, the second waits, then sees the first's principal and refuses.
pub async fn bootstrap(pool: &PgPool, name: &str) -> Result<Bootstrapped> {
    let name = PrincipalName::parse(name)
        .map_err(|d| super::invalid("name", crate::error::reasons::PRINCIPAL_NAME_INVALID, d))?;
    let mut tx = begin(pool).await?;
    sqlx::query("LOCK TABLE ward.principals IN EXCLUSIVE MODE")
        .execute(&mut *tx)
        .await?;
    let any: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM ward.principals)")
        .fetch_one(&mut *tx)
        .await?;
    if any {
        return Err(WardError::AlreadyBootstrapped);
    }
    let principal = principals::insert(
        &mut tx,
        &principals::Enrollment {
            kind: PrincipalKind::Human,
            name,
            display_name: None,
        },
    )
    .await?;
    // The new row is locked by this transaction already (it inserted it).
    let (action, object, audience, purpose) = ADMINISTER;
    sqlx::query(
        "INSERT INTO ward.assignments (id, principal_id, action, object, audience, purpose)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(Uuid::new_v4())
    .bind(principal.id)
    .bind(action)
    .bind(object)
    .bind(audience)
    .bind(purpose)
    .execute(&mut *tx)
    .await?;
    let policy_generation = bump_policy_generation(&mut tx, principal.id).await?;
    let ttl = lifetime::credential_ttl(CredentialKind::Standing, 0)
        .map_err(|d| super::invalid("ttl_seconds", crate::error::reasons::TTL_INVALID, d))?;
    let issued = credentials::insert(&mut tx, principal.id, CredentialKind::Standing, ttl).await?;
    audit::record(
        &mut tx,
        "ward.bootstrapped",
        None,
        Some(principal.id),
        json!({
            "name": principal.name,
            "credential_id": issued.id,
            "action": action,
            "object": object,
            "audience": audience,
            "purpose": purpose,
            "policy_generation": policy_generation,
        }),
    )
    .await?;
    lychd_runtime::refusal::commit(tx).await?;
    Ok(Bootstrapped {
        principal_id: principal.id,
        credential_id: issued.id,
        credential: issued.secret.expose_secret().to_owned(),
        expires_at: issued.expires_at,
    })
}

#[cfg(test)]
mod tests {
    use super::ADMINISTER;
    use lychd_auth::grammar::{Action, Audience, Object, Purpose};

    #[test]
    fn the_administration_grant_is_grammatical() {
        let (action, object, audience, purpose) = ADMINISTER;
        let action = Action::parse(action).unwrap();
        assert!(Object::parse(object).unwrap().is_type_wildcard());
        assert!(Audience::parse(audience).is_ok());
        assert!(Purpose::parse(purpose).is_ok());
        assert_eq!(
            action.verb(),
            purpose,
            "purpose is the verb, as ServeContext::authorize asks"
        );
    }
}
