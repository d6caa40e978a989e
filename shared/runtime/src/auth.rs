//! Request authentication for an office's own API (health and reflection stay open).
//!
//! Interim verifier (docs/adr/0002): the office accepts exactly the bearer credential named by
//! `auth.token_file`, compared as SHA-256 digests in constant time. Ward sessions replace this
//! verifier behind the same interceptor; the wire contract (`authorization: Bearer …`) stays.

use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tonic::{Code, Request, Status};

use crate::status::refusal;

const DOMAIN: &str = "lychd.runtime";

/// Checks `authorization: Bearer <token>` on every request it sees.
#[derive(Clone)]
pub struct Authenticator {
    digest: [u8; 32],
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authenticator([redacted])")
    }
}

impl Authenticator {
    pub fn new(token: &SecretString) -> Self {
        Authenticator {
            digest: Sha256::digest(token.expose_secret().as_bytes()).into(),
        }
    }

    pub fn check<T>(&self, request: Request<T>) -> Result<Request<T>, Status> {
        let Some(value) = request.metadata().get("authorization") else {
            return Err(refusal(
                Code::Unauthenticated,
                DOMAIN,
                "CREDENTIAL_MISSING",
                "missing bearer credential",
            ));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                refusal(
                    Code::Unauthenticated,
                    DOMAIN,
                    "CREDENTIAL_MALFORMED",
                    "authorization must be `Bearer <token>`",
                )
            })?;
        let presented: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
        if bool::from(presented.ct_eq(&self.digest)) {
            Ok(request)
        } else {
            Err(refusal(
                Code::Unauthenticated,
                DOMAIN,
                "CREDENTIAL_INVALID",
                "credential not recognised",
            ))
        }
    }
}

impl tonic::service::Interceptor for Authenticator {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        self.check(request)
    }
}

/// Who made a request, as resolved by the authentication layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Ward's identifier of the principal.
    pub id: String,
    /// `human`, `service`, `peer` or `node`.
    pub kind: String,
    /// Policy generation the decision was made under.
    pub policy_generation: i64,
    /// Revocation generation the decision was made under.
    pub revocation_generation: i64,
}

impl Principal {
    /// The holder of the interim stack credential (docs/adr/0002).
    pub fn stack() -> Self {
        Principal {
            id: "stack".into(),
            kind: "service".into(),
            policy_generation: 0,
            revocation_generation: 0,
        }
    }
}
