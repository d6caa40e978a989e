//! Asking Ward over gRPC (every office but Ward itself).

use lychd_proto::ward::v1::authenticate_response::Result as AuthResult;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_proto::ward::v1::{self as pb, AuthenticateRequest, AuthorizeRequest};
use secrecy::ExposeSecret;
use tonic::transport::Channel;

use crate::credentials::SessionSource;
use crate::{AuthError, Decision, Principal, Query, Verifier};

/// Ward over gRPC, called with this office's own session.
#[derive(Clone)]
pub struct WardVerifier {
    client: WardClient<Channel>,
    session: SessionSource,
}

impl WardVerifier {
    pub fn new(channel: Channel, session: SessionSource) -> Self {
        WardVerifier {
            client: WardClient::new(channel),
            session,
        }
    }

    fn request<T>(&self, message: T) -> Result<tonic::Request<T>, AuthError> {
        let token = self
            .session
            .current()
            .ok_or_else(|| AuthError::Unavailable("no session with ward yet".into()))?;
        let mut request = tonic::Request::new(message);
        let value = format!("Bearer {}", token.expose_secret())
            .parse()
            .map_err(|_| AuthError::Unavailable("session token is not a header value".into()))?;
        request.metadata_mut().insert("authorization", value);
        crate::inject_trace(request.metadata_mut());
        Ok(request)
    }
}

pub(crate) fn principal_of(p: pb::Principal) -> Principal {
    let kind = pb::PrincipalKind::try_from(p.kind)
        .map(|k| {
            k.as_str_name()
                .trim_start_matches("PRINCIPAL_KIND_")
                .to_ascii_lowercase()
        })
        .unwrap_or_else(|_| "unknown".into());
    Principal {
        id: p.id,
        kind,
        name: p.name,
        policy_generation: p.policy_generation,
        revocation_generation: p.revocation_generation,
    }
}

fn unavailable(status: tonic::Status) -> AuthError {
    AuthError::Unavailable(format!("{:?}", status.code()))
}

#[tonic::async_trait]
impl Verifier for WardVerifier {
    async fn authenticate(&self, token: &str, audience: &str) -> Result<Principal, AuthError> {
        let request = self.request(AuthenticateRequest {
            token: token.to_owned(),
            audience: audience.to_owned(),
        })?;
        let answer = self
            .client
            .clone()
            .authenticate(request)
            .await
            .map_err(unavailable)?
            .into_inner();
        match answer.result {
            Some(AuthResult::Authenticated(a)) => a
                .principal
                .map(principal_of)
                .ok_or_else(|| AuthError::Unavailable("empty answer".into())),
            Some(AuthResult::Refused(r)) => Err(AuthError::Unauthenticated(r.reason)),
            None => Err(AuthError::Unavailable("empty answer".into())),
        }
    }

    async fn authorize(&self, query: &Query<'_>) -> Result<Decision, AuthError> {
        let request = self.request(AuthorizeRequest {
            token: query.token.to_owned(),
            action: query.action.to_owned(),
            object: query.object.to_owned(),
            audience: query.audience.to_owned(),
            purpose: query.purpose.to_owned(),
            expected_policy_generation: query.expected_policy_generation,
        })?;
        let answer = self
            .client
            .clone()
            .authorize(request)
            .await
            .map_err(unavailable)?
            .into_inner();
        Ok(Decision {
            allowed: answer.decision == pb::Decision::Allow as i32,
            reason: answer.reason,
            principal: answer.principal.map(principal_of),
            policy_generation: answer.policy_generation,
            revocation_generation: answer.revocation_generation,
        })
    }
}
