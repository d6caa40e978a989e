//! Authority at every boundary: each action is its own; authority withdrawn while an operation
//! waits under its namespace lock refuses before anything is written; authority withdrawn
//! between commit and answer refuses the answer, and an exact replay recovers the committed
//! result.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lychd_proto::archive::v1 as pb;
use sqlx::Connection;
use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn every_rpc_is_refused_without_its_action() {
    let mut s = stack().await;
    let n = promoted(&mut s.client, "notes", "doc://a", "1", "amber").await;
    recall(&mut s.client, "notes", "q1", "amber").await;
    // Holding every other action is no help: each operation needs its own.
    for missing in ALL_ACTIONS {
        let grants: Vec<(&str, &str)> = ALL_ACTIONS
            .iter()
            .filter(|a| *a != missing)
            .map(|a| (*a, "namespace:notes"))
            .collect();
        let (_, mut c) = s.principal(&format!("p-{}", &missing[8..]), &grants).await;
        let result: Vec<Result<(), tonic::Status>> = match *missing {
            "archive:intake" => vec![
                c.intake(note("notes", "x", "doc://x", "1", "x"))
                    .await
                    .map(drop),
            ],
            "archive:lifecycle" => vec![
                c.promote(change(&n)).await.map(drop),
                c.archive_note(change(&n)).await.map(drop),
                c.revoke(change(&n)).await.map(drop),
            ],
            "archive:recall" => vec![c.recall(recall_req("notes", "q2", "amber")).await.map(drop)],
            "archive:resolve" => vec![resolve(&mut c, "notes", "q1").await.map(drop)],
            _ => vec![
                c.list_notes(pb::ListNotesRequest {
                    namespace: "notes".into(),
                    ..Default::default()
                })
                .await
                .map(drop),
                c.get_note(pb::GetNoteRequest {
                    namespace: "notes".into(),
                    revision_id: n.revision_id.clone(),
                })
                .await
                .map(drop),
                c.inspect_receipt(pb::InspectReceiptRequest {
                    namespace: "notes".into(),
                    request_id: "q1".into(),
                })
                .await
                .map(drop),
            ],
        };
        for r in result {
            let e = r.expect_err(missing);
            assert_eq!(e.code(), Code::PermissionDenied, "{missing}: {e:?}");
        }
    }
    // Authority on one namespace is not authority on another.
    let (_, mut other) = s
        .principal("other-ns", &[("archive:recall", "namespace:elsewhere")])
        .await;
    let e = other
        .recall(recall_req("notes", "q3", "amber"))
        .await
        .expect_err("another namespace");
    assert_eq!(e.code(), Code::PermissionDenied);
}

