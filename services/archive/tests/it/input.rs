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

/// Intake and Recall authenticate by their own first decision: bad input from a caller who
/// authenticates nobody here (a junk session, a session for another office) is refused as
/// unauthenticated, never answered with what is wrong with the input.
#[tokio::test]
async fn bad_input_from_a_stranger_is_refused_as_unauthenticated() {
    let s = stack().await;
    let (_, elsewhere) = s
        .spawned
        .principal_at(
            lychd_proto::ward::v1::PrincipalKind::Human,
            "ward-only",
            &["ward"],
        )
        .await;
    let junk = format!("lws_{:064x}", 7);
    for token in [junk.as_str(), elsewhere.as_str()] {
        let mut c = pb::archive_client::ArchiveClient::new(s.spawned.channel_with(token));
        let bad_intake = c
            .intake(pb::IntakeRequest {
                namespace: "Bad Name".into(),
                ..Default::default()
            })
            .await
            .expect_err("stranger");
        let bad_recall = c
            .recall(pb::RecallRequest {
                namespace: "notes".into(),
                request_id: "has space".into(),
                ..Default::default()
            })
            .await
            .expect_err("stranger");
        for e in [bad_intake, bad_recall] {
            assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
            assert!(fields(&e).is_empty(), "nothing said about the input: {e:?}");
        }
    }
    // The tester, who authenticates, is told what is wrong.
    let mut tester = s.client.clone();
    let e = tester
        .recall(pb::RecallRequest {
            namespace: "notes".into(),
            request_id: "has space".into(),
            ..Default::default()
        })
        .await
        .expect_err("bad input");
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
}
