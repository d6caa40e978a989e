//! Authentication and authorization for every office.
//!
//! - [`Verifier`]: the one question asked of Ward — who holds this token, and may they do this?
//!   Ward answers it from its own tables ([`Verifier`] implemented in `lychd-ward`); every other
//!   office asks Ward over gRPC ([`ward::WardVerifier`]).
//! - [`layer::AuthLayer`]: a tower layer requiring `authorization: Bearer <session>` on every
//!   RPC but health and reflection; it authenticates with the verifier and puts the resolved
//!   [`Principal`] into the request extensions. Caller-supplied identity headers are ignored.
//! - [`Authorizer::authorize`]: what a handler calls, with the action and object declared next
//!   to it, and again immediately before an effect. Nothing is cached: a revocation takes effect
//!   on the next decision.
//! - [`credentials::SessionSource`]: an office's own session, exchanged from its service
//!   credential and renewed before expiry, presented on calls to other offices.
//! - [`grammar`]: the names Ward decides over (actions `<office>:<verb>`, objects, audiences,
//!   purposes, principal names), parsed in one place for every office.
//!
//! Invariant: this crate decides nothing itself; every decision is Ward's. It never logs or
//! returns a token or credential.

pub mod admin;
pub mod credentials;
pub mod grammar;
pub mod layer;
pub mod ward;

use std::sync::Arc;

use tonic::{Code, Status};

/// The refusals of authentication and authorization, in domain `lychd.auth`: the layer's own
/// and Ward's decision reasons, which every office relays unchanged.
pub mod reasons {
    lychd_refusal::reasons! {
        /// the call carries no `authorization` header
        CREDENTIAL_MISSING = Unauthenticated;
        /// `authorization` must be `Bearer <token>`
        CREDENTIAL_MALFORMED = Unauthenticated;
        /// Ward could not be asked; nothing is allowed meanwhile
        AUTHORIZATION_UNAVAILABLE = Unavailable;
        /// Ward knows no such session
        SESSION_UNKNOWN = Unauthenticated;
        /// the session has expired
        SESSION_EXPIRED = Unauthenticated;
        /// the session was revoked
        SESSION_REVOKED = Unauthenticated;
        /// the credential the session came from was revoked
        CREDENTIAL_REVOKED = Unauthenticated;
        /// the principal was revoked
        PRINCIPAL_REVOKED = Unauthenticated;
        /// the principal holds no assignment for this action, object, audience and purpose
        NO_ASSIGNMENT = PermissionDenied;
        /// the principal's policy changed since the decision this call relied on
        POLICY_GENERATION_STALE = PermissionDenied;
        /// the session is not bound to the office it was presented to
        SESSION_AUDIENCE_MISMATCH = Unauthenticated;
    }
}

/// `lychd.auth`'s refusals.
pub const REFUSALS: lychd_refusal::Refusals =
    lychd_refusal::Refusals::new("lychd.auth", reasons::OWN);
pub const DOMAIN: &str = REFUSALS.domain;

/// One action an office enforces (`<office>:<verb>`), declared in the office's action
/// catalogue with [`actions!`]; handlers can only ask about declared actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    pub name: &'static str,
    /// What holding it allows.
    pub meaning: &'static str,
}

impl Action {
    /// The verb after `:`, the default purpose of a question about it.
    pub fn verb(&self) -> &'static str {
        self.name
            .split_once(':')
            .map(|(_, verb)| verb)
            .unwrap_or(self.name)
    }
}

/// Declares an office's actions as constants plus `pub const ALL: &[Action]`, its catalogue:
///
/// ```
/// lychd_auth::actions! {
///     /// describe the office
///     DESCRIBE = "archive:describe";
/// }
/// assert_eq!(ALL, [DESCRIBE]);
/// assert_eq!(DESCRIBE.verb(), "describe");
/// ```
#[macro_export]
macro_rules! actions {
    ($( #[doc = $meaning:literal] $name:ident = $wire:literal; )*) => {
        $(
            #[doc = $meaning]
            pub const $name: $crate::Action = $crate::Action {
                name: $wire,
                meaning: $meaning.trim_ascii(),
            };
        )*
        /// This office's action catalogue.
        pub const ALL: &[$crate::Action] = &[$($name),*];
    };
}

/// A principal as resolved for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Ward's identifier (UUID).
    pub id: String,
    /// `human`, `service`, `peer` or `node`.
    pub kind: String,
    /// Unique name.
    pub name: String,
    pub policy_generation: i64,
    pub revocation_generation: i64,
}

/// One authorization question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query<'a> {
    /// The session token of the principal asking (never logged).
    pub token: &'a str,
    /// `<office>:<verb>`.
    pub action: &'a str,
    /// `<type>:<id>` or `<type>:*`.
    pub object: &'a str,
    /// The office the request is addressed to.
    pub audience: &'a str,
    /// Why it is asked.
    pub purpose: &'a str,
    /// Deny unless the principal's policy generation is still this one.
    pub expected_policy_generation: Option<i64>,
}