/// Run `hook` once, for `operation` on `namespace`, between the transaction and the answer.
fn once_before_answer<F>(operation: &'static str, namespace: &'static str, hook: F)
where
    F: Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static,
{
    let fired = Arc::new(AtomicBool::new(false));
    let hook = Arc::new(hook);
    lychd_archive::testing::set_before_answer(Some(Arc::new(move |op, ns| {
        let go = op == operation && ns == namespace && !fired.swap(true, Ordering::SeqCst);
        let hook = hook.clone();
        Box::pin(async move {
            if go {
                hook().await;
            }
        })
    })));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_intake_whose_authority_goes_after_commit_is_refused_and_its_replay_recovers_it() {
    let mut s = stack().await;
    let warden = s.warden().await;
    let tester = s.spawned.tester_id.clone();
    once_before_answer("intake", "committed", move || {
        let mut warden = warden.clone();
        let tester = tester.clone();
        Box::pin(
            async move { unassign(&mut warden, &tester, "archive:intake", "namespace:*").await },
        )
    });
    let req = note("committed", "r1", "doc://a", "1", "amber");
    let e = s
        .client
        .intake(req.clone())
        .await
        .expect_err("refused at the answer");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    // The mutation stands: the note is there.
    let listed = s
        .client
        .list_notes(pb::ListNotesRequest {
            namespace: "committed".into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .notes;
    assert_eq!(listed.len(), 1);
    // Authority back: the exact replay recovers the committed identity.
    s.spawned.allow("archive:intake", "namespace:*").await;
    let replay = s.client.intake(req).await.expect("replay").into_inner();
    assert!(replay.replayed);
    assert_eq!(
        replay.note.expect("note").revision_id,
        listed[0].revision_id
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recall_whose_authority_goes_after_commit_is_refused_and_its_replay_recovers_it() {
    let mut s = stack().await;
    promoted(&mut s.client, "kept", "doc://a", "1", "amber").await;
    let warden = s.warden().await;
    let tester = s.spawned.tester_id.clone();
    once_before_answer("recall", "kept", move || {
        let mut warden = warden.clone();
        let tester = tester.clone();
        Box::pin(
            async move { unassign(&mut warden, &tester, "archive:recall", "namespace:*").await },
        )
    });
    let e = s
        .client
        .recall(recall_req("kept", "q1", "amber"))
        .await
        .expect_err("refused at the answer");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let kept = s
        .client
        .inspect_receipt(pb::InspectReceiptRequest {
            namespace: "kept".into(),
            request_id: "q1".into(),
        })
        .await
        .expect("the receipt was written")
        .into_inner()
        .receipt
        .expect("receipt");
    s.spawned.allow("archive:recall", "namespace:*").await;
    let replay = recall(&mut s.client, "kept", "q1", "amber").await;
    assert!(replay.replayed);
    assert_eq!(replay.receipt, Some(kept));
    assert_eq!(replay.notes.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revocation_refused_at_the_answer_still_stands() {
    let mut s = stack().await;
    let n = promoted(&mut s.client, "stands", "doc://a", "1", "amber").await;
    let warden = s.warden().await;
    let tester = s.spawned.tester_id.clone();
    once_before_answer("lifecycle", "stands", move || {
        let mut warden = warden.clone();
        let tester = tester.clone();
        Box::pin(
            async move { unassign(&mut warden, &tester, "archive:lifecycle", "namespace:*").await },
        )
    });
    let e = s
        .client
        .revoke(change(&n))
        .await
        .expect_err("refused at the answer");
    assert_eq!(e.code(), Code::PermissionDenied);
    let now = s
        .client
        .get_note(pb::GetNoteRequest {
            namespace: "stands".into(),
            revision_id: n.revision_id.clone(),
        })
        .await
        .expect("get")
        .into_inner()
        .note
        .expect("note");
    assert_eq!(now.state, pb::LifecycleState::Revoked as i32);
    assert_eq!(
        now.version,
        n.version + 1,
        "recovered by reading, never replayed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn authority_withdrawn_while_waiting_for_the_namespace_writes_nothing() {
    let mut s = stack().await;
    promoted(&mut s.client, "waits", "doc://a", "1", "amber").await;
    let mut warden = s.warden().await;
    let mut db = s.db().await;
    let mut tx = db.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM archive.namespaces WHERE name = 'waits' FOR SHARE")
        .execute(&mut *tx)
        .await
        .expect("lock");
    let mut c = s.client.clone();
    let call = tokio::spawn(async move {
        c.intake(note("waits", "r2", "doc://b", "1", "basalt"))
            .await
    });
    // The intake is past its first decision and waits for the namespace row.
    let mut watcher = s.db().await;
    let deadline = std::time::Instant::now() + Duration::from_millis(1500);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut watcher)
        .await
        .expect("pg_stat_activity");
        if waiting > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the intake never waited"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    unassign(
        &mut warden,
        &s.spawned.tester_id,
        "archive:intake",
        "namespace:*",
    )
    .await;
    tx.rollback().await.expect("release");
    let e = call
        .await
        .expect("join")
        .expect_err("refused before the write");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    // Refused by the second question (the first decision's policy generation is stale), not
    // by the first.
    assert_eq!(reason(&e), "POLICY_GENERATION_STALE", "{e:?}");
    let listed = s
        .client
        .list_notes(pb::ListNotesRequest {
            namespace: "waits".into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .notes;
    assert_eq!(listed.len(), 1, "nothing of the refused intake was written");
}
