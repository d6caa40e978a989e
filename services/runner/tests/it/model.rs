//! Model steps through a Dispatcher lease (the built `lychd-dispatcher` and `lychd-runner`
//! binaries, a simulated llama.cpp runtime): the runner leases the workflow's family with its
//! own Ward session, calls the endpoint the lease names, releases the lease and charges the
//! answer's tokens to the run; a cold capability is the typed wait `WAIT_CAPABILITY` (no
//! runtime call without a lease), retried until it is WARM; a run whose tokens run out ends
//! `BUDGET_EXHAUSTED`.

use lychd_proto::runner::v1 as pb;
use lychd_proto::runner::v1::runner_client::RunnerClient;
use lychd_runtime::Office;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::simllama::{SimHealth, SimLlama, chat_answer};
use lychd_testkit::verify::Verification;
use lychd_testkit::{Sandbox, channel_with};
use uuid::Uuid;

use crate::common::eventually;

pub const WORKFLOW: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"summarize","version":"0.1.0",
  "obligations":[{"id":"summary","evidence":["model_answer"]}],
  "steps":[{"id":"gather","kind":"task"},
           {"id":"draft","kind":"model","family":"chat","closes":["summary"]}],
  "verification":{"owner":"owner-alice"}}"#;

pub const INPUT: &str = "summarize the ledger";

/// Ward, a Dispatcher and a Runner as processes, the Dispatcher's one animator a simulated
/// runtime serving model `m` for family `chat` (shared with the no-progress and budget tests);
/// the HelmLoop office verifying the runs, their owner approving what is proposed.
pub struct Stack {
    pub sandbox: Sandbox,
    pub sim: SimLlama,
    pub client: RunnerClient<PeerChannel>,
    pub _verification: Verification,
}

pub async fn stack() -> Stack {
    stack_with("[office]\npoll_ms = 50\n").await
}

/// [`stack`] with the Runner's configuration `runner` (TOML).
pub async fn stack_with(runner: &str) -> Stack {
    let sim = SimLlama::serving("m").await;
    let registry = format!(
        "[office]\n[[office.animators]]\nname = \"sim\"\nsource = \"soulstone\"\n\
         dialect = \"llama_cpp\"\nendpoint = \"{}\"\n\n[[office.capabilities]]\n\
         animator = \"sim\"\nfamily = \"chat\"\nmodel_id = \"m\"\n",
        sim.endpoint()
    );
    let mut sandbox = Sandbox::builder()
        .office(Office::Dispatcher)
        .office(Office::Runner)
        .peer(Office::Runner, Office::Dispatcher)
        .verified(Office::Runner)
        .config_text(Office::Dispatcher, registry)
        .config_text(Office::Runner, crate::verified::office_text(runner))
        .start()
        .await;
    let mut verification = Verification::in_sandbox(&mut sandbox, Office::Runner).await;
    verification.approve_all();
    let mut admin = sandbox.admin();
    let runner = admin
        .ensure_office_principal("runner")
        .await
        .expect("runner principal");
    // What `lychd provision` gives the Runner's service principal (RUNNER_GRANTS).
    for object in ["capability:*", "lease:*"] {
        admin
            .ensure_assignment(&runner, "dispatcher:lease", object, "dispatcher", "lease")
            .await
            .expect("runner grant");
    }
    // An ended run's pending consents are released at once (without it the release stays due
    // and the run's row is rewritten at every retry).
    admin
        .ensure_assignment(&runner, "ward:cancel", "run:*", "ward", "cancel")
        .await
        .expect("runner grant");
    for verb in ["start", "read"] {
        admin
            .ensure_assignment(
                &sandbox.operator_id,
                &format!("runner:{verb}"),
                "run:*",
                "runner",
                verb,
            )
            .await
            .expect("operator grant");
    }
    let client = RunnerClient::new(channel_with(
        &sandbox.office(Office::Runner).endpoint(),
        &sandbox.token,
    ));
    Stack {
        sandbox,
        sim,
        client,
        _verification: verification,
    }
}

impl Stack {
    async fn start(&mut self, request_id: &str, budgets: Option<pb::Budgets>) -> Uuid {
        self.start_doc(request_id, WORKFLOW, INPUT, budgets).await
    }

    /// Start a run of `workflow` with `input` and `budgets`.
    pub async fn start_doc(
        &mut self,
        request_id: &str,
        workflow: &str,
        input: &str,
        budgets: Option<pb::Budgets>,
    ) -> Uuid {
        let run = self
            .client
            .start_run(pb::StartRunRequest {
                request_id: request_id.into(),
                workflow: workflow.as_bytes().to_vec(),
                input: input.as_bytes().to_vec(),
                budgets,
                timeout_seconds: 0,
                parent_run_id: String::new(),
            })
            .await
            .expect("start")
            .into_inner()
            .run
            .expect("a run");
        Uuid::parse_str(&run.run_id).expect("uuid")
    }

