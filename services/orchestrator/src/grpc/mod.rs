//! gRPC handlers of `lychd.orchestrator.v1.Orchestrator`: authenticate (the layer) → decode
//! into a typed command → authorize the object built from it → service → encode.

mod convert;
mod resources;

use std::sync::Arc;

use futures::future::BoxFuture;
use lychd_proto::orchestrator::v1 as pb;
use lychd_proto::orchestrator::v1::orchestrator_server::{Orchestrator, OrchestratorServer};
use lychd_runtime::server::ServeContext;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use self::convert::{capability_key, containment_pb, err, lease_pb, outcome, topology};
use crate::actions;
use crate::config::Settings;
use crate::observe::Dispatcher;
use crate::service::containment::{self, Examined};
use crate::service::transition::{Recheck, Transitions};

/// Ward asked again later whether a caller may still do an action (its refusal as is).
type Ask = Arc<dyn Fn() -> BoxFuture<'static, Result<(), Status>> + Send + Sync>;

pub struct OrchestratorService {
    ctx: ServeContext,
    settings: Arc<Settings>,
    dispatcher: Dispatcher,
    transitions: Arc<Transitions>,
    streams: lychd_runtime::streams::StreamLimit,
    /// The retention job, stopped when serving ends and this service is dropped.
    _retention: Option<lychd_runtime::retention::Job>,
    /// The gauges read from the office's schema, polled until this service is dropped.
    _gauges: Option<lychd_runtime::metrics::Polled>,
}

/// [`Ask`] as the transition engine's [`Recheck`]: whether the authority still stands.
fn standing(ask: Ask) -> Recheck {
    Arc::new(move || {
        let ask = ask.clone();
        Box::pin(async move { ask().await.is_ok() })
    })
}

impl OrchestratorService {
    /// Ward asked again later whether the caller of `request` may still do `action` on
    /// `object`: with the first decision's policy generation when given (an effect prepared
    /// under it), or whatever the caller's policy now (a stream's standing authority).
    fn recheck<T>(
        &self,
        request: &Request<T>,
        action: lychd_runtime::auth::Action,
        object: String,
        generation: Option<i64>,
    ) -> Ask {
        let authorizer = self.ctx.authorizer.clone();
        let metadata = request.metadata().clone();
        Arc::new(move || {
            let authorizer = authorizer.clone();
            let asking = Request::from_parts(metadata.clone(), tonic::Extensions::default(), ());
            let object = object.clone();
            Box::pin(async move {
                authorizer
                    .authorize_for(&asking, action, &object, action.verb(), generation)
                    .await
                    .map(|_| ())
            })
        })
    }
}

