//! The step loop driven in the test process (its store and fence are the office's, on real
//! PostgreSQL): claims under a lease with a new generation, every FSM edge through the
//! workflow's steps to `SUCCEEDED`, a takeover fencing the older generation, an attempt whose
//! holder vanished retried (not run twice), and a corrupt checkpoint quarantining on resume.

use lychd_proto::runner::v1 as pb;
use lychd_runner::config::Settings;
use lychd_runner::domain::fsm::Fsm;
use lychd_runner::service::Service;
use lychd_runner::service::driver::{Driver, Stopped};
use lychd_runner::store::{leases, runs};
use uuid::Uuid;

use crate::common::*;

pub const TASKS: &str = r#"{"schema":"lychd.runner.workflow/v1","name":"tasks","version":"0.1.0",
  "obligations":[{"id":"done","evidence":["task_result"]}],
  "steps":[{"id":"one","kind":"task"},{"id":"two","kind":"task"},
           {"id":"three","kind":"task","closes":["done"]}],
  "verification":{"owner":"owner-alice"}}"#;

pub fn driver(s: &Stack) -> Driver {
    driver_with(s, 0)
}

pub fn driver_with(s: &Stack, task_step_ms: u64) -> Driver {
    let service = Service::new(s.spawned.ctx.pool.clone(), Fsm::bound().expect("fsm"));
    Driver::new(
        service,
        lychd_runner::model::Models::none(),
        Settings {
            drive: true,
            lease_ttl_ms: 60_000,
            poll_ms: 10,
            concurrency: 1,
            task_step_ms,
            price_milli_per_1k_tokens: Default::default(),
            effects: Default::default(),
        },
    )
    .with_verifier(s.verifier())
}

async fn start_tasks(s: &mut Stack, request_id: &str) -> Uuid {
    start_tasks_with(s, request_id, None).await
}

