//! What every handler asks before it calls a service: the caller's authority (through
//! `ServeContext::authorize`, i.e. Ward's own decision), its principal id, and where the call
//! came from.
//!
//! Invariant: asks and answers only; decides nothing and reaches no store.

use lychd_runtime::auth::{Action, Principal};
use lychd_runtime::server::ServeContext;
use tonic::{Request, Status};
use uuid::Uuid;

use crate::actions;
use crate::domain::decision::Reason;
use crate::error::WardError;
use crate::service::consent::{Consents, effect_object};
use crate::service::decisions::{Authentication, Decisions};

/// What an administrator holds.
pub const ADMINISTER: (Action, &str) = (actions::ADMINISTER, "principal:*");

/// Where a call came from, as refusals are counted: the peer's IP address.
pub fn source<T>(request: &Request<T>) -> String {
    request
        .remote_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The caller must hold `action` on `object`; returns its principal id (for the audit).
pub async fn caller<T>(
    ctx: &ServeContext,
    request: &Request<T>,
    (action, object): (Action, &str),
) -> Result<Option<Uuid>, Status> {
    let principal = ctx.authorize(request, action, object).await?;
    Ok(Uuid::try_parse(&principal.id).ok())
}

/// A resolved principal's id, which Ward always issues as a UUID.
pub fn principal_uuid(p: &Principal) -> Result<Uuid, Status> {
    Uuid::try_parse(&p.id).map_err(|_| {
        tracing::error!("ward resolved a principal whose id is not a uuid");
        crate::error::REFUSALS.refuse(lychd_runtime::refusal::common::INTERNAL)
    })
}

/// The caller must hold `action` on the effect owner of consent `id` (asked immediately
/// before the change): its principal id. An unknown consent is not found.
pub async fn on_consent<T>(
    ctx: &ServeContext,
    consents: &Consents,
    request: &Request<T>,
    action: Action,
    id: Uuid,
) -> Result<Uuid, Status> {
    let owner = consents.owner_of(id).await?;
    let principal = ctx
        .authorize(request, action, &effect_object(&owner))
        .await?;
    principal_uuid(&principal)
}

/// A caller that authenticates nobody: counted, and refused as the auth layer would.
pub fn stranger<T>(decisions: &Decisions, request: &Request<T>, reason: Reason) -> Status {
    decisions.count_stranger(&source(request), reason);
    lychd_auth::AuthError::Unauthenticated(reason.as_str().to_owned()).into_status()
}

/// Bad input to a self-authenticating method: answered only to a caller whose bearer
/// authenticates someone at Ward (an answer that says no more than "your input is bad"); any
/// other caller is refused as a stranger.
pub async fn invalid<T>(decisions: &Decisions, request: &Request<T>, invalid: WardError) -> Status {
    let bearer = match lychd_auth::bearer(request) {
        Ok(bearer) => bearer,
        Err(refused) => return refused,
    };
    match decisions.authenticate(bearer).await {
        Ok(Authentication::Authenticated(_)) => invalid.into(),
        Ok(Authentication::Refused(reason)) => stranger(decisions, request, reason),
        Err(e) => e.into(),
    }
}
