//! Proposal handlers: `ProposeEffect` (self-authenticating: its own decision authenticates a
//! well-formed proposal), the standing preauthorization rules, and proposal history
//! (`CreateProposal`, `AppendProposalRecord`, `Supersede`, `Withdraw`, `GetProposal`,
//! `ListProposals`).
//!
//! Invariant: decode → authorize (`ward:propose`, `ward:consume` or `ward:approve` on the
//! effect owner, asked immediately before the change; `ward:review` on `consent:*` for reads)
//! → `service::proposals` → encode. Bad input to `ProposeEffect` is answered only to a caller
//! that authenticates.

use std::sync::Arc;

use lychd_proto::common::v1::PageResponse;
use lychd_proto::ward::v1 as pb;
use lychd_runtime::auth::Action;
use lychd_runtime::server::ServeContext;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use super::ask::{self, caller, on_consent, principal_uuid};
use super::convert::{self, consent as codec, proposal as history};
use crate::actions;
use crate::service::consent::{CONSENTS, Consents, effect_object};
use crate::service::decisions::Decisions;
use crate::service::proposals::{Closing, PREAUTH, Proposals, append_action};

pub struct Handlers {
    pub ctx: ServeContext,
    pub proposals: Proposals,
    pub consents: Consents,
    pub decisions: Arc<Decisions>,
}

impl Handlers {
    /// The caller must hold `action` on the effect owner of proposal `id`'s consent (asked
    /// immediately before the change): its principal id, and the proposal's initiator. An
    /// unknown proposal is not found.
    async fn on_proposal<T>(
        &self,
        request: &Request<T>,
        action: Action,
        id: Uuid,
    ) -> Result<(Uuid, Uuid), Status> {
        let (owner, initiated_by) = self.proposals.parties(id).await?;
        let principal = self
            .ctx
            .authorize(request, action, &effect_object(&owner))
            .await?;
        Ok((principal_uuid(&principal)?, initiated_by))
    }

    pub async fn propose_effect(
        &self,
        request: Request<pb::ProposeEffectRequest>,
    ) -> Result<Response<pb::ProposeEffectResponse>, Status> {
        // Self-authenticating: bad input is refused only to a caller that authenticates.
        let proposal = match codec::proposal(request.get_ref()) {
            Ok(p) => p,
            Err(invalid) => return Err(ask::invalid(&self.decisions, &request, invalid).await),
        };
        let principal = self
            .ctx
            .authorize(
                &request,
                actions::PROPOSE,
                &effect_object(&proposal.effect_owner),
            )
            .await?;
        let requested_by = principal_uuid(&principal)?;
        let (record, created) = self
            .proposals
            .propose(&proposal, requested_by, &principal.id, &principal.name)
            .await?;
        Ok(Response::new(pb::ProposeEffectResponse {
            consent: Some(codec::consent(&record)),
            created,
        }))
    }

    pub async fn list_preauth_rules(
        &self,
        request: Request<pb::ListPreauthRulesRequest>,
    ) -> Result<Response<pb::ListPreauthRulesResponse>, Status> {
        caller(&self.ctx, &request, PREAUTH).await?;
        let rules = self.proposals.rules().await?;
        Ok(Response::new(pb::ListPreauthRulesResponse {
            rules: rules.iter().map(codec::rule).collect(),
        }))
    }

    pub async fn disable_preauth_rule(
        &self,
        request: Request<pb::DisablePreauthRuleRequest>,
    ) -> Result<Response<pb::DisablePreauthRuleResponse>, Status> {
        let slug = codec::slug(&request.get_ref().slug)?;
        let actor = caller(&self.ctx, &request, PREAUTH).await?;
        let actor = actor.ok_or_else(|| convert::invalid("authorization", "unknown principal"))?;
        let rule = self.proposals.disable_rule(&slug, actor).await?;
        Ok(Response::new(pb::DisablePreauthRuleResponse {
            rule: Some(codec::rule(&rule)),
        }))
    }

    pub async fn create_proposal(
        &self,
        request: Request<pb::CreateProposalRequest>,
    ) -> Result<Response<pb::CreateProposalResponse>, Status> {
        let c = history::create(request.get_ref())?;
        // Only the consent's requesting principal (checked with the consent locked).
        let caller = on_consent(
            &self.ctx,
            &self.consents,
            &request,
            actions::PROPOSE,
            c.consent_id,
        )
        .await?;
        let created = self.proposals.create(&c.as_new(), caller).await?;
        Ok(Response::new(pb::CreateProposalResponse {
            proposal: Some(history::proposal(&created)),
        }))
    }

    pub async fn append_proposal_record(
        &self,
        request: Request<pb::AppendProposalRecordRequest>,
    ) -> Result<Response<pb::AppendProposalRecordResponse>, Status> {
        let (id, record) = history::append(request.get_ref())?;
        let (appender, action) = append_action(&record)?;
        let (caller, initiated_by) = self.on_proposal(&request, action, id).await?;
        let appended = self
            .proposals
            .append(id, &record, (appender, caller, initiated_by))
            .await?;
        Ok(Response::new(pb::AppendProposalRecordResponse {
            record: Some(history::record(&appended)),
        }))
    }

    pub async fn supersede(
        &self,
        request: Request<pb::SupersedeRequest>,
    ) -> Result<Response<pb::SupersedeResponse>, Status> {
        let (predecessor, successor) = history::supersede(request.get_ref())?;
        let (caller, _) = self
            .on_proposal(&request, actions::PROPOSE, predecessor)
            .await?;
        let (closed, consent) = self
            .proposals
            .close(predecessor, Closing::Supersede(successor), caller)
            .await?;
        Ok(Response::new(pb::SupersedeResponse {
            predecessor: Some(history::proposal(&closed)),
            predecessor_consent: Some(codec::consent(&consent)),
        }))
    }

    pub async fn withdraw(
        &self,
        request: Request<pb::WithdrawRequest>,
    ) -> Result<Response<pb::WithdrawResponse>, Status> {
        let id = convert::id("proposal_id", &request.get_ref().proposal_id)?;
        let (caller, _) = self.on_proposal(&request, actions::PROPOSE, id).await?;
        let (closed, consent) = self.proposals.close(id, Closing::Withdraw, caller).await?;
        Ok(Response::new(pb::WithdrawResponse {
            proposal: Some(history::proposal(&closed)),
            consent: Some(codec::consent(&consent)),
        }))
    }

    pub async fn get_proposal(
        &self,
        request: Request<pb::GetProposalRequest>,
    ) -> Result<Response<pb::GetProposalResponse>, Status> {
        let (id, size, after) = history::get(request.get_ref())?;
        self.ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let (found, page) = self.proposals.get(id, size, after).await?;
        Ok(Response::new(pb::GetProposalResponse {
            proposal: Some(history::proposal(&found)),
            records: page.items.iter().map(history::record).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }

    pub async fn list_proposals(
        &self,
        request: Request<pb::ListProposalsRequest>,
    ) -> Result<Response<pb::ListProposalsResponse>, Status> {
        let (group, size, after) = history::list(request.get_ref())?;
        self.ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let page = self.proposals.list(group, size, after).await?;
        Ok(Response::new(pb::ListProposalsResponse {
            proposals: page.items.iter().map(history::proposal).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }
}
