//! Shared helpers: a Runner spawned with its Ward, a tester allowed to start, read and cancel
//! runs (not to read every principal's), and small builders.

use lychd_proto::runner::v1 as pb;
use lychd_proto::runner::v1::runner_client::RunnerClient;
use lychd_proto::ward::v1::PrincipalKind;
use lychd_runtime::client::PeerChannel;
pub use lychd_testkit::refusal::{assert_refused as refused, field_violations as fields};
use lychd_testkit::{Spawned, spawn_office_with};

pub type Client = RunnerClient<PeerChannel>;

pub const TESTER_ACTIONS: &[&str] = &["runner:start", "runner:read", "runner:cancel"];

pub struct Stack {
    pub spawned: Spawned,
    pub client: Client,
    /// The independent verifier beside the Runner (`crate::verified`), when the test runs its
    /// workflows to success.
    pub verification: Option<crate::verified::Verified>,
}

/// A Runner whose tester holds start, read and cancel on `run:*`; its step loop is off (runs
/// stay where the API puts them).
pub async fn stack() -> Stack {
    stack_with("drive = false").await
}

/// A Runner whose `[office]` section is `office` (TOML).
pub async fn stack_with(office: &str) -> Stack {
    let table: toml::Table = office.parse().expect("office section");
    let spawned = spawn_office_with(lychd_runner::spec(), move |c| c.office = table).await;
    for action in TESTER_ACTIONS {
        spawned.allow(action, "run:*").await;
    }
    let client = RunnerClient::new(spawned.channel());
    Stack {
        spawned,
        client,
        verification: None,
    }
}

impl Stack {
    /// Another principal holding `actions` on `run:*`: its id and client.
    pub async fn principal(&self, name: &str, actions: &[&str]) -> (String, Client) {
        let (id, token) = self.spawned.principal(PrincipalKind::Human, name).await;
        let mut admin = self.spawned.admin.clone();
        for action in actions {
            let verb = action.split_once(':').map(|(_, v)| v).unwrap_or(action);
            admin
                .ensure_assignment(&id, action, "run:*", "runner", verb)
                .await
                .expect("assign");
        }
        (id, RunnerClient::new(self.spawned.channel_with(&token)))
    }

    /// A superuser connection to the office's test database.
    pub async fn db(&self) -> sqlx::PgConnection {
        self.spawned.db.superuser().await
    }

    /// How many runs and transitions the database holds.
    pub async fn counts(&self) -> (i64, i64) {
        let mut db = self.db().await;
        let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM runner.runs")
            .fetch_one(&mut db)
            .await
            .expect("count runs");
        let transitions: i64 = sqlx::query_scalar("SELECT count(*) FROM runner.run_transitions")
            .fetch_one(&mut db)
            .await
            .expect("count transitions");
        (runs, transitions)
    }
}

pub const WORKFLOW: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"summarize","version":"0.1.0",
  "obligations":[{"id":"summary","evidence":["model_answer"]}],
  "steps":[{"id":"draft","kind":"model","family":"chat","closes":["summary"]}],
  "verification":{"owner":"owner-alice"}}"#;

/// A start request of [`WORKFLOW`] with `input` and the contract's budgets.
pub fn start_req(request_id: &str, input: &str) -> pb::StartRunRequest {
    pb::StartRunRequest {
        request_id: request_id.into(),
        workflow: WORKFLOW.as_bytes().to_vec(),
        input: input.as_bytes().to_vec(),
        budgets: None,
        timeout_seconds: 0,
        parent_run_id: String::new(),
    }
}

pub async fn start(c: &mut Client, request_id: &str, input: &str) -> pb::Run {
    c.start_run(start_req(request_id, input))
        .await
        .expect("start")
        .into_inner()
        .run
        .expect("a run")
}

pub async fn get(c: &mut Client, id: &str) -> Result<pb::Run, tonic::Status> {
    c.get_run(pb::GetRunRequest { run_id: id.into() })
        .await
        .map(|r| r.into_inner().run.expect("a run"))
}

pub async fn cancel(c: &mut Client, id: &str) -> Result<pb::Run, tonic::Status> {
    c.cancel_run(pb::CancelRunRequest { run_id: id.into() })
        .await
        .map(|r| r.into_inner().run.expect("a run"))
}

pub async fn transitions(
    c: &mut Client,
    id: &str,
) -> Result<Vec<pb::RunTransition>, tonic::Status> {
    c.list_run_transitions(pb::ListRunTransitionsRequest {
        run_id: id.into(),
        page: None,
    })
    .await
    .map(|r| r.into_inner().transitions)
}

pub async fn list(
    c: &mut Client,
    size: u32,
    token: &str,
) -> Result<pb::ListRunsResponse, tonic::Status> {
    c.list_runs(pb::ListRunsRequest {
        page: Some(lychd_proto::common::v1::PageRequest {
            page_size: size,
            page_token: token.into(),
        }),
    })
    .await
    .map(|r| r.into_inner())
}

/// Replay run `id` (`ReplayRun`) and require no divergence: every transition replayed from its
/// recorded inputs (issue 28).
pub async fn replays_clean(c: &mut Client, id: &str) -> pb::ReplayRunResponse {
    let r = c
        .replay_run(pb::ReplayRunRequest { run_id: id.into() })
        .await
        .expect("replay")
        .into_inner();
    assert_eq!(r.divergence, None, "{r:?}");
    assert_eq!(r.transitions_replayed, r.transitions_total, "{r:?}");
    r
}

/// Set run `id`'s state directly (a state the API cannot reach yet), as a superuser.
pub async fn force_state(s: &Stack, id: &str, state: &str, category: Option<&str>) {
    let mut db = s.db().await;
    sqlx::query("UPDATE runner.runs SET state = $2, terminal_category = $3 WHERE id = $1::uuid")
        .bind(id)
        .bind(state)
        .bind(category)
        .execute(&mut db)
        .await
        .expect("force state");
}

/// Wait until `holds` answers true, polling every 5 ms for at most 20 s (`what` names it).
pub async fn eventually<F: std::future::Future<Output = bool>>(
    what: &str,
    mut holds: impl FnMut() -> F,
) {
    let t = std::time::Instant::now();
    while !holds().await {
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "{what}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// Overwrite checkpoint `version` of run `id` with a body that fails its checksum, as a storage
/// fault or a hand edit would (the step loop quarantines the run when it reads it).
pub async fn corrupt_checkpoint(db: &mut sqlx::PgConnection, id: uuid::Uuid, version: i64) {
    sqlx::query(
        "UPDATE runner.run_checkpoints SET body = convert_to('{\"tampered\":true}', 'UTF8') \
          WHERE run_id = $1 AND version = $2",
    )
    .bind(id)
    .bind(version)
    .execute(db)
    .await
    .expect("corrupt");
}
