//! `lychd dev --ephemeral` as a real process (every office, PostgreSQL, the console), and the
//! principals the walk needs, enrolled by the dev operator over Ward's gRPC API: a test agent
//! (a service that proposes, consumes and withdraws calls of `effect:agent`) and a reviewer (a
//! human who may review consents but approve nothing).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
use lychd_proto::dispatcher::v1::{
    Demand, Family, LeaseRequest, ReleaseLeaseRequest, lease_response,
};
use lychd_proto::orchestrator::v1::RequestTransitionRequest;
use lychd_proto::orchestrator::v1::orchestrator_client::OrchestratorClient;
use lychd_proto::runner::v1::runner_client::RunnerClient;
use lychd_proto::runner::v1::{GetRunRequest, StartRunRequest};
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_proto::ward::v1::{
    AssignRequest, CancelForRunRequest, Consent, ConsentState, ConsumeConsentRequest,
    CredentialKind, DecideRequest, EffectClass, EnrollPrincipalRequest, ExchangeCredentialRequest,
    IssueCredentialRequest, ListConsentsRequest, PrincipalKind, ProposeEffectRequest,
    RevokeRequest, Verdict, revoke_request,
};
use tonic::transport::Channel;
use tonic_types::StatusExt;

/// The run the agent proposes under.
const RUN: &str = "console-e2e-run";

/// The accountable owner of the runs the walk starts.
const OWNER: &str = "owner-una";

pub struct Stack {
    child: Option<tokio::process::Child>,
    _state: tempfile::TempDir,
    ward: Channel,
    orchestrator: Channel,
    dispatcher: Channel,
    runner: Channel,
    operator_token: String,
    pub operator_credential: String,
    pub console_url: String,
    pub console_addr: SocketAddr,
}

fn request<T>(message: T, bearer: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {bearer}").parse().expect("ascii bearer"),
    );
    r
}

