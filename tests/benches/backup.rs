//! Backup and restore time for a large database (issue 30, "Numbers to report"), by the
//! procedure of `docs/operations.md` ("Backup and restore"): the test kit's database filled
//! with Dispatcher leases and their dispatch events to `LYCHD_BENCH_BACKUP_MB` (default 1024)
//! MiB, `pg_dump -Fc` of it, and `pg_restore --create` into a fresh cluster started with
//! production durability. Reports sizes, times and the rate per GiB.
//!
//! Run: `cargo bench -p lychd-e2e --bench backup` (needs PostgreSQL like the tests).

use std::time::Instant;

use lychd_testkit::backup::{FreshCluster, dump, dump_roles};

const CHUNK: i64 = 200_000;

#[tokio::main]
async fn main() {
    let target_mb: i64 = std::env::var("LYCHD_BENCH_BACKUP_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let db = lychd_testkit::test_db_for(&[lychd_dispatcher::spec()]).await;
    let mut su = db.superuser().await;
    sqlx::query("INSERT INTO dispatcher.admission (animator) VALUES ('gpu0')")
        .execute(&mut su)
        .await
        .expect("admission");
    let filling = Instant::now();
    let mut rows = 0;
    while size(&mut su).await < target_mb * 1024 * 1024 {
        sqlx::raw_sql(&format!(
            "WITH l AS (
                 INSERT INTO dispatcher.leases (id, capability_key, family, model_id, animator,
                     holder, principal_id, run_id, attempt_id, priority, admission_generation,
                     issued_at, expires_at, released_at, request_id)
                 SELECT gen_random_uuid(), 'gpu0:chat:qwen3-0.6b', 'chat', 'qwen3-0.6b', 'gpu0',
                        'worker-' || (i % 64), 'b5a4c1f2-3d4e-4f50-8a6b-7c8d9e0f1a2b',
                        'run-' || (i / 10), (i % 10)::text, 50, 0, now(),
                        now() + interval '10 minutes', now() + interval '1 minute',
                        'request-' || {rows} + i
                   FROM generate_series(1, {CHUNK}) i
                 RETURNING id, capability_key, animator, holder, run_id, attempt_id, priority,
                           issued_at)
             INSERT INTO dispatcher.dispatch_events (lease_id, capability_key, animator, holder,
                 run_id, attempt_id, priority, admitted_at)
             SELECT id, capability_key, animator, holder, run_id, attempt_id, priority, issued_at
               FROM l"
        ))
        .execute(&mut su)
        .await
        .expect("fill");
        rows += CHUNK;
    }
    sqlx::query("CHECKPOINT")
        .execute(&mut su)
        .await
        .expect("checkpoint");
    let bytes = size(&mut su).await;
    let gib = bytes as f64 / (1024.0 * 1024.0 * 1024.0);
    println!(
        "database: {:.0} MiB ({rows} leases + as many events), filled in {:.0} s",
        bytes as f64 / 1048576.0,
        filling.elapsed().as_secs_f64()
    );
    let files = tempfile::tempdir().expect("temp dir");
    let (roles, data) = (
        files.path().join("roles.sql"),
        files.path().join("lychd.dump"),
    );
    dump_roles(&db, &roles);
    let dumped = dump(&db, None, &data);
    let dump_mb = std::fs::metadata(&data).expect("dump").len() as f64 / 1048576.0;
    let fresh = FreshCluster::start_with(lychd_pg::Durability::Durable);
    let restored = fresh.restore(&roles, &data);
    let (d, r) = (dumped.as_secs_f64(), restored.as_secs_f64());
    println!(
        "pg_dump -Fc:           {d:>7.1} s  ({dump_mb:.0} MiB file)  {:.1} s/GiB",
        d / gib
    );
    println!(
        "pg_restore --create:   {r:>7.1} s  (durable cluster)     {:.1} s/GiB",
        r / gib
    );
    drop(fresh);
    sqlx::raw_sql("DELETE FROM dispatcher.dispatch_events; DELETE FROM dispatcher.leases")
        .execute(&mut su)
        .await
        .expect("clean");
}

async fn size(su: &mut sqlx::PgConnection) -> i64 {
    sqlx::query_scalar("SELECT pg_database_size(current_database())")
        .fetch_one(su)
        .await
        .expect("size")
}