#[tonic::async_trait]
impl Orchestrator for OrchestratorService {
    async fn describe(
        &self,
        request: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::DescribeResponse>, Status> {
        self.ctx
            .authorize(&request, actions::DESCRIBE, "office:orchestrator")
            .await?;
        let office =
            lychd_runtime::describe::describe(&self.ctx, request.get_ref().include_peers).await?;
        let lease = self
            .transitions
            .lease()
            .view()
            .await
            .map_err(|e| err(e.into()))?;
        Ok(Response::new(pb::DescribeResponse {
            office: Some(office),
            host_lease: Some(lease_pb(lease)),
        }))
    }

    async fn get_topology(
        &self,
        request: Request<pb::GetTopologyRequest>,
    ) -> Result<Response<pb::GetTopologyResponse>, Status> {
        self.ctx
            .authorize(&request, actions::READ, "topology:*")
            .await?;
        Ok(Response::new(topology(&self.settings)))
    }

    async fn preview_plan(
        &self,
        request: Request<pb::PreviewPlanRequest>,
    ) -> Result<Response<pb::PreviewPlanResponse>, Status> {
        let key = capability_key("capability_key", &request.get_ref().capability_key)?;
        self.ctx
            .authorize(&request, actions::READ, &format!("capability:{key}"))
            .await?;
        let memory = self.transitions.memory().snapshot();
        let decided =
            crate::service::preview::preview(&self.settings, &self.dispatcher, &memory, &key)
                .await?;
        Ok(Response::new(pb::PreviewPlanResponse {
            outcome: Some(outcome(decided)),
        }))
    }

    async fn request_transition(
        &self,
        request: Request<pb::RequestTransitionRequest>,
    ) -> Result<Response<pb::RequestTransitionResponse>, Status> {
        self.request_transition_resource(request).await
    }

    async fn get_transition(
        &self,
        request: Request<pb::GetTransitionRequest>,
    ) -> Result<Response<pb::GetTransitionResponse>, Status> {
        self.get_transition_resource(request).await
    }

    async fn list_transitions(
        &self,
        request: Request<pb::ListTransitionsRequest>,
    ) -> Result<Response<pb::ListTransitionsResponse>, Status> {
        self.list_transitions_resource(request).await
    }

    async fn cancel_transition(
        &self,
        request: Request<pb::CancelTransitionRequest>,
    ) -> Result<Response<pb::CancelTransitionResponse>, Status> {
        self.cancel_transition_resource(request).await
    }

    type WatchTransitionsStream = resources::EventStream;

    async fn watch_transitions(
        &self,
        request: Request<pb::WatchTransitionsRequest>,
    ) -> Result<Response<Self::WatchTransitionsStream>, Status> {
        self.watch_transitions_resource(request).await
    }

    async fn list_containments(
        &self,
        request: Request<pb::ListContainmentsRequest>,
    ) -> Result<Response<pb::ListContainmentsResponse>, Status> {
        self.ctx
            .authorize(&request, actions::READ, "containment:*")
            .await?;
        let rows = containment::list(&self.ctx.pool, request.get_ref().include_recovered)
            .await
            .map_err(err)?;
        Ok(Response::new(pb::ListContainmentsResponse {
            containments: rows.iter().map(containment_pb).collect(),
        }))
    }

    async fn recover_containment(
        &self,
        request: Request<pb::RecoverContainmentRequest>,
    ) -> Result<Response<pb::RecoverContainmentResponse>, Status> {
        let id = request.get_ref().containment_id;
        let principal = self
            .ctx
            .authorize(&request, actions::RECOVER, "containment:*")
            .await?;
        // Only the lease holder reopens anything.
        let lease = self.transitions.lease();
        if lease.fence().is_none() {
            return Err(err(crate::error::OrchestratorError::HostLeaseNotHeld));
        }
        let (row, proved) = match containment::examine(&self.ctx.pool, &self.dispatcher, id)
            .await
            .map_err(err)?
        {
            Examined::Recovered(row) => {
                return Ok(Response::new(pb::RecoverContainmentResponse {
                    containment: Some(containment_pb(&row)),
                    proved: String::new(),
                }));
            }
            Examined::Proved(row, proved) => (row, proved),
        };
        // Ward again, with the first decision's generation, right before the reopen.
        self.recheck(
            &request,
            actions::RECOVER,
            "containment:*".into(),
            Some(principal.policy_generation),
        )()
        .await?;
        let row =
            containment::recover(&self.ctx.pool, lease, &self.dispatcher, &row, &principal.id)
                .await
                .map_err(err)?;
        Ok(Response::new(pb::RecoverContainmentResponse {
            containment: Some(containment_pb(&row)),
            proved: proved.as_str().to_owned(),
        }))
    }
}

/// Start the office: its routes (every call passes the auth layer, then `authorize`).
pub fn start(ctx: ServeContext) -> BoxFuture<'static, anyhow::Result<Routes>> {
    Box::pin(async move {
        let settings = Arc::new(crate::config::load(&ctx.config)?);
        let dispatcher = Dispatcher::new(&ctx)?;
        let retention = crate::service::retention::start(&ctx.config, ctx.pool.clone())?;
        let transitions = crate::service::startup::engine(
            settings.clone(),
            dispatcher.clone(),
            ctx.pool.clone(),
            (ctx.health.clone(), ctx.office.grpc_service()),
            &ctx.finishing,
        )
        .await?;
        Ok(routes(&ctx, settings, dispatcher, transitions, retention))
    })
}

fn routes(
    ctx: &ServeContext,
    settings: Arc<Settings>,
    dispatcher: Dispatcher,
    transitions: Arc<Transitions>,
    retention: Option<lychd_runtime::retention::Job>,
) -> Routes {
    let streams =
        lychd_runtime::streams::StreamLimit::new(settings.stream_limit, settings.stream_share);
    let server = OrchestratorServer::new(OrchestratorService {
        ctx: ctx.clone(),
        settings,
        dispatcher,
        transitions,
        streams,
        _retention: retention,
        _gauges: crate::service::metrics::start(ctx.pool.clone()),
    })
    .max_decoding_message_size(ctx.max_message_bytes())
    .max_encoding_message_size(ctx.max_message_bytes());
    Routes::new(server)
}
