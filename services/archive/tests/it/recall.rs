//! Recall: exactly the promoted notes of exactly one namespace, ranked with a stable tie break,
//! fitted whole to the budget, with a text-free receipt; a miss is an empty success.

use std::time::Instant;

use lychd_proto::archive::v1 as pb;
use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn recall_never_returns_candidate_archived_revoked_or_other_namespace_notes() {
    let mut s = stack().await;
    let c = &mut s.client;
    let eligible = promoted(c, "notes", "doc://p", "1", "lantern promoted").await;
    intake(
        c,
        note("notes", "cand", "doc://c", "1", "lantern candidate"),
    )
    .await;
    let a = promoted(c, "notes", "doc://a", "1", "lantern archived").await;
    archive(c, &a).await;
    let r = promoted(c, "notes", "doc://r", "1", "lantern revoked").await;
    revoke(c, &r).await;
    let old = promoted(c, "notes", "doc://s", "1", "lantern superseded").await;
    let new = promoted(c, "notes", "doc://s", "2", "lantern successor").await;
    promoted(c, "elsewhere", "doc://p", "1", "lantern elsewhere").await;

    let got = recall(c, "notes", "q1", "lantern").await;
    let mut want = vec![eligible.revision_id.clone(), new.revision_id.clone()];
    want.sort();
    let mut seen = ids(&got.notes);
    seen.sort();
    assert_eq!(seen, want);
    assert!(!seen.contains(&old.revision_id));
    for n in &got.notes {
        assert_eq!(
            n.note.as_ref().expect("note").state,
            pb::LifecycleState::Promoted as i32
        );
    }
}

#[tokio::test]
async fn a_miss_is_an_empty_success_with_its_receipt() {
    let mut s = stack().await;
    promoted(&mut s.client, "notes", "doc://a", "1", "amber").await;
    let got = recall(&mut s.client, "notes", "q1", "nothing-matches").await;
    assert!(got.notes.is_empty());
    let receipt = got.receipt.expect("a receipt even for a miss");
    assert!(receipt.selected.is_empty());
    assert!(receipt.omitted_revision_ids.is_empty());
    // A namespace that does not exist is not a miss.
    refused(
        s.client.recall(recall_req("nowhere", "q1", "amber")).await,
        Code::NotFound,
        "NAMESPACE_NOT_FOUND",
    );
}

#[tokio::test]
async fn equal_scores_are_ordered_by_revision_id_and_results_are_bounded() {
    let mut s = stack().await;
    let mut all = Vec::new();
    for i in 0..6 {
        let n = promoted(
            &mut s.client,
            "notes",
            &format!("doc://{i}"),
            "1",
            "same words",
        )
        .await;
        all.push(n.revision_id);
    }
    all.sort();
    let got = s
        .client
        .recall(pb::RecallRequest {
            max_results: 4,
            ..recall_req("notes", "q1", "same words")
        })
        .await
        .expect("recall")
        .into_inner();
    assert_eq!(ids(&got.notes), all[..4]);
    let scores: Vec<f32> = got.notes.iter().map(|n| n.score).collect();
    assert!(scores.windows(2).all(|w| w[0] == w[1]), "{scores:?}");
}

#[tokio::test]
async fn better_matches_rank_first() {
    let mut s = stack().await;
    let weak = promoted(
        &mut s.client,
        "notes",
        "doc://w",
        "1",
        "amber and many other words here",
    )
    .await;
    let strong = promoted(&mut s.client, "notes", "doc://s", "1", "amber amber amber").await;
    let got = recall(&mut s.client, "notes", "q1", "amber").await;
    assert_eq!(ids(&got.notes), [strong.revision_id, weak.revision_id]);
    assert!(got.notes[0].score > got.notes[1].score);
}

#[tokio::test]
async fn whole_notes_are_fitted_to_the_character_budget_and_omissions_reported() {
    let mut s = stack().await;
    // One occurrence of the term each: equal scores (`ts_rank` without length normalization),
    // so the rank order is the revision id order.
    let a = promoted(&mut s.client, "notes", "doc://a", "1", "kite").await; // 4 chars
    let b = promoted(
        &mut s.client,
        "notes",
        "doc://b",
        "1",
        "kite with a long tail",
    )
    .await; // 21
    let c = promoted(
        &mut s.client,
        "notes",
        "doc://c",
        "1",
        "kite tail longer still and more",
    )
    .await; // 31
    let got = s
        .client
        .recall(pb::RecallRequest {
            max_chars: 30,
            ..recall_req("notes", "q1", "kite")
        })
        .await
        .expect("recall")
        .into_inner();
    let mut kept = vec![a.revision_id.clone(), b.revision_id.clone()];
    kept.sort();
    assert_eq!(
        ids(&got.notes),
        kept,
        "the 31-character note does not fit 30"
    );
    for n in &got.notes {
        assert_eq!(
            n.text.chars().count() as u32,
            n.note.as_ref().expect("note").chars,
            "never cut"
        );
    }
    let receipt = got.receipt.expect("receipt");
    assert_eq!(receipt.omitted_revision_ids, [c.revision_id]);
    // A budget smaller than any note: nothing selected, everything omitted (not an error).
    let got = s
        .client
        .recall(pb::RecallRequest {
            max_chars: 3,
            ..recall_req("notes", "q2", "kite")
        })
        .await
        .expect("recall")
        .into_inner();
    assert!(got.notes.is_empty());
    assert_eq!(got.receipt.expect("receipt").omitted_revision_ids.len(), 3);
}

