//! gRPC handlers of `lychd.runner.v1.Runner`: decode (bad input is `INVALID_ARGUMENT` naming
//! every bad field, before any object is built; an unauthenticated caller hears
//! `UNAUTHENTICATED` first) → authorize (Ward) → call the service → encode. No store path, no
//! SQL here; proto ↔ typed conversions are in `grpc/convert.rs`.

mod convert;
mod effects;
mod watch;

use std::sync::Arc;

use futures::future::BoxFuture;
use lychd_proto::common::v1 as cpb;
use lychd_proto::runner::v1 as pb;
use lychd_proto::runner::v1::runner_server::{Runner, RunnerServer};
use lychd_runtime::auth::Principal;
use lychd_runtime::paging;
use lychd_runtime::refusal::Violations;
use lychd_runtime::server::ServeContext;
use tonic::service::Routes;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::actions;
use crate::domain::fsm::Fsm;
use crate::error::RunnerError;
use crate::error::reasons::PAGE_TOKEN_INVALID;
use crate::service::Service;
use crate::service::driver::Driver;
use crate::service::runs::Reader;

pub struct RunnerService {
    ctx: ServeContext,
    service: Arc<Service>,
    streams: lychd_runtime::streams::StreamLimit,
    /// The gauges read from the office's schema, polled until this service is dropped.
    _gauges: Option<lychd_runtime::metrics::Polled>,
    /// Ward's consent as a peer: a cancelled run's pending consents are released through it.
    consents: crate::consent::Consents,
    /// The retention job, stopped when serving ends and this service is dropped.
    _retention: Option<lychd_runtime::retention::Job>,
}

/// Run streams the office serves at once, and its default share per principal (fixed in this
/// slice; not yet configuration).
const STREAM_LIMIT: usize = 64;

fn err(e: RunnerError) -> Status {
    e.into()
}

/// Default and largest page of `ListRuns` and `ListRunTransitions`.
const PAGE_SIZE: paging::PageSize = paging::PageSize {
    default: 50,
    max: 500,
    oversize: paging::Oversize::Lower,
};
const RUNS: paging::Tokens = paging::Tokens::Tagged("runs");
const TRANSITIONS: paging::Tokens = paging::Tokens::Tagged("run_transitions");

/// The key after `page`'s token and its size; a bad token names `page.page_token`.
fn page(
    page: Option<&cpb::PageRequest>,
    tokens: paging::Tokens,
) -> Result<(Option<i64>, u32), RunnerError> {
    let page = page.cloned().unwrap_or_default();
    let after = tokens
        .after::<paging::Seq>(&page.page_token)
        .map_err(|bad| {
            RunnerError::from(Violations::one(
                "page.page_token",
                PAGE_TOKEN_INVALID,
                bad.to_string(),
            ))
        })?
        .map(|paging::Seq(n)| n);
    Ok((after, PAGE_SIZE.of(page.page_size).unwrap_or(PAGE_SIZE.max)))
}

/// The next page's token, when a row beyond the page was read.
fn next(keys: &[i64], size: u32, tokens: paging::Tokens) -> String {
    match keys.get(size as usize - 1) {
        Some(last) if keys.len() > size as usize => tokens.token(&paging::Seq(*last)),
        _ => String::new(),
    }
}

impl RunnerService {
    /// Who reads: the principal, and whether it reads every principal's runs.
    async fn reader<T>(
        &self,
        request: &Request<T>,
        object: &str,
    ) -> Result<(Principal, bool), Status> {
        self.ctx
            .reader(request, actions::READ, object, actions::READ_ALL, "run:*")
            .await
    }

    /// The run a read names (`run_id`, decoded after the caller is authenticated), and who
    /// reads it.
    async fn run_to_read<T>(
        &self,
        request: &Request<T>,
        run_id: &str,
    ) -> Result<(Uuid, Principal, bool), Status> {
        let id = self
            .ctx
            .authorizer
            .decoded(request, convert::run_id("run_id", run_id).map_err(err))
            .await?;
        let (principal, all) = self.reader(request, &format!("run:{id}")).await?;
        Ok((id, principal, all))
    }

