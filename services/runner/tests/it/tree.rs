//! Descendant runs: `StartRun.parent_run_id` — one level deeper than the parent, at most the
//! root's `max_recursion_depth`, at most the parent's `max_parallelism` children that have not
//! ended, budgets within the root's remaining; bad parents refused without a change; and every
//! consumption aggregated to the root (`aggregate_descendants: true`), so children exhausting
//! the root's budget end the tree `BUDGET_EXHAUSTED` — race-free under two replicas.

use std::sync::Arc;

use lychd_proto::runner::v1 as pb;
use lychd_runner::store::runs;
use tonic::Code;
use uuid::Uuid;

use crate::common::*;
use crate::steps::{TASKS, drive_once, driver_with};

async fn start_under(
    c: &mut Client,
    request_id: &str,
    parent: &str,
    budgets: Option<pb::Budgets>,
) -> Result<pb::Run, tonic::Status> {
    c.start_run(pb::StartRunRequest {
        request_id: request_id.into(),
        workflow: TASKS.as_bytes().to_vec(),
        input: b"in".to_vec(),
        budgets,
        timeout_seconds: 0,
        parent_run_id: parent.into(),
    })
    .await
    .map(|r| r.into_inner().run.expect("a run"))
}

fn steps(n: u64) -> Option<pb::Budgets> {
    Some(pb::Budgets {
        max_steps: n,
        ..Default::default()
    })
}

#[tokio::test]
async fn a_child_is_one_level_deeper_with_budgets_within_its_roots_remaining() {
    let mut s = stack().await;
    let root = start_under(&mut s.client, "root", "", steps(10))
        .await
        .expect("root");
    assert_eq!((root.depth, root.parent_run_id.as_str()), (0, ""));
    let child = start_under(&mut s.client, "child", &root.run_id, None)
        .await
        .expect("child");
    assert_eq!(
        (
            child.depth,
            child.parent_run_id.as_str(),
            child.root_run_id.as_str()
        ),
        (1, root.run_id.as_str(), root.run_id.as_str())
    );
    assert_eq!(
        child.budgets.as_ref().expect("budgets").max_steps,
        10,
        "the contract's 64 lowered to the root's remaining 10"
    );
    // What the tree consumed is no longer the child's to have.
    let mut db = s.db().await;
    sqlx::query("UPDATE runner.runs SET desc_steps = 7 WHERE id = $1::uuid")
        .bind(&root.run_id)
        .execute(&mut db)
        .await
        .expect("consumed");
    let second = start_under(&mut s.client, "child-2", &root.run_id, steps(5))
        .await
        .expect("second child");
    assert_eq!(second.budgets.expect("budgets").max_steps, 3);
    let grandchild = start_under(&mut s.client, "grandchild", &child.run_id, None)
        .await
        .expect("grandchild");
    assert_eq!(
        (grandchild.depth, grandchild.root_run_id.as_str()),
        (2, root.run_id.as_str())
    );
    let third = start_under(&mut s.client, "level-3", &grandchild.run_id, None)
        .await
        .expect("depth 3 is the contract's");
    assert_eq!(third.depth, 3);
    let before = s.counts().await;
    refused(
        start_under(&mut s.client, "level-4", &third.run_id, None).await,
        Code::FailedPrecondition,
        "RECURSION_TOO_DEEP",
    );
    // The root has nothing left: a child is refused.
    sqlx::query("UPDATE runner.runs SET desc_steps = 10 WHERE id = $1::uuid")
        .bind(&root.run_id)
        .execute(&mut db)
        .await
        .expect("consumed");
    refused(
        start_under(&mut s.client, "child-3", &root.run_id, None).await,
        Code::FailedPrecondition,
        "ROOT_BUDGET_SPENT",
    );
    assert_eq!(s.counts().await, before, "nothing changed");
    // A replay of a started child answers it, whatever the tree's state.
    let again = start_under(&mut s.client, "child", &root.run_id, None)
        .await
        .expect("replay");
    assert_eq!(again.run_id, child.run_id);
}

