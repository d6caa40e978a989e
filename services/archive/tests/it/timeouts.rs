//! Every Archive transaction has its own 2 s lock timeout: an operation that cannot take its
//! namespace row in time fails — a recall is then an error, never an empty result.

use std::time::{Duration, Instant};

use sqlx::Connection;
use tonic::Code;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_recall_blocked_by_a_held_lock_fails_instead_of_returning_empty() {
    let mut s = stack().await;
    promoted(&mut s.client, "notes", "doc://a", "1", "amber").await;
    let mut db = s.db().await;
    let mut tx = db.begin().await.expect("begin");
    // A mutation in progress elsewhere (held for longer than the lock timeout).
    sqlx::query("SELECT 1 FROM archive.namespaces WHERE name = 'notes' FOR UPDATE")
        .execute(&mut *tx)
        .await
        .expect("lock");
    let started = Instant::now();
    let result = s.client.recall(recall_req("notes", "q1", "amber")).await;
    let took = started.elapsed();
    refused(result, Code::DeadlineExceeded, "NAMESPACE_BUSY");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(5),
        "{took:?}"
    );
    tx.rollback().await.expect("release");
    // Nothing was kept of the failed recall; the same request id now recalls.
    let got = recall(&mut s.client, "notes", "q1", "amber").await;
    assert!(!got.replayed);
    assert_eq!(got.notes.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mutation_waits_for_recalls_and_fails_past_the_lock_timeout() {
    let mut s = stack().await;
    let n = promoted(&mut s.client, "notes", "doc://a", "1", "amber").await;
    let mut db = s.db().await;
    let mut tx = db.begin().await.expect("begin");
    // A recall in progress elsewhere: recalls share the row, mutations wait for it.
    sqlx::query("SELECT 1 FROM archive.namespaces WHERE name = 'notes' FOR SHARE")
        .execute(&mut *tx)
        .await
        .expect("lock");
    // Recalls still run alongside it.
    assert_eq!(
        recall(&mut s.client, "notes", "q1", "amber")
            .await
            .notes
            .len(),
        1
    );
    refused(
        s.client.revoke(change(&n)).await,
        Code::DeadlineExceeded,
        "NAMESPACE_BUSY",
    );
    tx.rollback().await.expect("release");
    revoke(&mut s.client, &n).await;
}
