//! Decision handlers: `Authenticate` and `Authorize` (self-authenticating: the caller's own
//! question is resolved in the statement that answers it) and `ListAudit`.
//!
//! Invariant: anyone may resolve their own token; someone else's needs `ward:decide` on
//! `decision:<audience>`; bad input is answered only to a caller that authenticates, and a
//! caller that authenticates nobody is refused as the auth layer would refuse it (and counted);
//! the caller's principal is held against its connection's TLS client certificate as the auth
//! layer holds every other method's caller (`lychd_runtime::tls`): a mismatch withholds the
//! answer (the decision is recorded all the same).

use lychd_proto::common::v1::{PageResponse, Refusal};
use lychd_proto::ward::v1 as pb;
use lychd_runtime::server::ServeContext;
use tonic::{Request, Response, Status};

use std::sync::Arc;

use super::ask::{self, ADMINISTER, caller, source};
use super::convert;
use crate::actions;
use crate::domain::decision::Reason;
use crate::domain::paging;
use crate::error::DOMAIN;
use crate::service::decisions::{
    Asked, Authentication, DecisionRecord, Decisions, Question, decision_object,
};
use crate::service::identity::PrincipalRecord;

pub struct Handlers {
    pub ctx: ServeContext,
    pub decisions: Arc<Decisions>,
}

/// An asker's refused decision, as the auth layer would refuse it.
fn refused(d: &DecisionRecord, object: &str) -> Status {
    match crate::verifier::decision(d).into_principal(actions::DECIDE.name, object) {
        Err(status) => status,
        Ok(_) => unreachable!("invariant: a refused asker's decision is not allowed"),
    }
}

/// A decision as `Authorize` answers it.
fn answer(d: &DecisionRecord) -> pb::AuthorizeResponse {
    pb::AuthorizeResponse {
        decision: if d.allowed() {
            pb::Decision::Allow
        } else {
            pb::Decision::Deny
        } as i32,
        reason: d.reason.as_str().to_owned(),
        principal: d.principal.as_ref().map(convert::principal),
        policy_generation: d.policy_generation,
        revocation_generation: d.revocation_generation,
    }
}

impl Handlers {
    /// Does what `request`'s connection says of the caller (its TLS client certificate) agree
    /// with the principal its session resolved to?
    fn peer_checked<T>(
        &self,
        request: &Request<T>,
        caller: &PrincipalRecord,
    ) -> Result<(), Status> {
        self.ctx
            .authorizer
            .checked(request.extensions(), crate::verifier::principal(caller))
            .map(drop)
    }

    fn stranger<T>(&self, request: &Request<T>, reason: Reason) -> Status {
        ask::stranger(&self.decisions, request, reason)
    }

