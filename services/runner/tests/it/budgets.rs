//! The remaining budgets, each consumed durably in the progress of the fenced commits and
//! carried in every checkpoint — tool calls (a `task` step is one), cost (a model step's
//! tokens at the configured price per family), suspended seconds (counted from the committed
//! entry into a waiting state) — each with its 80 % handoff and its `BUDGET_EXHAUSTED`; and
//! the caller's deadline (`timeout_seconds` → `deadline_passed` → `TIMED_OUT`), its bad
//! values refused.

use lychd_proto::runner::v1 as pb;
use lychd_testkit::simllama::SimHealth;
use tonic::Code;
use uuid::Uuid;

use crate::common::*;
use crate::model::{self, tokens};
use crate::steps::{
    TASKS, checkpoint, drive_once, driver, driver_with, path, start_tasks_with, triggers,
};

#[tokio::test]
async fn at_80_percent_of_the_tool_calls_the_handoff_is_recorded_and_the_run_succeeds() {
    let mut s = crate::verified::stack().await;
    let budgets = pb::Budgets {
        max_tool_calls: 3,
        ..Default::default()
    };
    let id = start_tasks_with(&mut s, "tools-1", Some(budgets)).await;
    let run = crate::verified::drive_to_end(&s, &driver(&s), id).await;
    assert_eq!(run.state, "SUCCEEDED");
    let body = checkpoint(&mut s, id, 0).await;
    assert_eq!(
        body["budgets_used"]["tool_calls"], 3,
        "a task step is one tool call"
    );
    let h = &body["handoff"];
    assert_eq!(
        (
            h["budget"].as_str(),
            h["used"].as_u64(),
            h["limit"].as_u64()
        ),
        (Some("max_tool_calls"), Some(3), Some(3))
    );
}

#[tokio::test]
async fn beyond_the_tool_calls_budget_the_run_ends_budget_exhausted() {
    let mut s = stack().await;
    let budgets = pb::Budgets {
        max_tool_calls: 2,
        ..Default::default()
    };
    let id = start_tasks_with(&mut s, "tools-2", Some(budgets)).await;
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
    assert_eq!(body["budgets_used"]["tool_calls"], 2);
    assert_eq!(body["handoff"]["budget"], "max_tool_calls");
    // Recorded when the second tool call was entered: `two` was not done yet.
    assert_eq!(
        body["handoff"]["residual_steps"],
        serde_json::json!(["two", "three"])
    );
}

/// The Runner's configuration pricing `chat` at 500 thousandths per 1 000 tokens.
const PRICED: &str = "[office]\npoll_ms = 50\n[office.price_milli_per_1k_tokens]\nchat = 500\n";

/// The cost of the model step of `model::WORKFLOW` at [`PRICED`] (rounded up).
fn cost() -> u64 {
    (tokens() * 500).div_ceil(1000)
}

#[tokio::test]
async fn a_model_steps_cost_is_charged_and_at_80_percent_records_the_handoff() {
    let mut s = model::stack_with(PRICED).await;
    let budgets = pb::Budgets {
        max_cost_milli: cost(),
        ..Default::default()
    };
    let id = s
        .start_doc("cost-1", model::WORKFLOW, model::INPUT, Some(budgets))
        .await;
    assert_eq!(s.ended(id).await.state, "SUCCEEDED");
    let body = s.latest(id).await;
    assert_eq!(body["budgets_used"]["cost_milli"], cost());
    let h = &body["handoff"];
    assert_eq!(
        (
            h["budget"].as_str(),
            h["used"].as_u64(),
            h["limit"].as_u64()
        ),
        (Some("max_cost_milli"), Some(cost()), Some(cost()))
    );
}

#[tokio::test]
async fn a_cost_beyond_the_budget_ends_the_run_budget_exhausted() {
    let mut s = model::stack_with(PRICED).await;
    let budgets = pb::Budgets {
        max_cost_milli: cost() - 1,
        ..Default::default()
    };
    let id = s
        .start_doc("cost-2", model::WORKFLOW, model::INPUT, Some(budgets))
        .await;
    let run = s.ended(id).await;
    assert_eq!(run.state, "BUDGET_EXHAUSTED");
    let t = s.triggers(id).await;
    assert_eq!(t.last().map(String::as_str), Some("budget_exhausted"));
    assert!(!t.contains(&"ready_to_verify".to_owned()), "{t:?}");
    let body = s.latest(id).await;
    assert_eq!(
        body["budgets_used"]["cost_milli"],
        cost(),
        "spent all the same"
    );
    assert_eq!(
        body["results"].as_array().map(Vec::len),
        Some(1),
        "the model's not ingested"
    );
    // The price the configuration gave the family is recorded with the answer: the replay
    // charges the same cost and ends the run the same way.
    replays_clean(&mut s.client, &id.to_string()).await;
}

#[tokio::test]
async fn suspended_seconds_beyond_the_budget_end_a_waiting_run_budget_exhausted() {
    let mut s = model::stack().await;
    s.sim.set_health(SimHealth::Loading);
    let budgets = pb::Budgets {
        max_suspended_seconds: 1,
        ..Default::default()
    };
    let id = s
        .start_doc("wait-1", model::WORKFLOW, model::INPUT, Some(budgets))
        .await;
    let run = s.ended(id).await;
    assert_eq!(
        (run.state.as_str(), run.terminal_category.as_str()),
        ("BUDGET_EXHAUSTED", "budget_exhausted")
    );
    let t = s.triggers(id).await;
    let n = t.len();
    assert_eq!(t[n - 2..], ["capability_cold", "budget_exhausted"], "{t:?}");
    let body = s.latest(id).await;
    assert!(
        body["budgets_used"]["suspended_ms"].as_u64() >= Some(1_000),
        "{body}"
    );
    assert_eq!(body["handoff"]["budget"], "max_suspended_seconds");
    assert_eq!(s.sim.chats(), 0);
    // The clock reads that ended the wait are recorded: the replay ends it the same way.
    replays_clean(&mut s.client, &id.to_string()).await;
}

