//! The server layer: every RPC but health and reflection needs `authorization: Bearer <token>`,
//! which Ward must resolve to a principal; the principal goes into the request extensions.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tower::{Layer, Service};

use crate::{Authorizer, Verifier, bearer_of, is_session_token, unknown_session};

/// Paths that never need a credential: gRPC health and server reflection.
pub const OPEN_PREFIXES: &[&str] = &[
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1.",
    "/grpc.reflection.v1alpha.",
];

/// Put by the server's wire check into the extensions of a response refusing a request body
/// that does not decode (or is too large). On a method that authenticates in its handler the
/// layer has not asked Ward yet, so it does then: a bearer that authenticates nobody is answered
/// `UNAUTHENTICATED` instead, and a stranger learns nothing about the bytes it sent. (Elsewhere
/// the bearer was authenticated before the body was read.)
#[derive(Debug, Clone, Copy)]
pub struct Undecodable;

/// Who authenticates a call to a method, by its path: the one rule the layer follows (and the
/// tidy test checks every office's methods against).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Health and reflection ([`OPEN_PREFIXES`]): no credential.
    Open,
    /// The layer asks Ward before the handler runs.
    Layer,
    /// The handler's own decision authenticates (a bearer is still required; on input that
    /// does not decode the layer authenticates after it).
    Handler,
}

/// The [`Gate`] of the method at `path` under an office's `self_authenticating` methods.
pub fn gate(path: &str, self_authenticating: &[&str]) -> Gate {
    if OPEN_PREFIXES.iter().any(|p| path.starts_with(p)) {
        Gate::Open
    } else if self_authenticating.contains(&path) {
        Gate::Handler
    } else {
        Gate::Layer
    }
}

#[derive(Clone)]
pub struct AuthLayer {
    verifier: Arc<dyn Verifier>,
    /// The authorizer whose peer check every authenticated principal passes.
    authorizer: Authorizer,
    /// The office this layer guards: the audience every token presented here must name.
    audience: &'static str,
    /// Methods that require a bearer but authenticate it themselves (Ward's ExchangeCredential;
    /// handlers that authorize before anything else).
    self_authenticating: &'static [&'static str],
}

impl AuthLayer {
    pub fn new(authorizer: &Authorizer, self_authenticating: &'static [&'static str]) -> Self {
        AuthLayer {
            verifier: authorizer.verifier().clone(),
            authorizer: authorizer.clone(),
            audience: authorizer.audience(),
            self_authenticating,
        }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = AuthService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        AuthService {
            inner,
            layer: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct AuthService<S> {
    inner: S,
    layer: AuthLayer,
}

impl<S, B> Service<http::Request<B>> for AuthService<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        // The clone that was driven to readiness serves this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let layer = self.layer.clone();
        Box::pin(async move {
            let path = request.uri().path();
            let gate = gate(path, layer.self_authenticating);
            if gate == Gate::Open {
                return inner.call(request).await;
            }
            let header = request
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok());
            let token = match bearer_of(header) {
                Ok(t) => t.to_owned(),
                Err(status) => return Ok(status.into_http()),
            };
            let self_authenticating = gate == Gate::Handler;
            if !self_authenticating {
                if !is_session_token(&token) {
                    return Ok(unknown_session().into_http());
                }
                let principal = match layer.verifier.authenticate(&token, layer.audience).await {
                    Ok(principal) => principal,
                    Err(e) => return Ok(e.into_status().into_http()),
                };
                match layer.authorizer.checked(request.extensions(), principal) {
                    Ok(principal) => {
                        request.extensions_mut().insert(principal);
                    }
                    Err(refused) => return Ok(refused.into_http()),
                }
            }
            let response = inner.call(request).await?;
            if self_authenticating && response.extensions().get::<Undecodable>().is_some() {
                if !is_session_token(&token) {
                    return Ok(unknown_session().into_http());
                }
                if let Err(e) = layer.verifier.authenticate(&token, layer.audience).await {
                    return Ok(e.into_status().into_http());
                }
            }
            Ok(response)
        })
    }
}
