//! Consent handlers: `Decide` (a promotion's verdict included), `ConsumeConsent`,
//! `RevokeConsent`, `CancelForRun`, `GetConsent`, `ListConsents` and `WatchConsents`.
//!
//! Invariant: decode → authorize (on the consent's effect owner, asked immediately before the
//! change; `ward:review` on `consent:*` for reads) → `service::consent` (or
//! `service::promotion` for a promotion's verdict) → encode.

use std::sync::Arc;
use std::time::Duration;

use lychd_proto::common::v1::PageResponse;
use lychd_proto::ward::v1 as pb;
use lychd_runtime::server::ServeContext;
use lychd_runtime::streams::StreamLimit;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::ask::{on_consent, principal_uuid};
use super::convert::{self, consent as codec};
use super::watch::{Follower, WatchStream};
use crate::actions;
use crate::error::WardError;
use crate::service::consent::{CONSENTS, Consents, run_object};
use crate::service::promotion::Promotions;

pub struct Handlers {
    pub ctx: ServeContext,
    pub consents: Consents,
    pub promotions: Arc<Promotions>,
    /// Places for open watch streams.
    pub streams: StreamLimit,
    /// How often a watch stream asks for its caller's authority again.
    pub recheck: Duration,
}

impl Handlers {
    pub async fn decide(
        &self,
        request: Request<pb::DecideRequest>,
    ) -> Result<Response<pb::DecideResponse>, Status> {
        let (id, verdict, review) = codec::decide(request.get_ref())?;
        // A promotion: `ward:approve` on `effect:helmloop` too, and the caller must be the
        // contract's accountable owner; an approval issues the records.
        let promotion = self.promotions.owner_of(id).await?;
        let principal =
            on_consent(&self.ctx, &self.consents, &request, actions::APPROVE, id).await?;
        let (record, changed) = match promotion {
            Some(owner) => {
                self.promotions
                    .decide((id, owner), verdict, &review, principal)
                    .await?
            }
            None => {
                self.consents
                    .decide(id, verdict, &review, principal)
                    .await?
            }
        };
        Ok(Response::new(pb::DecideResponse {
            consent: Some(codec::consent(&record)),
            changed,
        }))
    }

    pub async fn consume_consent(
        &self,
        request: Request<pb::ConsumeConsentRequest>,
    ) -> Result<Response<pb::ConsumeConsentResponse>, Status> {
        let (id, digest) = codec::consume(request.get_ref())?;
        let principal =
            on_consent(&self.ctx, &self.consents, &request, actions::CONSUME, id).await?;
        let record = self.consents.consume(id, &digest, principal).await?;
        Ok(Response::new(pb::ConsumeConsentResponse {
            consent: Some(codec::consent(&record)),
        }))
    }

    pub async fn revoke_consent(
        &self,
        request: Request<pb::RevokeConsentRequest>,
    ) -> Result<Response<pb::RevokeConsentResponse>, Status> {
        let id = convert::id("consent_id", &request.get_ref().consent_id)?;
        let principal =
            on_consent(&self.ctx, &self.consents, &request, actions::APPROVE, id).await?;
        let record = self.consents.revoke(id, principal).await?;
        Ok(Response::new(pb::RevokeConsentResponse {
            consent: Some(codec::consent(&record)),
        }))
    }

    pub async fn cancel_for_run(
        &self,
        request: Request<pb::CancelForRunRequest>,
    ) -> Result<Response<pb::CancelForRunResponse>, Status> {
        let run = codec::run("run_id", &request.get_ref().run_id)?;
        let principal = self
            .ctx
            .authorize(&request, actions::CANCEL, &run_object(&run))
            .await?;
        let cancelled = self
            .consents
            .cancel_for_run(&run, principal_uuid(&principal)?)
            .await?;
        Ok(Response::new(pb::CancelForRunResponse {
            cancelled: u32::try_from(cancelled).unwrap_or(u32::MAX),
        }))
    }

    pub async fn get_consent(
        &self,
        request: Request<pb::GetConsentRequest>,
    ) -> Result<Response<pb::GetConsentResponse>, Status> {
        let id = convert::id("consent_id", &request.get_ref().consent_id)?;
        self.ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let record = self.consents.get(id).await?;
        Ok(Response::new(pb::GetConsentResponse {
            consent: Some(codec::consent(&record)),
        }))
    }

    pub async fn list_consents(
        &self,
        request: Request<pb::ListConsentsRequest>,
    ) -> Result<Response<pb::ListConsentsResponse>, Status> {
        let q = codec::list(request.get_ref())?;
        self.ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let page = self.consents.list(&q).await?;
        Ok(Response::new(pb::ListConsentsResponse {
            consents: page.items.iter().map(codec::consent).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }

    pub async fn watch_consents(
        &self,
        request: Request<pb::WatchConsentsRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        let r = request.get_ref();
        let after = i64::try_from(r.after_change)
            .map_err(|_| convert::invalid("after_change", "must be at most 2^63-1"))?;
        let run = match r.run_id.as_str() {
            "" => None,
            run => Some(codec::run("run_id", run)?),
        };
        let principal = self
            .ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let place = self.streams.open(&principal.id).map_err(WardError::from)?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let follower = Follower {
            consents: self.consents.clone(),
            authorizer: self.ctx.authorizer.clone(),
            metadata: request.metadata().clone(),
            every: self.recheck,
            run,
        };
        tokio::spawn(async move {
            let _place = place;
            follower.follow(after, tx).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
