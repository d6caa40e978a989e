//! Read-only views of the hardware offices, each through the person's own session bound to that
//! office: the Orchestrator's transitions and containments, the Dispatcher's leases.

use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
use lychd_proto::dispatcher::v1::{
    CapabilityInfo, LeaseInfo, LeaseState, ListCapabilitiesRequest, ListLeasesRequest, Phase,
};
use lychd_proto::orchestrator::v1::orchestrator_client::OrchestratorClient;
use lychd_proto::orchestrator::v1::{
    CancelTransitionRequest, Containment, ListContainmentsRequest, ListTransitionsRequest,
    RecoverContainmentRequest, Transition, TransitionEvent, TransitionPhase,
    WatchTransitionsRequest,
};
use lychd_proto::runner::v1::runner_client::RunnerClient;
use lychd_proto::runner::v1::{
    CancelRunRequest, GetRunRequest, InspectCheckpointRequest, ListRunTransitionsRequest,
    ListRunsRequest, Run, RunTransition,
};
use tonic::Code;
use tonic::transport::Channel;

use crate::view::instant;
use crate::ward::{Refusal, authorized, explain};

pub const ORCHESTRATOR: &str = "orchestrator";
pub const DISPATCHER: &str = "dispatcher";
pub const RUNNER: &str = "runner";

/// The hardware offices the console was given the address of.
#[derive(Clone, Default)]
pub struct Hardware {
    orchestrator: Option<Channel>,
    dispatcher: Option<Channel>,
    runner: Option<Channel>,
}

fn channel(
    endpoint: Option<&str>,
    ca: Option<&tonic::transport::Certificate>,
) -> anyhow::Result<Option<Channel>> {
    endpoint.map(|e| crate::office_channel(e, ca)).transpose()
}

fn not_configured() -> Refusal {
    let (words, next) = explain(Code::Unavailable, "NOT_CONFIGURED");
    Refusal {
        code: Code::Unavailable,
        reason: "NOT_CONFIGURED".into(),
        words,
        next,
    }
}

/// A person signed in before the office was configured has no session for it.
fn no_session() -> Refusal {
    let (words, next) = explain(Code::Unauthenticated, "SESSION_UNKNOWN");
    Refusal {
        code: Code::Unauthenticated,
        reason: "SESSION_UNKNOWN".into(),
        words,
        next,
    }
}

impl Hardware {
    pub fn new(
        orchestrator: Option<&str>,
        dispatcher: Option<&str>,
        runner: Option<&str>,
    ) -> anyhow::Result<Self> {
        Self::with_ca(orchestrator, dispatcher, runner, None)
    }

    /// [`Hardware::new`] over TLS verified by `ca` for `https://` endpoints.
    pub fn with_ca(
        orchestrator: Option<&str>,
        dispatcher: Option<&str>,
        runner: Option<&str>,
        ca: Option<&tonic::transport::Certificate>,
    ) -> anyhow::Result<Self> {
        Ok(Hardware {
            orchestrator: channel(orchestrator, ca)?,
            dispatcher: channel(dispatcher, ca)?,
            runner: channel(runner, ca)?,
        })
    }

