//! Bounds on every input: `INVALID_ARGUMENT` naming each bad field, before Ward is asked about
//! any object built from it.

use lychd_proto::archive::v1 as pb;
use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn a_bad_intake_names_every_bad_field() {
    let mut s = stack().await;
    let e = s
        .client
        .intake(pb::IntakeRequest {
            namespace: "Bad Name".into(),
            request_id: "has space".into(),
            source_key: String::new(),
            source_revision: "x".repeat(129),
            text: "t".repeat(16_385),
            producer: "\nproducer".into(),
            classification: "Public!".into(),
            observed_at: None,
        })
        .await
        .expect_err("bad input");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(reason(&e), "NAMESPACE_INVALID");
    assert_eq!(
        fields(&e),
        [
            "namespace",
            "request_id",
            "source_key",
            "source_revision",
            "text",
            "producer",
            "classification",
            "observed_at"
        ]
    );
    assert!(!e.message().contains("ttttt"), "never the value");
    let e = s
        .client
        .intake(note("notes", "r", "k", "1", "nul\0byte"))
        .await
        .expect_err("NUL");
    assert_eq!(reason(&e), "TEXT_INVALID");
    let e = s
        .client
        .intake(note("notes", "r", "k", "1", ""))
        .await
        .expect_err("empty");
    assert_eq!(reason(&e), "TEXT_INVALID");
}

#[tokio::test]
async fn recall_bounds_query_purpose_results_and_characters() {
    let mut s = stack().await;
    let e = s
        .client
        .recall(pb::RecallRequest {
            namespace: "notes".into(),
            request_id: "q".into(),
            query: "q".repeat(513),
            purpose: "Answer Now".into(),
            max_results: 51,
            max_chars: 0,
        })
        .await
        .expect_err("bad input");
    assert_eq!(reason(&e), "QUERY_INVALID");
    assert_eq!(fields(&e), ["query", "purpose", "max_results", "max_chars"]);
    for (req, want) in [
        (
            pb::RecallRequest {
                query: "   ".into(),
                ..recall_req("notes", "q", "x")
            },
            "QUERY_INVALID",
        ),
        (
            pb::RecallRequest {
                max_results: 0,
                ..recall_req("notes", "q", "x")
            },
            "MAX_RESULTS_OUT_OF_RANGE",
        ),
        (
            pb::RecallRequest {
                max_chars: 65_537,
                ..recall_req("notes", "q", "x")
            },
            "MAX_CHARS_OUT_OF_RANGE",
        ),
    ] {
        refused(s.client.recall(req).await, Code::InvalidArgument, want);
    }
}

#[tokio::test]
async fn lifecycle_list_get_and_receipt_inputs_are_checked() {
    let mut s = stack().await;
    let e = s
        .client
        .promote(pb::LifecycleRequest {
            namespace: "notes".into(),
            revision_id: "not-a-uuid".into(),
            expected_version: 0,
        })
        .await
        .expect_err("bad");
    assert_eq!(fields(&e), ["revision_id", "expected_version"]);
    assert_eq!(reason(&e), "REVISION_ID_MALFORMED");
    let e = s
        .client
        .list_notes(pb::ListNotesRequest {
            namespace: "notes".into(),
            state: 9,
            page: Some(lychd_proto::common::v1::PageRequest {
                page_size: 501,
                page_token: "junk".into(),
            }),
        })
        .await
        .expect_err("bad");
    assert_eq!(fields(&e), ["state", "page.page_size", "page.page_token"]);
    assert_eq!(reason(&e), "STATE_UNKNOWN");
    refused(
        s.client
            .get_note(pb::GetNoteRequest {
                namespace: "-x".into(),
                revision_id: uuid::Uuid::nil().to_string(),
            })
            .await,
        Code::InvalidArgument,
        "NAMESPACE_INVALID",
    );
    refused(
        resolve(&mut s.client, "notes", "").await,
        Code::InvalidArgument,
        "REQUEST_ID_INVALID",
    );
}
