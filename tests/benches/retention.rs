//! The retention job's cost per 100,000 rows (issue 30, "Numbers to report"): the Dispatcher's
//! `leases` rule (a lease with its dispatch event and request per row) run by the shared job in
//! batches of 1,000, against one bare `DELETE` of the same rows in the same run. Wall time and
//! CPU (this process and the PostgreSQL cluster, from `/proc`) per 100,000 rows; the pause
//! between batches is set to 0 here (its wall cost is `pause_ms` × batches, idle).
//!
//! Run: `cargo bench -p lychd-e2e --bench retention` (needs PostgreSQL like the tests).

use std::time::{Duration, Instant};

use lychd_runtime::Office;
use lychd_testkit::bench::Cpu;

const ROWS: i64 = 100_000;
/// Live leases among them, which neither variant may delete.
const LIVE: i64 = 1_000;
const ROUNDS: usize = 3;

const FILL: &str = "
    INSERT INTO dispatcher.admission (animator) VALUES ('gpu0') ON CONFLICT DO NOTHING;
    INSERT INTO dispatcher.leases (id, capability_key, family, model_id, animator, holder,
        principal_id, priority, admission_generation, issued_at, expires_at, released_at)
    SELECT gen_random_uuid(), 'gpu0:chat:m', 'chat', 'm', 'gpu0', 'bench', 'p', 50, 0,
           now() - interval '30 days', now() - interval '30 days' + interval '10 minutes',
           CASE WHEN i % 2 = 0 THEN now() - interval '30 days' + interval '1 minute' END
      FROM generate_series(1, 100000) i;
    INSERT INTO dispatcher.leases (id, capability_key, family, model_id, animator, holder,
        principal_id, priority, admission_generation, issued_at, expires_at)
    SELECT gen_random_uuid(), 'gpu0:chat:m', 'chat', 'm', 'gpu0', 'live', 'p', 50, 0,
           now(), now() + interval '1 hour'
      FROM generate_series(1, 1000) i;
    INSERT INTO dispatcher.dispatch_events (lease_id, capability_key, animator, holder, run_id,
        attempt_id, priority, admitted_at)
    SELECT id, capability_key, animator, holder, '', '', priority, issued_at
      FROM dispatcher.leases;
    INSERT INTO dispatcher.lease_requests (request_id, principal_id, demand, outcome, lease_id,
        answered_at)
    SELECT 'r-' || id, principal_id, '{}', 'GRANTED', id, issued_at FROM dispatcher.leases;
    ANALYZE dispatcher.leases; ANALYZE dispatcher.dispatch_events;
    ANALYZE dispatcher.lease_requests;";

/// The same rows in one statement each way, as an operator would by hand.
const BARE: &str = "
    WITH doomed AS (SELECT id FROM dispatcher.leases
                     WHERE coalesce(released_at, expires_at) < now() - interval '7 days'),
         events AS (DELETE FROM dispatcher.dispatch_events
                     WHERE lease_id IN (SELECT id FROM doomed)),
         requests AS (DELETE FROM dispatcher.lease_requests
                       WHERE lease_id IN (SELECT id FROM doomed))
    DELETE FROM dispatcher.leases WHERE id IN (SELECT id FROM doomed)";

struct Case {
    wall: Duration,
    cpu: Cpu,
}

#[tokio::main]
async fn main() {
    let db = lychd_testkit::test_db_for(&[lychd_dispatcher::spec()]).await;
    let mut su = db.superuser().await;
    let opts = lychd_runtime::db::connect_options(
        &db.runtime_url(Office::Dispatcher),
        None,
        Office::Dispatcher,
    )
    .expect("runtime url");
    let pool = lychd_runtime::db::pool(opts, 2)
        .await
        .expect("runtime role");
    let env = [("PAUSE_MS", "0"), ("MAX_BATCHES", "100000")]
        .map(|(k, v)| (format!("LYCHD_DISPATCHER__RETENTION__{k}"), v.to_owned()));
    let config =
        lychd_runtime::config::OfficeConfig::load(Office::Dispatcher, None, env).expect("config");
    let mut settings = lychd_dispatcher::service::retention::settings(&config).expect("settings");
    settings.keep.retain(|(rule, _)| rule.name == "leases");
    let batch = settings.batch_size;

    let mut job = Vec::new();
    let mut bare = Vec::new();
    for _ in 0..ROUNDS {
        for variant in ["job", "bare"] {
            sqlx::raw_sql(FILL).execute(&mut su).await.expect("fill");
            sqlx::query("CHECKPOINT")
                .execute(&mut su)
                .await
                .expect("checkpoint");
            let (started, cpu) = (Instant::now(), Cpu::now());
            let deleted = if variant == "job" {
                lychd_dispatcher::service::retention::round(&pool, &settings)
                    .await
                    .of("leases")
            } else {
                sqlx::query(BARE)
                    .execute(&pool)
                    .await
                    .expect("bare")
                    .rows_affected()
            };
            let case = Case {
                wall: started.elapsed(),
                cpu: cpu.per_call_since(1),
            };
            assert_eq!(deleted as i64, ROWS, "{variant} deleted every ended lease");
            let left: i64 = sqlx::query_scalar("SELECT count(*) FROM dispatcher.leases")
                .fetch_one(&mut su)
                .await
                .expect("count");
            assert_eq!(left, LIVE, "{variant} left the live leases");
            for sql in [
                "DELETE FROM dispatcher.dispatch_events",
                "DELETE FROM dispatcher.lease_requests",
                "DELETE FROM dispatcher.leases",
                "VACUUM (ANALYZE) dispatcher.leases",
                "VACUUM (ANALYZE) dispatcher.dispatch_events",
                "VACUUM (ANALYZE) dispatcher.lease_requests",
            ] {
                sqlx::query(sql).execute(&mut su).await.expect("reset");
            }
            if variant == "job" {
                job.push(case)
            } else {
                bare.push(case)
            }
        }
    }
    let median = |cases: &mut Vec<Case>| {
        cases.sort_by_key(|c| c.wall);
        let m = &cases[cases.len() / 2];
        (m.wall, m.cpu)
    };
    let (jw, jc) = median(&mut job);
    let (bw, bc) = median(&mut bare);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "retention of {ROWS} ended leases (+ event + request each), {LIVE} live kept; batches of {batch}, pause 0; median of {ROUNDS}"
    );
    println!(
        "{:<6} {:>10} {:>14} {:>14}",
        "", "wall ms", "cpu bench ms", "cpu pg ms"
    );
    println!(
        "{:<6} {:>10.0} {:>14.0} {:>14.0}",
        "job",
        ms(jw),
        ms(jc.process),
        ms(jc.database)
    );
    println!(
        "{:<6} {:>10.0} {:>14.0} {:>14.0}",
        "bare",
        ms(bw),
        ms(bc.process),
        ms(bc.database)
    );
    println!(
        "ratio job/bare: wall {:.2}, cpu {:.2}",
        jw.as_secs_f64() / bw.as_secs_f64(),
        jc.total().as_secs_f64() / bc.total().as_secs_f64().max(1e-9)
    );
}