    /// The offices besides Ward a signed-in person needs a session for.
    pub fn offices(&self) -> Vec<&'static str> {
        let mut o = Vec::new();
        if self.orchestrator.is_some() {
            o.push(ORCHESTRATOR);
        }
        if self.dispatcher.is_some() {
            o.push(DISPATCHER);
        }
        if self.runner.is_some() {
            o.push(RUNNER);
        }
        o
    }

    pub async fn transitions(&self, token: Option<&str>) -> Result<Vec<TransitionView>, Refusal> {
        let channel = self.orchestrator.clone().ok_or_else(not_configured)?;
        let request = authorized(
            ListTransitionsRequest { page: None },
            token.ok_or_else(no_session)?,
        )?;
        let list = OrchestratorClient::new(channel)
            .list_transitions(request)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner()
            .transitions;
        Ok(list.iter().map(TransitionView::from).collect())
    }

    /// The Orchestrator's transition feed from now on (`WatchTransitions`), with the person's own
    /// session: one event per recorded phase of a transition the person may read.
    pub async fn watch_transitions(
        &self,
        token: Option<&str>,
    ) -> Result<tonic::Streaming<TransitionEvent>, Refusal> {
        let channel = self.orchestrator.clone().ok_or_else(not_configured)?;
        let mut request = tonic::Request::new(WatchTransitionsRequest {
            after_sequence: None,
        });
        // No deadline: the stream stays open as long as the page does.
        request.metadata_mut().insert(
            "authorization",
            crate::ward::bearer(token.ok_or_else(no_session)?)?,
        );
        OrchestratorClient::new(channel)
            .watch_transitions(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| Refusal::from_status(&s))
    }

    /// `CancelTransition` of the person's own session: the Orchestrator refuses anyone but the
    /// transition's owner (`TRANSITION_NOT_OWNED`). Answers the transition as recorded.
    pub async fn cancel_transition(
        &self,
        token: Option<&str>,
        id: &str,
    ) -> Result<Option<TransitionView>, Refusal> {
        let channel = self.orchestrator.clone().ok_or_else(not_configured)?;
        let request = authorized(
            CancelTransitionRequest {
                transition_id: id.to_owned(),
                wait_ms: None,
            },
            token.ok_or_else(no_session)?,
        )?;
        let answer = OrchestratorClient::new(channel)
            .cancel_transition(request)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner();
        Ok(answer.transition.as_ref().map(TransitionView::from))
    }

    /// `RecoverContainment` of the person's own session: the Orchestrator has the Dispatcher
    /// observe the recorded animators afresh and recovers only on a proved world. Answers the
    /// record and which world was proved (`PRIOR`, `DESIRED` or `STOPPED`).
    pub async fn recover_containment(
        &self,
        token: Option<&str>,
        id: i64,
    ) -> Result<(Option<ContainmentView>, String), Refusal> {
        let channel = self.orchestrator.clone().ok_or_else(not_configured)?;
        let request = authorized(
            RecoverContainmentRequest { containment_id: id },
            token.ok_or_else(no_session)?,
        )?;
        let answer = OrchestratorClient::new(channel)
            .recover_containment(request)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner();
        Ok((
            answer.containment.as_ref().map(ContainmentView::from),
            answer.proved,
        ))
    }

    pub async fn containments(&self, token: Option<&str>) -> Result<Vec<ContainmentView>, Refusal> {
        let channel = self.orchestrator.clone().ok_or_else(not_configured)?;
        let request = authorized(
            ListContainmentsRequest {
                include_recovered: true,
            },
            token.ok_or_else(no_session)?,
        )?;
        let list = OrchestratorClient::new(channel)
            .list_containments(request)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner()
            .containments;
        Ok(list.iter().map(ContainmentView::from).collect())
    }

    /// The Dispatcher's registry (`ListCapabilities`): each capability with its animator's last
    /// observation and admission.
    pub async fn capabilities(&self, token: Option<&str>) -> Result<Vec<CapabilityView>, Refusal> {
        let channel = self.dispatcher.clone().ok_or_else(not_configured)?;
        let request = authorized(ListCapabilitiesRequest {}, token.ok_or_else(no_session)?)?;
        let answer = DispatcherClient::new(channel)
            .list_capabilities(request)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner();
        Ok(answer
            .capabilities
            .iter()
            .map(|c| {
                let admission = answer.admission.iter().find(|a| a.animator == c.animator);
                CapabilityView::new(c, admission)
            })
            .collect())
    }

    /// The person's runs (`ListRuns`), newest first.
    pub async fn runs(&self, token: Option<&str>) -> Result<Vec<RunView>, Refusal> {
        let channel = self.runner.clone().ok_or_else(not_configured)?;
        let request = authorized(
            ListRunsRequest { page: None },
            token.ok_or_else(no_session)?,
        )?;
        let list = RunnerClient::new(channel)
            .list_runs(request)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner()
            .runs;
        Ok(list.iter().map(RunView::from).collect())
    }

    /// One run (`GetRun`), its transitions (`ListRunTransitions`, first page) and its latest
    /// checkpoint's summary (`InspectCheckpoint`: version, state, whether its checksum verifies).
    pub async fn run(&self, token: Option<&str>, id: &str) -> Result<RunPageView, Refusal> {
        let channel = self.runner.clone().ok_or_else(not_configured)?;
        let token = token.ok_or_else(no_session)?;
        let mut client = RunnerClient::new(channel);
        let run = client
            .get_run(authorized(
                GetRunRequest {
                    run_id: id.to_owned(),
                },
                token,
            )?)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner()
            .run
            .as_ref()
            .map(RunView::from);
        let transitions = client
            .list_run_transitions(authorized(
                ListRunTransitionsRequest {
                    run_id: id.to_owned(),
                    page: None,
                },
                token,
            )?)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner()
            .transitions;
        let checkpoint = client
            .inspect_checkpoint(authorized(
                InspectCheckpointRequest {
                    run_id: id.to_owned(),
                    version: 0,
                },
                token,
            )?)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner();
        let mut used = BudgetsUsed::default();
        for t in &transitions {
            used.add(&t.budget_delta);
        }
        Ok(RunPageView {
            run,
            used,
            transitions: transitions.iter().map(RunTransitionView::from).collect(),
            checkpoint: checkpoint.checkpoint.as_ref().map(|c| CheckpointView {
                version: c.version,
                state: c.state.clone(),
                checksum: c.checksum.clone(),
                created_at: instant(c.created_at.as_ref()),
                verified: checkpoint.verified,
            }),
        })
    }

    /// `CancelRun` of the person's own session (the Runner cancels only the caller's runs).
    pub async fn cancel_run(
        &self,
        token: Option<&str>,
        id: &str,
    ) -> Result<Option<RunView>, Refusal> {
        let channel = self.runner.clone().ok_or_else(not_configured)?;
        let request = authorized(
            CancelRunRequest {
                run_id: id.to_owned(),
            },
            token.ok_or_else(no_session)?,
        )?;
        let answer = RunnerClient::new(channel)
            .cancel_run(request)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner();
        Ok(answer.run.as_ref().map(RunView::from))
    }

    pub async fn leases(&self, token: Option<&str>) -> Result<Vec<LeaseView>, Refusal> {
        let channel = self.dispatcher.clone().ok_or_else(not_configured)?;
        let request = authorized(
            ListLeasesRequest {
                animators: Vec::new(),
                include_inactive: false,
                page: None,
                request_id: String::new(),
            },
            token.ok_or_else(no_session)?,
        )?;
        let list = DispatcherClient::new(channel)
            .list_leases(request)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner()
            .leases;
        Ok(list.iter().map(LeaseView::from).collect())
    }
}

