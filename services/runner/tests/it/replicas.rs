//! Two runner processes (the built `lychd-runner` binary, twice) on one database: kill -9 of
//! the one holding a run mid-run, and the other resumes it from its last checkpoint under a new
//! generation with no step run twice; split brain (the holder stopped with SIGSTOP until its
//! lease is taken over, then continued): one commits, the other is fenced.

use std::time::{Duration, Instant};

use lychd_proto::runner::v1 as pb;
use lychd_proto::runner::v1::runner_client::RunnerClient;
use lychd_runtime::Office;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::{OfficeProcess, Sandbox, channel_with};
use nix::sys::signal::Signal;
use uuid::Uuid;

use crate::common::eventually;

const WORKFLOW: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"six","version":"0.1.0",
  "obligations":[{"id":"done","evidence":["task_result"]}],
  "steps":[{"id":"s1","kind":"task"},{"id":"s2","kind":"task"},{"id":"s3","kind":"task"},
           {"id":"s4","kind":"task"},{"id":"s5","kind":"task"},
           {"id":"s6","kind":"task","closes":["done"]}],
  "verification":{"owner":"owner-alice"}}"#;

/// Leases of 1.5 s, steps of 250 ms: a run takes ~1.5 s, a takeover waits out the lease.
const OFFICE: &str = "[office]\nlease_ttl_ms = 1500\npoll_ms = 50\ntask_step_ms = 250\n";

struct Replicas {
    sandbox: Sandbox,
    other: OfficeProcess,
    client: RunnerClient<PeerChannel>,
    /// The HelmLoop office verifying the runs, their owner approving what is proposed.
    _verification: lychd_testkit::verify::Verification,
}

async fn replicas() -> Replicas {
    let mut sandbox = Sandbox::builder()
        .office(Office::Runner)
        .verified(Office::Runner)
        .config_text(Office::Runner, crate::verified::office_text(OFFICE))
        .start()
        .await;
    let mut verification =
        lychd_testkit::verify::Verification::in_sandbox(&mut sandbox, Office::Runner).await;
    verification.approve_all();
    let mut admin = sandbox.admin();
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
            .expect("grant");
    }
    let other = sandbox.start_another(Office::Runner).await;
    let client = RunnerClient::new(channel_with(
        &sandbox.office(Office::Runner).endpoint(),
        &sandbox.token,
    ));
    Replicas {
        sandbox,
        other,
        client,
        _verification: verification,
    }
}

impl Replicas {
    async fn db(&self) -> sqlx::PgConnection {
        self.sandbox.db.superuser().await
    }