#[tokio::test]
async fn the_receipt_keeps_no_query_or_note_text() {
    let mut s = stack().await;
    promoted(&mut s.client, "notes", "doc://a", "1", "zeppelin marmalade").await;
    let got = recall(&mut s.client, "notes", "q1", "zeppelin").await;
    let receipt = got.receipt.expect("receipt");
    assert_eq!(receipt.selected.len(), 1);
    assert_eq!(receipt.purpose, "answer");
    assert_eq!(receipt.policy_revision, 1);
    assert_eq!(receipt.subject, s.spawned.tester_id);
    use sha2::Digest;
    assert_eq!(
        receipt.query_digest,
        hex::encode(sha2::Sha256::digest("zeppelin")),
        "the query's SHA-256"
    );
    let mut db = s.db().await;
    let row: String = sqlx::query_scalar("SELECT r::text FROM archive.recall_receipts r")
        .fetch_one(&mut db)
        .await
        .expect("receipt row");
    assert!(
        !row.contains("zeppelin") && !row.contains("marmalade"),
        "{row}"
    );
}

#[tokio::test]
async fn the_same_request_id_replays_its_receipt_and_another_request_under_it_refuses() {
    let mut s = stack().await;
    promoted(&mut s.client, "notes", "doc://a", "1", "amber").await;
    let first = recall(&mut s.client, "notes", "q1", "amber").await;
    let again = recall(&mut s.client, "notes", "q1", "amber").await;
    assert!(again.replayed);
    assert_eq!(again.receipt, first.receipt);
    assert_eq!(ids(&again.notes), ids(&first.notes));
    refused(
        s.client.recall(recall_req("notes", "q1", "basalt")).await,
        Code::AlreadyExists,
        "RECALL_REQUEST_CONFLICT",
    );
}

/// A revocation whose answer came back before a recall was sent is never in that recall, even
/// with recalls running against it all along.
#[tokio::test(flavor = "multi_thread")]
async fn a_revocation_committed_before_a_recall_is_never_returned_by_it() {
    let mut s = stack().await;
    for round in 0..8 {
        let n = promoted(
            &mut s.client,
            "notes",
            &format!("doc://{round}"),
            "1",
            "beacon",
        )
        .await;
        let mut reviser = s.client.clone();
        let revoking = tokio::spawn(async move {
            reviser.revoke(change(&n)).await.expect("revoke");
            Instant::now()
        });
        let mut recalls = Vec::new();
        let mut i = 0;
        let revoked_at = loop {
            let sent = Instant::now();
            let got = recall(&mut s.client, "notes", &format!("q{round}-{i}"), "beacon").await;
            recalls.push((sent, got.notes.len()));
            i += 1;
            if revoking.is_finished() {
                break revoking.await.expect("join");
            }
        };
        for j in 0..3 {
            let sent = Instant::now();
            let got = recall(
                &mut s.client,
                "notes",
                &format!("q{round}-after{j}"),
                "beacon",
            )
            .await;
            recalls.push((sent, got.notes.len()));
        }
        for (sent, found) in recalls {
            if sent > revoked_at {
                assert_eq!(
                    found, 0,
                    "round {round}: a recall after the revocation found it"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_note_too_long_for_what_is_left_is_skipped_and_a_later_shorter_one_still_fits() {
    let mut s = stack().await;
    let first = promoted(&mut s.client, "notes", "doc://1", "1", "kite kite kite").await; // 14
    let second = promoted(
        &mut s.client,
        "notes",
        "doc://2",
        "1",
        "kite kite and a long long tail here",
    )
    .await; // 35
    let third = promoted(&mut s.client, "notes", "doc://3", "1", "kite").await; // 4
    let got = s
        .client
        .recall(pb::RecallRequest {
            max_chars: 20,
            ..recall_req("notes", "q1", "kite")
        })
        .await
        .expect("recall")
        .into_inner();
    assert_eq!(ids(&got.notes), [first.revision_id, third.revision_id]);
    assert!(got.notes[0].score > got.notes[1].score);
    assert_eq!(
        got.receipt.expect("receipt").omitted_revision_ids,
        [second.revision_id]
    );
}