    /// Wait until run `id` is in `state` (at most 20 s); the run.
    pub async fn until(&mut self, id: Uuid, state: &str) -> pb::Run {
        let client = self.client.clone();
        eventually(&format!("the run reaches {state}"), || {
            let mut c = client.clone();
            async move {
                c.get_run(pb::GetRunRequest {
                    run_id: id.to_string(),
                })
                .await
                .expect("get")
                .into_inner()
                .run
                .expect("run")
                .state
                    == state
            }
        })
        .await;
        self.run(id).await
    }

    /// Wait until run `id` is in a terminal state (at most 20 s); the run.
    pub async fn ended(&mut self, id: Uuid) -> pb::Run {
        let client = self.client.clone();
        eventually("the run ends", || {
            let mut c = client.clone();
            async move {
                !c.get_run(pb::GetRunRequest {
                    run_id: id.to_string(),
                })
                .await
                .expect("get")
                .into_inner()
                .run
                .expect("run")
                .terminal_category
                .is_empty()
            }
        })
        .await;
        self.run(id).await
    }

    pub async fn run(&mut self, id: Uuid) -> pb::Run {
        self.client
            .get_run(pb::GetRunRequest {
                run_id: id.to_string(),
            })
            .await
            .expect("get")
            .into_inner()
            .run
            .expect("a run")
    }

    pub async fn triggers(&mut self, id: Uuid) -> Vec<String> {
        self.client
            .list_run_transitions(pb::ListRunTransitionsRequest {
                run_id: id.to_string(),
                page: None,
            })
            .await
            .expect("transitions")
            .into_inner()
            .transitions
            .into_iter()
            .map(|t| t.trigger)
            .collect()
    }

    pub async fn latest(&mut self, id: Uuid) -> serde_json::Value {
        let c = self
            .client
            .inspect_checkpoint(pb::InspectCheckpointRequest {
                run_id: id.to_string(),
                version: 0,
            })
            .await
            .expect("inspect")
            .into_inner();
        assert!(c.verified);
        serde_json::from_slice(&c.checkpoint.expect("checkpoint").body).expect("json")
    }

    /// Dispatcher leases of run `id`: (all, unreleased).
    async fn leases(&self, id: Uuid) -> (i64, i64) {
        let mut db = self.sandbox.db.superuser().await;
        sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE released_at IS NULL) \
               FROM dispatcher.leases WHERE run_id = $1",
        )
        .bind(id.to_string())
        .fetch_one(&mut db)
        .await
        .expect("leases")
    }
}

/// The tokens the simulated runtime charges for the model step of [`WORKFLOW`].
pub fn tokens() -> u64 {
    chat_answer("m", &["lychd runner step draft", INPUT])["usage"]["total_tokens"]
        .as_u64()
        .expect("tokens")
}

#[tokio::test]
async fn a_model_step_leases_calls_releases_and_charges_its_tokens() {
    let mut s = stack().await;
    let id = s.start("model-1", None).await;
    eventually("the run succeeds", || async {
        s.client
            .clone()
            .get_run(pb::GetRunRequest {
                run_id: id.to_string(),
            })
            .await
            .expect("get")
            .into_inner()
            .run
            .expect("run")
            .state
            == "SUCCEEDED"
    })
    .await;
    assert_eq!(s.sim.chats(), 1, "one call for one model step");
    assert_eq!(s.leases(id).await, (1, 0), "one lease, released");
    let body = s.latest(id).await;
    assert_eq!(body["budgets_used"]["tokens"], tokens());
    let answer = chat_answer("m", &["lychd runner step draft", INPUT]);
    let content = answer["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    assert_eq!(
        body["results"][1]["digest"],
        lychd_runner::domain::run::sha256(content.as_bytes()),
        "the answer's digest is recorded, never its text"
    );
    assert!(!String::from_utf8_lossy(&serde_json::to_vec(&body).expect("json")).contains(content));
    assert_eq!(s.run(id).await.terminal_category, "success");
    // The answer is a provenance snapshot (its digest, the parser, who produced it) beside the
    // input's; the model step's transitions name its capability.
    let snapshots = s
        .client
        .list_provenance(pb::ListProvenanceRequest {
            run_id: id.to_string(),
        })
        .await
        .expect("provenance")
        .into_inner()
        .snapshots;
    let seen: Vec<(&str, &str, &str)> = snapshots
        .iter()
        .map(|p| {
            (
                p.source.as_str(),
                p.step.as_str(),
                p.content_sha256.as_str(),
            )
        })
        .collect();
    let digest = lychd_runner::domain::run::sha256(content.as_bytes());
    let input = lychd_runner::domain::run::sha256(INPUT.as_bytes());
    assert_eq!(
        seen,
        [
            ("input", "", input.as_str()),
            ("model:chat", "draft", digest.as_str())
        ]
    );
    assert_eq!(
        snapshots[1].parser_version,
        lychd_runner::store::provenance::ANSWER_PARSER
    );
    assert_eq!(
        snapshots[1].responsibility,
        lychd_runner::store::provenance::ANSWER_RESPONSIBILITY
    );
    let t = s
        .client
        .list_run_transitions(pb::ListRunTransitionsRequest {
            run_id: id.to_string(),
            page: None,
        })
        .await
        .expect("transitions")
        .into_inner()
        .transitions;
    let chat: Vec<(&str, &str)> = t
        .iter()
        .filter(|t| t.capability == "chat")
        .map(|t| (t.trigger.as_str(), t.target_state.as_str()))
        .collect();
    assert_eq!(chat, [("plan_step", "ACT"), ("step_result", "INGEST")]);
    let result = t
        .iter()
        .rfind(|t| t.trigger == "step_result")
        .expect("result");
    assert_eq!(result.evidence_hashes, [digest]);
}