#[tokio::test]
async fn suspended_time_is_counted_from_the_committed_entry_into_the_wait() {
    let mut s = model::stack().await;
    s.sim.set_health(SimHealth::Loading);
    let budgets = pb::Budgets {
        max_suspended_seconds: 20,
        ..Default::default()
    };
    let id = s
        .start_doc("wait-2", model::WORKFLOW, model::INPUT, Some(budgets))
        .await;
    s.until(id, "WAIT_CAPABILITY").await;
    // The wait began 16.5 s earlier by its committed timestamp (a runner restarting meanwhile
    // would read the same): at the next probe it is past 80 % of the budget, not beyond it.
    let mut db = s.sandbox.db.superuser().await;
    sqlx::query(
        "UPDATE runner.runs SET updated_at = updated_at - interval '16.5 seconds' WHERE id = $1",
    )
    .bind(id)
    .execute(&mut db)
    .await
    .expect("backdate");
    s.sim.set_health(SimHealth::Ok);
    assert_eq!(s.ended(id).await.state, "SUCCEEDED");
    let body = s.latest(id).await;
    let used = body["budgets_used"]["suspended_ms"]
        .as_u64()
        .expect("suspended");
    assert!((16_500..20_000).contains(&used), "{used}");
    assert_eq!(body["handoff"]["budget"], "max_suspended_seconds");
    let t = s.triggers(id).await;
    assert!(t.contains(&"capability_warm".to_owned()), "{t:?}");
    // The committed start of the wait the loop compared with is recorded with its clock read.
    replays_clean(&mut s.client, &id.to_string()).await;
}

async fn start_with_timeout(
    s: &mut Stack,
    request_id: &str,
    timeout_seconds: i64,
    budgets: Option<pb::Budgets>,
) -> Result<pb::Run, tonic::Status> {
    s.client
        .start_run(pb::StartRunRequest {
            request_id: request_id.into(),
            workflow: TASKS.as_bytes().to_vec(),
            input: b"in".to_vec(),
            budgets,
            timeout_seconds,
            parent_run_id: String::new(),
        })
        .await
        .map(|r| r.into_inner().run.expect("a run"))
}

#[tokio::test]
async fn past_its_deadline_a_run_takes_deadline_passed_to_timed_out() {
    let mut s = stack().await;
    let run = start_with_timeout(&mut s, "deadline-1", 1, None)
        .await
        .expect("start");
    assert_eq!(run.timeout_seconds, 1);
    let (created, deadline) = (
        run.created_at.expect("created"),
        run.deadline_at.expect("a deadline"),
    );
    assert_eq!(deadline.seconds - created.seconds, 1);
    let id = Uuid::parse_str(&run.run_id).expect("uuid");
    // Each step takes 600 ms: the deadline passes during the second.
    drive_once(&s, &driver_with(&s, 600)).await;
    let run = get(&mut s.client, &run.run_id).await.expect("run");
    assert_eq!(
        (run.state.as_str(), run.terminal_category.as_str()),
        ("TIMED_OUT", "timeout")
    );
    let t = transitions(&mut s.client, &run.run_id).await.expect("t");
    let last = t.last().expect("last");
    assert_eq!(
        (last.trigger.as_str(), last.actor.as_str()),
        (
            "deadline_passed",
            lychd_runner::service::driver::BUDGET_GOVERNOR
        )
    );
    assert!(
        checkpoint(&mut s, id, 0).await["results"]
            .as_array()
            .is_some_and(|r| r.len() < 3)
    );
    replays_clean(&mut s.client, &run.run_id).await;
    // Without a timeout there is no deadline.
    let plain = start_with_timeout(&mut s, "deadline-2", 0, None)
        .await
        .expect("start");
    assert_eq!((plain.timeout_seconds, plain.deadline_at), (0, None));
}

#[tokio::test]
async fn a_negative_or_too_long_timeout_is_refused_and_changes_nothing() {
    let mut s = stack().await;
    let wall = |n| {
        Some(pb::Budgets {
            max_wall_seconds: n,
            ..Default::default()
        })
    };
    for (i, (timeout, budgets)) in [
        (-1, None),
        (601, None),
        (i64::MAX, None),
        (i64::MIN, None),
        (11, wall(10)),
    ]
    .into_iter()
    .enumerate()
    {
        let e = refused(
            start_with_timeout(&mut s, &format!("bad-{i}"), timeout, budgets).await,
            Code::InvalidArgument,
            "TIMEOUT_INVALID",
        );
        assert_eq!(fields(&e), ["timeout_seconds"], "{timeout}");
    }
    assert_eq!(s.counts().await, (0, 0));
    // At the wall budget exactly is accepted.
    let run = start_with_timeout(&mut s, "ok", 10, wall(10))
        .await
        .expect("start");
    assert_eq!(run.timeout_seconds, 10);
}