    /// The run a call names (`run_id`, decoded after the caller is authenticated), and the
    /// caller Ward allows `action` on it.
    async fn run_for<T>(
        &self,
        request: &Request<T>,
        run_id: &str,
        action: lychd_runtime::auth::Action,
    ) -> Result<(Uuid, Principal), Status> {
        let id = self
            .ctx
            .authorizer
            .decoded(request, convert::run_id("run_id", run_id).map_err(err))
            .await?;
        let principal = self
            .ctx
            .authorize(request, action, &format!("run:{id}"))
            .await?;
        Ok((id, principal))
    }
}

fn reader(principal: &Principal, all: bool) -> Reader<'_> {
    if all {
        Reader::All
    } else {
        Reader::Own(&principal.id)
    }
}

#[tonic::async_trait]
impl Runner for RunnerService {
    type WatchRunStream = watch::TransitionStream;

    async fn watch_run(
        &self,
        request: Request<pb::WatchRunRequest>,
    ) -> Result<Response<Self::WatchRunStream>, Status> {
        self.watch(request).await
    }

    async fn describe(
        &self,
        request: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::DescribeResponse>, Status> {
        self.ctx
            .authorize(&request, actions::DESCRIBE, "office:runner")
            .await?;
        let office =
            lychd_runtime::describe::describe(&self.ctx, request.get_ref().include_peers).await?;
        Ok(Response::new(pb::DescribeResponse {
            office: Some(office),
        }))
    }

    async fn start_run(
        &self,
        request: Request<pb::StartRunRequest>,
    ) -> Result<Response<pb::StartRunResponse>, Status> {
        let (metadata, extensions, body) = request.into_parts();
        let asking = Request::from_parts(metadata, extensions, ());
        let cmd = self
            .ctx
            .authorizer
            .decoded(&asking, convert::start(body).map_err(err))
            .await?;
        let principal = self.ctx.authorize(&asking, actions::START, "run:*").await?;
        // An effect step is a distinct adapter permission: the caller must hold it on each
        // destination (the Runner asks again, for its own principal, before every dispatch).
        for object in effects::destinations(&cmd.workflow) {
            self.ctx
                .authorize(&asking, actions::EFFECT_HTTP, &object)
                .await?;
        }
        let (run, replayed) = self.service.start(&principal.id, &cmd).await.map_err(err)?;
        Ok(Response::new(pb::StartRunResponse {
            run: Some(convert::run(&run)),
            replayed,
        }))
    }

    async fn get_run(
        &self,
        request: Request<pb::GetRunRequest>,
    ) -> Result<Response<pb::GetRunResponse>, Status> {
        let (id, principal, all) = self
            .run_to_read(&request, &request.get_ref().run_id)
            .await?;
        let run = self
            .service
            .get(id, reader(&principal, all))
            .await
            .map_err(err)?;
        Ok(Response::new(pb::GetRunResponse {
            run: Some(convert::run(&run)),
        }))
    }

    async fn list_runs(
        &self,
        request: Request<pb::ListRunsRequest>,
    ) -> Result<Response<pb::ListRunsResponse>, Status> {
        let (before, size) = self
            .ctx
            .authorizer
            .decoded(
                &request,
                page(request.get_ref().page.as_ref(), RUNS).map_err(err),
            )
            .await?;
        let (principal, all) = self.reader(&request, "run:*").await?;
        let rows = self
            .service
            .list(reader(&principal, all), before, i64::from(size) + 1)
            .await
            .map_err(err)?;
        let keys: Vec<i64> = rows.iter().map(|r| r.listed).collect();
        Ok(Response::new(pb::ListRunsResponse {
            runs: rows.iter().take(size as usize).map(convert::run).collect(),
            page: Some(cpb::PageResponse {
                next_page_token: next(&keys, size, RUNS),
            }),
        }))
    }

    async fn cancel_run(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Result<Response<pb::CancelRunResponse>, Status> {
        let (id, principal) = self
            .run_for(&request, &request.get_ref().run_id, actions::CANCEL)
            .await?;
        let run = self.service.cancel(id, &principal.id).await.map_err(err)?;
        // The cancel is committed: its pending consents are released at Ward now; a failed
        // ask stays due and the step loop asks again (the run is canceled either way).
        if let Err(e) = self.service.release(&self.consents, id).await {
            tracing::warn!(run = %id, error = %e, "releasing a cancelled run's consents failed; retried later");
        }
        Ok(Response::new(pb::CancelRunResponse {
            run: Some(convert::run(&run)),
        }))
    }

    async fn list_run_transitions(
        &self,
        request: Request<pb::ListRunTransitionsRequest>,
    ) -> Result<Response<pb::ListRunTransitionsResponse>, Status> {
        let body = request.get_ref();
        let decoded = match (
            convert::run_id("run_id", &body.run_id),
            page(body.page.as_ref(), TRANSITIONS),
        ) {
            (Ok(id), Ok(p)) => Ok((id, p)),
            (Err(RunnerError::InvalidArgument(mut v)), Err(RunnerError::InvalidArgument(w))) => {
                v.extend(w);
                Err(err(v.into()))
            }
            (Err(e), _) | (_, Err(e)) => Err(err(e)),
        };
        let (id, (after, size)) = self.ctx.authorizer.decoded(&request, decoded).await?;
        let (principal, all) = self.reader(&request, &format!("run:{id}")).await?;
        let rows = self
            .service
            .transitions(id, reader(&principal, all), after, i64::from(size) + 1)
            .await
            .map_err(err)?;
        let keys: Vec<i64> = rows.iter().map(|t| t.version).collect();
        Ok(Response::new(pb::ListRunTransitionsResponse {
            transitions: rows
                .iter()
                .take(size as usize)
                .map(convert::transition)
                .collect(),
            page: Some(cpb::PageResponse {
                next_page_token: next(&keys, size, TRANSITIONS),
            }),
        }))
    }

    async fn inspect_checkpoint(
        &self,
        request: Request<pb::InspectCheckpointRequest>,
    ) -> Result<Response<pb::InspectCheckpointResponse>, Status> {
        let (id, version) = self
            .ctx
            .authorizer
            .decoded(&request, convert::inspect(request.get_ref()).map_err(err))
            .await?;
        let (principal, all) = self.reader(&request, &format!("run:{id}")).await?;
        let inspected = self
            .service
            .inspect(id, reader(&principal, all), version)
            .await
            .map_err(err)?;
        let point = self
            .service
            .recovery_point(&inspected.run)
            .await
            .map_err(err)?;
        Ok(Response::new(pb::InspectCheckpointResponse {
            checkpoint: Some(convert::checkpoint(&inspected.checkpoint)),
            verified: inspected.verified,
            run: Some(convert::run(&inspected.run)),
            recovery_version: point
                .as_ref()
                .map_or(0, |p| u64::try_from(p.version).unwrap_or(0)),
            recovery_checksum: point.map(|p| p.checksum).unwrap_or_default(),
        }))
    }

    async fn review_quarantine(
        &self,
        request: Request<pb::ReviewQuarantineRequest>,
    ) -> Result<Response<pb::ReviewQuarantineResponse>, Status> {
        let review = self
            .ctx
            .authorizer
            .decoded(&request, convert::review(request.get_ref()).map_err(err))
            .await?;
        let principal = self
            .ctx
            .authorize(&request, actions::REVIEW, &format!("run:{}", review.run_id))
            .await?;
        let reviewed = self
            .service
            .review(&principal.id, &review)
            .await
            .map_err(err)?;
        Ok(Response::new(pb::ReviewQuarantineResponse {
            review: Some(convert::quarantine_review(&reviewed.review)),
            run: Some(convert::run(&reviewed.run)),
            replayed: reviewed.replayed,
        }))
    }

    async fn inspect_effect(
        &self,
        request: Request<pb::InspectEffectRequest>,
    ) -> Result<Response<pb::InspectEffectResponse>, Status> {
        let (id, _) = self
            .run_for(&request, &request.get_ref().run_id, actions::RECONCILE)
            .await?;
        let inspected = self.service.inspect_effect(id).await.map_err(err)?;
        Ok(Response::new(effects::inspected(&inspected)))
    }

    async fn resolve_unknown_outcome(
        &self,
        request: Request<pb::ResolveUnknownOutcomeRequest>,
    ) -> Result<Response<pb::ResolveUnknownOutcomeResponse>, Status> {
        let (id, resolution, evidence) = self
            .ctx
            .authorizer
            .decoded(&request, effects::resolve(request.get_ref()).map_err(err))
            .await?;
        let principal = self
            .ctx
            .authorize(&request, actions::RECONCILE, &format!("run:{id}"))
            .await?;
        let run = self
            .service
            .resolve(&principal.id, id, &resolution, &evidence)
            .await
            .map_err(err)?;
        Ok(Response::new(effects::resolved(&run)))
    }

    async fn list_provenance(
        &self,
        request: Request<pb::ListProvenanceRequest>,
    ) -> Result<Response<pb::ListProvenanceResponse>, Status> {
        let (id, principal, all) = self
            .run_to_read(&request, &request.get_ref().run_id)
            .await?;
        let rows = self
            .service
            .provenance(id, reader(&principal, all))
            .await
            .map_err(err)?;
        Ok(Response::new(pb::ListProvenanceResponse {
            snapshots: rows.iter().map(convert::snapshot).collect(),
        }))
    }

    async fn replay_run(
        &self,
        request: Request<pb::ReplayRunRequest>,
    ) -> Result<Response<pb::ReplayRunResponse>, Status> {
        let (id, principal, all) = self
            .run_to_read(&request, &request.get_ref().run_id)
            .await?;
        let replayed = self
            .service
            .replay(id, reader(&principal, all))
            .await
            .map_err(err)?;
        Ok(Response::new(convert::replayed(id, replayed)))
    }
}

/// Start the office: the control FSM is loaded and checked first (a broken one refuses
/// start-up, naming the invariant), then its routes (every call passes the auth layer, then
/// `authorize`).
pub fn start(ctx: ServeContext) -> BoxFuture<'static, anyhow::Result<Routes>> {
    Box::pin(async move {
        let settings = crate::config::load(&ctx.config)?;
        let retention = crate::service::retention::start(&ctx.config, ctx.pool.clone())?;
        let fsm =
            Fsm::bound().map_err(|broken| anyhow::anyhow!("control fsm refused: {broken}"))?;
        let service = Service::new(ctx.pool.clone(), fsm);
        if settings.drive {
            let models = crate::model::Models::new(&ctx)?;
            let verifier = crate::verifier::Verifier::new(&ctx)?
                .recheck_ms(crate::config::verify_recheck_ms(&ctx.config)?);
            let consents = crate::consent::Consents::new(&ctx)?;
            let driver = Arc::new(
                Driver::new(service.clone(), models, settings)
                    .with_verifier(verifier)
                    .with_consents(consents),
            );
            // The loop ends with the process; a lease it held expires and another runner
            // resumes the run from its last checkpoint.
            tokio::spawn(driver.run());
        }
        let consents = crate::consent::Consents::new(&ctx)?;
        Ok(routes(&ctx, service, consents, retention))
    })
}

fn routes(
    ctx: &ServeContext,
    service: Arc<Service>,
    consents: crate::consent::Consents,
    retention: Option<lychd_runtime::retention::Job>,
) -> Routes {
    let server = RunnerServer::new(RunnerService {
        ctx: ctx.clone(),
        _gauges: crate::service::metrics::start(ctx.pool.clone()),
        service,
        consents,
        _retention: retention,
        streams: lychd_runtime::streams::StreamLimit::new(
            STREAM_LIMIT,
            lychd_runtime::streams::default_share(STREAM_LIMIT),
        ),
    })
    .max_decoding_message_size(ctx.max_message_bytes())
    .max_encoding_message_size(ctx.max_message_bytes());
    Routes::new(server)
}