pub struct TransitionView {
    pub id: String,
    pub capability: String,
    pub priority: u32,
    pub phase: String,
    pub settled: bool,
    pub detail: String,
    pub requested_at: String,
}

impl From<&Transition> for TransitionView {
    fn from(t: &Transition) -> Self {
        TransitionView {
            id: t.transition_id.clone(),
            capability: t.capability_key.clone(),
            priority: t.priority,
            phase: TransitionPhase::try_from(t.phase)
                .map(|p| {
                    p.as_str_name()
                        .trim_start_matches("TRANSITION_PHASE_")
                        .to_lowercase()
                        .replace('_', " ")
                })
                .unwrap_or_else(|_| "unknown".into()),
            settled: t.settled,
            detail: t.detail.clone(),
            requested_at: instant(t.requested_at.as_ref()),
        }
    }
}

pub struct ContainmentView {
    pub id: i64,
    pub transition: String,
    pub cause: String,
    pub affected: String,
    pub expected_active: String,
    pub target: String,
    pub capability: String,
    pub recorded_at: String,
    pub recovered_at: String,
    pub guard_armed: bool,
}

impl From<&Containment> for ContainmentView {
    fn from(c: &Containment) -> Self {
        ContainmentView {
            id: c.containment_id,
            transition: c.transition_id.clone(),
            cause: c.cause.clone(),
            affected: c.affected.join(", "),
            expected_active: c.expected_active.join(", "),
            target: c.target_animator.clone(),
            capability: c.capability_key.clone(),
            recorded_at: instant(c.recorded_at.as_ref()),
            recovered_at: instant(c.recovered_at.as_ref()),
            guard_armed: c.runtime_guard_armed,
        }
    }
}

pub struct LeaseView {
    pub id: String,
    pub capability: String,
    pub animator: String,
    pub holder: String,
    pub state: &'static str,
    pub issued_at: String,
    pub expires_at: String,
}

impl From<&LeaseInfo> for LeaseView {
    fn from(l: &LeaseInfo) -> Self {
        LeaseView {
            id: l.lease_id.clone(),
            capability: l.capability_key.clone(),
            animator: l.animator.clone(),
            holder: l.holder.clone(),
            state: match LeaseState::try_from(l.state) {
                Ok(LeaseState::Active) => "active",
                Ok(LeaseState::Expired) => "expired",
                Ok(LeaseState::Released) => "released",
                _ => "unknown",
            },
            issued_at: instant(l.issued_at.as_ref()),
            expires_at: instant(l.expires_at.as_ref()),
        }
    }
}

pub struct CapabilityView {
    pub key: String,
    pub animator: String,
    pub model: String,
    pub context_tokens: u32,
    pub phase: String,
    pub reason: String,
    pub observed_at: String,
    /// `open`, `closed (n)` or `unknown` when the Dispatcher answered no admission state.
    pub admission: String,
    pub live_leases: String,
}

