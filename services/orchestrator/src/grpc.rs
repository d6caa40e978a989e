//! gRPC handlers of `lychd.orchestrator.v1.Orchestrator`: authenticate (the layer) → decode
//! into a typed command → authorize the object built from it → service → encode.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use futures::future::BoxFuture;
use lychd_proto::orchestrator::v1 as pb;
use lychd_proto::orchestrator::v1::orchestrator_server::{Orchestrator, OrchestratorServer};
use lychd_registry::key::parse_v1;
use lychd_runtime::refusal::Violations;
use lychd_runtime::server::ServeContext;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use crate::actions;
use crate::config::Settings;
use crate::domain::phase::{PRIORITY_MAX, TransitionPhase};
use crate::domain::plan::{Action, Decline, Plan};
use crate::error::reasons::{
    ADMISSION_TIMEOUT_INVALID, CAPABILITY_KEY_MALFORMED, PRIORITY_OUT_OF_RANGE,
    TRANSITION_ID_MALFORMED,
};
use crate::error::{OrchestratorError, Result};
use crate::observe::Dispatcher;
use crate::store::ContainmentRow;
use crate::transition::{
    Cancelled, Event, Heard, Outcome, Recheck, Settled, TransitionRequest, Transitions,
};

pub struct OrchestratorService {
    ctx: ServeContext,
    settings: Arc<Settings>,
    dispatcher: Dispatcher,
    transitions: Arc<Transitions>,
    streams: Arc<tokio::sync::Semaphore>,
}

/// The longest admission timeout accepted, in seconds (one year).
const ADMISSION_TIMEOUT_MAX_S: f64 = 365.0 * 86_400.0;

/// A decoded `RequestTransition`.
struct TransitionCommand {
    key: String,
    priority: u8,
    /// The admission timeout, converted once at entry.
    timeout: Option<Duration>,
}

fn decode_transition(req: &pb::RequestTransitionRequest) -> Result<TransitionCommand> {
    let mut v = Violations::new();
    if let Err(e) = parse_v1(&req.capability_key) {
        v.push("capability_key", CAPABILITY_KEY_MALFORMED, e.describe());
    }
    let priority = u8::try_from(req.priority)
        .ok()
        .filter(|p| u32::from(*p) <= PRIORITY_MAX);
    if priority.is_none() {
        v.push(
            "priority",
            PRIORITY_OUT_OF_RANGE,
            "must be between 0 and 100",
        );
    }
    let timeout = match req.admission_timeout_s {
        None => None,
        Some(s) if s.is_finite() && (0.0..=ADMISSION_TIMEOUT_MAX_S).contains(&s) => {
            Some(Duration::from_secs_f64(s))
        }
        Some(_) => {
            v.push(
                "admission_timeout_s",
                ADMISSION_TIMEOUT_INVALID,
                "must be a finite number of seconds between 0 and one year",
            );
            None
        }
    };
    Ok(v.finish(|| TransitionCommand {
        key: req.capability_key.clone(),
        priority: priority.unwrap_or(0),
        timeout,
    })?)
}

fn err(e: OrchestratorError) -> Status {
    e.into()
}

fn ts(t: time::OffsetDateTime) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.unix_timestamp(),
        nanos: i32::try_from(t.nanosecond()).unwrap_or(0),
    }
}

fn containment_pb(r: &ContainmentRow) -> pb::Containment {
    pb::Containment {
        containment_id: r.id,
        transition_id: r.transition_id.clone(),
        cause: r.cause.clone(),
        affected: r.affected.clone(),
        expected_active: r.expected_active.clone(),
        target_animator: r.target_animator.clone(),
        capability_key: r.capability_key.clone(),
        recorded_at: Some(ts(r.recorded_at)),
        recovered_at: r.recovered_at.map(ts),
        runtime_guard_armed: r.guard_armed,
    }
}

/// A settled cohort as a caller's answer: its outcome, or the refusal every member receives.
fn settled_pb(
    settled: Settled,
    joined: bool,
) -> std::result::Result<pb::TransitionOutcome, Status> {
    match settled {
        Settled::Outcome(o) => Ok(outcome_pb(&o, joined)),
        Settled::AdmissionExpired => Err(err(OrchestratorError::AdmissionExpired)),
        Settled::Contained => Err(err(OrchestratorError::Contained)),
        Settled::Database => Err(err(OrchestratorError::DatabaseUnavailable)),
    }
}

/// Decode a transition id (32 lowercase hex digits).
fn transition_id(field: &str, s: &str) -> Result<String> {
    let mut v = Violations::new();
    if !crate::domain::intent::is_transition_id(s) {
        v.push(
            field,
            TRANSITION_ID_MALFORMED,
            "must be 32 lowercase hex digits",
        );
    }
    Ok(v.finish(|| s.to_owned())?)
}

