//! The retention job's cost per 100,000 rows (issue 30, "Numbers to report"), per office rule:
//! the Dispatcher's `leases` (a lease with its dispatch event and request per row) and the
//! Runner's `runs` (a finished run with three transitions and three checkpoints per row), each
//! run by the shared job in batches of 1,000 against one bare `DELETE` of the same rows in the
//! same run. Wall time and CPU (this process and the PostgreSQL cluster, from `/proc`) per
//! 100,000 rows; the pause between batches is set to 0 here (its wall cost is `pause_ms` ×
//! batches, idle).
//!
//! Run: `cargo bench -p lychd-e2e --bench retention` (needs PostgreSQL like the tests).

use std::time::{Duration, Instant};

use lychd_runtime::Office;
use lychd_testkit::bench::Cpu;

const ROWS: i64 = 100_000;
/// Rows still in use among them, which neither variant may delete.
const LIVE: i64 = 1_000;
const ROUNDS: usize = 3;

/// One office's rule: how to fill its schema, the bare statement an operator would run by
/// hand, and how to empty it again.
struct Scenario {
    office: Office,
    rule: &'static str,
    what: &'static str,
    fill: &'static str,
    bare: &'static str,
    /// Counts what is left (must be [`LIVE`]).
    left: &'static str,
    reset: &'static [&'static str],
}

const DISPATCHER: Scenario = Scenario {
    office: Office::Dispatcher,
    rule: "leases",
    what: "ended leases (+ event + request each)",
    fill: "
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
    ANALYZE dispatcher.lease_requests;",
    bare: "
    WITH doomed AS (SELECT id FROM dispatcher.leases
                     WHERE coalesce(released_at, expires_at) < now() - interval '7 days'),
         events AS (DELETE FROM dispatcher.dispatch_events
                     WHERE lease_id IN (SELECT id FROM doomed)),
         requests AS (DELETE FROM dispatcher.lease_requests
                       WHERE lease_id IN (SELECT id FROM doomed))
    DELETE FROM dispatcher.leases WHERE id IN (SELECT id FROM doomed)",
    left: "SELECT count(*) FROM dispatcher.leases",
    reset: &[
        "DELETE FROM dispatcher.dispatch_events",
        "DELETE FROM dispatcher.lease_requests",
        "DELETE FROM dispatcher.leases",
        "VACUUM (ANALYZE) dispatcher.leases",
        "VACUUM (ANALYZE) dispatcher.dispatch_events",
        "VACUUM (ANALYZE) dispatcher.lease_requests",
    ],
};

const RUNNER: Scenario = Scenario {
    office: Office::Runner,
    rule: "runs",
    what: "finished runs (+ 3 transitions + 3 checkpoints each)",
    fill: "
    INSERT INTO runner.runs (id, owner, request_id, request_sha256, workflow, workflow_sha256,
        workflow_name, workflow_version, state_schema_version, fsm_sha256, input, input_sha256,
        max_steps, max_tool_calls, max_retries_per_transition, max_wall_seconds,
        max_suspended_seconds, max_tokens, max_cost_milli, max_recursion_depth, max_parallelism,
        state, terminal_category, version, generation, created_at, updated_at)
    SELECT gen_random_uuid(), 'p', 'r-' || i, repeat('0', 64), '\\x00', repeat('0', 64), 'w',
           '1', '1', repeat('0', 64), '\\x00', repeat('0', 64), 8, 4, 1, 60, 60, 1000, 100, 1, 1,
           CASE WHEN i <= 100000 THEN 'SUCCEEDED' ELSE 'PLAN' END,
           CASE WHEN i <= 100000 THEN 'success' END, 3, 1,
           now() - interval '100 days',
           CASE WHEN i <= 100000 THEN now() - interval '100 days' ELSE now() END
      FROM generate_series(1, 101000) i;
    INSERT INTO runner.run_transitions (transition_id, run_id, version, generation,
        workflow_version, state_schema_version, source_state, target_state, trigger, actor)
    SELECT gen_random_uuid(), r.id, v, 1, '1', '1', 'A', 'B', 't', 'runner'
      FROM runner.runs r, generate_series(1, 3) v;
    INSERT INTO runner.run_checkpoints (run_id, version, generation, state, body, checksum)
    SELECT r.id, v, 1, 'B', '\\x00', repeat('0', 64) FROM runner.runs r, generate_series(1, 3) v;
    ANALYZE runner.runs; ANALYZE runner.run_transitions; ANALYZE runner.run_checkpoints;",
    bare: "
    WITH doomed AS (SELECT id FROM runner.runs
                     WHERE terminal_category IS NOT NULL
                       AND updated_at < now() - interval '90 days'),
         transitions AS (DELETE FROM runner.run_transitions
                          WHERE run_id IN (SELECT id FROM doomed)),
         checkpoints AS (DELETE FROM runner.run_checkpoints
                          WHERE run_id IN (SELECT id FROM doomed))
    DELETE FROM runner.runs WHERE id IN (SELECT id FROM doomed)",
    left: "SELECT count(*) FROM runner.runs",
    reset: &[
        "DELETE FROM runner.run_transitions",
        "DELETE FROM runner.run_checkpoints",
        "DELETE FROM runner.runs",
        "VACUUM (ANALYZE) runner.runs",
        "VACUUM (ANALYZE) runner.run_transitions",
        "VACUUM (ANALYZE) runner.run_checkpoints",
    ],
};