    async fn start(&mut self, request_id: &str) -> Uuid {
        let run = self
            .client
            .start_run(pb::StartRunRequest {
                request_id: request_id.into(),
                workflow: WORKFLOW.as_bytes().to_vec(),
                input: Vec::new(),
                budgets: None,
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

    /// The pid in the run's lease holder name and the generation, once a step is in flight
    /// after `steps` results.
    async fn holder_in_act(&self, id: Uuid, steps: i64) -> (i32, i64) {
        let mut db = self.db().await;
        let t = Instant::now();
        loop {
            let row: (String, Option<String>, i64, i64) = sqlx::query_as(
                "SELECT state, lease_holder, generation, \
                        (SELECT count(*) FROM runner.run_transitions \
                          WHERE run_id = r.id AND trigger = 'step_result') \
                   FROM runner.runs r WHERE id = $1",
            )
            .bind(id)
            .fetch_one(&mut db)
            .await
            .expect("run");
            if let (s, Some(holder), g, n) = &row
                && s == "ACT"
                && *n >= steps
            {
                let pid = holder.split('-').nth(1).expect("pid").parse().expect("pid");
                return (pid, *g);
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "no step in flight: {row:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn process(&self, pid: i32) -> &OfficeProcess {
        let a = self.sandbox.office(Office::Runner);
        if a.pid() == pid { a } else { &self.other }
    }

    /// A client of the replica that is not `pid` (the one left standing when `pid` is killed).
    fn survivor(&self, pid: i32) -> RunnerClient<PeerChannel> {
        let a = self.sandbox.office(Office::Runner);
        let survivor = if a.pid() == pid { &self.other } else { a };
        RunnerClient::new(channel_with(&survivor.endpoint(), &self.sandbox.token))
    }

    /// `(trigger, generation)` of every transition of `id`, in order.
    async fn path(&self, id: Uuid) -> Vec<(String, i64)> {
        let mut db = self.db().await;
        sqlx::query_as(
            "SELECT trigger, generation FROM runner.run_transitions WHERE run_id = $1 \
              ORDER BY version",
        )
        .bind(id)
        .fetch_all(&mut db)
        .await
        .expect("transitions")
    }

    /// Transitions of `id` under a generation above `generation` whose trigger is like `like`.
    async fn newer(&self, id: Uuid, generation: i64, like: &str) -> i64 {
        let mut db = self.db().await;
        sqlx::query_scalar(
            "SELECT count(*) FROM runner.run_transitions \
              WHERE run_id = $1 AND generation > $2 AND trigger LIKE $3",
        )
        .bind(id)
        .bind(generation)
        .bind(like)
        .fetch_one(&mut db)
        .await
        .expect("count")
    }

    async fn state(&self, id: Uuid) -> String {
        let mut db = self.db().await;
        sqlx::query_scalar("SELECT state FROM runner.runs WHERE id = $1")
            .bind(id)
            .fetch_one(&mut db)
            .await
            .expect("state")
    }
}

/// The run replays from its record with no divergence: the inputs of a commit the fence refused
/// were never recorded, and a takeover's retry seed is its generation (issue 28, replay).
async fn replays_clean(client: &mut RunnerClient<PeerChannel>, id: Uuid, transitions: usize) {
    let r = client
        .replay_run(pb::ReplayRunRequest {
            run_id: id.to_string(),
        })
        .await
        .expect("replay")
        .into_inner();
    assert_eq!(r.divergence, None, "{r:?}");
    assert_eq!(r.transitions_replayed as usize, transitions, "{r:?}");
}

/// Every step entered once and its result committed once; the path ends in `SUCCEEDED`.
fn no_step_twice(path: &[(String, i64)]) {
    let count = |t: &str| path.iter().filter(|(x, _)| x == t).count();
    assert_eq!(count("plan_step"), 6, "{path:?}");
    assert_eq!(count("step_result"), 6, "{path:?}");
    assert_eq!(path.last().map(|(t, _)| t.as_str()), Some("verified_pass"));
}

#[tokio::test]
async fn kill_9_of_the_holder_mid_run_resumes_on_the_other_replica_with_no_step_run_twice() {
    let mut r = replicas().await;
    let id = r.start("kill-1").await;
    let (pid, generation) = r.holder_in_act(id, 2).await;
    let killed_at = Instant::now();
    r.process(pid).signal(Signal::SIGKILL);
    eventually("the other replica resumes the run", || async {
        r.newer(id, generation, "%").await > 0
    })
    .await;
    let resumed = killed_at.elapsed();
    eventually("the run succeeds", || async {
        r.state(id).await == "SUCCEEDED"
    })
    .await;
    let path = r.path(id).await;
    no_step_twice(&path);
    // The killed holder's attempt in flight is a transient failure under the new generation,
    // and every transition after it is the new generation's.
    let first_new = path
        .iter()
        .position(|(_, g)| *g > generation)
        .expect("resumed");
    assert_eq!(path[first_new].0, "transient_failure", "{path:?}");
    assert!(path[first_new..].iter().all(|(_, g)| *g > generation));
    assert_eq!(
        path.iter()
            .filter(|(t, _)| t == "transient_failure")
            .count(),
        1
    );
    // Asked of the replica left standing: the killed holder may be the one `r.client` calls.
    replays_clean(&mut r.survivor(pid), id, path.len()).await;
    println!(
        "kill -9 to resume on the other replica: {:.0} ms (lease 1500 ms)",
        resumed.as_secs_f64() * 1000.0
    );
}

#[tokio::test]
async fn split_brain_the_stalled_holder_is_fenced_and_the_other_commits() {
    let mut r = replicas().await;
    let id = r.start("split-1").await;
    let (pid, generation) = r.holder_in_act(id, 1).await;
    // The holder stalls inside a step's call; its lease runs out and the other takes over.
    r.process(pid).signal(Signal::SIGSTOP);
    eventually(
        "the other replica commits under a new generation",
        || async { r.newer(id, generation, "step_result").await > 0 },
    )
    .await;
    // The stalled holder wakes with what it read and tries to commit its step's result.
    r.process(pid).signal(Signal::SIGCONT);
    eventually("the stalled holder is fenced", || async {
        r.process(pid)
            .log()
            .contains("fenced: another runner holds the run")
    })
    .await;
    eventually("the run succeeds", || async {
        r.state(id).await == "SUCCEEDED"
    })
    .await;
    let path = r.path(id).await;
    no_step_twice(&path);
    let first_new = path
        .iter()
        .position(|(_, g)| *g > generation)
        .expect("taken over");
    assert!(
        path[first_new..].iter().all(|(_, g)| *g > generation),
        "nothing of the fenced holder after the takeover: {path:?}"
    );
    replays_clean(&mut r.client, id, path.len()).await;
}
