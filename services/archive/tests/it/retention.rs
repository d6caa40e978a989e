//! Retention of recall receipts (issue 30 item 3), the office's rule run by the shared job
//! against the real schema as the runtime role: receipts older than the age go, in bounded
//! batches; recent ones stay.

use lychd_runtime::Office;

#[tokio::test]
async fn old_receipts_go_in_bounded_batches_and_recent_ones_stay() {
    let db = lychd_testkit::test_db_for(&[lychd_archive::spec()]).await;
    let mut su = db.superuser().await;
    sqlx::query(
        "INSERT INTO archive.namespaces (name, owner, policy_revision) VALUES ('ops', 'p', 1)",
    )
    .execute(&mut su)
    .await
    .expect("namespace");
    // 25 receipts a year and a half old, 3 from yesterday.
    sqlx::query(
        "INSERT INTO archive.recall_receipts (id, namespace, request_id, request_digest, subject,
             purpose, policy_revision, query_digest, max_results, max_chars, selected_ids,
             selected_versions, projection_digests, scores, omitted_ids, created_at)
         SELECT gen_random_uuid(), 'ops', 'r-' || i, sha256(i::text::bytea), 'p', 'answer', 1,
                sha256(i::text::bytea), 5, 100, '{}', '{}', '{}', '{}', '{}',
                now() - CASE WHEN i <= 25 THEN interval '540 days' ELSE interval '1 day' END
           FROM generate_series(1, 28) i",
    )
    .execute(&mut su)
    .await
    .expect("receipts");
    let opts =
        lychd_runtime::db::connect_options(&db.runtime_url(Office::Archive), None, Office::Archive)
            .expect("runtime url");
    let pool = lychd_runtime::db::pool(opts, 2)
        .await
        .expect("runtime role");
    let env = [("BATCH_SIZE", "10"), ("PAUSE_MS", "0")]
        .map(|(k, v)| (format!("LYCHD_ARCHIVE__RETENTION__{k}"), v.to_owned()));
    let config =
        lychd_runtime::config::OfficeConfig::load(Office::Archive, None, env).expect("config");
    let settings = lychd_archive::service::retention::settings(&config).expect("settings");
    // One batch at most: ten of them.
    let rule = settings.keep[0];
    let one = lychd_runtime::retention::batch(&pool, rule.0, rule.1, settings.batch_size)
        .await
        .expect("batch");
    assert_eq!(one, 10, "a batch is bounded");
    let swept = lychd_archive::service::retention::round(&pool, &settings).await;
    assert_eq!(swept.of("recall_receipts"), 15);
    let left: Vec<String> =
        sqlx::query_scalar("SELECT request_id FROM archive.recall_receipts ORDER BY request_id")
            .fetch_all(&mut su)
            .await
            .expect("left");
    assert_eq!(left, ["r-26", "r-27", "r-28"]);
}
