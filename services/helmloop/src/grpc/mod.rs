//! gRPC handlers of `lychd.helmloop.v1.HelmLoop`: authenticate (the layer, or the handler's own
//! decision on the self-authenticating `Reduce`) → decode → authorize (the
//! action and object declared next to each handler, built from decoded input only) → call the
//! service → encode.
//!
//! Authority at the write: `AppendRecords` and a stored evaluation ask Ward again, with the
//! first decision's policy generation, immediately before the insert. Objects: records and
//! stored reductions are `subject:<subject.id>`; a batch asks `subject:*` first and each
//! subject only when that is denied; inline work (`Reduce`, `Validate`, `Digest`,
//! `RunConformance`) is on `office:helmloop`; `GetRecord` and `GetEvaluation`, whose request
//! names no subject, ask `subject:*` and, when that is denied, the subject of what was found.

mod authority;
mod convert;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::future::BoxFuture;
use lychd_proto::helmloop::v1 as pb;
use lychd_proto::helmloop::v1::helm_loop_server::{HelmLoop, HelmLoopServer};
use lychd_runtime::auth::{Action, Principal};
use lychd_runtime::paging::{Seq, Tokens};
use lychd_runtime::server::ServeContext;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use crate::actions;
use crate::domain::record::{Authority, Verified};
use crate::error::HelmLoopError;
use crate::service::{FirstBody, Identity, Service};

/// How often an append is authorized again when first bodies appear under its identities
/// between the look-up and the write (each round leaves fewer identities without one).
const APPEND_ATTEMPTS: usize = 3;

/// The object of inline work.
const OFFICE_OBJECT: &str = "office:helmloop";
/// Every subject.
const ANY_SUBJECT: &str = "subject:*";

/// The Ward action appending a record of `authority` needs.
pub fn append_action(authority: Authority) -> Action {
    match authority {
        Authority::Observation => actions::APPEND_OBSERVATION,
        Authority::LearningProposal => actions::APPEND_LEARNING_PROPOSAL,
        Authority::Contract => actions::APPEND_CONTRACT,
        Authority::Grant => actions::APPEND_GRANT,
        Authority::Assurance => actions::APPEND_ASSURANCE,
        Authority::Promotion => actions::APPEND_PROMOTION,
        Authority::LearningAcceptance => actions::APPEND_LEARNING_ACCEPTANCE,
    }
}

pub struct HelmLoopService {
    ctx: ServeContext,
    service: Arc<Service>,
}

fn err(e: HelmLoopError) -> Status {
    e.into()
}