fn phase_pb(p: TransitionPhase) -> pb::TransitionPhase {
    match p {
        TransitionPhase::Requested => pb::TransitionPhase::Requested,
        TransitionPhase::Arbitrating => pb::TransitionPhase::Arbitrating,
        TransitionPhase::Draining => pb::TransitionPhase::Draining,
        TransitionPhase::Actuating => pb::TransitionPhase::Actuating,
        TransitionPhase::Verifying => pb::TransitionPhase::Verifying,
        TransitionPhase::Compensating => pb::TransitionPhase::Compensating,
        TransitionPhase::Completed => pb::TransitionPhase::Completed,
        TransitionPhase::DeclinedNoEffect => pb::TransitionPhase::DeclinedNoEffect,
        TransitionPhase::FailedRestored => pb::TransitionPhase::FailedRestored,
        TransitionPhase::CancelledRestored => pb::TransitionPhase::CancelledRestored,
        TransitionPhase::ContainedUncertain => pb::TransitionPhase::ContainedUncertain,
        TransitionPhase::Failed => pb::TransitionPhase::Failed,
    }
}

fn outcome_pb(o: &Outcome, joined: bool) -> pb::TransitionOutcome {
    pb::TransitionOutcome {
        transition_id: o.transition_id.clone(),
        phase: phase_pb(o.phase) as i32,
        plan: o.plan.as_ref().map(plan_pb),
        detail: o.detail.clone(),
        joined,
    }
}

