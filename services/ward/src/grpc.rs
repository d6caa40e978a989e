//! gRPC handlers of `lychd.ward.v1.Ward`: decode → authorize → domain/store → encode.
//!
//! Every call has already passed the auth layer (a valid session), except `ExchangeCredential`,
//! whose bearer is the credential itself, and `Authenticate` and `Authorize`, which resolve the
//! caller's session in the statement that answers them. Administration needs `ward:administer` on
//! `principal:*`; `Authenticate` and `Authorize` about someone else's token need `ward:decide`
//! on `decision:*`. Authorization comes before decoding, so a caller without authority learns
//! nothing about its input.

mod consent;
mod convert;
mod promotion;
mod proposal;

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use futures::future::BoxFuture;
use lychd_proto::common::v1::{PageResponse, Refusal};
use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::ward_server::{Ward, WardServer};
use lychd_runtime::server::ServeContext;
use secrecy::ExposeSecret;
use tokio_stream::wrappers::ReceiverStream;
use tonic::service::Routes;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::actions;
use crate::config::Settings;
use crate::domain::consent::censor;
use crate::domain::decision::Reason;
use crate::domain::paging;
use crate::domain::preauth::Rule;
use crate::error::{DOMAIN, WardError};
use crate::store::decision_log::DecisionLog;
use crate::store::decisions::{Asked, DecisionRecord};
use crate::store::strangers::Tally;
use crate::store::{self, decisions};
use lychd_runtime::auth::Action;

/// What an administrator holds.
pub const ADMINISTER: (Action, &str) = (actions::ADMINISTER, "principal:*");
/// What an office holds to ask about tokens presented to it: `ward:decide` on
/// `decision:<office>` (an operator may hold `decision:*`).
pub const DECIDE: Action = actions::DECIDE;

pub struct WardService {
    ctx: ServeContext,
    /// Records of the decisions asked over `Authorize` and `Authenticate`.
    log: DecisionLog,
    /// Counts of refusals of callers and tokens that authenticate nobody.
    strangers: Tally,
    settings: Settings,
    /// Places for open watch streams.
    streams: Arc<tokio::sync::Semaphore>,
    /// The standing preauthorization rules, in matching order.
    rules: Arc<Vec<Rule>>,
    /// The HelmLoop office (`peers.helmloop`), when configured: promotions need it.
    helmloop: Option<crate::helmloop::Link>,
}

/// Where a call came from, as refusals are counted: the peer's IP address.
fn source<T>(request: &Request<T>) -> String {
    request
        .remote_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Where a token asked about came from: the office it was presented to.
fn presented_to(audience: &str) -> String {
    format!("office:{audience}")
}

impl WardService {
    /// The caller must hold `action` on `object`; returns its principal id (for the audit).
    async fn authorize<T>(
        &self,
        request: &Request<T>,
        (action, object): (Action, &str),
    ) -> Result<Option<Uuid>, Status> {
        let principal = self.ctx.authorize(request, action, object).await?;
        Ok(Uuid::try_parse(&principal.id).ok())
    }

    /// The caller's bearer must authenticate someone at Ward (for answers that say no more
    /// than "your input is bad").
    async fn authenticate_caller<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let bearer = lychd_auth::bearer(request)?;
        match decisions::authenticate(self.pool(), bearer, crate::OFFICE.name()).await? {
            decisions::Authentication::Authenticated(_) => Ok(()),
            decisions::Authentication::Refused(reason) => Err(self.stranger(request, reason)),
        }
    }

    /// A caller that authenticates nobody: counted, and refused as the layer would.
    fn stranger<T>(&self, request: &Request<T>, reason: Reason) -> Status {
        self.strangers.count(&source(request), reason.as_str());
        lychd_auth::AuthError::Unauthenticated(reason.as_str().to_owned()).into_status()
    }

    /// An asker's refusal: counted when it authenticates nobody (else it is audited).
    fn refused_asker<T>(&self, request: &Request<T>, d: &DecisionRecord, object: &str) -> Status {
        if d.reason.is_authentication_failure() {
            self.strangers.count(&source(request), d.reason.as_str());
        }
        refused(d, object)
    }

    fn pool(&self) -> &sqlx::PgPool {
        &self.ctx.pool
    }

    /// The caller must hold `action` on the effect owner of consent `id` (asked immediately
    /// before the change): its principal id. An unknown consent is not found.
    async fn on_consent<T>(
        &self,
        request: &Request<T>,
        action: Action,
        id: Uuid,
    ) -> Result<Uuid, Status> {
        let owner = store::consents::owner_of(self.pool(), id)
            .await?
            .ok_or(WardError::NotFound(crate::error::Entity::Consent))?;
        let principal = self
            .ctx
            .authorize(request, action, &effect_object(&owner))
            .await?;
        principal_uuid(&principal)
    }
}

