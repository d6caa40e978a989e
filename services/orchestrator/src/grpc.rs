//! gRPC handlers of `lychd.orchestrator.v1.Orchestrator`: authenticate (the layer) → decode
//! into a typed command → authorize the object built from it → service → encode.

use std::sync::Arc;

use futures::future::BoxFuture;
use lychd_proto::orchestrator::v1 as pb;
use lychd_proto::orchestrator::v1::orchestrator_server::{Orchestrator, OrchestratorServer};
use lychd_registry::key::parse_v1;
use lychd_runtime::refusal::Violations;
use lychd_runtime::server::ServeContext;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use crate::config::Settings;
use crate::domain::plan::{Action, Decline, Plan};
use crate::error::Result;
use crate::error::reasons::CAPABILITY_KEY_MALFORMED;
use crate::observe::Dispatcher;

pub struct OrchestratorService {
    ctx: ServeContext,
    settings: Arc<Settings>,
    dispatcher: Dispatcher,
}

/// Decode a capability key (the v1 grammar of the shared registry).
fn capability_key(field: &str, s: &str) -> Result<String> {
    let mut v = Violations::new();
    if let Err(e) = parse_v1(s) {
        v.push(field, CAPABILITY_KEY_MALFORMED, e.describe());
    }
    Ok(v.finish(|| s.to_owned())?)
}

#[tonic::async_trait]
impl Orchestrator for OrchestratorService {
    async fn describe(
        &self,
        request: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::DescribeResponse>, Status> {
        self.ctx
            .authorize(&request, crate::actions::DESCRIBE, "office:orchestrator")
            .await?;
        let office =
            lychd_runtime::describe::describe(&self.ctx, request.get_ref().include_peers).await?;
        Ok(Response::new(pb::DescribeResponse {
            office: Some(office),
        }))
    }

    async fn get_topology(
        &self,
        request: Request<pb::GetTopologyRequest>,
    ) -> Result<Response<pb::GetTopologyResponse>, Status> {
        self.ctx
            .authorize(&request, crate::actions::READ, "topology:*")
            .await?;
        Ok(Response::new(topology(&self.settings)))
    }

    async fn preview_plan(
        &self,
        request: Request<pb::PreviewPlanRequest>,
    ) -> Result<Response<pb::PreviewPlanResponse>, Status> {
        let key = capability_key("capability_key", &request.get_ref().capability_key)?;
        self.ctx
            .authorize(&request, crate::actions::READ, &format!("capability:{key}"))
            .await?;
        let decided = crate::service::preview(&self.settings, &self.dispatcher, &key).await?;
        Ok(Response::new(pb::PreviewPlanResponse {
            outcome: Some(outcome(decided)),
        }))
    }
}

fn topology(s: &Settings) -> pb::GetTopologyResponse {
    let g = &s.graph;
    pb::GetTopologyResponse {
        config_digest: g.digest().to_owned(),
        animators: g
            .nodes()
            .map(|n| pb::TopologyAnimator {
                name: n.name.clone(),
                managed: n.managed,
                resident: n.resident,
                conflict_domains: n.domains.iter().cloned().collect(),
                default_exclusive: n.default_exclusive,
                groups: n.groups.iter().cloned().collect(),
                capability_keys: s.registry.keys_of(&n.name).to_vec(),
                conflicts_with: g.neighbours(&n.name).cloned().collect(),
            })
            .collect(),
        edges: g
            .edges()
            .map(|(a, b)| pb::ConflictEdge {
                a: a.clone(),
                b: b.clone(),
            })
            .collect(),
        covens: g
            .covens()
            .iter()
            .map(|(name, members)| pb::Coven {
                name: name.clone(),
                members: members.iter().cloned().collect(),
            })
            .collect(),
    }
}

pub(crate) fn plan_pb(p: &Plan) -> pb::Plan {
    pb::Plan {
        action: match p.action {
            Action::NoOp => pb::PlanAction::NoOp,
            Action::SoftSwap => pb::PlanAction::SoftSwap,
            Action::HardSwap => pb::PlanAction::HardSwap,
        } as i32,
        capability_key: p.capability_key.clone(),
        target_animator: p.target.clone(),
        evict: p.evict.clone(),
        launch: p.launch.clone(),
        cost: p.cost,
        expected_active: p.expected_active.clone(),
        config_digest: p.config_digest.clone(),
        affected: p.affected(),
    }
}

pub(crate) fn declined_pb(d: &Decline) -> pb::PlanDeclined {
    pb::PlanDeclined {
        code: d.code().to_owned(),
        animator: d.animator().to_owned(),
        observed_phase: d.phase().map(|p| p.as_str().to_owned()).unwrap_or_default(),
    }
}

fn outcome(decided: std::result::Result<Plan, Decline>) -> pb::preview_plan_response::Outcome {
    use pb::preview_plan_response::Outcome;
    match decided {
        Ok(p) => Outcome::Plan(plan_pb(&p)),
        Err(d) => Outcome::Declined(declined_pb(&d)),
    }
}

/// Start the office: its routes (every call passes the auth layer, then `authorize`).
pub fn start(ctx: ServeContext) -> BoxFuture<'static, anyhow::Result<Routes>> {
    Box::pin(async move {
        let settings = crate::config::load(&ctx.config)?;
        let dispatcher = Dispatcher::new(&ctx)?;
        Ok(routes(&ctx, Arc::new(settings), dispatcher))
    })
}

fn routes(ctx: &ServeContext, settings: Arc<Settings>, dispatcher: Dispatcher) -> Routes {
    let server = OrchestratorServer::new(OrchestratorService {
        ctx: ctx.clone(),
        settings,
        dispatcher,
    })
    .max_decoding_message_size(ctx.max_message_bytes())
    .max_encoding_message_size(ctx.max_message_bytes());
    Routes::new(server)
}
