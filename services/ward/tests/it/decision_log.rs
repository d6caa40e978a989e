//! The decision log against a real PostgreSQL: records are written in the order they were
//! queued and `flush` waits for them; the writer finishes what is queued when the last handle
//! drops; a log that cannot write refuses more records instead of answering unrecorded.

use std::time::Duration;

use lychd_ward::error::WardError;
use lychd_ward::store::decision_log::{BATCH, CAPACITY, DecisionLog, Entry};
use serde_json::json;

use crate::common::Ward;

fn entry(i: usize) -> Entry {
    Entry {
        event: "authorize.allow",
        actor_id: None,
        subject_id: None,
        detail: json!({ "i": i }),
    }
}

async fn written(w: &Ward) -> Vec<i64> {
    let mut su = w.superuser().await;
    sqlx::query_scalar(
        "SELECT (detail->>'i')::bigint FROM ward.audit WHERE detail ? 'i' ORDER BY seq",
    )
    .fetch_all(&mut su)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn records_are_written_in_queue_order_and_flush_waits_for_them() {
    let w = Ward::new().await;
    let (log, _writer) = DecisionLog::start(w.pool.clone());
    let n = BATCH * 3 + 7;
    for i in 0..n {
        log.record(entry(i)).expect("queued");
    }
    log.flush().await.expect("flushed");
    let got = written(&w).await;
    assert_eq!(got, (0..n as i64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_writer_finishes_what_is_queued_when_the_last_handle_drops() {
    let w = Ward::new().await;
    let (log, writer) = DecisionLog::start(w.pool.clone());
    for i in 0..100 {
        log.clone().record(entry(i)).expect("queued");
    }
    drop(log);
    tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the writer ends")
        .expect("the writer did not panic");
    assert_eq!(written(&w).await.len(), 100);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_that_cannot_write_refuses_more_records() {
    // A pool to a port nothing listens on: every write fails and is retried.
    let port = lychd_testkit::verify::free_port();
    let opts = lychd_runtime::db::connect_options(
        &format!("postgres://nobody@127.0.0.1:{port}/none"),
        None,
        lychd_runtime::Office::Ward,
    )
    .expect("options");
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(200))
        .connect_lazy_with(opts);
    let (log, writer) = DecisionLog::start(pool);
    let mut queued = 0;
    let refused = loop {
        match log.record(entry(queued)) {
            Ok(()) => queued += 1,
            Err(e) => break e,
        }
        assert!(queued <= CAPACITY + BATCH, "the queue is bounded");
        if queued % 1000 == 0 {
            // Let the writer take its first batch.
            tokio::task::yield_now().await;
        }
    };
    assert!(
        matches!(refused, WardError::DecisionLogUnavailable),
        "{refused:?}"
    );
    assert!(queued >= CAPACITY, "refused only when full: {queued}");
    let status = tonic::Status::from(refused);
    assert_eq!(status.code(), tonic::Code::Unavailable);
    // Nothing was lost: flushing waits for writes that cannot happen.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), log.flush())
            .await
            .is_err(),
        "a flush does not pretend the records were written"
    );
    writer.abort();
}
