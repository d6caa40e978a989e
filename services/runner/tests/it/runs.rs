//! Runs as durable resources: start (idempotent per request id), read, list with paging,
//! cancel through the control FSM, and every state change as a transition row.

use lychd_proto::runner::v1 as pb;
use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn a_started_run_is_recorded_in_created_with_the_contracts_budgets() {
    let mut s = stack().await;
    let run = start(&mut s.client, "r-1", "{\"topic\":\"x\"}").await;
    assert_eq!(run.state, "CREATED");
    assert_eq!(run.terminal_category, "");
    assert_eq!((run.version, run.generation), (1, 1));
    assert_eq!(run.owner, s.spawned.tester_id);
    assert_eq!(
        (run.workflow_name.as_str(), run.workflow_version.as_str()),
        ("summarize", "0.1.0")
    );
    assert_eq!(run.state_schema_version, "0.1.0");
    assert_eq!(run.fsm_sha256, lychd_runner::domain::fsm::FSM_SHA256);
    assert_eq!(run.input_sha256.len(), 64);
    let b = run.budgets.expect("budgets");
    assert_eq!(
        (
            b.max_steps,
            b.max_tool_calls,
            b.max_retries_per_transition,
            b.max_wall_seconds
        ),
        (64, 24, 3, 600)
    );
    assert_eq!(
        (
            b.max_suspended_seconds,
            b.max_tokens,
            b.max_cost_milli,
            b.max_recursion_depth,
            b.max_parallelism
        ),
        (86_400, 100_000, 20_000, 3, 4)
    );
    assert_eq!(get(&mut s.client, &run.run_id).await.expect("get"), run);
    let t = transitions(&mut s.client, &run.run_id)
        .await
        .expect("transitions");
    assert_eq!(t.len(), 1);
    assert_eq!(
        (
            t[0].source_state.as_str(),
            t[0].target_state.as_str(),
            t[0].trigger.as_str(),
            t[0].version
        ),
        ("", "CREATED", "created", 1)
    );
    assert_eq!(t[0].actor, s.spawned.tester_id);
}

#[tokio::test]
async fn budgets_within_the_contract_are_kept_as_asked() {
    let mut s = stack().await;
    let run = s
        .client
        .start_run(pb::StartRunRequest {
            budgets: Some(pb::Budgets {
                max_steps: 8,
                max_tokens: 1000,
                ..Default::default()
            }),
            ..start_req("r-b", "")
        })
        .await
        .expect("start")
        .into_inner()
        .run
        .expect("run");
    let b = run.budgets.expect("budgets");
    assert_eq!((b.max_steps, b.max_tokens, b.max_tool_calls), (8, 1000, 24));
}

#[tokio::test]
async fn the_same_request_id_answers_the_same_run_and_another_request_under_it_conflicts() {
    let mut s = stack().await;
    let first = s
        .client
        .start_run(start_req("again", "in"))
        .await
        .expect("start")
        .into_inner();
    assert!(!first.replayed);
    let again = s
        .client
        .start_run(start_req("again", "in"))
        .await
        .expect("replay")
        .into_inner();
    assert!(again.replayed);
    assert_eq!(again.run, first.run);
    let before = s.counts().await;
    refused(
        s.client.start_run(start_req("again", "other input")).await,
        Code::AlreadyExists,
        "START_REQUEST_CONFLICT",
    );
    let budgets = pb::StartRunRequest {
        budgets: Some(pb::Budgets {
            max_steps: 1,
            ..Default::default()
        }),
        ..start_req("again", "in")
    };
    refused(
        s.client.start_run(budgets).await,
        Code::AlreadyExists,
        "START_REQUEST_CONFLICT",
    );
    assert_eq!(s.counts().await, before, "nothing changed");
    // Another principal's request id is its own.
    let (_, mut other) = s.principal("other", &["runner:start"]).await;
    let theirs = start(&mut other, "again", "other input").await;
    assert_ne!(Some(theirs.run_id), first.run.map(|r| r.run_id));
}

#[tokio::test]
async fn cancel_takes_the_fsm_edge_is_recorded_and_answers_at_once() {
    let mut s = stack().await;
    let run = start(&mut s.client, "c-1", "").await;
    let canceled = cancel(&mut s.client, &run.run_id).await.expect("cancel");
    assert_eq!(
        (
            canceled.state.as_str(),
            canceled.terminal_category.as_str(),
            canceled.version
        ),
        ("CANCELED", "canceled", 2)
    );
    assert_eq!(
        get(&mut s.client, &run.run_id).await.expect("get"),
        canceled
    );
    let t = transitions(&mut s.client, &run.run_id)
        .await
        .expect("transitions");
    let steps: Vec<_> = t
        .iter()
        .map(|t| {
            (
                t.source_state.as_str(),
                t.target_state.as_str(),
                t.trigger.as_str(),
                t.version,
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("", "CREATED", "created", 1),
            ("CREATED", "CANCELED", "cancel", 2)
        ]
    );
    assert!(t[0].sequence < t[1].sequence);
    // Cancelling a canceled run answers it as it is; nothing more is recorded.
    assert_eq!(
        cancel(&mut s.client, &run.run_id).await.expect("again"),
        canceled
    );
    assert_eq!(s.counts().await, (1, 2));
}

#[tokio::test]
async fn an_effect_critical_run_records_the_interrupt_and_a_finished_run_refuses() {
    let mut s = stack().await;
    let run = start(&mut s.client, "e-1", "").await;
    force_state(&s, &run.run_id, "EXECUTE", None).await;
    let interrupted = cancel(&mut s.client, &run.run_id).await.expect("cancel");
    assert_eq!(
        interrupted.state, "EXECUTE",
        "no edge leaves EXECUTE on cancel"
    );
    assert!(interrupted.interrupt_pending);
    assert_eq!(
        interrupted.version, 1,
        "a recorded interrupt is no transition"
    );
    assert_eq!(
        cancel(&mut s.client, &run.run_id).await.expect("again"),
        interrupted
    );

    let done = start(&mut s.client, "e-2", "").await;
    force_state(&s, &done.run_id, "SUCCEEDED", Some("success")).await;
    let before = s.counts().await;
    refused(
        cancel(&mut s.client, &done.run_id).await,
        Code::FailedPrecondition,
        "RUN_FINISHED",
    );
    assert_eq!(s.counts().await, before);
}

#[tokio::test]
async fn runs_are_listed_newest_first_in_pages() {
    let mut s = stack().await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(start(&mut s.client, &format!("p-{i}"), "").await.run_id);
    }
    let first = list(&mut s.client, 2, "").await.expect("page 1");
    let got: Vec<_> = first.runs.iter().map(|r| r.run_id.clone()).collect();
    assert_eq!(got, [ids[2].clone(), ids[1].clone()]);
    let token = first.page.expect("page").next_page_token;
    assert!(!token.is_empty());
    let second = list(&mut s.client, 2, &token).await.expect("page 2");
    let got: Vec<_> = second.runs.iter().map(|r| r.run_id.clone()).collect();
    assert_eq!(got, [ids[0].clone()]);
    assert_eq!(second.page.expect("page").next_page_token, "");
    let all = list(&mut s.client, 0, "").await.expect("default page");
    assert_eq!(all.runs.len(), 3);
}