/// Ward's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// `ALLOWED` or a stable deny reason (see `lychd.ward.v1.AuthorizeResponse.reason`).
    pub reason: String,
    /// The principal, when the token resolved.
    pub principal: Option<Principal>,
    pub policy_generation: i64,
    pub revocation_generation: i64,
}

/// Whether Ward's deny reason `name` means "this token does not authenticate anyone now".
pub fn is_authentication_reason(name: &str) -> bool {
    reasons::OWN
        .iter()
        .any(|r| r.name == name && r.code == Code::Unauthenticated)
}

/// Why a verification did not produce an answer or a principal.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthError {
    /// The token authenticates nobody (stable reason).
    #[error("not authenticated: {0}")]
    Unauthenticated(String),
    /// Ward could not be asked; nothing is allowed meanwhile.
    #[error("authorization unavailable: {0}")]
    Unavailable(String),
}

impl AuthError {
    pub fn into_status(self) -> Status {
        match self {
            AuthError::Unauthenticated(reason) => {
                REFUSALS.relay(Code::Unauthenticated, &reason, "session not valid")
            }
            AuthError::Unavailable(_) => REFUSALS.refuse(reasons::AUTHORIZATION_UNAVAILABLE),
        }
    }
}

/// Asks Ward.
#[tonic::async_trait]
pub trait Verifier: Send + Sync + 'static {
    /// Who holds `token`, presented to the office `audience`?
    async fn authenticate(&self, token: &str, audience: &str) -> Result<Principal, AuthError>;
    async fn authorize(&self, query: &Query<'_>) -> Result<Decision, AuthError>;

    /// Write now what this verifier counts and holds back between writes (Ward's own verifier:
    /// the refusals of strangers at Ward's auth layer, ADR 0005), so a listing made next sees
    /// them. Nothing to do for a verifier that holds nothing back.
    async fn flush_counts(&self) -> Result<(), AuthError> {
        Ok(())
    }
}

/// Whether `token` has the shape of a Ward session token (`lws_` and 64 lowercase hex digits,
/// Ward's wire format). Anything else is refused as `SESSION_UNKNOWN` where it is presented,
/// without asking Ward: a stranger's junk costs no Ward call and no database work.
pub fn is_session_token(token: &str) -> bool {
    token.len() == 68
        && token.starts_with("lws_")
        && token[4..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The refusal of a token that is not a session token at all.
pub(crate) fn unknown_session() -> Status {
    REFUSALS.refuse_with(reasons::SESSION_UNKNOWN, "session not valid")
}

/// The bearer token of a request (already required by the layer).
pub fn bearer<T>(request: &tonic::Request<T>) -> Result<&str, Status> {
    bearer_of(
        request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok()),
    )
}

pub(crate) fn bearer_of(header: Option<&str>) -> Result<&str, Status> {
    let Some(value) = header else {
        return Err(REFUSALS.refuse(reasons::CREDENTIAL_MISSING));
    };
    value
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| REFUSALS.refuse(reasons::CREDENTIAL_MALFORMED))
}

/// A check of the principal a request's session resolved to against what else the request's
/// connection says of the caller (its TLS client certificate: `lychd_runtime::tls`), run in
/// addition to the session, never instead of it.
pub type PeerCheck = Arc<dyn Fn(&http::Extensions, &Principal) -> Result<(), Status> + Send + Sync>;

/// What handlers use to decide, bound to the receiving office (the audience).
#[derive(Clone)]
pub struct Authorizer {
    audience: &'static str,
    verifier: Arc<dyn Verifier>,
    peer_check: Option<PeerCheck>,
}

impl Authorizer {
    pub fn new(audience: &'static str, verifier: Arc<dyn Verifier>) -> Self {
        Authorizer {
            audience,
            verifier,
            peer_check: None,
        }
    }

    /// Every principal resolved from a request is also checked by `check`.
    pub fn with_peer_check(mut self, check: PeerCheck) -> Self {
        self.peer_check = Some(check);
        self
    }

    /// `principal`, once the peer check (if any) agrees with the request's connection.
    pub fn checked(
        &self,
        extensions: &http::Extensions,
        principal: Principal,
    ) -> Result<Principal, Status> {
        match &self.peer_check {
            Some(check) => check(extensions, &principal).map(|()| principal),
            None => Ok(principal),
        }
    }

    pub fn verifier(&self) -> &Arc<dyn Verifier> {
        &self.verifier
    }