impl Stack {
    pub async fn start() -> Stack {
        let state = tempfile::tempdir().expect("state dir");
        let base_port = lychd_testkit::verify::free_port();
        let child = tokio::process::Command::new(lychd_testkit::bin_path("lychd"))
            .args(["dev", "--ephemeral", "--no-build", "--base-port"])
            .arg(base_port.to_string())
            .arg("--state-dir")
            .arg(state.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start lychd dev");
        let mut stack = Stack {
            child: Some(child),
            ward: Channel::from_static("http://127.0.0.1:1").connect_lazy(),
            orchestrator: Channel::from_static("http://127.0.0.1:1").connect_lazy(),
            dispatcher: Channel::from_static("http://127.0.0.1:1").connect_lazy(),
            runner: Channel::from_static("http://127.0.0.1:1").connect_lazy(),
            operator_token: String::new(),
            operator_credential: String::new(),
            console_url: String::new(),
            console_addr: "127.0.0.1:1".parse().expect("addr"),
            _state: state,
        };
        let dev = stack._state.path().join("dev");
        let endpoints = dev.join("endpoints.json");
        let deadline = Instant::now() + Duration::from_secs(120);
        while !endpoints.is_file() {
            if let Ok(Some(status)) = stack.child.as_mut().expect("running").try_wait() {
                panic!("lychd dev exited early ({status})");
            }
            assert!(Instant::now() < deadline, "lychd dev not up within 120 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let endpoints: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&endpoints).expect("read"))
                .expect("json");
        let ward = endpoints["ward"].as_str().expect("ward endpoint");
        stack.ward = Channel::from_shared(format!("http://{ward}"))
            .expect("url")
            .connect()
            .await
            .expect("connect to ward");
        for (office, channel) in [
            ("orchestrator", &mut stack.orchestrator),
            ("dispatcher", &mut stack.dispatcher),
            ("runner", &mut stack.runner),
        ] {
            let at = endpoints[office].as_str().expect("office endpoint");
            *channel = Channel::from_shared(format!("http://{at}"))
                .expect("url")
                .connect_lazy();
        }
        let read = |name: &str| {
            std::fs::read_to_string(dev.join(name))
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .trim()
                .to_owned()
        };
        stack.operator_token = read("operator.ward.token");
        stack.operator_credential = read("operator.credential");
        let address = read("console.address");
        stack.console_addr = address.parse().expect("console address");
        assert!(
            stack.console_addr.ip().is_loopback(),
            "the console listens on loopback: {address}"
        );
        stack.console_url = format!("http://{address}/");
        stack
    }

    fn client(&self) -> WardClient<Channel> {
        WardClient::new(self.ward.clone())
    }

    /// Enrol `name` of `kind` with `grants` (action, object); returns its id and a standing
    /// credential.
    async fn enrol(
        &self,
        kind: PrincipalKind,
        name: &str,
        grants: &[(&str, &str)],
    ) -> (String, String) {
        let op = &self.operator_token;
        let id = self
            .client()
            .enroll_principal(request(
                EnrollPrincipalRequest {
                    kind: kind as i32,
                    name: name.to_owned(),
                    display_name: String::new(),
                },
                op,
            ))
            .await
            .expect("enrol")
            .into_inner()
            .principal
            .expect("principal")
            .id;
        for (action, object) in grants {
            let (audience, purpose) = action.split_once(':').expect("office:verb");
            self.client()
                .assign(request(
                    AssignRequest {
                        principal_id: id.clone(),
                        action: (*action).to_owned(),
                        object: (*object).to_owned(),
                        audience: audience.to_owned(),
                        purpose: purpose.to_owned(),
                        expires_at: None,
                    },
                    op,
                ))
                .await
                .expect("assign");
        }
        let credential = self
            .client()
            .issue_credential(request(
                IssueCredentialRequest {
                    principal_id: id.clone(),
                    kind: CredentialKind::Standing as i32,
                    ttl_seconds: 0,
                },
                op,
            ))
            .await
            .expect("issue")
            .into_inner()
            .credential;
        (id, credential)
    }

    /// A service that proposes, consumes and withdraws calls of `effect:agent` under [`RUN`].
    pub async fn agent(&self, name: &str) -> Agent {
        let (id, credential) = self
            .enrol(
                PrincipalKind::Service,
                name,
                &[
                    ("ward:propose", "effect:agent"),
                    ("ward:consume", "effect:agent"),
                    ("ward:cancel", &format!("run:{RUN}")),
                ],
            )
            .await;
        let session = self
            .client()
            .exchange_credential(request(
                ExchangeCredentialRequest {
                    ttl_seconds: 0,
                    audiences: vec!["ward".into()],
                },
                &credential,
            ))
            .await
            .expect("exchange")
            .into_inner()
            .session_token;
        Agent {
            ward: self.ward.clone(),
            token: session,
            principal_id: id,
        }
    }

    /// A human who may review every consent and approve none; returns its id and credential.
    pub async fn reviewer(&self, name: &str) -> (String, String) {
        self.enrol(PrincipalKind::Human, name, &[("ward:review", "consent:*")])
            .await
    }

    /// The operator revokes principal `id` (every credential and session of it) at Ward.
    pub async fn revoke(&self, id: &str) {
        self.client()
            .revoke(request(
                RevokeRequest {
                    target: Some(revoke_request::Target::PrincipalId(id.to_owned())),
                },
                &self.operator_token,
            ))
            .await
            .expect("revoke");
    }

    /// Where consent `id` stands, as the operator sees it with its own session.
    pub async fn state_of(&self, id: &str) -> ConsentState {
        let listed = self
            .client()
            .list_consents(request(
                ListConsentsRequest {
                    run_id: RUN.into(),
                    state: 0,
                    page: None,
                },
                &self.operator_token,
            ))
            .await
            .expect("list")
            .into_inner()
            .consents;
        let c = listed
            .iter()
            .find(|c| c.consent_id == id)
            .expect("the consent is listed");
        ConsentState::try_from(c.state).expect("a state")
    }

    /// The dev operator's own session for `office` (its credential exchanged at Ward), as a
    /// grpcurl user gets one.
    pub async fn operator_session(&self, office: &str) -> String {
        self.client()
            .exchange_credential(request(
                ExchangeCredentialRequest {
                    ttl_seconds: 0,
                    audiences: vec![office.into()],
                },
                &self.operator_credential,
            ))
            .await
            .expect("exchange")
            .into_inner()
            .session_token
    }

    /// The operator leases `model` from the Dispatcher (its animator then has a lease to
    /// drain); returns the lease id.
    pub async fn lease(&self, model: &str) -> String {
        let token = self.operator_session("dispatcher").await;
        let answer = DispatcherClient::new(self.dispatcher.clone())
            .lease(request(
                LeaseRequest {
                    demand: Some(Demand {
                        family: Family::Chat as i32,
                        capability_key: String::new(),
                        model_id: model.into(),
                        input_modalities: Vec::new(),
                        tools_required: false,
                    }),
                    holder: "console-e2e".into(),
                    run_id: String::new(),
                    attempt_id: String::new(),
                    priority: 0,
                    ttl_seconds: 120,
                    request_id: String::new(),
                },
                &token,
            ))
            .await
            .expect("lease")
            .into_inner();
        match answer.outcome {
            Some(lease_response::Outcome::Granted(g)) => g.lease_id,
            other => panic!("{model} not granted: {other:?}"),
        }
    }

    pub async fn release(&self, lease: &str) {
        let token = self.operator_session("dispatcher").await;
        DispatcherClient::new(self.dispatcher.clone())
            .release_lease(request(
                ReleaseLeaseRequest {
                    lease_id: lease.into(),
                    holder: "console-e2e".into(),
                },
                &token,
            ))
            .await
            .expect("release");
    }

    /// The operator requests a transition making `capability` WARM (answered once recorded);
    /// returns its id.
    pub async fn request_transition(&self, capability: &str, request_id: &str) -> String {
        let token = self.operator_session("orchestrator").await;
        OrchestratorClient::new(self.orchestrator.clone())
            .request_transition(request(
                RequestTransitionRequest {
                    capability_key: capability.into(),
                    priority: 50,
                    admission_timeout_s: None,
                    request_id: request_id.into(),
                    wait_ms: None,
                },
                &token,
            ))
            .await
            .expect("request a transition")
            .into_inner()
            .transition
            .expect("the transition")
            .transition_id
    }

    /// The operator starts a run of a one-step workflow (a model step on the dev model,
    /// verified for the accountable owner [`OWNER`]) with its own Runner session; returns the
    /// run id.
    pub async fn start_run(&self, request_id: &str) -> String {
        let token = self.operator_session("runner").await;
        let workflow = br#"{"schema": "lychd.runner.workflow/v1", "name": "summarize", "version": "0.1.0",
 "obligations": [{"id": "summary", "evidence": ["model_answer"]}],
 "steps": [{"id": "draft", "kind": "model", "family": "chat", "model": "qwen3-0.6b", "closes": ["summary"]}],
 "verification": {"owner": "owner-una"}}"#;
        RunnerClient::new(self.runner.clone())
            .start_run(request(
                StartRunRequest {
                    request_id: request_id.into(),
                    workflow: workflow.to_vec(),
                    input: b"{}".to_vec(),
                    budgets: None,
                    timeout_seconds: 0,
                    parent_run_id: String::new(),
                },
                &token,
            ))
            .await
            .expect("start a run")
            .into_inner()
            .run
            .expect("the run")
            .run_id
    }

    /// The accountable owner of the runs started here (a run succeeds only on HelmLoop's PASS,
    /// which needs the owner's records and promotion): enrolled, allowed to approve
    /// `effect:helmloop`, with a Ward session.
    async fn owner(&self) -> String {
        let (_, credential) = self
            .enrol(
                PrincipalKind::Human,
                OWNER,
                &[("ward:approve", "effect:helmloop")],
            )
            .await;
        self.client()
            .exchange_credential(request(
                ExchangeCredentialRequest {
                    ttl_seconds: 0,
                    audiences: vec!["ward".into()],
                },
                &credential,
            ))
            .await
            .expect("exchange")
            .into_inner()
            .session_token
    }

    /// The owner (`owner`: its session) approves run `id`'s pending owner records and
    /// promotion, as the operator lists them.
    async fn approve_owned(&self, owner: &str, id: &str) {
        let pending = self
            .client()
            .list_consents(request(
                ListConsentsRequest {
                    run_id: id.into(),
                    state: ConsentState::Pending as i32,
                    page: None,
                },
                &self.operator_token,
            ))
            .await
            .expect("list consents")
            .into_inner()
            .consents;
        for c in pending
            .into_iter()
            .filter(|c| c.tool_name == "helmloop.issue" || c.tool_name == "helmloop.promote")
        {
            self.client()
                .decide(request(
                    DecideRequest {
                        consent_id: c.consent_id,
                        verdict: Verdict::Approve as i32,
                        review_digest: c.binding_digest,
                    },
                    owner,
                ))
                .await
                .expect("the owner approves");
        }
    }

    /// Wait (at most 30 s) until run `id` has ended, as the operator reads it over gRPC, its
    /// owner approving what the verifier proposes meanwhile.
    pub async fn wait_run_ended(&self, id: &str) {
        let token = self.operator_session("runner").await;
        let owner = self.owner().await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            self.approve_owned(&owner, id).await;
            let run = RunnerClient::new(self.runner.clone())
                .get_run(request(GetRunRequest { run_id: id.into() }, &token))
                .await
                .expect("get the run")
                .into_inner()
                .run
                .expect("the run");
            if !run.terminal_category.is_empty() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "run {id} still {} after 30 s",
                run.state
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Ctrl-C, as an operator stops it; everything must stop cleanly.
    pub async fn stop(mut self) {
        let child = self.child.take().expect("running");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id().expect("pid") as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .expect("ctrl-c");
        let out = tokio::time::timeout(Duration::from_secs(40), child.wait_with_output())
            .await
            .expect("stops within 40 s")
            .expect("exit");
        assert!(out.status.success(), "lychd dev exit {}", out.status);
        assert!(
            tokio::net::TcpStream::connect(self.console_addr)
                .await
                .is_err(),
            "the console stopped with the stack"
        );
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGINT,
                );
            }
            let deadline = Instant::now() + Duration::from_secs(40);
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.start_kill();
        }
    }
}

