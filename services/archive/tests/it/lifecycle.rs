//! Lifecycle: compare-and-set on the version, promotion supersedes, revocation clears text and
//! search data but keeps the tombstone, and concurrent changes have exactly one winner.

use lychd_proto::archive::v1 as pb;
use sqlx::Row;
use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn promotion_archives_the_sources_previously_promoted_revision() {
    let mut s = stack().await;
    let v1 = promoted(&mut s.client, "notes", "doc://a", "1", "amber one").await;
    let v2 = intake(
        &mut s.client,
        note("notes", "v2", "doc://a", "2", "amber two"),
    )
    .await;
    let answer = s
        .client
        .promote(change(&v2))
        .await
        .expect("promote")
        .into_inner();
    let sup = answer.superseded.expect("the previous revision");
    assert_eq!(sup.revision_id, v1.revision_id);
    assert_eq!(sup.state, pb::LifecycleState::Archived as i32);
    assert_eq!(sup.version, v1.version + 1);
    assert_eq!(sup.superseded_by, v2.revision_id);
    let now = answer.note.expect("note");
    assert_eq!(
        (now.state, now.version),
        (pb::LifecycleState::Promoted as i32, 2)
    );
    // Another source is untouched.
    let other = promoted(&mut s.client, "notes", "doc://b", "1", "amber three").await;
    assert_eq!(other.state, pb::LifecycleState::Promoted as i32);
}

#[tokio::test]
async fn a_stale_version_or_an_invalid_transition_refuses() {
    let mut s = stack().await;
    let n = intake(&mut s.client, note("notes", "r1", "doc://a", "1", "amber")).await;
    refused(
        s.client
            .promote(pb::LifecycleRequest {
                expected_version: 2,
                ..change(&n)
            })
            .await,
        Code::FailedPrecondition,
        "LIFECYCLE_VERSION_MISMATCH",
    );
    refused(
        s.client.archive_note(change(&n)).await,
        Code::FailedPrecondition,
        "LIFECYCLE_TRANSITION_INVALID",
    );
    let p = promote(&mut s.client, &n).await;
    // A retry of the promotion with the version it saw: stale, not repeated.
    refused(
        s.client.promote(change(&n)).await,
        Code::FailedPrecondition,
        "LIFECYCLE_VERSION_MISMATCH",
    );
    let r = revoke(&mut s.client, &p).await;
    for call in [
        s.client.promote(change(&r)).await,
        s.client.archive_note(change(&r)).await,
        s.client.revoke(change(&r)).await,
    ] {
        refused(
            call,
            Code::FailedPrecondition,
            "LIFECYCLE_TRANSITION_INVALID",
        );
    }
    refused(
        s.client
            .promote(pb::LifecycleRequest {
                revision_id: uuid::Uuid::new_v4().to_string(),
                ..change(&n)
            })
            .await,
        Code::NotFound,
        "NOTE_NOT_FOUND",
    );
}

#[tokio::test]
async fn revocation_clears_text_and_search_data_and_keeps_the_tombstone() {
    let mut s = stack().await;
    let n = promoted(&mut s.client, "notes", "doc://a", "1", "amber lantern").await;
    revoke(&mut s.client, &n).await;
    let mut db = s.db().await;
    let id = uuid::Uuid::parse_str(&n.revision_id).expect("uuid");
    for (table, what) in [
        ("archive.note_texts", "the text is gone"),
        ("archive.recall_index", "the search vector is gone"),
    ] {
        let held: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {table} WHERE revision_id = $1"
        ))
        .bind(id)
        .fetch_one(&mut db)
        .await
        .expect("count");
        assert_eq!(held, 0, "{what}");
    }
    let row = sqlx::query(
        "SELECT source_key, source_revision, encode(content_digest, 'hex') AS d
         FROM archive.note_revisions WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&mut db)
    .await
    .expect("tombstone");
    assert_eq!(row.get::<String, _>("source_key"), "doc://a");
    assert_eq!(row.get::<String, _>("source_revision"), "1");
    assert_eq!(row.get::<String, _>("d"), n.content_digest);
}

/// `n` callers change one note at its version at once: exactly one wins, the others are told
/// their version is stale.
async fn race(s: &Stack, n: &pb::NoteInfo, changes: &[&'static str]) -> Vec<&'static str> {
    let calls = changes.iter().map(|&which| {
        let mut c = s.client.clone();
        let req = change(n);
        tokio::spawn(async move {
            let r = match which {
                "promote" => c.promote(req).await,
                "archive" => c.archive_note(req).await,
                _ => c.revoke(req).await,
            };
            (which, r)
        })
    });
    let mut winners = Vec::new();
    for j in futures::future::join_all(calls).await {
        let (which, r) = j.expect("join");
        match r {
            Ok(_) => winners.push(which),
            Err(e) => assert_eq!(reason(&e), "LIFECYCLE_VERSION_MISMATCH", "{e:?}"),
        }
    }
    winners
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_compare_and_set_has_exactly_one_winner() {
    let mut s = stack().await;
    let n = intake(&mut s.client, note("notes", "r1", "doc://a", "1", "amber")).await;
    let winners = race(&s, &n, &["promote"; 6]).await;
    assert_eq!(winners, ["promote"]);
    let p = s
        .client
        .get_note(pb::GetNoteRequest {
            namespace: "notes".into(),
            revision_id: n.revision_id.clone(),
        })
        .await
        .expect("get")
        .into_inner()
        .note
        .expect("note");
    assert_eq!(p.version, 2);
    let winners = race(
        &s,
        &p,
        &[
            "archive", "revoke", "archive", "revoke", "archive", "revoke",
        ],
    )
    .await;
    assert_eq!(winners.len(), 1, "{winners:?}");
    let after = s
        .client
        .get_note(pb::GetNoteRequest {
            namespace: "notes".into(),
            revision_id: n.revision_id.clone(),
        })
        .await
        .expect("get")
        .into_inner()
        .note
        .expect("note");
    assert_eq!(after.version, 3);
    let want = if winners[0] == "archive" {
        pb::LifecycleState::Archived
    } else {
        pb::LifecycleState::Revoked
    };
    assert_eq!(after.state, want as i32);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_promotions_of_two_revisions_of_one_source_leave_one_promoted() {
    let mut s = stack().await;
    let a = intake(&mut s.client, note("notes", "a", "doc://a", "1", "amber")).await;
    let b = intake(&mut s.client, note("notes", "b", "doc://a", "2", "basalt")).await;
    let (mut c1, mut c2) = (s.client.clone(), s.client.clone());
    let (ra, rb) = tokio::join!(c1.promote(change(&a)), c2.promote(change(&b)));
    ra.expect("a promoted");
    rb.expect("b promoted");
    let list = s
        .client
        .list_notes(pb::ListNotesRequest {
            namespace: "notes".into(),
            state: pb::LifecycleState::Promoted as i32,
            page: None,
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(list.notes.len(), 1, "one promoted revision per source");
}