impl CapabilityView {
    fn new(
        c: &CapabilityInfo,
        admission: Option<&lychd_proto::dispatcher::v1::AdmissionState>,
    ) -> Self {
        let observation = c.observation.as_ref();
        CapabilityView {
            key: c.capability_key.clone(),
            animator: c.animator.clone(),
            model: c
                .route
                .as_ref()
                .map(|r| r.model.clone())
                .unwrap_or_default(),
            context_tokens: c.route.as_ref().map_or(0, |r| r.context_tokens),
            phase: observation
                .and_then(|o| Phase::try_from(o.phase).ok())
                .filter(|p| *p != Phase::Unspecified)
                .map(|p| p.as_str_name().trim_start_matches("PHASE_").to_lowercase())
                .unwrap_or_else(|| "not observed".into()),
            reason: observation.map(|o| o.reason.clone()).unwrap_or_default(),
            observed_at: instant(observation.and_then(|o| o.observed_at.as_ref())),
            admission: match admission {
                Some(a) if a.open_closures == 0 => "open".into(),
                Some(a) => format!("closed ({})", a.open_closures),
                None => "unknown".into(),
            },
            live_leases: admission.map_or_else(|| "unknown".into(), |a| a.live_leases.to_string()),
        }
    }
}

pub struct RunView {
    pub id: String,
    pub workflow: String,
    pub state: String,
    /// Empty while the run has not ended.
    pub terminal: String,
    pub budgets: String,
    pub interrupt_pending: bool,
    pub created_at: String,
    pub updated_at: String,
    pub parent: String,
}

impl From<&Run> for RunView {
    fn from(r: &Run) -> Self {
        let b = r.budgets.unwrap_or_default();
        RunView {
            id: r.run_id.clone(),
            workflow: format!("{} {}", r.workflow_name, r.workflow_version),
            state: r.state.clone(),
            terminal: r.terminal_category.clone(),
            budgets: format!(
                "{} steps, {} tool calls, {} tokens, {} milli cost, {} s wall",
                b.max_steps, b.max_tool_calls, b.max_tokens, b.max_cost_milli, b.max_wall_seconds
            ),
            interrupt_pending: r.interrupt_pending,
            created_at: instant(r.created_at.as_ref()),
            updated_at: instant(r.updated_at.as_ref()),
            parent: r.parent_run_id.clone(),
        }
    }
}

/// What a run consumed of its budgets: the sum of its transitions' `budget_delta`.
#[derive(Default)]
pub struct BudgetsUsed {
    pub steps: u64,
    pub tool_calls: u64,
    pub tokens: u64,
    pub cost_milli: u64,
    pub suspended_ms: u64,
}

impl BudgetsUsed {
    fn add(&mut self, delta: &str) {
        let Ok(serde_json::Value::Object(d)) = serde_json::from_str::<serde_json::Value>(delta)
        else {
            return;
        };
        let get = |k: &str| d.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        self.steps += get("steps");
        self.tool_calls += get("tool_calls");
        self.tokens += get("tokens");
        self.cost_milli += get("cost_milli");
        self.suspended_ms += get("suspended_ms");
    }
}

pub struct RunTransitionView {
    pub sequence: u64,
    pub from: String,
    pub to: String,
    pub trigger: String,
    pub actor: String,
    pub recorded_at: String,
    pub budget_delta: String,
}

impl From<&RunTransition> for RunTransitionView {
    fn from(t: &RunTransition) -> Self {
        RunTransitionView {
            sequence: t.sequence,
            from: t.source_state.clone(),
            to: t.target_state.clone(),
            trigger: t.trigger.clone(),
            actor: t.actor.clone(),
            recorded_at: instant(t.recorded_at.as_ref()),
            budget_delta: t.budget_delta.clone(),
        }
    }
}

pub struct CheckpointView {
    pub version: u64,
    pub state: String,
    pub checksum: String,
    pub created_at: String,
    pub verified: bool,
}

pub struct RunPageView {
    pub run: Option<RunView>,
    pub used: BudgetsUsed,
    pub transitions: Vec<RunTransitionView>,
    pub checkpoint: Option<CheckpointView>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_used_sum_the_transitions_deltas_and_skip_what_is_not_json() {
        let mut used = BudgetsUsed::default();
        used.add(r#"{"steps": 1, "tokens": 40}"#);
        used.add(r#"{"steps": 1, "tool_calls": 2, "cost_milli": 5, "suspended_ms": 7}"#);
        used.add("");
        used.add("not json");
        assert_eq!(
            (
                used.steps,
                used.tool_calls,
                used.tokens,
                used.cost_milli,
                used.suspended_ms
            ),
            (2, 2, 40, 5, 7)
        );
    }
}
