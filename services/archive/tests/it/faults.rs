//! Database faults between the Archive and PostgreSQL (the test kit's `FaultProxy`; Ward is
//! reached directly): an intake whose `COMMIT` answer is lost is `OUTCOME_UNKNOWN` and its
//! retry under the same request id answers the note it admitted; a database that cannot be
//! reached before anything is written is `DATABASE_UNAVAILABLE` and changes nothing.

use lychd_proto::archive::v1::archive_client::ArchiveClient;
use lychd_testkit::FaultProxy;
use tonic::Code;

use crate::common::*;

async fn stack_behind(proxy: &FaultProxy) -> Stack {
    let spawned = lychd_testkit::spawn_office_with(lychd_archive::spec(), |c| {
        proxy.route(&mut c.database.url)
    })
    .await;
    for action in ALL_ACTIONS {
        spawned.allow(action, "namespace:*").await;
    }
    let client = ArchiveClient::new(spawned.channel());
    Stack { spawned, client }
}

async fn notes_stored(s: &Stack) -> i64 {
    let mut db = s.spawned.db.superuser().await;
    sqlx::query_scalar("SELECT count(*) FROM archive.note_revisions")
        .fetch_one(&mut db)
        .await
        .expect("count")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_intake_whose_commit_answer_is_lost_is_unknown_and_its_retry_answers_the_note() {
    let proxy = FaultProxy::start().await;
    let mut s = stack_behind(&proxy).await;
    let req = note("ns-a", "req-1", "doc", "r1", "the quick brown fox");

    proxy.drop_after_commit_of("INSERT INTO archive.note_revisions");
    let lost = s.client.intake(req.clone()).await.expect_err("answer lost");
    assert_eq!(proxy.fired(), 1);
    assert_eq!(
        (lost.code(), reason(&lost).as_str()),
        (Code::Unavailable, "OUTCOME_UNKNOWN"),
        "{lost:?}"
    );
    assert_eq!(notes_stored(&s).await, 1, "it was admitted");

    // The retry under the same request id answers the admitted note; nothing new is written.
    let retried = s.client.intake(req).await.expect("retry").into_inner();
    assert!(retried.replayed);
    assert_eq!(notes_stored(&s).await, 1);

    // A COMMIT that never arrives: unknown as well; the retry admits it once.
    let req = note("ns-a", "req-2", "doc", "r2", "jumps over the lazy dog");
    proxy.drop_before_commit_of("INSERT INTO archive.note_revisions");
    let lost = s.client.intake(req.clone()).await.expect_err("commit lost");
    assert_eq!(reason(&lost), "OUTCOME_UNKNOWN");
    assert_eq!(notes_stored(&s).await, 1, "rolled back");
    let retried = s.client.intake(req).await.expect("retry").into_inner();
    assert!(!retried.replayed);
    assert_eq!(notes_stored(&s).await, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_database_before_any_write_is_unavailable_and_changes_nothing() {
    let proxy = FaultProxy::start().await;
    let mut s = stack_behind(&proxy).await;
    intake(
        &mut s.client,
        note("ns-b", "req-1", "doc", "r1", "first words"),
    )
    .await;

    proxy.refuse(true);
    let refused = s
        .client
        .intake(note("ns-b", "req-2", "doc", "r2", "second words"))
        .await
        .expect_err("database unreachable");
    assert_eq!(
        (refused.code(), reason(&refused).as_str()),
        (Code::Unavailable, "DATABASE_UNAVAILABLE"),
        "{refused:?}"
    );
    assert_eq!(notes_stored(&s).await, 1);

    proxy.refuse(false);
    // Connections that broke while idle fail the one statement sent on each (the pool does
    // not ping before use): retried as a caller would, until the database answers.
    let mut tries = 0;
    loop {
        match s
            .client
            .intake(note("ns-b", "req-2", "doc", "r2", "second words"))
            .await
        {
            Ok(_) => break,
            Err(e) if reason(&e) == "DATABASE_UNAVAILABLE" && tries < 16 => tries += 1,
            Err(e) => panic!("intake after the database came back: {e:?}"),
        }
    }
    assert_eq!(notes_stored(&s).await, 2);
}