#[tokio::test]
async fn a_cold_capability_is_a_typed_wait_without_a_runtime_call_then_the_run_goes_on() {
    let mut s = stack().await;
    s.sim.set_health(SimHealth::Loading);
    let id = s.start("model-2", None).await;
    eventually("the run waits for its capability", || async {
        s.client
            .clone()
            .get_run(pb::GetRunRequest {
                run_id: id.to_string(),
            })
            .await
            .expect("get")
            .into_inner()
            .run
            .expect("run")
            .state
            == "WAIT_CAPABILITY"
    })
    .await;
    assert_eq!(s.sim.chats(), 0, "no runtime call without a lease");
    assert_eq!(s.leases(id).await, (0, 0));
    s.sim.set_health(SimHealth::Ok);
    eventually("the run succeeds once the capability is WARM", || async {
        s.client
            .clone()
            .get_run(pb::GetRunRequest {
                run_id: id.to_string(),
            })
            .await
            .expect("get")
            .into_inner()
            .run
            .expect("run")
            .state
            == "SUCCEEDED"
    })
    .await;
    let t = s.triggers(id).await;
    let at = t.iter().position(|x| x == "capability_cold").expect("cold");
    assert_eq!(t[at + 1], "capability_warm", "{t:?}");
    assert_eq!(
        t.iter().filter(|x| *x == "step_result").count(),
        2,
        "each step's result once: {t:?}"
    );
    assert_eq!(s.sim.chats(), 1);
    assert_eq!(s.leases(id).await, (1, 0));
}

#[tokio::test]
async fn at_80_percent_of_the_tokens_the_run_records_its_handoff_and_still_succeeds() {
    let mut s = stack().await;
    let budgets = pb::Budgets {
        max_tokens: tokens(),
        ..Default::default()
    };
    let id = s.start("model-4", Some(budgets)).await;
    eventually("the run succeeds", || async {
        s.client
            .clone()
            .get_run(pb::GetRunRequest {
                run_id: id.to_string(),
            })
            .await
            .expect("get")
            .into_inner()
            .run
            .expect("run")
            .state
            == "SUCCEEDED"
    })
    .await;
    let h = s.latest(id).await["handoff"].clone();
    assert_eq!(h["budget"], "max_tokens", "{h}");
    assert_eq!(
        (h["used"].as_u64(), h["limit"].as_u64()),
        (Some(tokens()), Some(tokens()))
    );
    assert_eq!(h["residual_steps"], serde_json::json!([]));
}

#[tokio::test]
async fn tokens_beyond_the_budget_end_the_run_budget_exhausted() {
    let mut s = stack().await;
    let budgets = pb::Budgets {
        max_tokens: tokens() - 1,
        ..Default::default()
    };
    let id = s.start("model-3", Some(budgets)).await;
    eventually("the run ends", || async {
        s.client
            .clone()
            .get_run(pb::GetRunRequest {
                run_id: id.to_string(),
            })
            .await
            .expect("get")
            .into_inner()
            .run
            .expect("run")
            .state
            == "BUDGET_EXHAUSTED"
    })
    .await;
    assert_eq!(s.run(id).await.terminal_category, "budget_exhausted");
    let t = s.triggers(id).await;
    assert_eq!(t.last().map(String::as_str), Some("budget_exhausted"));
    assert_eq!(s.latest(id).await["budgets_used"]["tokens"], tokens());
    assert_eq!(s.leases(id).await, (1, 0));
}
