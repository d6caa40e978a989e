//! gRPC handlers of `lychd.ward.v1.Ward`, one module per capability: `identity`,
//! `decisions`, `consent` (with `watch`, the consent feed's stream), `proposals` and
//! `promotion`; `convert/` holds the proto <-> typed conversions and `ask` what every handler
//! asks. This module routes each method to its capability and starts the office.
//!
//! Every call has already passed the auth layer (a valid session), except `ExchangeCredential`,
//! whose bearer is the credential itself, and `Authenticate`, `Authorize` and `ProposeEffect`,
//! which resolve the caller's session in the statement that answers them. Administration needs
//! `ward:administer` on `principal:*`; `Authenticate` and `Authorize` about someone else's
//! token need `ward:decide` on `decision:*`. Authorization comes before decoding where a
//! caller without authority must learn nothing about its input.
//!
//! Invariant: handlers decode, authorize, call a `service` and encode; no store path, no SQL.

mod ask;
mod consent;
mod convert;
mod decisions;
mod identity;
mod promotion;
mod proposals;
mod watch;

use std::time::Duration;

use futures::future::BoxFuture;
use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::ward_server::{Ward, WardServer};
use lychd_runtime::server::ServeContext;
use lychd_runtime::streams::StreamLimit;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use crate::config::Settings;
use crate::helmloop::Link;
use crate::service::Services;

/// Ward's handlers, by capability.
pub struct WardService {
    identity: identity::Handlers,
    decisions: decisions::Handlers,
    consent: consent::Handlers,
    proposals: proposals::Handlers,
    promotion: promotion::Handlers,
    /// The retention job, stopped when serving ends and this service is dropped.
    _retention: Option<lychd_runtime::retention::Job>,
    /// The gauges read from the office's schema, polled until this service is dropped.
    _gauges: Option<lychd_runtime::metrics::Polled>,
}

