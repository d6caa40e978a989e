//! Intake: idempotent on the request id, and each of its refusals.

use lychd_proto::archive::v1 as pb;
use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn a_new_revision_starts_as_a_candidate_and_an_exact_replay_answers_its_current_lifecycle() {
    let mut s = stack().await;
    let first = s
        .client
        .intake(note("notes", "r1", "doc://a", "1", "the amber lantern"))
        .await
        .expect("intake")
        .into_inner();
    assert!(!first.replayed);
    let n = first.note.expect("note");
    assert_eq!(n.state, pb::LifecycleState::Candidate as i32);
    assert_eq!(n.version, 1);
    assert!(n.text_held);
    assert_eq!(n.chars, 17);
    let p = promote(&mut s.client, &n).await;

    let again = s
        .client
        .intake(note("notes", "r1", "doc://a", "1", "the amber lantern"))
        .await
        .expect("replay")
        .into_inner();
    assert!(again.replayed);
    let m = again.note.expect("note");
    assert_eq!(m.revision_id, n.revision_id);
    assert_eq!(
        (m.state, m.version),
        (pb::LifecycleState::Promoted as i32, p.version)
    );
}

#[tokio::test]
async fn the_same_request_id_with_other_material_refuses() {
    let mut s = stack().await;
    intake(&mut s.client, note("notes", "r1", "doc://a", "1", "amber")).await;
    for other in [
        note("notes", "r1", "doc://a", "1", "basalt"),
        note("notes", "r1", "doc://a", "2", "amber"),
        note("notes", "r1", "doc://b", "1", "amber"),
        pb::IntakeRequest {
            producer: "someone else".into(),
            ..note("notes", "r1", "doc://a", "1", "amber")
        },
    ] {
        refused(
            s.client.intake(other).await,
            Code::AlreadyExists,
            "INTAKE_REQUEST_CONFLICT",
        );
    }
}

#[tokio::test]
async fn other_bytes_under_an_existing_source_revision_refuse() {
    let mut s = stack().await;
    intake(&mut s.client, note("notes", "r1", "doc://a", "1", "amber")).await;
    let refusal = refused(
        s.client
            .intake(note("notes", "r2", "doc://a", "1", "secret basalt"))
            .await,
        Code::AlreadyExists,
        "SOURCE_REVISION_CONFLICT",
    );
    assert!(!refusal.message().contains("basalt"), "no text in errors");
}

#[tokio::test]
async fn another_request_id_naming_the_same_source_revision_is_the_same_note() {
    let mut s = stack().await;
    let a = intake(&mut s.client, note("notes", "r1", "doc://a", "1", "amber")).await;
    let again = s
        .client
        .intake(note("notes", "r2", "doc://a", "1", "amber"))
        .await
        .expect("same revision")
        .into_inner();
    assert!(again.replayed);
    assert_eq!(again.note.expect("note").revision_id, a.revision_id);
    let list = s
        .client
        .list_notes(pb::ListNotesRequest {
            namespace: "notes".into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(list.notes.len(), 1);
}

#[tokio::test]
async fn a_revoked_source_revision_is_a_tombstone_that_refuses_reintake() {
    let mut s = stack().await;
    let n = intake(&mut s.client, note("notes", "r1", "doc://a", "1", "amber")).await;
    let r = revoke(&mut s.client, &n).await;
    assert_eq!(r.state, pb::LifecycleState::Revoked as i32);
    assert!(!r.text_held);
    assert_eq!(r.content_digest, n.content_digest, "the digest stays");
    for req in [
        note("notes", "r2", "doc://a", "1", "amber"),
        note("notes", "r3", "doc://a", "1", "basalt"),
    ] {
        refused(
            s.client.intake(req).await,
            Code::FailedPrecondition,
            "SOURCE_REVISION_REVOKED",
        );
    }
    // The original request id still answers its identity, now revoked.
    let replay = s
        .client
        .intake(note("notes", "r1", "doc://a", "1", "amber"))
        .await
        .expect("exact replay")
        .into_inner();
    assert!(replay.replayed);
    assert_eq!(
        replay.note.expect("note").state,
        pb::LifecycleState::Revoked as i32
    );
    // A new revision of the same source is admitted.
    intake(&mut s.client, note("notes", "r4", "doc://a", "2", "amber")).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_first_intakes_of_one_request_admit_one_note() {
    let s = stack().await;
    let calls = (0..8).map(|_| {
        let mut c = s.client.clone();
        tokio::spawn(async move {
            c.intake(note("fresh", "r1", "doc://a", "1", "amber"))
                .await
                .map(|r| r.into_inner())
        })
    });
    let answers: Vec<_> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|j| j.expect("join").expect("every intake answers"))
        .collect();
    assert_eq!(answers.iter().filter(|a| !a.replayed).count(), 1);
    let ids: std::collections::BTreeSet<_> = answers
        .iter()
        .map(|a| a.note.as_ref().expect("note").revision_id.clone())
        .collect();
    assert_eq!(ids.len(), 1);
}