#[tonic::async_trait]
impl HelmLoop for HelmLoopService {
    async fn describe(
        &self,
        request: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::DescribeResponse>, Status> {
        self.ctx
            .authorize(&request, actions::DESCRIBE, "office:helmloop")
            .await?;
        let office =
            lychd_runtime::describe::describe(&self.ctx, request.get_ref().include_peers).await?;
        Ok(Response::new(pb::DescribeResponse {
            office: Some(office),
        }))
    }

    async fn append_records(
        &self,
        request: Request<pb::AppendRecordsRequest>,
    ) -> Result<Response<pb::AppendRecordsResponse>, Status> {
        let (metadata, extensions, message) = request.into_parts();
        let asking = Request::from_parts(metadata, extensions, ());
        let bodies = convert::append_request(message, &self.service.settings).map_err(err)?;
        let verified = self.service.verify_all(bodies).await.map_err(err)?;
        let identities = crate::service::identities(&verified);
        // Authorized against the first body of every identity that has one as well as against
        // each new body; a first body stored meanwhile under a new identity means asking again.
        let mut outcomes = None;
        for _ in 0..APPEND_ATTEMPTS {
            let known = self.service.first_bodies(&identities).await.map_err(err)?;
            let (principal, decided) = self.authorize_append(&asking, &verified, &known).await?;
            let recheck = self.recheck_all(&asking, decided, &principal);
            match self
                .service
                .append(&verified, &principal.id, recheck, &known)
                .await
            {
                Ok(done) => {
                    outcomes = Some(done);
                    break;
                }
                Err(HelmLoopError::FirstBodiesChanged) => continue,
                Err(e) => return Err(err(e)),
            }
        }
        let outcomes = outcomes.ok_or_else(|| err(HelmLoopError::FirstBodiesChanged))?;
        let results = verified
            .into_iter()
            .zip(outcomes)
            .enumerate()
            .map(|(i, (r, outcome))| pb::AppendResult {
                index: u32::try_from(i).unwrap_or(u32::MAX),
                record_type: r.record_type.as_str().to_owned(),
                id: r.id,
                digest: r.digest,
                body_digest: r.body_digest,
                outcome: convert::appended(outcome) as i32,
            })
            .collect();
        Ok(Response::new(pb::AppendRecordsResponse { results }))
    }

    async fn get_record(
        &self,
        request: Request<pb::GetRecordRequest>,
    ) -> Result<Response<pb::GetRecordResponse>, Status> {
        let (record_type, id) = convert::get_record(request.get_ref()).map_err(err)?;
        let all = self
            .ctx
            .authorizer
            .decision(&request, actions::READ, ANY_SUBJECT, None)
            .await?;
        let rows = self.service.get_record(&record_type, &id).await;
        if all.is_none() {
            let subjects = match &rows {
                Ok(rows) => rows.iter().map(|r| r.subject_id.as_str()).collect(),
                Err(_) => BTreeSet::new(),
            };
            self.read_subjects(&request, subjects).await?;
        }
        Ok(Response::new(pb::GetRecordResponse {
            records: rows
                .map_err(err)?
                .into_iter()
                .map(convert::stored_record)
                .collect(),
        }))
    }

    async fn list_records(
        &self,
        request: Request<pb::ListRecordsRequest>,
    ) -> Result<Response<pb::ListRecordsResponse>, Status> {
        let cmd = convert::list_records(request.get_ref()).map_err(err)?;
        let object = subject_object(&cmd.filter.subject_id);
        self.ctx.authorize(&request, actions::READ, &object).await?;
        let rows = self
            .service
            .list_records(
                &cmd.filter,
                cmd.after,
                i64::from(cmd.size) + 1,
                !request.get_ref().omit_bodies,
            )
            .await
            .map_err(err)?;
        let more = rows.len() > cmd.size as usize;
        let mut rows = rows;
        rows.truncate(cmd.size as usize);
        let next = match (more, rows.last()) {
            (true, Some(last)) => Tokens::Plain.token(&Seq(last.seq)),
            _ => String::new(),
        };
        Ok(Response::new(pb::ListRecordsResponse {
            records: rows.into_iter().map(convert::stored_record).collect(),
            page: Some(lychd_proto::common::v1::PageResponse {
                next_page_token: next,
            }),
        }))
    }

    async fn reduce(
        &self,
        request: Request<pb::ReduceRequest>,
    ) -> Result<Response<pb::ReduceResponse>, Status> {
        let (metadata, extensions, message) = request.into_parts();
        let asking = Request::from_parts(metadata, extensions, ());
        let max = self.service.settings.max_input_bytes;
        self.decode_authenticated(&asking, || convert::document("input", &message.input, max))
            .await?;
        // Authorized before the input is parsed: an unauthorized caller costs no CPU.
        let principal = self
            .ctx
            .authorize(&asking, actions::REDUCE, OFFICE_OBJECT)
            .await?;
        let reduced = self
            .service
            .reduce_inline(message.input, message.return_input, message.store)
            .await
            .map_err(err)?;
        if message.store {
            let recheck = self.recheck(&asking, actions::REDUCE, OFFICE_OBJECT, &principal);
            self.service
                .store_evaluation(&reduced, None, &principal.id, recheck)
                .await
                .map_err(err)?;
        }
        Ok(Response::new(convert::reduced(reduced, message.store)))
    }

    async fn reduce_stored(
        &self,
        request: Request<pb::ReduceStoredRequest>,
    ) -> Result<Response<pb::ReduceResponse>, Status> {
        let (metadata, extensions, message) = request.into_parts();
        let asking = Request::from_parts(metadata, extensions, ());
        let max = self.service.settings.max_record_bytes;
        convert::document("context", &message.context, max).map_err(err)?;
        let (context, binding) = self
            .service
            .parse_context(message.context)
            .await
            .map_err(err)?;
        let object = subject_object(&binding.subject_id);
        let principal = self
            .ctx
            .authorize(&asking, actions::REDUCE, &object)
            .await?;
        let reduced = self
            .service
            .reduce_stored(context, &binding, message.return_input)
            .await
            .map_err(err)?;
        let recheck = self.recheck(&asking, actions::REDUCE, &object, &principal);
        self.service
            .store_evaluation(&reduced, Some(&binding), &principal.id, recheck)
            .await
            .map_err(err)?;
        Ok(Response::new(convert::reduced(reduced, true)))
    }

    async fn get_evaluation(
        &self,
        request: Request<pb::GetEvaluationRequest>,
    ) -> Result<Response<pb::GetEvaluationResponse>, Status> {
        let digest = convert::input_digest(&request.get_ref().input_digest).map_err(err)?;
        let all = self
            .ctx
            .authorizer
            .decision(&request, actions::READ, ANY_SUBJECT, None)
            .await?;
        let found = self.service.get_evaluation(&digest).await;
        if all.is_none() {
            let subjects = match &found {
                Ok((stored, _)) => stored.subject_id.as_deref().into_iter().collect(),
                Err(_) => BTreeSet::new(),
            };
            self.read_subjects(&request, subjects).await?;
        }
        let (stored, summary) = found.map_err(err)?;
        Ok(Response::new(pb::GetEvaluationResponse {
            result: stored.result,
            summary: Some(convert::summary(&summary)),
            context: stored.context,
            evaluated_by: stored.evaluated_by,
            stored_at: Some(crate::service::timestamp_us(stored.stored_at_us)),
        }))
    }

    async fn validate(
        &self,
        request: Request<pb::ValidateRequest>,
    ) -> Result<Response<pb::ValidateResponse>, Status> {
        let max = self.service.settings.max_input_bytes;
        convert::document("document", &request.get_ref().document, max).map_err(err)?;
        self.ctx
            .authorize(&request, actions::CHECK, OFFICE_OBJECT)
            .await?;
        let report = self
            .service
            .validate(request.into_inner().document)
            .await
            .map_err(err)?;
        Ok(Response::new(pb::ValidateResponse {
            valid: report.is_valid(),
            first_code: report.first_code().unwrap_or_default().to_owned(),
            report: report.to_json().into_bytes(),
        }))
    }

    async fn digest(
        &self,
        request: Request<pb::DigestRequest>,
    ) -> Result<Response<pb::DigestResponse>, Status> {
        let max = self.service.settings.max_input_bytes;
        let domain = convert::domain(request.get_ref().domain).map_err(err)?;
        convert::document("document", &request.get_ref().document, max).map_err(err)?;
        self.ctx
            .authorize(&request, actions::CHECK, OFFICE_OBJECT)
            .await?;
        let (digest, canonical) = self
            .service
            .digest(request.into_inner().document, domain)
            .await
            .map_err(err)?;
        Ok(Response::new(pb::DigestResponse { digest, canonical }))
    }

    async fn run_conformance(
        &self,
        request: Request<pb::RunConformanceRequest>,
    ) -> Result<Response<pb::RunConformanceResponse>, Status> {
        let suite = convert::adapter(&request.get_ref().adapter).map_err(err)?;
        self.ctx
            .authorize(&request, actions::CHECK, OFFICE_OBJECT)
            .await?;
        let run = match suite {
            None => self.service.conformance_core().await,
            Some(adapter) => self.service.conformance_adapter(adapter).await,
        }
        .map_err(err)?;
        Ok(Response::new(pb::RunConformanceResponse {
            passed: run.passed,
            total: u32::try_from(run.total).unwrap_or(u32::MAX),
            failed: u32::try_from(run.failed).unwrap_or(u32::MAX),
            fixture_set_digest: run.fixture_set_digest,
            report: run.report,
        }))
    }
}

/// `subject:<id>`, or `subject:*` for none.
fn subject_object(subject_id: &str) -> String {
    if subject_id.is_empty() {
        ANY_SUBJECT.to_owned()
    } else {
        format!("subject:{subject_id}")
    }
}

/// The HelmLoop office deletes nothing.
static NO_RETENTION: lychd_runtime::retention::Rules = lychd_runtime::retention::Rules {
    rules: &[],
    upkeep: &[],
};

/// Start the office: read the `[office]` limits (a bad one refuses start-up with exit 2) and
/// return the routes.
pub fn start(ctx: ServeContext) -> BoxFuture<'static, anyhow::Result<Routes>> {
    Box::pin(async move {
        let settings = crate::config::load(&ctx.config)?;
        // No retention rule: records and evaluations are append-only and kept for good
        // (docs/operations.md, "Retention"); `[retention]` is still validated.
        lychd_runtime::retention::Settings::load(&ctx.config, &NO_RETENTION)?;
        tracing::info!(
            reduce_workers = settings.reduce_workers,
            max_input_bytes = settings.max_input_bytes,
            "helmloop limits loaded"
        );
        let service = Service::new(settings, ctx.pool.clone());
        let server = HelmLoopServer::new(HelmLoopService {
            ctx: ctx.clone(),
            service,
        })
        .max_decoding_message_size(ctx.max_message_bytes())
        .max_encoding_message_size(ctx.max_message_bytes());
        Ok(Routes::new(server))
    })
}