fn event_pb(e: &Event) -> pb::TransitionEvent {
    pb::TransitionEvent {
        transition_id: e.transition_id.clone(),
        capability_key: e.capability_key.clone(),
        priority: u32::from(e.priority),
        phase: phase_pb(e.phase) as i32,
        detail: e.detail.clone(),
        plan: e.plan.as_ref().map(plan_pb),
    }
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
    ) -> Recheck {
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
            .authorize(&request, actions::DESCRIBE, "office:orchestrator")
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
        let decided = crate::service::preview(&self.settings, &self.dispatcher, &key).await?;
        Ok(Response::new(pb::PreviewPlanResponse {
            outcome: Some(outcome(decided)),
        }))
    }

    async fn request_transition(
        &self,
        request: Request<pb::RequestTransitionRequest>,
    ) -> Result<Response<pb::RequestTransitionResponse>, Status> {
        let cmd = decode_transition(request.get_ref())?;
        // The cutoff is fixed at entry, before Ward is asked.
        let cutoff = cmd
            .timeout
            .map(|d| tokio::time::Instant::now().checked_add(d));
        let object = format!("capability:{}", cmd.key);
        let principal = self
            .ctx
            .authorize(&request, actions::TRANSITION, &object)
            .await?;
        if self.settings.registry.capability(&cmd.key).is_none() {
            return Err(err(OrchestratorError::CapabilityUnknown));
        }
        let cutoff = match cutoff {
            None => None,
            Some(None) => {
                return Err(err(OrchestratorError::invalid(
                    "admission_timeout_s",
                    ADMISSION_TIMEOUT_INVALID,
                    "makes a cutoff beyond the clock",
                )));
            }
            Some(Some(c)) => Some(c),
        };
        // An already-expired request declines before any trace, cohort or probe.
        if cutoff.is_some_and(|c| tokio::time::Instant::now() >= c) {
            return Err(err(OrchestratorError::AdmissionExpired));
        }
        if self.transitions.fenced().await.map_err(err)? {
            return Err(err(OrchestratorError::Contained));
        }
        let recheck = self.recheck(
            &request,
            actions::TRANSITION,
            object,
            Some(principal.policy_generation),
        );
        let heard = self
            .transitions
            .request(TransitionRequest {
                capability_key: cmd.key,
                priority: cmd.priority,
                cutoff,
                principal_id: principal.id,
                recheck,
            })
            .await;
        match heard {
            Heard::WaitExpired => Err(err(OrchestratorError::AdmissionWaitExpired)),
            Heard::Settled { settled, joined } => {
                Ok(Response::new(pb::RequestTransitionResponse {
                    outcome: Some(settled_pb(settled, joined)?),
                }))
            }
        }
    }

    async fn cancel_transition(
        &self,
        request: Request<pb::CancelTransitionRequest>,
    ) -> Result<Response<pb::CancelTransitionResponse>, Status> {
        let id = transition_id("transition_id", &request.get_ref().transition_id)?;
        let principal = self
            .ctx
            .authorize(&request, actions::CANCEL, &format!("transition:{id}"))
            .await?;
        match self.transitions.cancel(&id, &principal.id).await {
            Cancelled::NotRunning => Err(err(OrchestratorError::TransitionNotRunning)),
            Cancelled::NotOwned => Err(err(OrchestratorError::TransitionNotOwned)),
            Cancelled::Settled(settled) => Ok(Response::new(pb::CancelTransitionResponse {
                outcome: Some(settled_pb(settled, false)?),
            })),
        }
    }

    type WatchTransitionsStream =
        Pin<Box<dyn Stream<Item = Result<pb::TransitionEvent, Status>> + Send + 'static>>;

    async fn watch_transitions(
        &self,
        request: Request<pb::WatchTransitionsRequest>,
    ) -> Result<Response<Self::WatchTransitionsStream>, Status> {
        self.ctx
            .authorize(&request, actions::READ, "transition:*")
            .await?;
        let place = self
            .streams
            .clone()
            .try_acquire_owned()
            .map_err(|_| err(OrchestratorError::StreamLimit))?;
        let recheck = self.recheck(&request, actions::READ, "transition:*".into(), None);
        let mut events = self.transitions.subscribe();
        let every = self.settings.stream_recheck_interval;
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<pb::TransitionEvent, Status>>(64);
        tokio::spawn(async move {
            let _place = place;
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tokio::select! {
                    () = tx.closed() => return,
                    _ = tick.tick() => {
                        if let Err(refused) = recheck().await {
                            let _ = tx.send(Err(refused)).await;
                            return;
                        }
                    }
                    e = events.recv() => match e {
                        Ok(e) => {
                            if tx.send(Ok(event_pb(&e))).await.is_err() {
                                return;
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!(skipped = n, "a transition stream fell behind");
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    },
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn list_containments(
        &self,
        request: Request<pb::ListContainmentsRequest>,
    ) -> Result<Response<pb::ListContainmentsResponse>, Status> {
        self.ctx
            .authorize(&request, actions::READ, "containment:*")
            .await?;
        let rows = crate::store::containments(&self.ctx.pool, request.get_ref().include_recovered)
            .await
            .map_err(|e| err(e.into()))?;
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
        let row = crate::store::containment_by_id(&self.ctx.pool, id)
            .await
            .map_err(|e| err(e.into()))?
            .ok_or_else(|| err(OrchestratorError::ContainmentNotFound))?;
        if row.recovered_at.is_some() {
            return Ok(Response::new(pb::RecoverContainmentResponse {
                containment: Some(containment_pb(&row)),
                proved: String::new(),
            }));
        }
        let proved = if row.guard_armed {
            crate::service::prove_stopped(&self.dispatcher, &row).await
        } else {
            crate::service::prove(&self.dispatcher, &row).await
        }
        .map_err(err)?
        .ok_or_else(|| err(OrchestratorError::WorldNotProven))?;
        // Ward again, with the first decision's generation, right before the reopen.
        self.recheck(
            &request,
            actions::RECOVER,
            "containment:*".into(),
            Some(principal.policy_generation),
        )()
        .await?;
        let token = match &row.closure_token {
            Some(t) => t.clone(),
            // The close is idempotent on the transition id: ask for its token again.
            None => self
                .dispatcher
                .close(&row.transition_id, &row.affected, "orchestrator transition")
                .await
                .map_err(|_| err(OrchestratorError::ObservationUnavailable))?,
        };
        self.dispatcher
            .reopen(&token)
            .await
            .map_err(|_| err(OrchestratorError::ObservationUnavailable))?;
        crate::store::recover(&self.ctx.pool, id, &principal.id)
            .await
            .map_err(|e| err(e.into()))?;
        let row = crate::store::containment_by_id(&self.ctx.pool, id)
            .await
            .map_err(|e| err(e.into()))?
            .ok_or_else(|| err(OrchestratorError::ContainmentNotFound))?;
        Ok(Response::new(pb::RecoverContainmentResponse {
            containment: Some(containment_pb(&row)),
            proved: proved.as_str().to_owned(),
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
        let settings = Arc::new(crate::config::load(&ctx.config)?);
        let dispatcher = Dispatcher::new(&ctx)?;
        // A transition a previous process left unfinished may have closed admission or
        // touched the host: contain it before serving (nothing reopens without proof). An
        // armed runtime guard (a soft activation not observed WARM) contains its transition
        // whatever phase it recorded.
        let guarded = crate::store::contain_guarded(&ctx.pool).await?;
        if guarded > 0 {
            tracing::warn!(
                guarded,
                "transitions with an armed runtime guard contained at start"
            );
        }
        let contained = crate::store::contain_interrupted(&ctx.pool).await?;
        if contained > 0 {
            tracing::warn!(contained, "interrupted transitions contained at start");
        }
        let actuator = crate::actuator::build(&settings)?;
        let transitions = Transitions::new(
            settings.clone(),
            dispatcher.clone(),
            actuator,
            ctx.pool.clone(),
        );
        Ok(routes(&ctx, settings, dispatcher, transitions))
    })
}

fn routes(
    ctx: &ServeContext,
    settings: Arc<Settings>,
    dispatcher: Dispatcher,
    transitions: Arc<Transitions>,
) -> Routes {
    let streams = Arc::new(tokio::sync::Semaphore::new(settings.stream_limit));
    let server = OrchestratorServer::new(OrchestratorService {
        ctx: ctx.clone(),
        settings,
        dispatcher,
        transitions,
        streams,
    })
    .max_decoding_message_size(ctx.max_message_bytes())
    .max_encoding_message_size(ctx.max_message_bytes());
    Routes::new(server)
}
