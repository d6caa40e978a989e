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
    assert!(took >= Duration::from_secs(2), "{took:?}");
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

#[tokio::test(flavor = "multi_thread")]
async fn every_transaction_sets_its_own_timeouts_and_a_statement_past_five_seconds_is_an_error() {
    use lychd_archive::error::ArchiveError;
    let s = stack().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&s.spawned.db.runtime_url(lychd_runtime::Office::Archive))
        .await
        .expect("runtime pool");
    let mut tx = lychd_archive::store::begin(&pool).await.expect("begin");
    let set: (String, String) = sqlx::query_as(
        "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')",
    )
    .fetch_one(&mut *tx)
    .await
    .expect("settings");
    assert_eq!(set, ("5s".to_owned(), "2s".to_owned()));
    let e = sqlx::query("SELECT pg_sleep(6)")
        .execute(&mut *tx)
        .await
        .expect_err("cancelled by the statement timeout");
    let status = tonic::Status::from(ArchiveError::Database(e));
    assert_eq!(
        (status.code(), reason(&status).as_str()),
        (Code::DeadlineExceeded, "DATABASE_TIMEOUT")
    );
    drop(tx);
    // The same connection, after the transaction: its own defaults, untouched.
    let after: (String, String) = sqlx::query_as(
        "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')",
    )
    .fetch_one(&pool)
    .await
    .expect("settings");
    assert_eq!(after, ("0".to_owned(), "0".to_owned()));
}