#[tonic::async_trait]
impl Ward for WardService {
    async fn describe(
        &self,
        request: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::DescribeResponse>, Status> {
        self.identity.describe(request).await
    }

    async fn exchange_credential(
        &self,
        request: Request<pb::ExchangeCredentialRequest>,
    ) -> Result<Response<pb::ExchangeCredentialResponse>, Status> {
        self.identity.exchange_credential(request).await
    }

    async fn authenticate(
        &self,
        request: Request<pb::AuthenticateRequest>,
    ) -> Result<Response<pb::AuthenticateResponse>, Status> {
        self.decisions.authenticate(request).await
    }

    async fn authorize(
        &self,
        request: Request<pb::AuthorizeRequest>,
    ) -> Result<Response<pb::AuthorizeResponse>, Status> {
        self.decisions.authorize(request).await
    }

    async fn authorize_batch(
        &self,
        request: Request<pb::AuthorizeBatchRequest>,
    ) -> Result<Response<pb::AuthorizeBatchResponse>, Status> {
        self.decisions.authorize_batch(request).await
    }

    async fn enroll_principal(
        &self,
        request: Request<pb::EnrollPrincipalRequest>,
    ) -> Result<Response<pb::EnrollPrincipalResponse>, Status> {
        self.identity.enroll_principal(request).await
    }

    async fn issue_credential(
        &self,
        request: Request<pb::IssueCredentialRequest>,
    ) -> Result<Response<pb::IssueCredentialResponse>, Status> {
        self.identity.issue_credential(request).await
    }

    async fn rotate_credential(
        &self,
        request: Request<pb::RotateCredentialRequest>,
    ) -> Result<Response<pb::RotateCredentialResponse>, Status> {
        self.identity.rotate_credential(request).await
    }

    async fn revoke(
        &self,
        request: Request<pb::RevokeRequest>,
    ) -> Result<Response<pb::RevokeResponse>, Status> {
        self.identity.revoke(request).await
    }

    async fn assign(
        &self,
        request: Request<pb::AssignRequest>,
    ) -> Result<Response<pb::AssignResponse>, Status> {
        self.identity.assign(request).await
    }

    async fn unassign(
        &self,
        request: Request<pb::UnassignRequest>,
    ) -> Result<Response<pb::UnassignResponse>, Status> {
        self.identity.unassign(request).await
    }

    async fn list_principals(
        &self,
        request: Request<pb::ListPrincipalsRequest>,
    ) -> Result<Response<pb::ListPrincipalsResponse>, Status> {
        self.identity.list_principals(request).await
    }

    async fn list_assignments(
        &self,
        request: Request<pb::ListAssignmentsRequest>,
    ) -> Result<Response<pb::ListAssignmentsResponse>, Status> {
        self.identity.list_assignments(request).await
    }

    async fn list_audit(
        &self,
        request: Request<pb::ListAuditRequest>,
    ) -> Result<Response<pb::ListAuditResponse>, Status> {
        self.decisions.list_audit(request).await
    }

    async fn propose_effect(
        &self,
        request: Request<pb::ProposeEffectRequest>,
    ) -> Result<Response<pb::ProposeEffectResponse>, Status> {
        self.proposals.propose_effect(request).await
    }

    async fn decide(
        &self,
        request: Request<pb::DecideRequest>,
    ) -> Result<Response<pb::DecideResponse>, Status> {
        self.consent.decide(request).await
    }

    async fn consume_consent(
        &self,
        request: Request<pb::ConsumeConsentRequest>,
    ) -> Result<Response<pb::ConsumeConsentResponse>, Status> {
        self.consent.consume_consent(request).await
    }

    async fn revoke_consent(
        &self,
        request: Request<pb::RevokeConsentRequest>,
    ) -> Result<Response<pb::RevokeConsentResponse>, Status> {
        self.consent.revoke_consent(request).await
    }

    async fn cancel_for_run(
        &self,
        request: Request<pb::CancelForRunRequest>,
    ) -> Result<Response<pb::CancelForRunResponse>, Status> {
        self.consent.cancel_for_run(request).await
    }

    async fn get_consent(
        &self,
        request: Request<pb::GetConsentRequest>,
    ) -> Result<Response<pb::GetConsentResponse>, Status> {
        self.consent.get_consent(request).await
    }

    async fn list_preauth_rules(
        &self,
        request: Request<pb::ListPreauthRulesRequest>,
    ) -> Result<Response<pb::ListPreauthRulesResponse>, Status> {
        self.proposals.list_preauth_rules(request).await
    }

    async fn disable_preauth_rule(
        &self,
        request: Request<pb::DisablePreauthRuleRequest>,
    ) -> Result<Response<pb::DisablePreauthRuleResponse>, Status> {
        self.proposals.disable_preauth_rule(request).await
    }

    async fn list_consents(
        &self,
        request: Request<pb::ListConsentsRequest>,
    ) -> Result<Response<pb::ListConsentsResponse>, Status> {
        self.consent.list_consents(request).await
    }

    async fn create_proposal(
        &self,
        request: Request<pb::CreateProposalRequest>,
    ) -> Result<Response<pb::CreateProposalResponse>, Status> {
        self.proposals.create_proposal(request).await
    }

    async fn append_proposal_record(
        &self,
        request: Request<pb::AppendProposalRecordRequest>,
    ) -> Result<Response<pb::AppendProposalRecordResponse>, Status> {
        self.proposals.append_proposal_record(request).await
    }

    async fn supersede(
        &self,
        request: Request<pb::SupersedeRequest>,
    ) -> Result<Response<pb::SupersedeResponse>, Status> {
        self.proposals.supersede(request).await
    }

    async fn withdraw(
        &self,
        request: Request<pb::WithdrawRequest>,
    ) -> Result<Response<pb::WithdrawResponse>, Status> {
        self.proposals.withdraw(request).await
    }

    async fn get_proposal(
        &self,
        request: Request<pb::GetProposalRequest>,
    ) -> Result<Response<pb::GetProposalResponse>, Status> {
        self.proposals.get_proposal(request).await
    }

    async fn list_proposals(
        &self,
        request: Request<pb::ListProposalsRequest>,
    ) -> Result<Response<pb::ListProposalsResponse>, Status> {
        self.proposals.list_proposals(request).await
    }

    async fn propose_promotion(
        &self,
        request: Request<pb::ProposePromotionRequest>,
    ) -> Result<Response<pb::ProposePromotionResponse>, Status> {
        self.promotion.propose_promotion(request).await
    }

    async fn propose_owner_records(
        &self,
        request: Request<pb::ProposeOwnerRecordsRequest>,
    ) -> Result<Response<pb::ProposeOwnerRecordsResponse>, Status> {
        self.promotion.propose_owner_records(request).await
    }

    async fn get_promotion(
        &self,
        request: Request<pb::GetPromotionRequest>,
    ) -> Result<Response<pb::GetPromotionResponse>, Status> {
        self.promotion.get_promotion(request).await
    }

    type WatchConsentsStream = watch::WatchStream;

    async fn watch_consents(
        &self,
        request: Request<pb::WatchConsentsRequest>,
    ) -> Result<Response<Self::WatchConsentsStream>, Status> {
        self.consent.watch_consents(request).await
    }
}

/// Start the office: its services (background tasks finished before exit) and the routes
/// (every call passes the auth layer, then its handler's authorization).
pub fn start(ctx: ServeContext) -> BoxFuture<'static, anyhow::Result<Routes>> {
    Box::pin(async move {
        let settings = Settings::load(&ctx.config)?;
        let (streams, recheck) = (
            StreamLimit::new(settings.stream_limit, settings.stream_share),
            settings.stream_recheck_interval,
        );
        let helmloop = Link::from_context(&ctx)?;
        let retention = crate::service::retention::start(&ctx.config, ctx.pool.clone())?;
        let services =
            Services::start(ctx.pool.clone(), settings, helmloop, &ctx.finishing).await?;
        Ok(routes(&ctx, services, streams, recheck, retention))
    })
}

fn routes(
    ctx: &ServeContext,
    s: Services,
    streams: StreamLimit,
    recheck: Duration,
    retention: Option<lychd_runtime::retention::Job>,
) -> Routes {
    let server = WardServer::new(WardService {
        identity: identity::Handlers {
            ctx: ctx.clone(),
            identity: s.identity,
        },
        decisions: decisions::Handlers {
            ctx: ctx.clone(),
            decisions: s.decisions.clone(),
        },
        consent: consent::Handlers {
            ctx: ctx.clone(),
            consents: s.consents.clone(),
            promotions: s.promotions.clone(),
            streams,
            recheck,
        },
        proposals: proposals::Handlers {
            ctx: ctx.clone(),
            proposals: s.proposals,
            consents: s.consents,
            decisions: s.decisions,
        },
        promotion: promotion::Handlers {
            ctx: ctx.clone(),
            promotions: s.promotions,
        },
        _retention: retention,
        _gauges: crate::service::metrics::start(ctx.pool.clone()),
    })
    .max_decoding_message_size(ctx.max_message_bytes())
    .max_encoding_message_size(ctx.max_message_bytes());
    Routes::new(server)
}