impl WardService {
    /// The caller must hold `action` on the effect owner of proposal `id`'s consent (asked
    /// immediately before the change): its principal id, and the proposal's initiator. An
    /// unknown proposal is not found.
    async fn on_proposal<T>(
        &self,
        request: &Request<T>,
        action: Action,
        id: Uuid,
    ) -> Result<(Uuid, Uuid), Status> {
        let (owner, initiated_by) = store::proposals::parties(self.pool(), id)
            .await?
            .ok_or(WardError::NotFound(crate::error::Entity::Proposal))?;
        let principal = self
            .ctx
            .authorize(request, action, &effect_object(&owner))
            .await?;
        Ok((principal_uuid(&principal)?, initiated_by))
    }
}

impl WardService {
    /// `Decide` on a promotion: `ward:approve` on `effect:helmloop` (asked immediately before
    /// the change), and the caller must be the contract's accountable owner. An approval issues
    /// the records in the verdict's transaction and wakes the delivery.
    async fn decide_promotion(
        &self,
        request: &Request<pb::DecideRequest>,
        id: Uuid,
        owner: Uuid,
        verdict: crate::domain::consent::Verdict,
        review: &str,
    ) -> Result<Response<pb::DecideResponse>, Status> {
        let principal = self.on_consent(request, actions::APPROVE, id).await?;
        if principal != owner {
            return Err(WardError::NotOwner.into());
        }
        let (record, changed, issued) =
            store::promotions::decide(self.pool(), id, verdict, review, principal).await?;
        if changed {
            tracing::info!(consent = %id, state = record.state.as_str(), issued, "promotion settled");
        }
        if issued && let Some(link) = &self.helmloop {
            link.wake();
        }
        Ok(Response::new(pb::DecideResponse {
            consent: Some(consent::consent(&record)),
            changed,
        }))
    }
}

/// How often a watch stream reads new changes when it has caught up.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// Changes read per query.
const FOLLOW_BATCH: i64 = 256;

/// One `WatchConsents` stream's loop: reads changes in order (the gap rule of
/// `lychd_runtime::feed`), sends those of its run, and asks for the caller's authority again
/// every `every` — also while the caller does not read — ending the stream with the refusal
/// when it is gone.
struct Follower {
    pool: sqlx::PgPool,
    authorizer: lychd_runtime::auth::Authorizer,
    metadata: tonic::metadata::MetadataMap,
    every: Duration,
    run: Option<String>,
}

type Sent = tokio::sync::mpsc::Sender<Result<pb::WatchConsentsResponse, Status>>;

impl Follower {
    /// Still allowed? Otherwise the refusal is sent (bounded: a caller that reads nothing does
    /// not keep its place) and the stream ends.
    async fn still_allowed(&self, tx: &Sent) -> bool {
        let asking = Request::from_parts(self.metadata.clone(), tonic::Extensions::default(), ());
        match self
            .authorizer
            .authorize(&asking, actions::REVIEW, CONSENTS)
            .await
        {
            Ok(_) => true,
            Err(refused) => {
                let _ = tokio::time::timeout(self.every, tx.send(Err(refused))).await;
                false
            }
        }
    }

    async fn follow(self, after: i64, tx: Sent) {
        let mut cursor = lychd_runtime::feed::Cursor::after(after);
        let mut next_check = tokio::time::Instant::now() + self.every;
        loop {
            if tokio::time::Instant::now() >= next_check {
                if !self.still_allowed(&tx).await {
                    return;
                }
                next_check = tokio::time::Instant::now() + self.every;
            }
            let changes =
                match store::consents::changes_after(&self.pool, cursor.delivered, FOLLOW_BATCH)
                    .await
                {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = tx.send(Err(e.into())).await;
                        return;
                    }
                };
            let full = changes.len() as i64 == FOLLOW_BATCH;
            for change in changes {
                if !cursor.admit(change.seq, std::time::Instant::now()) {
                    break;
                }
                if self
                    .run
                    .as_ref()
                    .is_some_and(|r| *r != change.consent.run_id)
                {
                    continue;
                }
                let slot = loop {
                    tokio::select! {
                        slot = tx.reserve() => break slot,
                        () = tokio::time::sleep_until(next_check) => {
                            if !self.still_allowed(&tx).await {
                                return;
                            }
                            next_check = tokio::time::Instant::now() + self.every;
                        }
                    }
                };
                let Ok(slot) = slot else {
                    return;
                };
                slot.send(Ok(pb::WatchConsentsResponse {
                    change: u64::try_from(change.seq).unwrap_or(0),
                    changed_to: consent::state(change.changed_to) as i32,
                    consent: Some(consent::consent(&change.consent)),
                }));
            }
            if !full {
                tokio::select! {
                    () = tokio::time::sleep(FOLLOW_POLL) => {}
                    () = tx.closed() => return,
                }
            }
        }
    }
}

/// What a standing-rule administrator holds.
pub const PREAUTH: (Action, &str) = (actions::ADMINISTER, "preauth:*");

/// What a reviewer holds: every consent.
const CONSENTS: &str = "consent:*";

