//! Promotion handlers: `ProposePromotion`, `ProposeOwnerRecords` and `GetPromotion` (a
//! promotion's verdict is `Decide`, in `consent`).
//!
//! Invariant: decode → authorize (`ward:propose` on `effect:helmloop`, asked again under the
//! first answer's policy generation immediately before the write) → `service::promotion` →
//! encode.

use std::sync::Arc;

use lychd_proto::ward::v1 as pb;
use lychd_runtime::auth::Principal;
use lychd_runtime::server::ServeContext;
use tonic::{Request, Response, Status};

use super::ask::principal_uuid;
use super::convert::{self, consent as codec, promotion as promo};
use crate::actions;
use crate::domain::promotion::EFFECT_OWNER;
use crate::service::consent::{CONSENTS, effect_object};
use crate::service::promotion::{ConsentRecord, Issuance, PromotionRecord, Promotions};

pub struct Handlers {
    pub ctx: ServeContext,
    pub promotions: Arc<Promotions>,
}

impl Handlers {
    /// The caller must hold `ward:propose` on `effect:helmloop`: its first resolution.
    async fn proposer<T>(&self, request: &Request<T>) -> Result<Principal, Status> {
        self.ctx
            .authorize(request, actions::PROPOSE, &effect_object(EFFECT_OWNER))
            .await
    }

    /// Record `issuance`, asked again, under `first`'s policy generation, immediately before
    /// the write.
    async fn propose<T>(
        &self,
        request: &Request<T>,
        first: &Principal,
        issuance: &Issuance,
    ) -> Result<(ConsentRecord, PromotionRecord, bool), Status> {
        let principal = self
            .ctx
            .authorizer
            .authorize_for(
                request,
                actions::PROPOSE,
                &effect_object(EFFECT_OWNER),
                actions::PROPOSE.verb(),
                Some(first.policy_generation),
            )
            .await?;
        Ok(self
            .promotions
            .propose(issuance, principal_uuid(&principal)?)
            .await?)
    }

    pub async fn propose_promotion(
        &self,
        request: Request<pb::ProposePromotionRequest>,
    ) -> Result<Response<pb::ProposePromotionResponse>, Status> {
        let asked = promo::request(request.get_ref())?;
        let first = self.proposer(&request).await?;
        let issuance = self.promotions.promotion(asked, &first.id).await?;
        let (record, promotion, created) = self.propose(&request, &first, &issuance).await?;
        tracing::info!(consent = %record.id, created, "promotion proposed");
        Ok(Response::new(pb::ProposePromotionResponse {
            consent: Some(codec::consent(&record)),
            created,
            promotion: Some(promo::promotion(&promotion)),
        }))
    }

    pub async fn propose_owner_records(
        &self,
        request: Request<pb::ProposeOwnerRecordsRequest>,
    ) -> Result<Response<pb::ProposeOwnerRecordsResponse>, Status> {
        let (run_id, drafts) = promo::owner_records(request.get_ref())?;
        let first = self.proposer(&request).await?;
        let issuance = self
            .promotions
            .owner_records(run_id, &drafts, &first.id)
            .await?;
        let (record, promotion, created) = self.propose(&request, &first, &issuance).await?;
        tracing::info!(consent = %record.id, created, records = drafts.records.len(), "owner records proposed");
        Ok(Response::new(pb::ProposeOwnerRecordsResponse {
            consent: Some(codec::consent(&record)),
            created,
            promotion: Some(promo::promotion(&promotion)),
        }))
    }

    pub async fn get_promotion(
        &self,
        request: Request<pb::GetPromotionRequest>,
    ) -> Result<Response<pb::GetPromotionResponse>, Status> {
        let id = convert::id("consent_id", &request.get_ref().consent_id)?;
        self.ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let (promotion, record) = self.promotions.get(id).await?;
        Ok(Response::new(pb::GetPromotionResponse {
            consent: Some(codec::consent(&record)),
            promotion: Some(promo::promotion(&promotion)),
        }))
    }
}