#[tokio::test]
async fn bad_parents_depth_and_parallelism_are_refused_and_change_nothing() {
    let mut s = stack().await;
    let shallow = start_under(
        &mut s.client,
        "shallow",
        "",
        Some(pb::Budgets {
            max_recursion_depth: 1,
            max_parallelism: 2,
            ..Default::default()
        }),
    )
    .await
    .expect("root");
    let (_, mut other) = s.principal("other", TESTER_ACTIONS).await;
    let theirs = start_under(&mut other, "theirs", "", None)
        .await
        .expect("their run");
    let a = start_under(&mut s.client, "a", &shallow.run_id, None)
        .await
        .expect("a");
    let b = start_under(&mut s.client, "b", &shallow.run_id, None)
        .await
        .expect("b");
    let before = s.counts().await;
    refused(
        start_under(&mut s.client, "c", &shallow.run_id, None).await,
        Code::FailedPrecondition,
        "PARALLELISM_REACHED",
    );
    refused(
        start_under(&mut s.client, "deep", &a.run_id, None).await,
        Code::FailedPrecondition,
        "RECURSION_TOO_DEEP",
    );
    refused(
        start_under(&mut s.client, "x", &Uuid::new_v4().to_string(), None).await,
        Code::NotFound,
        "PARENT_RUN_NOT_FOUND",
    );
    refused(
        start_under(&mut s.client, "y", &theirs.run_id, None).await,
        Code::NotFound,
        "PARENT_RUN_NOT_FOUND",
    );
    let e = refused(
        start_under(&mut s.client, "z", "not-a-uuid", None).await,
        Code::InvalidArgument,
        "RUN_ID_MALFORMED",
    );
    assert_eq!(fields(&e), ["parent_run_id"]);
    assert_eq!(s.counts().await, before, "nothing changed");
    // A child that ended frees its place; an ended parent takes no child.
    cancel(&mut s.client, &b.run_id).await.expect("cancel");
    start_under(&mut s.client, "c", &shallow.run_id, None)
        .await
        .expect("a place is free");
    cancel(&mut s.client, &a.run_id).await.expect("cancel");
    let before = s.counts().await;
    refused(
        start_under(&mut s.client, "under-ended", &a.run_id, None).await,
        Code::FailedPrecondition,
        "PARENT_FINISHED",
    );
    assert_eq!(s.counts().await, before);
}

/// The progress `used` of run `id` (its row).
async fn used(s: &Stack, id: &str) -> serde_json::Value {
    progress(s, id).await["used"].clone()
}

async fn progress(s: &Stack, id: &str) -> serde_json::Value {
    let row = runs::get(
        &s.spawned.ctx.pool,
        Uuid::parse_str(id).expect("uuid"),
        None,
    )
    .await
    .expect("get")
    .expect("run");
    serde_json::from_str::<serde_json::Value>(&row.progress).expect("json")
}

async fn desc_steps(s: &Stack, id: &str) -> i64 {
    let mut db = s.db().await;
    sqlx::query_scalar("SELECT desc_steps FROM runner.runs WHERE id = $1::uuid")
        .bind(id)
        .fetch_one(&mut db)
        .await
        .expect("desc")
}