/// The object of an effect's consents: its owner.
fn effect_object(owner: &str) -> String {
    format!("effect:{owner}")
}

fn principal_uuid(p: &lychd_runtime::auth::Principal) -> Result<Uuid, Status> {
    Uuid::try_parse(&p.id).map_err(|_| {
        tracing::error!("ward resolved a principal whose id is not a uuid");
        crate::error::REFUSALS.refuse(lychd_runtime::refusal::common::INTERNAL)
    })
}

/// The object an asker must hold `ward:decide` on to ask about a token presented to
/// `audience`.
fn decision_object(audience: &str) -> String {
    format!("decision:{audience}")
}

/// The question an asker's own token must answer before Ward resolves someone else's: the same
/// one `ServeContext::authorize` would ask (audience this office, purpose the verb), about the
/// audience it asks for.
fn decide_question<'a>(token: &'a str, object: &'a str) -> decisions::Question<'a> {
    decisions::Question {
        token,
        action: DECIDE.name,
        object,
        audience: crate::OFFICE.name(),
        purpose: DECIDE.verb(),
        expected_policy_generation: None,
        asked_by: None,
    }
}

/// An asker's refused decision, as the auth layer would refuse it.
fn refused(d: &decisions::DecisionRecord, object: &str) -> Status {
    match crate::verifier::decision(d).into_principal(DECIDE.name, object) {
        Err(status) => status,
        Ok(_) => unreachable!("invariant: a refused asker's decision is not allowed"),
    }
}