pub struct Agent {
    ward: Channel,
    token: String,
    pub principal_id: String,
}

impl Agent {
    fn client(&self) -> WardClient<Channel> {
        WardClient::new(self.ward.clone())
    }

    /// Propose `fs.write` of a report under deferred call `call` (a secret-like argument in it).
    pub async fn propose(&self, call: &str) -> Consent {
        let answer = self
            .client()
            .propose_effect(request(
                ProposeEffectRequest {
                    run_id: RUN.into(),
                    effect_owner: "agent".into(),
                    effect_id: "write-report".into(),
                    effect_revision: 1,
                    tool_name: "fs.write".into(),
                    deferred_call_id: call.into(),
                    arguments_json: br#"{"path":"/srv/report.txt","token":"s3cr3t"}"#.to_vec(),
                    effect_class: EffectClass::Standard as i32,
                    binding: None,
                },
                &self.token,
            ))
            .await
            .expect("propose")
            .into_inner();
        assert!(answer.created);
        answer.consent.expect("consent")
    }

    /// Consume an approval at effect time: the consent, or the refusal's reason.
    pub async fn consume(&self, id: &str, digest: &str) -> Result<Consent, String> {
        self.client()
            .consume_consent(request(
                ConsumeConsentRequest {
                    consent_id: id.into(),
                    binding_digest: digest.into(),
                },
                &self.token,
            ))
            .await
            .map(|r| r.into_inner().consent.expect("consent"))
            .map_err(|s| {
                s.get_details_error_info()
                    .map(|i| i.reason)
                    .unwrap_or_else(|| s.message().to_owned())
            })
    }

    /// Withdraw the run: its pending consents are cancelled.
    pub async fn cancel_run(&self) {
        self.client()
            .cancel_for_run(request(
                CancelForRunRequest { run_id: RUN.into() },
                &self.token,
            ))
            .await
            .expect("cancel the run");
    }
}
