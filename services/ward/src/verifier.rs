//! Ward's own answer to the [`Verifier`] question, straight from its tables: what the auth
//! layer and `ServeContext::authorize` use inside the Ward office. No cache: every call is one
//! fresh decision (plus its audit record).

use lychd_auth::{AuthError, Decision, Principal, Query, Verifier};
use sqlx::PgPool;

use crate::error::WardError;
use crate::store::PrincipalRecord;
use crate::store::decisions::{self, Authentication, DecisionRecord, Question};

/// Decides from Ward's own database.
#[derive(Clone)]
pub struct LocalVerifier {
    pool: PgPool,
}

impl LocalVerifier {
    pub fn new(pool: PgPool) -> Self {
        LocalVerifier { pool }
    }
}

impl std::fmt::Debug for LocalVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalVerifier")
    }
}

pub(crate) fn principal(p: &PrincipalRecord) -> Principal {
    Principal {
        id: p.id.to_string(),
        kind: p.kind.as_str().to_owned(),
        name: p.name.clone(),
        policy_generation: p.policy_generation,
        revocation_generation: p.revocation_generation,
    }
}

/// Nothing is allowed while Ward cannot read its own tables.
fn unavailable(e: WardError) -> AuthError {
    tracing::warn!(error = %e, "ward decision failed");
    AuthError::Unavailable("ward database unavailable".into())
}

#[tonic::async_trait]
impl Verifier for LocalVerifier {
    async fn authenticate(&self, token: &str, audience: &str) -> Result<Principal, AuthError> {
        match decisions::authenticate(&self.pool, token, audience)
            .await
            .map_err(unavailable)?
        {
            Authentication::Authenticated(resolved) => Ok(principal(&resolved.principal)),
            Authentication::Refused(reason) => {
                Err(AuthError::Unauthenticated(reason.as_str().to_owned()))
            }
        }
    }

    async fn authorize(&self, query: &Query<'_>) -> Result<Decision, AuthError> {
        let question = Question {
            token: query.token,
            action: query.action,
            object: query.object,
            audience: query.audience,
            purpose: query.purpose,
            expected_policy_generation: query.expected_policy_generation,
            asked_by: None,
        };
        let d = decisions::authorize(&self.pool, &question)
            .await
            .map_err(unavailable)?;
        Ok(decision(&d))
    }
}

pub(crate) fn decision(d: &DecisionRecord) -> Decision {
    Decision {
        allowed: d.allowed(),
        reason: d.reason.as_str().to_owned(),
        principal: d.principal.as_ref().map(principal),
        policy_generation: d.policy_generation,
        revocation_generation: d.revocation_generation,
    }
}
