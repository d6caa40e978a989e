//! Receipt resolution: exactly the selection, or a refusal naming why — never a replacement.
//! Inspection: the retained metadata, whatever happened since.

use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn an_unchanged_selection_resolves_to_exactly_the_recalled_notes() {
    let mut s = stack().await;
    promoted(&mut s.client, "notes", "doc://a", "1", "amber lantern").await;
    promoted(&mut s.client, "notes", "doc://b", "1", "amber").await;
    let got = recall(&mut s.client, "notes", "q1", "amber").await;
    // A later promotion that would match is not added.
    promoted(&mut s.client, "notes", "doc://c", "1", "amber amber").await;
    let resolved = resolve(&mut s.client, "notes", "q1")
        .await
        .expect("resolves");
    assert_eq!(resolved.receipt, got.receipt);
    assert_eq!(resolved.notes, got.notes);
}

#[tokio::test]
async fn resolution_after_revoke_archive_or_supersede_refuses() {
    let mut s = stack().await;
    let c = &mut s.client;
    let r = promoted(c, "notes", "doc://r", "1", "revokable lantern").await;
    let a = promoted(c, "notes", "doc://a", "1", "archivable lantern").await;
    promoted(c, "notes", "doc://s", "1", "supersedable lantern").await;
    let qr = recall(c, "notes", "qr", "revokable").await;
    let qa = recall(c, "notes", "qa", "archivable").await;
    let qs = recall(c, "notes", "qs", "supersedable").await;
    assert_eq!(qr.notes.len() + qa.notes.len() + qs.notes.len(), 3);

    revoke(c, &r).await;
    archive(c, &a).await;
    promoted(c, "notes", "doc://s", "2", "supersedable lantern again").await;

    for (q, want) in [
        ("qr", "RECEIPT_NOTE_REVOKED"),
        ("qa", "RECEIPT_NOTE_ARCHIVED"),
        ("qs", "RECEIPT_NOTE_SUPERSEDED"),
    ] {
        refused(resolve(c, "notes", q).await, Code::FailedPrecondition, want);
        // Replaying the recall resolves the kept receipt: refused the same way.
        refused(
            c.recall(recall_req(
                "notes",
                q,
                match q {
                    "qr" => "revokable",
                    "qa" => "archivable",
                    _ => "supersedable",
                },
            ))
            .await,
            Code::FailedPrecondition,
            want,
        );
    }
    refused(
        resolve(c, "notes", "missing").await,
        Code::NotFound,
        "RECEIPT_NOT_FOUND",
    );
}

#[tokio::test]
async fn a_receipt_with_one_stale_note_refuses_whole() {
    let mut s = stack().await;
    promoted(&mut s.client, "notes", "doc://a", "1", "amber").await;
    let b = promoted(&mut s.client, "notes", "doc://b", "1", "amber lantern").await;
    let got = recall(&mut s.client, "notes", "q1", "amber").await;
    assert_eq!(got.notes.len(), 2);
    revoke(&mut s.client, &b).await;
    refused(
        resolve(&mut s.client, "notes", "q1").await,
        Code::FailedPrecondition,
        "RECEIPT_NOTE_REVOKED",
    );
}

#[tokio::test]
async fn a_changed_selection_refuses() {
    let mut s = stack().await;
    let n = promoted(&mut s.client, "notes", "doc://a", "1", "amber").await;
    recall(&mut s.client, "notes", "q1", "amber").await;
    // The stored text altered behind the office's back: the projection no longer matches.
    let mut db = s.db().await;
    sqlx::query("UPDATE archive.note_texts SET body = 'amber!' WHERE revision_id = $1")
        .bind(uuid::Uuid::parse_str(&n.revision_id).expect("uuid"))
        .execute(&mut db)
        .await
        .expect("tamper");
    refused(
        resolve(&mut s.client, "notes", "q1").await,
        Code::FailedPrecondition,
        "RECEIPT_NOTE_CHANGED",
    );
}

#[tokio::test]
async fn inspection_returns_the_retained_receipt_after_revocation_without_text() {
    let mut s = stack().await;
    let n = promoted(&mut s.client, "notes", "doc://a", "1", "amber").await;
    let got = recall(&mut s.client, "notes", "q1", "amber").await;
    revoke(&mut s.client, &n).await;
    let inspected = s
        .client
        .inspect_receipt(lychd_proto::archive::v1::InspectReceiptRequest {
            namespace: "notes".into(),
            request_id: "q1".into(),
        })
        .await
        .expect("inspect")
        .into_inner()
        .receipt;
    assert_eq!(inspected, got.receipt);
    refused(
        s.client
            .inspect_receipt(lychd_proto::archive::v1::InspectReceiptRequest {
                namespace: "notes".into(),
                request_id: "nope".into(),
            })
            .await,
        Code::NotFound,
        "RECEIPT_NOT_FOUND",
    );
}