    /// The office this authorizer decides for.
    pub fn audience(&self) -> &'static str {
        self.audience
    }

    /// Who presents the bearer of `request` to this office? `UNAUTHENTICATED` when nobody.
    pub async fn authenticate<T>(&self, request: &tonic::Request<T>) -> Result<Principal, Status> {
        let token = bearer(request)?;
        if !is_session_token(token) {
            return Err(unknown_session());
        }
        let principal = self
            .verifier
            .authenticate(token, self.audience)
            .await
            .map_err(AuthError::into_status)?;
        self.checked(request.extensions(), principal)
    }

    /// The decoded input of a request, for a handler that authenticates by its own decision
    /// (the layer's `self_authenticating` methods): input that does not decode is refused with
    /// its own status only once the caller authenticates, with the authentication refusal
    /// otherwise, so a stranger learns nothing about the input it sent.
    pub async fn decoded<T, C>(
        &self,
        request: &tonic::Request<T>,
        decoded: Result<C, Status>,
    ) -> Result<C, Status> {
        match decoded {
            Ok(c) => Ok(c),
            Err(invalid) => Err(match self.authenticate(request).await {
                Ok(_) => invalid,
                Err(unauthenticated) => unauthenticated,
            }),
        }
    }

    /// May the caller of `request` perform `action` on `object`? Purpose defaults to the
    /// action's verb. `UNAUTHENTICATED` or `PERMISSION_DENIED` (with Ward's reason) otherwise.
    pub async fn authorize<T>(
        &self,
        request: &tonic::Request<T>,
        action: Action,
        object: &str,
    ) -> Result<Principal, Status> {
        self.authorize_for(request, action, object, action.verb(), None)
            .await
    }

    /// The full question: explicit purpose and an optional expected policy generation (for
    /// effect-time re-authorization of prepared work).
    pub async fn authorize_for<T>(
        &self,
        request: &tonic::Request<T>,
        action: Action,
        object: &str,
        purpose: &str,
        expected_policy_generation: Option<i64>,
    ) -> Result<Principal, Status> {
        let token = bearer(request)?;
        if !is_session_token(token) {
            return Err(unknown_session());
        }
        let query = Query {
            token,
            action: action.name,
            object,
            audience: self.audience,
            purpose,
            expected_policy_generation,
        };
        let principal = self
            .verifier
            .authorize(&query)
            .await
            .map_err(AuthError::into_status)?
            .into_principal(action.name, object)?;
        self.checked(request.extensions(), principal)
    }
}

impl Authorizer {
    /// Does the caller of `request` hold `action` on `object` (under policy generation
    /// `expected`, when given)? A denial is an answer here (`None`), not a refusal, and is not
    /// logged as one; a session that authenticates nobody, or Ward unreachable, is the refusal.
    pub async fn decision<T>(
        &self,
        request: &tonic::Request<T>,
        action: Action,
        object: &str,
        expected: Option<i64>,
    ) -> Result<Option<Principal>, Status> {
        let token = bearer(request)?;
        if !is_session_token(token) {
            return Err(unknown_session());
        }
        let decision = self
            .verifier
            .authorize(&Query {
                token,
                action: action.name,
                object,
                audience: self.audience,
                purpose: action.verb(),
                expected_policy_generation: expected,
            })
            .await
            .map_err(AuthError::into_status)?;
        if decision.allowed {
            return decision
                .principal
                .map(|p| self.checked(request.extensions(), p))
                .transpose();
        }
        if is_authentication_reason(&decision.reason) {
            return decision.into_principal(action.name, object).map(Some);
        }
        Ok(None)
    }
}

impl Decision {
    /// The allowed principal, or the refusal a handler returns: `UNAUTHENTICATED` when the
    /// token authenticates nobody, `PERMISSION_DENIED` otherwise (with Ward's reason).
    pub fn into_principal(self, action: &str, object: &str) -> Result<Principal, Status> {
        match (self.allowed, self.principal) {
            (true, Some(principal)) => Ok(principal),
            _ if is_authentication_reason(&self.reason) => {
                Err(REFUSALS.relay(Code::Unauthenticated, &self.reason, "session not valid"))
            }
            _ => {
                tracing::info!(action, object, reason = %self.reason, "permission denied");
                Err(REFUSALS.relay(
                    Code::PermissionDenied,
                    &self.reason,
                    &format!("not permitted: {action} on {object}"),
                ))
            }
        }
    }
}

/// Write the current span's W3C trace context into outgoing metadata (the calls this crate
/// makes to Ward belong to the trace of the request that caused them).
pub fn inject_trace(metadata: &mut tonic::metadata::MetadataMap) {
    use opentelemetry::propagation::Injector;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);
    impl Injector for MetadataInjector<'_> {
        fn set(&mut self, key: &str, value: String) {
            if let (Ok(k), Ok(v)) = (
                tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
                tonic::metadata::MetadataValue::try_from(value.as_str()),
            ) {
                self.0.insert(k, v);
            }
        }
    }
    let cx = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&cx, &mut MetadataInjector(metadata))
    });
}
