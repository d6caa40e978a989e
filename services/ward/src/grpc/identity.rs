//! Identity handlers: `ExchangeCredential`, enrollment, credentials, revocation, assignments
//! and their listings, and `Describe`.
//!
//! Invariant: decode → authorize (`ward:administer` on `principal:*`, before decoding, so a
//! caller without authority learns nothing about its input) → `service::identity` → encode;
//! `ExchangeCredential` alone is authenticated by its bearer, the credential itself.

use lychd_proto::common::v1::PageResponse;
use lychd_proto::ward::v1 as pb;
use lychd_runtime::server::ServeContext;
use secrecy::ExposeSecret;
use tonic::{Request, Response, Status};

use super::ask::{ADMINISTER, caller, source};
use super::convert;
use crate::actions;
use crate::service::identity::{Identity, RevokeTarget};

pub struct Handlers {
    pub ctx: ServeContext,
    pub identity: Identity,
}

impl Handlers {
    pub async fn describe(
        &self,
        request: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::DescribeResponse>, Status> {
        self.ctx
            .authorize(&request, actions::DESCRIBE, "office:ward")
            .await?;
        let office =
            lychd_runtime::describe::describe(&self.ctx, request.get_ref().include_peers).await?;
        Ok(Response::new(pb::DescribeResponse {
            office: Some(office),
        }))
    }

    pub async fn exchange_credential(
        &self,
        request: Request<pb::ExchangeCredentialRequest>,
    ) -> Result<Response<pb::ExchangeCredentialResponse>, Status> {
        // The bearer is the credential: no session, no authorize call.
        let credential = lychd_auth::bearer(&request)?;
        let r = request.get_ref();
        // Bad audiences are answered `INVALID_ARGUMENT` only to a caller whose credential is
        // good; an outsider is `UNAUTHENTICATED` (and counted) whatever it sent.
        let audiences = convert::audiences(&r.audiences);
        let session = self
            .identity
            .exchange(&source(&request), credential, r.ttl_seconds, audiences)
            .await?;
        // The credential is the secret: exchanging it needs no client certificate (the session
        // is refused without its office's certificate wherever it is used), but a certificate
        // presented must name the credential's office; otherwise the token is withheld.
        lychd_runtime::tls::check_peer(
            false,
            request.extensions(),
            &crate::verifier::principal(&session.principal),
        )?;
        Ok(Response::new(pb::ExchangeCredentialResponse {
            session_token: session.token.expose_secret().to_owned(),
            session_id: session.id.to_string(),
            expires_at: Some(convert::timestamp(session.expires_at)),
            principal: Some(convert::principal(&session.principal)),
            audiences: session.audiences,
            lifetime_seconds: session.lifetime_secs,
        }))
    }

    pub async fn enroll_principal(
        &self,
        request: Request<pb::EnrollPrincipalRequest>,
    ) -> Result<Response<pb::EnrollPrincipalResponse>, Status> {
        let actor = caller(&self.ctx, &request, ADMINISTER).await?;
        let enrollment = convert::enrollment(request.get_ref())?;
        let principal = self.identity.enroll(actor, &enrollment).await?;
        Ok(Response::new(pb::EnrollPrincipalResponse {
            principal: Some(convert::principal(&principal)),
        }))
    }

    pub async fn issue_credential(
        &self,
        request: Request<pb::IssueCredentialRequest>,
    ) -> Result<Response<pb::IssueCredentialResponse>, Status> {
        let actor = caller(&self.ctx, &request, ADMINISTER).await?;
        let c = convert::issue(request.get_ref())?;
        let issued = self
            .identity
            .issue(actor, c.principal_id, c.kind, c.ttl)
            .await?;
        Ok(Response::new(pb::IssueCredentialResponse {
            credential_id: issued.id.to_string(),
            credential: issued.secret.expose_secret().to_owned(),
            expires_at: Some(convert::timestamp(issued.expires_at)),
        }))
    }

    pub async fn rotate_credential(
        &self,
        request: Request<pb::RotateCredentialRequest>,
    ) -> Result<Response<pb::RotateCredentialResponse>, Status> {
        let actor = caller(&self.ctx, &request, ADMINISTER).await?;
        let r = convert::rotate(request.get_ref())?;
        let issued = self
            .identity
            .rotate(actor, r.credential_id, r.request_id.as_deref())
            .await?;
        Ok(Response::new(pb::RotateCredentialResponse {
            credential_id: issued.id.to_string(),
            credential: issued.secret.expose_secret().to_owned(),
            expires_at: Some(convert::timestamp(issued.expires_at)),
        }))
    }

    pub async fn revoke(
        &self,
        request: Request<pb::RevokeRequest>,
    ) -> Result<Response<pb::RevokeResponse>, Status> {
        let actor = caller(&self.ctx, &request, ADMINISTER).await?;
        let target: RevokeTarget = convert::revoke_target(request.get_ref())?;
        let revoked = self.identity.revoke(actor, target).await?;
        Ok(Response::new(pb::RevokeResponse {
            changed: revoked.changed,
            revocation_generation: revoked.revocation_generation,
        }))
    }

    pub async fn assign(
        &self,
        request: Request<pb::AssignRequest>,
    ) -> Result<Response<pb::AssignResponse>, Status> {
        let actor = caller(&self.ctx, &request, ADMINISTER).await?;
        let a = convert::assign(request.get_ref())?;
        let assigned = self
            .identity
            .assign(actor, a.principal_id, &a.grant, a.expires_at)
            .await?;
        Ok(Response::new(pb::AssignResponse {
            assignment: Some(convert::assignment(&assigned.assignment)),
            policy_generation: assigned.policy_generation,
        }))
    }

    pub async fn unassign(
        &self,
        request: Request<pb::UnassignRequest>,
    ) -> Result<Response<pb::UnassignResponse>, Status> {
        let actor = caller(&self.ctx, &request, ADMINISTER).await?;
        let assignment_id = convert::id("assignment_id", &request.get_ref().assignment_id)?;
        let u = self.identity.unassign(actor, assignment_id).await?;
        Ok(Response::new(pb::UnassignResponse {
            changed: u.changed,
            policy_generation: u.policy_generation,
        }))
    }

    pub async fn list_principals(
        &self,
        request: Request<pb::ListPrincipalsRequest>,
    ) -> Result<Response<pb::ListPrincipalsResponse>, Status> {
        caller(&self.ctx, &request, ADMINISTER).await?;
        let p = convert::principals_page(request.get_ref())?;
        let page = self.identity.principals(p.size, p.after).await?;
        Ok(Response::new(pb::ListPrincipalsResponse {
            principals: page.items.iter().map(convert::principal).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }

    pub async fn list_assignments(
        &self,
        request: Request<pb::ListAssignmentsRequest>,
    ) -> Result<Response<pb::ListAssignmentsResponse>, Status> {
        caller(&self.ctx, &request, ADMINISTER).await?;
        let (principal_id, p) = convert::assignments_page(request.get_ref())?;
        let page = self
            .identity
            .assignments(principal_id, p.size, p.after)
            .await?;
        Ok(Response::new(pb::ListAssignmentsResponse {
            assignments: page.items.iter().map(convert::assignment).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }
}