pub async fn start_tasks_with(
    s: &mut Stack,
    request_id: &str,
    budgets: Option<pb::Budgets>,
) -> Uuid {
    let run = s
        .client
        .start_run(pb::StartRunRequest {
            request_id: request_id.into(),
            workflow: TASKS.as_bytes().to_vec(),
            input: b"some input".to_vec(),
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

/// `(trigger, target, generation)` of every transition of `id`.
pub async fn path(s: &mut Stack, id: Uuid) -> Vec<(String, String, u64)> {
    transitions(&mut s.client, &id.to_string())
        .await
        .expect("transitions")
        .into_iter()
        .map(|t| (t.trigger, t.target_state, t.generation))
        .collect()
}

pub fn triggers(p: &[(String, String, u64)]) -> Vec<&str> {
    p.iter().map(|(t, _, _)| t.as_str()).collect()
}

#[tokio::test]
async fn a_claimed_run_takes_the_fsm_edges_through_every_step_to_succeeded() {
    let mut s = crate::verified::stack().await;
    let id = start_tasks(&mut s, "steps-1").await;
    let d = driver(&s);
    let claimed = leases::claim(&s.spawned.ctx.pool, d.holder(), 60_000)
        .await
        .expect("claim")
        .expect("a run");
    assert_eq!(
        (claimed.id, claimed.generation),
        (id, 2),
        "a claim is a new generation"
    );
    // The claim drives every step, then the independent verifier holds the run (the owner
    // approves only what the verifier proposed): given back, to be asked again.
    assert!(
        matches!(d.drive(claimed).await.expect("drive"), Stopped::Waiting(_)),
        "held for verification"
    );
    crate::verified::drive_to_end(&s, &d, id).await;
    let p = path(&mut s, id).await;
    let steps = [
        "created",
        "start",
        "plan_step",
        "step_result",
        "ingested",
        "plan_step",
        "step_result",
        "ingested",
        "plan_step",
        "step_result",
        "ready_to_verify",
    ];
    crate::verified::assert_verified_path(&triggers(&p), &steps);
    // The first claim's generation took every step and the first hold.
    assert!(p[1..=steps.len()].iter().all(|(_, _, g)| *g == 2), "{p:?}");
    let t = transitions(&mut s.client, &id.to_string())
        .await
        .expect("t");
    assert_eq!(t.last().expect("last").actor, "helmloop");
    let run = get(&mut s.client, &id.to_string()).await.expect("run");
    assert_eq!(run.state, "SUCCEEDED");
    // The last checkpoint verifies and records each step's result once.
    let c = s
        .client
        .inspect_checkpoint(pb::InspectCheckpointRequest {
            run_id: id.to_string(),
            version: 0,
        })
        .await
        .expect("inspect")
        .into_inner();
    assert!(c.verified);
    let body: serde_json::Value =
        serde_json::from_slice(&c.checkpoint.expect("checkpoint").body).expect("json");
    let steps: Vec<&str> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["step"].as_str().expect("step"))
        .collect();
    assert_eq!(steps, ["one", "two", "three"]);
    assert_eq!(body["budgets_used"]["steps"], 3);
    // A finished run holds no lease and is not claimed again.
    let row = runs::get(&s.spawned.ctx.pool, id, None)
        .await
        .expect("get")
        .expect("run");
    assert_eq!(row.lease_holder, None);
    assert!(
        leases::claim(&s.spawned.ctx.pool, "another", 60_000)
            .await
            .expect("claim")
            .is_none()
    );
}

#[tokio::test]
async fn a_leased_run_is_not_claimed_until_its_lease_expires_then_the_old_generation_is_fenced() {
    let mut s = crate::verified::stack().await;
    let id = start_tasks(&mut s, "steps-2").await;
    let pool = s.spawned.ctx.pool.clone();
    let (a, b) = (driver(&s), driver(&s));
    let held = leases::claim(&pool, a.holder(), 60_000)
        .await
        .expect("claim")
        .expect("a run");
    assert!(
        leases::claim(&pool, b.holder(), 60_000)
            .await
            .expect("claim")
            .is_none(),
        "a run under a live lease is skipped"
    );
    // A's lease runs out (its process stalled): B takes the run over under a new generation.
    let mut db = s.db().await;
    sqlx::query("UPDATE runner.runs SET lease_expires_at = now() - interval '1 s' WHERE id = $1")
        .bind(id)
        .execute(&mut db)
        .await
        .expect("expire");
    let taken = leases::claim(&pool, b.holder(), 60_000)
        .await
        .expect("claim")
        .expect("taken over");
    assert_eq!(taken.generation, held.generation + 1);
    let b_gen = u64::try_from(taken.generation).expect("generation");
    assert!(
        !leases::renew(&pool, id, held.generation, a.holder(), 60_000)
            .await
            .expect("renew"),
        "the old holder cannot renew"
    );
    // B takes every step; the independent verifier holds the run and it is given back.
    assert!(
        matches!(b.drive(taken).await.expect("drive"), Stopped::Waiting(_)),
        "held for verification"
    );
    // A wakes up with what it read: every commit it tries is fenced, nothing is written.
    let before = path(&mut s, id).await;
    assert_eq!(a.drive(held).await.expect("drive"), Stopped::Fenced);
    assert_eq!(path(&mut s, id).await, before);
    assert!(
        before[1..].iter().all(|(_, _, g)| *g == b_gen),
        "{before:?}"
    );
    assert_eq!(
        triggers(&before).last(),
        Some(&"verification_hold"),
        "{before:?}"
    );
    assert_eq!(
        crate::verified::drive_to_end(&s, &b, id).await.state,
        "SUCCEEDED"
    );
}

#[tokio::test]
async fn the_older_generation_is_fenced_mid_run() {
    let mut s = stack().await;
    let id = start_tasks(&mut s, "steps-3").await;
    let pool = s.spawned.ctx.pool.clone();
    let (a, b) = (driver(&s), driver(&s));
    let held = leases::claim(&pool, a.holder(), 60_000)
        .await
        .expect("claim")
        .expect("a run");
    let mut db = s.db().await;
    sqlx::query(
        "UPDATE runner.runs SET generation = generation + 1, lease_holder = $2 WHERE id = $1",
    )
    .bind(id)
    .bind(b.holder())
    .execute(&mut db)
    .await
    .expect("taken over");
    assert_eq!(a.drive(held).await.expect("drive"), Stopped::Fenced);
    assert_eq!(
        triggers(&path(&mut s, id).await),
        ["created"],
        "nothing committed"
    );
}

#[tokio::test]
async fn an_attempt_whose_holder_stalled_is_retried_by_the_new_holder_and_its_result_recorded_once()
{
    let mut s = crate::verified::stack().await;
    let id = start_tasks(&mut s, "steps-4").await;
    let pool = s.spawned.ctx.pool.clone();
    // A's steps take 2 s: it is inside step one's call when its lease is taken over.
    let a = driver_with(&s, 2_000);
    let b = driver(&s);
    let held = leases::claim(&pool, a.holder(), 60_000)
        .await
        .expect("claim")
        .expect("a run");
    let a_gen = u64::try_from(held.generation).expect("generation");
    let stalled = tokio::spawn(async move { a.drive(held).await });
    eventually("A is inside step one's call", || async {
        runs::get(&pool, id, None)
            .await
            .expect("get")
            .expect("run")
            .state
            == "ACT"
    })
    .await;
    let mut db = s.db().await;
    sqlx::query("UPDATE runner.runs SET lease_expires_at = now() - interval '1 s' WHERE id = $1")
        .bind(id)
        .execute(&mut db)
        .await
        .expect("expire");
    let taken = leases::claim(&pool, b.holder(), 60_000)
        .await
        .expect("claim")
        .expect("taken over");
    assert!(
        matches!(b.drive(taken).await.expect("drive"), Stopped::Waiting(_)),
        "held for verification"
    );
    // A's call returns: its result commit is fenced and nothing of it is written.
    assert_eq!(
        stalled.await.expect("task").expect("drive"),
        Stopped::Fenced
    );
    crate::verified::drive_to_end(&s, &b, id).await;
    let p = path(&mut s, id).await;
    crate::verified::assert_verified_path(
        &triggers(&p),
        &[
            "created",
            "start",
            "plan_step",
            "transient_failure",
            "step_result",
            "ingested",
            "plan_step",
            "step_result",
            "ingested",
            "plan_step",
            "step_result",
            "ready_to_verify",
        ],
    );
    let by_a: Vec<&str> = p
        .iter()
        .filter(|(_, _, g)| *g == a_gen)
        .map(|(t, _, _)| t.as_str())
        .collect();
    assert_eq!(
        by_a,
        ["start", "plan_step"],
        "A committed nothing after the takeover"
    );
    assert_eq!(
        get(&mut s.client, &id.to_string())
            .await
            .expect("run")
            .state,
        "SUCCEEDED"
    );
}

#[tokio::test]
async fn a_corrupt_latest_checkpoint_quarantines_the_run_on_resume() {
    let mut s = stack().await;
    let id = start_tasks(&mut s, "steps-5").await;
    let pool = s.spawned.ctx.pool.clone();
    let mut db = s.db().await;
    sqlx::query(
        "UPDATE runner.run_checkpoints SET body = convert_to('{\"tampered\":true}', 'UTF8') \
          WHERE run_id = $1",
    )
    .bind(id)
    .execute(&mut db)
    .await
    .expect("corrupt");
    let d = driver(&s);
    let claimed = leases::claim(&pool, d.holder(), 60_000)
        .await
        .expect("claim")
        .expect("a run");
    assert_eq!(d.drive(claimed).await.expect("drive"), Stopped::Idle);
    let p = path(&mut s, id).await;
    assert_eq!(triggers(&p), ["created", "checksum_mismatch"]);
    assert_eq!(p[1].1, "QUARANTINED");
    // A quarantined run is not claimed again (it waits for recovery review).
    assert!(
        leases::claim(&pool, d.holder(), 60_000)
            .await
            .expect("claim")
            .is_none()
    );
}

/// Checkpoint `version` of run `id` (the latest when 0), as JSON.
pub async fn checkpoint(s: &mut Stack, id: Uuid, version: u64) -> serde_json::Value {
    let c = s
        .client
        .inspect_checkpoint(pb::InspectCheckpointRequest {
            run_id: id.to_string(),
            version,
        })
        .await
        .expect("inspect")
        .into_inner();
    assert!(c.verified);
    serde_json::from_slice(&c.checkpoint.expect("checkpoint").body).expect("json")
}

pub async fn drive_once(s: &Stack, d: &Driver) {
    let claimed = leases::claim(&s.spawned.ctx.pool, d.holder(), 60_000)
        .await
        .expect("claim")
        .expect("a run");
    assert_eq!(d.drive(claimed).await.expect("drive"), Stopped::Idle);
}

#[tokio::test]
async fn at_80_percent_of_the_steps_a_checkpoint_carries_the_typed_residual_work_handoff() {
    let mut s = crate::verified::stack().await;
    let budgets = pb::Budgets {
        max_steps: 3,
        ..Default::default()
    };
    let id = start_tasks_with(&mut s, "budget-1", Some(budgets)).await;
    crate::verified::drive_to_end(&s, &driver(&s), id).await;
    assert_eq!(
        get(&mut s.client, &id.to_string())
            .await
            .expect("run")
            .state,
        "SUCCEEDED"
    );
    let h = checkpoint(&mut s, id, 0).await["handoff"].clone();
    assert_eq!(h["schema"], "lychd.runner.handoff/v1");
    assert_eq!(
        (
            h["budget"].as_str(),
            h["used"].as_u64(),
            h["limit"].as_u64()
        ),
        (Some("max_steps"), Some(3), Some(3))
    );
    assert_eq!(h["residual_steps"], serde_json::json!(["three"]));
    assert_eq!(h["open_obligations"], serde_json::json!(["done"]));
    // The checkpoint of the commit that crossed 80 % (the third `plan_step`) is the first with it.
    let at = h["at_version"].as_u64().expect("version");
    let t = transitions(&mut s.client, &id.to_string())
        .await
        .expect("t");
    let crossing = t.iter().find(|t| t.version == at).expect("that version");
    assert_eq!(crossing.trigger, "plan_step");
    assert_eq!(checkpoint(&mut s, id, at).await["handoff"], h);
    assert!(checkpoint(&mut s, id, at - 1).await["handoff"].is_null());
}

#[tokio::test]
async fn beyond_the_steps_budget_the_run_ends_budget_exhausted_with_its_handoff() {
    let mut s = stack().await;
    let budgets = pb::Budgets {
        max_steps: 2,
        ..Default::default()
    };
    let id = start_tasks_with(&mut s, "budget-2", Some(budgets)).await;
    drive_once(&s, &driver(&s)).await;
    let run = get(&mut s.client, &id.to_string()).await.expect("run");
    assert_eq!(
        (run.state.as_str(), run.terminal_category.as_str()),
        ("BUDGET_EXHAUSTED", "budget_exhausted")
    );
    let p = path(&mut s, id).await;
    assert_eq!(triggers(&p).last(), Some(&"budget_exhausted"));
    assert_eq!(
        triggers(&p).iter().filter(|t| **t == "step_result").count(),
        2
    );
    let body = checkpoint(&mut s, id, 0).await;
    assert_eq!(
        body["handoff"]["residual_steps"],
        serde_json::json!(["two", "three"])
    );
    assert_eq!(body["budgets_used"]["steps"], 2);
}

#[tokio::test]
async fn beyond_the_wall_clock_budget_the_run_ends_budget_exhausted_without_ingesting() {
    let mut s = stack().await;
    let budgets = pb::Budgets {
        max_wall_seconds: 1,
        ..Default::default()
    };
    let id = start_tasks_with(&mut s, "budget-3", Some(budgets)).await;
    // Each step takes longer than the whole budget.
    drive_once(&s, &driver_with(&s, 1_200)).await;
    let run = get(&mut s.client, &id.to_string()).await.expect("run");
    assert_eq!(run.state, "BUDGET_EXHAUSTED");
    let p = path(&mut s, id).await;
    assert!(!triggers(&p).contains(&"step_result"), "{p:?}");
    assert!(
        checkpoint(&mut s, id, 0).await["results"]
            .as_array()
            .expect("results")
            .is_empty()
    );
}

#[tokio::test]
async fn a_transient_failure_is_retried_with_a_recorded_jitter_seed_until_retries_run_out() {
    let mut s = stack().await;
    let run = s
        .client
        .start_run(pb::StartRunRequest {
            request_id: "retry-1".into(),
            workflow: WORKFLOW.as_bytes().to_vec(),
            input: Vec::new(),
            budgets: Some(pb::Budgets {
                max_retries_per_transition: 2,
                ..Default::default()
            }),
            timeout_seconds: 0,
            parent_run_id: String::new(),
        })
        .await
        .expect("start")
        .into_inner()
        .run
        .expect("a run");
    let id = Uuid::parse_str(&run.run_id).expect("uuid");
    // A Dispatcher that is not there: every lease request fails in transport (transient).
    let endpoint = format!("http://127.0.0.1:{}", lychd_testkit::verify::free_port());
    let models = lychd_runner::model::Models::at(&endpoint, Default::default()).expect("models");
    let service = Service::new(s.spawned.ctx.pool.clone(), Fsm::bound().expect("fsm"));
    let d = Driver::new(
        service,
        models,
        Settings {
            drive: true,
            lease_ttl_ms: 60_000,
            poll_ms: 10,
            concurrency: 1,
            task_step_ms: 0,
            price_milli_per_1k_tokens: Default::default(),
            effects: Default::default(),
        },
    );
    drive_once(&s, &d).await;
    let p = path(&mut s, id).await;
    assert_eq!(
        triggers(&p),
        [
            "created",
            "start",
            "plan_step",
            "transient_failure",
            "retries_exhausted"
        ]
    );
    let run = get(&mut s.client, &id.to_string()).await.expect("run");
    assert_eq!(run.terminal_category, "retry_exhausted");
    let body = checkpoint(&mut s, id, 0).await;
    assert_eq!(body["retries"]["attempt"], 2);
    assert!(body["retries"]["jitter_seed"].is_u64(), "{body}");
    // The seed drawn is a recorded input: the replay retries as the run did.
    crate::common::replays_clean(&mut s.client, &id.to_string()).await;
}
