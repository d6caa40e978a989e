//! Metadata reads: keyset pages with a finite bound, state filters, no text, and a missing
//! namespace that lists empty.

use std::collections::BTreeSet;

use lychd_proto::archive::v1 as pb;
use lychd_proto::common::v1::PageRequest;
use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn notes_list_in_keyset_pages_by_revision_id() {
    let mut s = stack().await;
    let mut want = BTreeSet::new();
    for i in 0..7 {
        let n = intake(
            &mut s.client,
            note(
                "notes",
                &format!("r{i}"),
                &format!("doc://{i}"),
                "1",
                "amber",
            ),
        )
        .await;
        want.insert(n.revision_id);
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = s
            .client
            .list_notes(pb::ListNotesRequest {
                namespace: "notes".into(),
                state: 0,
                page: Some(PageRequest {
                    page_size: 3,
                    page_token: token,
                }),
            })
            .await
            .expect("list")
            .into_inner();
        assert!(page.notes.len() <= 3);
        seen.extend(page.notes.iter().map(|n| n.revision_id.clone()));
        token = page.page.expect("page").next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen, want.into_iter().collect::<Vec<_>>());
}

#[tokio::test]
async fn a_state_filter_a_missing_namespace_and_an_exact_read() {
    let mut s = stack().await;
    let a = promoted(&mut s.client, "notes", "doc://a", "1", "amber").await;
    intake(&mut s.client, note("notes", "b", "doc://b", "1", "basalt")).await;
    let list = |state: pb::LifecycleState, ns: &str| pb::ListNotesRequest {
        namespace: ns.into(),
        state: state as i32,
        page: None,
    };
    let promoted_only = s
        .client
        .list_notes(list(pb::LifecycleState::Promoted, "notes"))
        .await
        .expect("list")
        .into_inner()
        .notes;
    assert_eq!(promoted_only.len(), 1);
    assert_eq!(promoted_only[0].revision_id, a.revision_id);
    let none = s
        .client
        .list_notes(list(pb::LifecycleState::Unspecified, "nowhere"))
        .await
        .expect("a missing namespace lists empty")
        .into_inner();
    assert!(none.notes.is_empty());
    let got = s
        .client
        .get_note(pb::GetNoteRequest {
            namespace: "notes".into(),
            revision_id: a.revision_id.clone(),
        })
        .await
        .expect("get")
        .into_inner()
        .note
        .expect("note");
    assert_eq!(got, a);
    refused(
        s.client
            .get_note(pb::GetNoteRequest {
                namespace: "elsewhere".into(),
                revision_id: a.revision_id.clone(),
            })
            .await,
        Code::NotFound,
        "NOTE_NOT_FOUND",
    );
}

#[tokio::test]
async fn a_namespace_bound_to_another_policy_revision_is_refused_not_empty() {
    let mut s = stack().await;
    promoted(&mut s.client, "notes", "doc://a", "1", "amber").await;
    let mut db = s.db().await;
    sqlx::query("UPDATE archive.namespaces SET policy_revision = 2 WHERE name = 'notes'")
        .execute(&mut db)
        .await
        .expect("rebind");
    refused(
        s.client.recall(recall_req("notes", "q", "amber")).await,
        Code::FailedPrecondition,
        "NAMESPACE_POLICY_MISMATCH",
    );
    refused(
        s.client
            .list_notes(pb::ListNotesRequest {
                namespace: "notes".into(),
                ..Default::default()
            })
            .await,
        Code::FailedPrecondition,
        "NAMESPACE_POLICY_MISMATCH",
    );
    refused(
        s.client
            .intake(note("notes", "r9", "doc://z", "1", "zinc"))
            .await,
        Code::FailedPrecondition,
        "NAMESPACE_POLICY_MISMATCH",
    );
}
