//! Ward's own answer to the [`Verifier`] question, straight from its tables: what the auth
//! layer and `ServeContext::authorize` use inside the Ward office. No cache: every call is one
//! fresh decision; its audit record goes to the verifier's [`DecisionLog`] (queued before the
//! answer, written in batches behind it, like the records of the `Authorize` RPC; ADR 0004), and
//! a token that authenticates nobody is counted in the verifier's [`Tally`] instead, under
//! source `ward`. Questions asked together are resolved together ([`Resolver`]). Both writers
//! are flushed when the office stops serving (the runtime's [`Finishing`]), so a graceful
//! shutdown loses no record.

use std::sync::Arc;

use lychd_auth::{AuthError, Decision, Principal, Query, Verifier};
use lychd_runtime::server::Finishing;
use sqlx::PgPool;

use crate::error::WardError;
use crate::store::PrincipalRecord;
use crate::store::decision_log::DecisionLog;
use crate::store::decisions::{self, Authentication, DecisionRecord, Question, Resolver};
use crate::store::strangers::Tally;

/// Decides from Ward's own database.
#[derive(Clone)]
pub struct LocalVerifier {
    resolver: Resolver,
    log: DecisionLog,
    strangers: Arc<Tally>,
}

/// The source Ward's own verifier counts refusals under (the auth layer of Ward's API).
const SOURCE: &str = "ward";

impl LocalVerifier {
    /// Needs a tokio runtime (the writers of the decision log and of the tally run on it; they
    /// end when the last clone of the verifier is dropped). What they hold is written whenever
    /// `finishing` runs its flushes (the office stops serving).
    pub fn new(pool: PgPool, finishing: &Finishing) -> Self {
        let (strangers, _writer) = Tally::start(pool.clone());
        let (log, _writer) = DecisionLog::start(pool.clone());
        crate::service::metrics::observe_queue(&log, "local");
        let verifier = LocalVerifier {
            resolver: Resolver::start(pool),
            log,
            strangers: Arc::new(strangers),
        };
        let held = verifier.clone();
        finishing.on_finish(Arc::new(move || {
            let held = held.clone();
            Box::pin(async move {
                if let Err(e) = held.flush_counts().await {
                    tracing::warn!(error = %e, "ward's own decision records not flushed at exit");
                }
            })
        }));
        verifier
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
        match decisions::authenticate(&self.resolver, token, audience)
            .await
            .map_err(unavailable)?
        {
            Authentication::Authenticated(resolved) => Ok(principal(&resolved.principal)),
            Authentication::Refused(reason) => {
                self.strangers.count(SOURCE, reason.as_str());
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
        let started = std::time::Instant::now();
        let d = decisions::authorize(&self.resolver, &self.log, &question)
            .await
            .map_err(unavailable)?;
        crate::service::metrics::decided("local", started);
        if d.reason.is_authentication_failure() {
            self.strangers.count(SOURCE, d.reason.as_str());
        }
        Ok(decision(&d))
    }

    /// The tally of strangers and the decision records of Ward's own checks, written now.
    async fn flush_counts(&self) -> Result<(), AuthError> {
        let (counted, logged) = tokio::join!(self.strangers.flush(), self.log.flush());
        counted.map_err(unavailable)?;
        logged.map_err(unavailable)
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

#[cfg(test)]
mod tests {
    use crate::domain::secret;

    /// `lychd-auth` refuses tokens that are not Ward's session tokens without asking Ward: its
    /// idea of the shape must be Ward's.
    #[test]
    fn the_auth_layer_knows_the_shape_of_wards_session_tokens() {
        for _ in 0..100 {
            let minted = secret::mint_session().expect("randomness");
            let token = secrecy::ExposeSecret::expose_secret(&minted.secret);
            assert!(secret::well_formed(secret::SESSION_PREFIX, token));
            assert!(lychd_auth::is_session_token(token), "{}", token.len());
        }
        let credential = secret::mint_credential().expect("randomness");
        let credential = secrecy::ExposeSecret::expose_secret(&credential.secret);
        for junk in [
            "",
            "junk",
            credential,
            &format!("lws_{}", "0".repeat(63)),
            &format!("lws_{}", "A".repeat(64)),
            &format!("lws_{}g", "0".repeat(63)),
            &format!("lws_{}", "0".repeat(65)),
        ] {
            assert_eq!(
                lychd_auth::is_session_token(junk),
                secret::well_formed(secret::SESSION_PREFIX, junk),
                "{junk}"
            );
            assert!(!lychd_auth::is_session_token(junk), "{junk}");
        }
    }
}