struct Case {
    wall: Duration,
    cpu: Cpu,
}

#[tokio::main]
async fn main() {
    let db = lychd_testkit::test_db_for(&[lychd_dispatcher::spec(), lychd_runner::spec()]).await;
    for scenario in [DISPATCHER, RUNNER] {
        measure(&db, &scenario).await;
    }
}

async fn measure(db: &lychd_testkit::TestDb, sc: &Scenario) {
    let office = sc.office;
    let mut su = db.superuser().await;
    let opts = lychd_runtime::db::connect_options(&db.runtime_url(office), None, office)
        .expect("runtime url");
    let pool = lychd_runtime::db::pool(opts, 2)
        .await
        .expect("runtime role");
    let prefix = format!("LYCHD_{}__RETENTION__", office.name().to_uppercase());
    let env = [("PAUSE_MS", "0"), ("MAX_BATCHES", "100000")]
        .map(|(k, v)| (format!("{prefix}{k}"), v.to_owned()));
    let config = lychd_runtime::config::OfficeConfig::load(office, None, env).expect("config");
    let rules = match office {
        Office::Dispatcher => lychd_dispatcher::service::retention::RULES,
        _ => lychd_runner::service::retention::RULES,
    };
    let mut settings = lychd_runtime::retention::Settings::load(&config, rules).expect("settings");
    settings.keep.retain(|(rule, _)| rule.name == sc.rule);
    let batch = settings.batch_size;

    let mut job = Vec::new();
    let mut bare = Vec::new();
    for _ in 0..ROUNDS {
        for variant in ["job", "bare"] {
            sqlx::raw_sql(sc.fill).execute(&mut su).await.expect("fill");
            sqlx::query("CHECKPOINT")
                .execute(&mut su)
                .await
                .expect("checkpoint");
            let (started, cpu) = (Instant::now(), Cpu::now());
            let deleted = if variant == "job" {
                lychd_runtime::retention::round(&pool, &settings)
                    .await
                    .of(sc.rule)
            } else {
                sqlx::query(sc.bare)
                    .execute(&pool)
                    .await
                    .expect("bare")
                    .rows_affected()
            };
            let case = Case {
                wall: started.elapsed(),
                cpu: cpu.per_call_since(1),
            };
            assert_eq!(deleted as i64, ROWS, "{variant} deleted every finished row");
            let left: i64 = sqlx::query_scalar(sc.left)
                .fetch_one(&mut su)
                .await
                .expect("count");
            assert_eq!(left, LIVE, "{variant} left the rows in use");
            for sql in sc.reset {
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
        "{office} `{}`: retention of {ROWS} {}, {LIVE} in use kept; batches of {batch}, pause 0; median of {ROUNDS}",
        sc.rule, sc.what
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