#[tonic::async_trait]
impl Ward for WardService {
    async fn describe(
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

    async fn exchange_credential(
        &self,
        request: Request<pb::ExchangeCredentialRequest>,
    ) -> Result<Response<pb::ExchangeCredentialResponse>, Status> {
        // The bearer is the credential: no session, no authorize call.
        let credential = lychd_auth::bearer(&request)?;
        let r = request.get_ref();
        let audiences = convert::audiences(&r.audiences)?;
        let exchanged =
            store::credentials::exchange(self.pool(), credential, r.ttl_seconds, &audiences).await;
        let session = match exchanged {
            Err(WardError::Refused(refusal)) => {
                self.strangers.count(&source(&request), refusal.as_str());
                return Err(WardError::Refused(refusal).into());
            }
            other => other?,
        };
        Ok(Response::new(pb::ExchangeCredentialResponse {
            session_token: session.token.expose_secret().to_owned(),
            session_id: session.id.to_string(),
            expires_at: Some(convert::timestamp(session.expires_at)),
            principal: Some(convert::principal(&session.principal)),
            audiences: session.audiences,
        }))
    }

    async fn authenticate(
        &self,
        request: Request<pb::AuthenticateRequest>,
    ) -> Result<Response<pb::AuthenticateResponse>, Status> {
        // Anyone may resolve their own token; someone else's needs `ward:decide`. The layer
        // does not authenticate this method: the answer (or the asker's question, resolved in
        // the same statement) does.
        let bearer = lychd_auth::bearer(&request)?;
        if !lychd_auth::is_session_token(bearer) {
            return Err(self.stranger(&request, Reason::SessionUnknown));
        }
        let token = &request.get_ref().token;
        let authentication = if bearer == token {
            match decisions::authenticate(self.pool(), token, crate::OFFICE.name()).await? {
                // The caller itself is not authenticated: refused as the layer would.
                decisions::Authentication::Refused(reason) => {
                    return Err(self.stranger(&request, reason));
                }
                authenticated => authenticated,
            }
        } else {
            let audience = match convert::authenticate_request(request.get_ref()) {
                Ok(audience) => audience,
                Err(invalid) => {
                    // Bad input is answered to an authenticated caller only.
                    self.authenticate_caller(&request).await?;
                    return Err(invalid.into());
                }
            };
            let object = decision_object(&audience);
            let asker = decide_question(bearer, &object);
            let asked =
                decisions::authenticate_asked(self.pool(), &self.log, &asker, token, &audience);
            match asked.await? {
                Asked::Refused(d) => return Err(self.refused_asker(&request, &d, &object)),
                Asked::Answered(a) => {
                    if let decisions::Authentication::Refused(reason) = &a {
                        self.strangers
                            .count(&presented_to(&audience), reason.as_str());
                    }
                    a
                }
            }
        };
        let result = match authentication {
            decisions::Authentication::Authenticated(r) => {
                pb::authenticate_response::Result::Authenticated(pb::Authenticated {
                    principal: Some(convert::principal(&r.principal)),
                    session_id: r.session_id.to_string(),
                    session_expires_at: Some(convert::timestamp(r.session_expires_at)),
                })
            }
            decisions::Authentication::Refused(reason) => {
                pb::authenticate_response::Result::Refused(Refusal {
                    reason: reason.as_str().to_owned(),
                    domain: DOMAIN.to_owned(),
                    message: "session not valid".to_owned(),
                    field_violations: Vec::new(),
                })
            }
        };
        Ok(Response::new(pb::AuthenticateResponse {
            result: Some(result),
        }))
    }

    async fn authorize(
        &self,
        request: Request<pb::AuthorizeRequest>,
    ) -> Result<Response<pb::AuthorizeResponse>, Status> {
        let r = request.get_ref();
        if !lychd_auth::is_session_token(lychd_auth::bearer(&request)?) {
            return Err(self.stranger(&request, Reason::SessionUnknown));
        }
        if let Err(invalid) = convert::authorize_request(r) {
            // Bad input is answered to an authenticated caller only.
            self.authenticate_caller(&request).await?;
            return Err(invalid.into());
        }
        // The layer does not authenticate this method: the asker's own `ward:decide` question
        // is resolved in the same statement as the one it asks.
        let object = decision_object(&r.audience);
        let asker = decide_question(lychd_auth::bearer(&request)?, &object);
        let question = decisions::Question {
            token: &r.token,
            action: &r.action,
            object: &r.object,
            audience: &r.audience,
            purpose: &r.purpose,
            expected_policy_generation: r.expected_policy_generation,
            asked_by: None,
        };
        let d = match decisions::authorize_asked(self.pool(), &self.log, &asker, &question).await? {
            Asked::Refused(d) => return Err(self.refused_asker(&request, &d, &object)),
            Asked::Answered(d) => d,
        };
        if d.reason.is_authentication_failure() {
            self.strangers
                .count(&presented_to(&r.audience), d.reason.as_str());
        }
        Ok(Response::new(pb::AuthorizeResponse {
            decision: if d.allowed() {
                pb::Decision::Allow
            } else {
                pb::Decision::Deny
            } as i32,
            reason: d.reason.as_str().to_owned(),
            principal: d.principal.as_ref().map(convert::principal),
            policy_generation: d.policy_generation,
            revocation_generation: d.revocation_generation,
        }))
    }

    async fn enroll_principal(
        &self,
        request: Request<pb::EnrollPrincipalRequest>,
    ) -> Result<Response<pb::EnrollPrincipalResponse>, Status> {
        let actor = self.authorize(&request, ADMINISTER).await?;
        let enrollment = convert::enrollment(request.get_ref())?;
        let principal = store::principals::enroll(self.pool(), actor, &enrollment).await?;
        Ok(Response::new(pb::EnrollPrincipalResponse {
            principal: Some(convert::principal(&principal)),
        }))
    }

    async fn issue_credential(
        &self,
        request: Request<pb::IssueCredentialRequest>,
    ) -> Result<Response<pb::IssueCredentialResponse>, Status> {
        let actor = self.authorize(&request, ADMINISTER).await?;
        let c = convert::issue(request.get_ref())?;
        let issued =
            store::credentials::issue(self.pool(), actor, c.principal_id, c.kind, c.ttl).await?;
        Ok(Response::new(pb::IssueCredentialResponse {
            credential_id: issued.id.to_string(),
            credential: issued.secret.expose_secret().to_owned(),
            expires_at: Some(convert::timestamp(issued.expires_at)),
        }))
    }

    async fn rotate_credential(
        &self,
        request: Request<pb::RotateCredentialRequest>,
    ) -> Result<Response<pb::RotateCredentialResponse>, Status> {
        let actor = self.authorize(&request, ADMINISTER).await?;
        let credential_id = convert::id("credential_id", &request.get_ref().credential_id)?;
        let issued = store::credentials::rotate(self.pool(), actor, credential_id).await?;
        Ok(Response::new(pb::RotateCredentialResponse {
            credential_id: issued.id.to_string(),
            credential: issued.secret.expose_secret().to_owned(),
            expires_at: Some(convert::timestamp(issued.expires_at)),
        }))
    }

    async fn revoke(
        &self,
        request: Request<pb::RevokeRequest>,
    ) -> Result<Response<pb::RevokeResponse>, Status> {
        use convert::RevokeTarget;
        let actor = self.authorize(&request, ADMINISTER).await?;
        let target = convert::revoke_target(request.get_ref())?;
        let pool = self.pool();
        let revoked = match target {
            RevokeTarget::Credential(id) => store::credentials::revoke(pool, actor, id).await?,
            RevokeTarget::Session(id) => store::sessions::revoke(pool, actor, id).await?,
            RevokeTarget::Principal(id) => store::principals::revoke(pool, actor, id).await?,
        };
        Ok(Response::new(pb::RevokeResponse {
            changed: revoked.changed,
            revocation_generation: revoked.revocation_generation,
        }))
    }

    async fn assign(
        &self,
        request: Request<pb::AssignRequest>,
    ) -> Result<Response<pb::AssignResponse>, Status> {
        let actor = self.authorize(&request, ADMINISTER).await?;
        let a = convert::assign(request.get_ref())?;
        let assigned =
            store::assignments::assign(self.pool(), actor, a.principal_id, &a.grant, a.expires_at)
                .await?;
        Ok(Response::new(pb::AssignResponse {
            assignment: Some(convert::assignment(&assigned.assignment)),
            policy_generation: assigned.policy_generation,
        }))
    }

    async fn unassign(
        &self,
        request: Request<pb::UnassignRequest>,
    ) -> Result<Response<pb::UnassignResponse>, Status> {
        let actor = self.authorize(&request, ADMINISTER).await?;
        let assignment_id = convert::id("assignment_id", &request.get_ref().assignment_id)?;
        let u = store::assignments::unassign(self.pool(), actor, assignment_id).await?;
        Ok(Response::new(pb::UnassignResponse {
            changed: u.changed,
            policy_generation: u.policy_generation,
        }))
    }

    async fn list_principals(
        &self,
        request: Request<pb::ListPrincipalsRequest>,
    ) -> Result<Response<pb::ListPrincipalsResponse>, Status> {
        self.authorize(&request, ADMINISTER).await?;
        let p = convert::principals_page(request.get_ref())?;
        let page = store::principals::list(self.pool(), p.size, p.after).await?;
        Ok(Response::new(pb::ListPrincipalsResponse {
            principals: page.items.iter().map(convert::principal).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }

    async fn list_assignments(
        &self,
        request: Request<pb::ListAssignmentsRequest>,
    ) -> Result<Response<pb::ListAssignmentsResponse>, Status> {
        self.authorize(&request, ADMINISTER).await?;
        let (principal_id, p) = convert::assignments_page(request.get_ref())?;
        let page = store::assignments::list(self.pool(), principal_id, p.size, p.after).await?;
        Ok(Response::new(pb::ListAssignmentsResponse {
            assignments: page.items.iter().map(convert::assignment).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }

    async fn list_audit(
        &self,
        request: Request<pb::ListAuditRequest>,
    ) -> Result<Response<pb::ListAuditResponse>, Status> {
        self.authorize(&request, ADMINISTER).await?;
        let (size, token) = convert::page(request.get_ref().page.as_ref());
        let before = paging::seq_before(paging::List::Audit, token)
            .map_err(|d| WardError::invalid("page.page_token", d))?;
        // Every decision answered and every refusal counted before this listing is in it.
        self.log.flush().await?;
        self.strangers.flush().await?;
        let page = store::audit::list(self.pool(), size, before).await?;
        Ok(Response::new(pb::ListAuditResponse {
            events: page.items.iter().map(convert::audit_event).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }

    async fn propose_effect(
        &self,
        request: Request<pb::ProposeEffectRequest>,
    ) -> Result<Response<pb::ProposeEffectResponse>, Status> {
        // Self-authenticating: bad input is refused only to a caller that authenticates.
        let proposal = match consent::proposal(request.get_ref()) {
            Ok(p) => p,
            Err(invalid) => {
                self.authenticate_caller(&request).await?;
                return Err(invalid.into());
            }
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
        let censored = lychd_helmloop::to_canonical_string(&censor(&proposal.arguments));
        let digests = crate::domain::consent::digests(&proposal, &principal.id);
        let (Ok(censored), Ok((arguments_digest, binding_digest))) = (censored, digests) else {
            // The arguments parsed under HL-C14N-1, so they canonicalize: unreachable in
            // practice, refused without echoing anything if it ever is.
            return Err(WardError::invalid("arguments_json", "cannot be canonicalized").into());
        };
        let derived = store::consents::Derived {
            censored_arguments: &censored,
            arguments_digest: &arguments_digest,
            binding_digest: &binding_digest,
            ttl_seconds: i64::from(self.settings.consent_ttl(proposal.class)),
        };
        let (record, created) = store::consents::propose(
            self.pool(),
            &proposal,
            requested_by,
            &principal.name,
            &derived,
            &self.rules,
        )
        .await?;
        tracing::info!(consent = %record.id, owner = %record.effect_owner, created, "effect proposed");
        Ok(Response::new(pb::ProposeEffectResponse {
            consent: Some(consent::consent(&record)),
            created,
        }))
    }

    async fn decide(
        &self,
        request: Request<pb::DecideRequest>,
    ) -> Result<Response<pb::DecideResponse>, Status> {
        let (id, verdict, review) = consent::decide(request.get_ref())?;
        if let Some(owner) = store::promotions::owner_of(self.pool(), id).await? {
            return self
                .decide_promotion(&request, id, owner, verdict, &review)
                .await;
        }
        let principal = self.on_consent(&request, actions::APPROVE, id).await?;
        let (record, changed) =
            store::consents::decide(self.pool(), id, verdict, &review, principal).await?;
        if changed {
            tracing::info!(consent = %id, state = record.state.as_str(), "consent settled");
        }
        Ok(Response::new(pb::DecideResponse {
            consent: Some(consent::consent(&record)),
            changed,
        }))
    }

    async fn consume_consent(
        &self,
        request: Request<pb::ConsumeConsentRequest>,
    ) -> Result<Response<pb::ConsumeConsentResponse>, Status> {
        let (id, digest) = consent::consume(request.get_ref())?;
        let principal = self.on_consent(&request, actions::CONSUME, id).await?;
        let record = store::consents::consume(self.pool(), id, &digest, principal).await?;
        tracing::info!(consent = %id, "approval consumed");
        Ok(Response::new(pb::ConsumeConsentResponse {
            consent: Some(consent::consent(&record)),
        }))
    }

    async fn revoke_consent(
        &self,
        request: Request<pb::RevokeConsentRequest>,
    ) -> Result<Response<pb::RevokeConsentResponse>, Status> {
        let id = convert::id("consent_id", &request.get_ref().consent_id)?;
        let principal = self.on_consent(&request, actions::APPROVE, id).await?;
        let record = store::consents::revoke(self.pool(), id, principal).await?;
        Ok(Response::new(pb::RevokeConsentResponse {
            consent: Some(consent::consent(&record)),
        }))
    }

    async fn cancel_for_run(
        &self,
        request: Request<pb::CancelForRunRequest>,
    ) -> Result<Response<pb::CancelForRunResponse>, Status> {
        let run = consent::run("run_id", &request.get_ref().run_id)?;
        let principal = self
            .ctx
            .authorize(&request, actions::CANCEL, &format!("run:{run}"))
            .await?;
        let cancelled =
            store::consents::cancel_for_run(self.pool(), &run, principal_uuid(&principal)?).await?;
        Ok(Response::new(pb::CancelForRunResponse {
            cancelled: u32::try_from(cancelled).unwrap_or(u32::MAX),
        }))
    }

    async fn get_consent(
        &self,
        request: Request<pb::GetConsentRequest>,
    ) -> Result<Response<pb::GetConsentResponse>, Status> {
        let id = convert::id("consent_id", &request.get_ref().consent_id)?;
        self.ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let record = store::consents::get(self.pool(), id)
            .await?
            .ok_or(WardError::NotFound(crate::error::Entity::Consent))?;
        Ok(Response::new(pb::GetConsentResponse {
            consent: Some(consent::consent(&record)),
        }))
    }

    async fn list_preauth_rules(
        &self,
        request: Request<pb::ListPreauthRulesRequest>,
    ) -> Result<Response<pb::ListPreauthRulesResponse>, Status> {
        self.authorize(&request, PREAUTH).await?;
        let rules = store::preauth::list(self.pool()).await?;
        Ok(Response::new(pb::ListPreauthRulesResponse {
            rules: rules.iter().map(consent::rule).collect(),
        }))
    }

    async fn disable_preauth_rule(
        &self,
        request: Request<pb::DisablePreauthRuleRequest>,
    ) -> Result<Response<pb::DisablePreauthRuleResponse>, Status> {
        let slug = consent::slug(&request.get_ref().slug)?;
        let actor = self.authorize(&request, PREAUTH).await?;
        let actor =
            actor.ok_or_else(|| WardError::invalid("authorization", "unknown principal"))?;
        let rule = store::preauth::disable(self.pool(), &slug, actor).await?;
        tracing::info!(rule = %rule.slug, "standing rule disabled");
        Ok(Response::new(pb::DisablePreauthRuleResponse {
            rule: Some(consent::rule(&rule)),
        }))
    }

    type WatchConsentsStream =
        std::pin::Pin<Box<dyn Stream<Item = Result<pb::WatchConsentsResponse, Status>> + Send>>;

    async fn watch_consents(
        &self,
        request: Request<pb::WatchConsentsRequest>,
    ) -> Result<Response<Self::WatchConsentsStream>, Status> {
        let r = request.get_ref();
        let after = i64::try_from(r.after_change)
            .map_err(|_| WardError::invalid("after_change", "must be at most 2^63-1"))?;
        let run = match r.run_id.as_str() {
            "" => None,
            run => Some(consent::run("run_id", run)?),
        };
        self.ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let place = self
            .streams
            .clone()
            .try_acquire_owned()
            .map_err(|_| WardError::StreamLimitReached)?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let follower = Follower {
            pool: self.pool().clone(),
            authorizer: self.ctx.authorizer.clone(),
            metadata: request.metadata().clone(),
            every: self.settings.stream_recheck_interval,
            run,
        };
        tokio::spawn(async move {
            let _place = place;
            follower.follow(after, tx).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn list_consents(
        &self,
        request: Request<pb::ListConsentsRequest>,
    ) -> Result<Response<pb::ListConsentsResponse>, Status> {
        let q = consent::list(request.get_ref())?;
        self.ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let page =
            store::consents::list(self.pool(), q.run_id.as_deref(), q.state, q.size, q.before)
                .await?;
        Ok(Response::new(pb::ListConsentsResponse {
            consents: page.items.iter().map(consent::consent).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }

    async fn create_proposal(
        &self,
        request: Request<pb::CreateProposalRequest>,
    ) -> Result<Response<pb::CreateProposalResponse>, Status> {
        let c = proposal::create(request.get_ref())?;
        // Only the consent's requesting principal (checked with the consent locked).
        let caller = self
            .on_consent(&request, actions::PROPOSE, c.consent_id)
            .await?;
        let created = store::proposals::create(self.pool(), &c.as_new(), caller).await?;
        tracing::info!(proposal = %created.id, consent = %created.consent_id, "proposal recorded");
        Ok(Response::new(pb::CreateProposalResponse {
            proposal: Some(proposal::proposal(&created)),
        }))
    }

    async fn append_proposal_record(
        &self,
        request: Request<pb::AppendProposalRecordRequest>,
    ) -> Result<Response<pb::AppendProposalRecordResponse>, Status> {
        use crate::domain::proposal::Appender;
        let (id, record) = proposal::append(request.get_ref())?;
        let appender = record
            .kind
            .appended_by()
            .ok_or_else(|| WardError::invalid("kind", "is appended by ward or by its own call"))?;
        let action = match appender {
            Appender::Proposer => actions::PROPOSE,
            Appender::EffectOwner => actions::CONSUME,
        };
        let (caller, initiated_by) = self.on_proposal(&request, action, id).await?;
        if appender == Appender::Proposer && caller != initiated_by {
            return Err(WardError::NotProposer.into());
        }
        let appended = store::proposals::append_record(self.pool(), id, &record, caller).await?;
        // The kind and number only: the text is untrusted content and never logged.
        tracing::info!(proposal = %id, seq = appended.seq, kind = appended.kind.as_str(), "proposal record appended");
        Ok(Response::new(pb::AppendProposalRecordResponse {
            record: Some(proposal::record(&appended)),
        }))
    }

    async fn supersede(
        &self,
        request: Request<pb::SupersedeRequest>,
    ) -> Result<Response<pb::SupersedeResponse>, Status> {
        let (predecessor, successor) = proposal::supersede(request.get_ref())?;
        let (caller, _) = self
            .on_proposal(&request, actions::PROPOSE, predecessor)
            .await?;
        let (closed, consent) = store::proposals::close(
            self.pool(),
            predecessor,
            store::proposals::Closing::Supersede(successor),
            caller,
        )
        .await?;
        tracing::info!(proposal = %predecessor, successor = %successor, "proposal superseded");
        Ok(Response::new(pb::SupersedeResponse {
            predecessor: Some(proposal::proposal(&closed)),
            predecessor_consent: Some(consent::consent(&consent)),
        }))
    }

    async fn withdraw(
        &self,
        request: Request<pb::WithdrawRequest>,
    ) -> Result<Response<pb::WithdrawResponse>, Status> {
        let id = convert::id("proposal_id", &request.get_ref().proposal_id)?;
        let (caller, _) = self.on_proposal(&request, actions::PROPOSE, id).await?;
        let (closed, consent) =
            store::proposals::close(self.pool(), id, store::proposals::Closing::Withdraw, caller)
                .await?;
        tracing::info!(proposal = %id, "proposal withdrawn");
        Ok(Response::new(pb::WithdrawResponse {
            proposal: Some(proposal::proposal(&closed)),
            consent: Some(consent::consent(&consent)),
        }))
    }

    async fn get_proposal(
        &self,
        request: Request<pb::GetProposalRequest>,
    ) -> Result<Response<pb::GetProposalResponse>, Status> {
        let (id, size, after) = proposal::get(request.get_ref())?;
        self.ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let found = store::proposals::get(self.pool(), id)
            .await?
            .ok_or(WardError::NotFound(crate::error::Entity::Proposal))?;
        let page = store::proposals::records(self.pool(), id, size, after).await?;
        Ok(Response::new(pb::GetProposalResponse {
            proposal: Some(proposal::proposal(&found)),
            records: page.items.iter().map(proposal::record).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }

    async fn list_proposals(
        &self,
        request: Request<pb::ListProposalsRequest>,
    ) -> Result<Response<pb::ListProposalsResponse>, Status> {
        let (group, size, after) = proposal::list(request.get_ref())?;
        self.ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let page = store::proposals::list(self.pool(), group, size, after).await?;
        Ok(Response::new(pb::ListProposalsResponse {
            proposals: page.items.iter().map(proposal::proposal).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }

    async fn propose_promotion(
        &self,
        request: Request<pb::ProposePromotionRequest>,
    ) -> Result<Response<pb::ProposePromotionResponse>, Status> {
        use crate::domain::consent::{Binding, EffectClass, Proposal};
        use crate::domain::promotion::{EFFECT_OWNER, PromotionRefusal, TOOL, Terms};
        let asked = promotion::request(request.get_ref())?;
        let object = effect_object(EFFECT_OWNER);
        let first = self
            .ctx
            .authorize(&request, actions::PROPOSE, &object)
            .await?;
        let link = self
            .helmloop
            .as_ref()
            .ok_or(WardError::Promotion(PromotionRefusal::NotConfigured))?;
        let contract = link.contract(&asked.contract).await?;
        let owner = store::promotions::owner(self.pool(), &contract.owner)
            .await?
            .ok_or(WardError::Promotion(PromotionRefusal::OwnerNotEnrolled))?;
        let terms = Terms::new(&asked, &contract);
        let proposal = Proposal {
            run_id: asked.run_id.clone(),
            effect_owner: EFFECT_OWNER.to_owned(),
            effect_id: "promote".to_owned(),
            effect_revision: 1,
            tool_name: TOOL.to_owned(),
            deferred_call_id: "promote".to_owned(),
            class: EffectClass::SecretOrAuthorityChange,
            binding: Binding::default(),
            arguments: terms.to_value(),
        };
        let terms_json = lychd_helmloop::to_canonical_string(&proposal.arguments);
        let censored = lychd_helmloop::to_canonical_string(&censor(&proposal.arguments));
        let digests = crate::domain::consent::digests(&proposal, &first.id);
        let (Ok(terms_json), Ok(censored), Ok((arguments_digest, binding_digest))) =
            (terms_json, censored, digests)
        else {
            return Err(WardError::Promotion(PromotionRefusal::ContractUnusable).into());
        };
        let derived = store::consents::Derived {
            censored_arguments: &censored,
            arguments_digest: &arguments_digest,
            binding_digest: &binding_digest,
            ttl_seconds: i64::from(self.settings.consent_ttl(proposal.class)),
        };
        // Asked again immediately before the write, under the first decision's policy.
        let principal = self
            .ctx
            .authorizer
            .authorize_for(
                &request,
                actions::PROPOSE,
                &object,
                actions::PROPOSE.verb(),
                Some(first.policy_generation),
            )
            .await?;
        let (record, promotion, created) = store::promotions::propose(
            self.pool(),
            &proposal,
            principal_uuid(&principal)?,
            &derived,
            (owner, &contract.owner),
            &terms_json,
        )
        .await?;
        tracing::info!(consent = %record.id, created, "promotion proposed");
        Ok(Response::new(pb::ProposePromotionResponse {
            consent: Some(consent::consent(&record)),
            created,
            promotion: Some(promotion::promotion(&promotion)),
        }))
    }

    async fn get_promotion(
        &self,
        request: Request<pb::GetPromotionRequest>,
    ) -> Result<Response<pb::GetPromotionResponse>, Status> {
        let id = convert::id("consent_id", &request.get_ref().consent_id)?;
        self.ctx
            .authorize(&request, actions::REVIEW, CONSENTS)
            .await?;
        let promotion = store::promotions::get(self.pool(), id)
            .await?
            .ok_or(WardError::NotFound(crate::error::Entity::Promotion))?;
        let record = store::consents::get(self.pool(), id)
            .await?
            .ok_or(WardError::NotFound(crate::error::Entity::Consent))?;
        Ok(Response::new(pb::GetPromotionResponse {
            consent: Some(consent::consent(&record)),
            promotion: Some(promotion::promotion(&promotion)),
        }))
    }
}

/// Start the office: the decision log's writer (finished before exit) and the routes (every
/// call passes the auth layer, then `authorize`).
pub fn start(ctx: ServeContext) -> BoxFuture<'static, anyhow::Result<Routes>> {
    Box::pin(async move {
        let (log, writer) = DecisionLog::start(ctx.pool.clone());
        ctx.finishing.push(writer);
        let settings = Settings::load(&ctx.config)?;
        // The standing rules, as one set, before the first call: a bad file refuses the start.
        let rules = settings
            .preauth_rules()
            .map_err(|e| anyhow::anyhow!("preauthorization rules refused: {e}"))?;
        store::preauth::sync(&ctx.pool, &rules)
            .await
            .map_err(|e| anyhow::anyhow!("preauthorization rules not synchronised: {e}"))?;
        tracing::info!(
            rules = rules.len(),
            "standing preauthorization rules loaded"
        );
        let helmloop = crate::helmloop::Link::from_context(&ctx)?;
        if let Some(link) = &helmloop {
            ctx.finishing
                .push(link.start(ctx.pool.clone(), settings.promotion_retry_interval));
        }
        let (strangers, writer) = Tally::start(ctx.pool.clone());
        ctx.finishing.push(writer);
        Ok(routes(&ctx, log, strangers, settings, rules, helmloop))
    })
}

fn routes(
    ctx: &ServeContext,
    log: DecisionLog,
    strangers: Tally,
    settings: Settings,
    rules: Vec<Rule>,
    helmloop: Option<crate::helmloop::Link>,
) -> Routes {
    let server = WardServer::new(WardService {
        ctx: ctx.clone(),
        log,
        strangers,
        streams: Arc::new(tokio::sync::Semaphore::new(settings.stream_limit)),
        settings,
        rules: Arc::new(rules),
        helmloop,
    })
    .max_decoding_message_size(ctx.max_message_bytes())
    .max_encoding_message_size(ctx.max_message_bytes());
    Routes::new(server)
}