#[tokio::test]
async fn children_consumption_counts_against_the_root_and_exhausts_the_tree() {
    let mut s = crate::verified::stack().await;
    let root = start_under(&mut s.client, "root", "", steps(5))
        .await
        .expect("root");
    let child = start_under(&mut s.client, "child", &root.run_id, None)
        .await
        .expect("child");
    // The child runs first (the root is not claimable meanwhile).
    let mut db = s.db().await;
    let hold =
        |at: &'static str| format!("UPDATE runner.runs SET not_before = {at} WHERE id = $1::uuid");
    sqlx::query(&hold("now() + interval '1 hour'"))
        .bind(&root.run_id)
        .execute(&mut db)
        .await
        .expect("hold the root");
    let child_id = uuid::Uuid::parse_str(&child.run_id).expect("uuid");
    assert_eq!(
        crate::verified::drive_to_end(&s, &driver_with(&s, 0), child_id)
            .await
            .state,
        "SUCCEEDED"
    );
    assert_eq!(
        desc_steps(&s, &root.run_id).await,
        3,
        "aggregated to the root"
    );
    sqlx::query(&hold("NULL"))
        .bind(&root.run_id)
        .execute(&mut db)
        .await
        .expect("release the root");
    drive_once(&s, &driver_with(&s, 0)).await;
    let r = get(&mut s.client, &root.run_id).await.expect("root");
    assert_eq!(
        (r.state.as_str(), r.terminal_category.as_str()),
        ("BUDGET_EXHAUSTED", "budget_exhausted")
    );
    // The root took 2 steps: with the child's 3 the tree's 5 is spent.
    assert_eq!(used(&s, &root.run_id).await["steps"], 2);
    // Its first step brought the tree to 4 of the root's 5 (80 %): that commit recorded the
    // tree's residual-work handoff, though the root alone had used 1 of 5.
    let handoff = progress(&s, &root.run_id).await["handoff"].clone();
    assert_eq!(handoff["budget"], "tree.max_steps", "{handoff}");
    assert_eq!(
        (handoff["used"].as_u64(), handoff["limit"].as_u64()),
        (Some(4), Some(5))
    );
    let t = transitions(&mut s.client, &root.run_id).await.expect("t");
    assert_eq!(
        t.iter().filter(|t| t.trigger == "plan_step").count(),
        2,
        "the third step is not taken"
    );
}

#[tokio::test]
async fn two_replicas_aggregate_a_tree_without_a_lost_update() {
    let mut s = crate::verified::stack().await;
    let root = start_under(&mut s.client, "root", "", steps(9))
        .await
        .expect("root");
    let mut ids = vec![root.run_id.clone()];
    for i in 0..4 {
        ids.push(
            start_under(&mut s.client, &format!("child-{i}"), &root.run_id, None)
                .await
                .expect("child")
                .run_id,
        );
    }
    // Two replicas (each its own holder, four runs at once), steps slow enough to interleave.
    let replicas: Vec<_> = (0..2)
        .map(|_| tokio::spawn(Arc::new(driver_with(&s, 15)).run()))
        .collect();
    for id in &ids {
        let c = s.client.clone();
        eventually("every run of the tree ends", || {
            let (mut c, id) = (c.clone(), id.clone());
            async move {
                !get(&mut c, &id)
                    .await
                    .expect("run")
                    .terminal_category
                    .is_empty()
            }
        })
        .await;
    }
    for r in replicas {
        r.abort();
    }
    let mut total = 0;
    let mut children = 0;
    let mut exhausted = 0;
    for (i, id) in ids.iter().enumerate() {
        let n = used(&s, id).await["steps"].as_i64().unwrap_or(0);
        total += n;
        if i > 0 {
            children += n;
        }
        exhausted +=
            usize::from(get(&mut s.client, id).await.expect("run").state == "BUDGET_EXHAUSTED");
    }
    assert_eq!(
        desc_steps(&s, &root.run_id).await,
        children,
        "every child's steps reached the root"
    );
    assert_eq!(
        total, 9,
        "the tree took exactly the root's 9 steps of 15 asked"
    );
    assert!(exhausted >= 1, "some run of the tree ran out");
    // Each run of the tree replays from its record: the tree totals its gate read (other runs'
    // concurrent work) are recorded inputs (issue 28, replay).
    for id in &ids {
        let r = s
            .client
            .replay_run(pb::ReplayRunRequest { run_id: id.clone() })
            .await
            .expect("replay")
            .into_inner();
        assert_eq!(r.divergence, None, "{r:?}");
        assert_eq!(r.transitions_replayed, r.transitions_total);
    }
}