    pub async fn authenticate(
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
            let authentication = self.decisions.authenticate(token).await?;
            match &authentication {
                // The caller itself is not authenticated: refused as the layer would.
                Authentication::Refused(reason) => {
                    return Err(self.stranger(&request, *reason));
                }
                Authentication::Authenticated(r) => self.peer_checked(&request, &r.principal)?,
            }
            authentication
        } else {
            let audience = match convert::authenticate_request(request.get_ref()) {
                Ok(audience) => audience,
                Err(invalid) => return Err(ask::invalid(&self.decisions, &request, invalid).await),
            };
            let from = source(&request);
            let asked = self
                .decisions
                .authenticate_asked(&from, bearer, token, &audience);
            match asked.await? {
                Asked::Refused(d) => return Err(refused(&d, &decision_object(&audience))),
                Asked::Answered(a, asker) => {
                    self.peer_checked(&request, &asker)?;
                    a
                }
            }
        };
        let result = match authentication {
            Authentication::Authenticated(r) => {
                pb::authenticate_response::Result::Authenticated(pb::Authenticated {
                    principal: Some(convert::principal(&r.principal)),
                    session_id: r.session_id.to_string(),
                    session_expires_at: Some(convert::timestamp(r.session_expires_at)),
                })
            }
            Authentication::Refused(reason) => {
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

    pub async fn authorize(
        &self,
        request: Request<pb::AuthorizeRequest>,
    ) -> Result<Response<pb::AuthorizeResponse>, Status> {
        let r = request.get_ref();
        let bearer = lychd_auth::bearer(&request)?;
        if !lychd_auth::is_session_token(bearer) {
            return Err(self.stranger(&request, Reason::SessionUnknown));
        }
        if let Err(invalid) = convert::authorize_request(r) {
            return Err(ask::invalid(&self.decisions, &request, invalid).await);
        }
        // The layer does not authenticate this method: the asker's own `ward:decide` question
        // is resolved in the same statement as the one it asks.
        let question = Question {
            token: &r.token,
            action: &r.action,
            object: &r.object,
            audience: &r.audience,
            purpose: &r.purpose,
            expected_policy_generation: r.expected_policy_generation,
            asked_by: None,
        };
        let from = source(&request);
        let asked = self.decisions.authorize_asked(&from, bearer, &question);
        let d = match asked.await? {
            Asked::Refused(d) => return Err(refused(&d, &decision_object(&r.audience))),
            Asked::Answered(d, asker) => {
                self.peer_checked(&request, &asker)?;
                d
            }
        };
        Ok(Response::new(answer(&d)))
    }

    pub async fn authorize_batch(
        &self,
        request: Request<pb::AuthorizeBatchRequest>,
    ) -> Result<Response<pb::AuthorizeBatchResponse>, Status> {
        let r = request.get_ref();
        let bearer = lychd_auth::bearer(&request)?;
        if !lychd_auth::is_session_token(bearer) {
            return Err(self.stranger(&request, Reason::SessionUnknown));
        }
        let audience = match convert::authorize_batch(r) {
            Ok(audience) => audience,
            Err(invalid) => return Err(ask::invalid(&self.decisions, &request, invalid).await),
        };
        // A malformed question is answered with its refusal; the others are asked together,
        // with the asker's own `ward:decide` question, in one statement.
        let checked: Vec<_> = r
            .questions
            .iter()
            .map(convert::authorize_question)
            .collect();
        let questions: Vec<Question<'_>> = r
            .questions
            .iter()
            .zip(&checked)
            .filter(|(_, c)| c.is_ok())
            .map(|(q, _)| Question {
                token: &q.token,
                action: &q.action,
                object: &q.object,
                audience: &audience,
                purpose: &q.purpose,
                expected_policy_generation: q.expected_policy_generation,
                asked_by: None,
            })
            .collect();
        let from = source(&request);
        let asked = self
            .decisions
            .authorize_batch(&from, bearer, &audience, &questions);
        let mut decided = match asked.await? {
            Asked::Refused(d) => return Err(refused(&d, &decision_object(&audience))),
            Asked::Answered(ds, asker) => {
                self.peer_checked(&request, &asker)?;
                ds.into_iter()
            }
        };
        let answers = checked
            .into_iter()
            .map(|c| pb::AuthorizeAnswer {
                result: Some(match c {
                    Err(invalid) => {
                        pb::authorize_answer::Result::Refused(convert::refusal(invalid))
                    }
                    Ok(()) => pb::authorize_answer::Result::Decided(answer(
                        &decided
                            .next()
                            .expect("invariant: one decision per well-formed question"),
                    )),
                }),
            })
            .collect();
        Ok(Response::new(pb::AuthorizeBatchResponse { answers }))
    }

    pub async fn list_audit(
        &self,
        request: Request<pb::ListAuditRequest>,
    ) -> Result<Response<pb::ListAuditResponse>, Status> {
        caller(&self.ctx, &request, ADMINISTER).await?;
        let (size, token) = convert::page(request.get_ref().page.as_ref());
        let before = paging::seq_before(paging::List::Audit, token)
            .map_err(|d| convert::invalid("page.page_token", d))?;
        // Every decision answered and every refusal counted before this listing is in it:
        // those of Ward's API and those of its own auth layer (its verifier's tally).
        self.decisions.flush().await?;
        self.ctx
            .authorizer
            .verifier()
            .flush_counts()
            .await
            .map_err(lychd_auth::AuthError::into_status)?;
        let page = self.decisions.audit(size, before).await?;
        Ok(Response::new(pb::ListAuditResponse {
            events: page.items.iter().map(convert::audit_event).collect(),
            page: Some(PageResponse {
                next_page_token: page.next_page_token,
            }),
        }))
    }
}
