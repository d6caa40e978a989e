//! Retention of transitions (issue 30 item 3), the office's rule run by the shared job against
//! the real schema as the runtime role: a finished transition older than the age goes with its
//! events, requests and cleared guard; a contained one (recovered or not), one with an armed
//! runtime guard, one still open and a recent one all stay.

use lychd_runtime::Office;
use sqlx::PgConnection;

pub(crate) fn id(n: u8) -> String {
    format!("{n:032x}")
}

/// A transition `n` in `phase`, requested and journalled `age` ago, final when `done`.
pub(crate) async fn transition(su: &mut PgConnection, n: u8, phase: &str, age: &str, done: bool) {
    let id = id(n);
    sqlx::query(
        "INSERT INTO orchestrator.transitions (id, capability_key, priority, requested_by, action,
             phase, config_digest, target_animator, evict, launch, expected_active, affected,
             created_at, updated_at)
         VALUES ($1, 'gpu0:chat:m', 50, 'tester', 'HARD_SWAP', $2, 'sha256:x', 'gpu0', '{}',
                 '{gpu0}', '{}', '{gpu0}', now() - $3::interval, now() - $3::interval)",
    )
    .bind(&id)
    .bind(phase)
    .bind(age)
    .execute(&mut *su)
    .await
    .expect("transition");
    sqlx::query(
        "INSERT INTO orchestrator.transition_requests (requested_by, request_id, transition_id,
             capability_key, priority, joined, created_at)
         VALUES ('tester', $1, $1, 'gpu0:chat:m', 50, false, now() - $2::interval)",
    )
    .bind(&id)
    .bind(age)
    .execute(&mut *su)
    .await
    .expect("request");
    for (event, fin) in [("requested", false), ("draining", false), (phase, done)] {
        sqlx::query(
            "INSERT INTO orchestrator.transition_events (transition_id, capability_key, priority,
                 phase, final, recorded_at)
             VALUES ($1, 'gpu0:chat:m', 50, $2, $3, now() - $4::interval)",
        )
        .bind(&id)
        .bind(event)
        .bind(fin)
        .bind(age)
        .execute(&mut *su)
        .await
        .expect("event");
    }
}

async fn count(su: &mut PgConnection, table: &str, n: u8) -> i64 {
    let column = if table == "transitions" {
        "id"
    } else {
        "transition_id"
    };
    sqlx::query_scalar(&format!(
        "SELECT count(*) FROM orchestrator.{table} WHERE {column} = $1"
    ))
    .bind(id(n))
    .fetch_one(&mut *su)
    .await
    .expect("count")
}

#[tokio::test]
async fn finished_transitions_go_and_contained_guarded_open_or_recent_ones_stay() {
    let db = lychd_testkit::test_db_for(&[lychd_orchestrator::spec()]).await;
    let mut su = db.superuser().await;
    let su = &mut su;
    let opts = lychd_runtime::db::connect_options(
        &db.runtime_url(Office::Orchestrator),
        None,
        Office::Orchestrator,
    )
    .expect("runtime url");
    let pool = lychd_runtime::db::pool(opts, 2)
        .await
        .expect("runtime role");

    transition(su, 1, "completed", "40 days", true).await; // goes
    transition(su, 2, "failed_restored", "40 days", true).await; // goes, with its cleared guard
    transition(su, 3, "contained_uncertain", "40 days", true).await; // contained: stays
    transition(su, 4, "completed", "40 days", true).await; // recovered containment: stays
    transition(su, 5, "completed", "40 days", true).await; // armed guard: stays
    transition(su, 6, "actuating", "40 days", false).await; // open: stays
    transition(su, 7, "completed", "1 day", true).await; // recent: stays
    sqlx::query(
        "INSERT INTO orchestrator.containments (transition_id, cause, recovered_at, recovered_by)
         VALUES ($1, 'uncertain', NULL, NULL), ($2, 'uncertain', now(), 'operator')",
    )
    .bind(id(3))
    .bind(id(4))
    .execute(&mut *su)
    .await
    .expect("containments");
    sqlx::query(
        "INSERT INTO orchestrator.runtime_guards (transition_id, target_animator, capability_key,
             cleared_at, cleared_by)
         VALUES ($1, 'gpu0', 'gpu0:chat:m', now(), 'NOT_INVOKED'),
                ($2, 'gpu0', 'gpu0:chat:m', NULL, NULL)",
    )
    .bind(id(2))
    .bind(id(5))
    .execute(&mut *su)
    .await
    .expect("guards");

    // The office's own settings: thirty days, in batches of one (several batches a round).
    let env = [("BATCH_SIZE", "1"), ("PAUSE_MS", "0")]
        .map(|(k, v)| (format!("LYCHD_ORCHESTRATOR__RETENTION__{k}"), v.to_owned()));
    let config =
        lychd_runtime::config::OfficeConfig::load(Office::Orchestrator, None, env).expect("config");
    let settings = lychd_orchestrator::service::retention::settings(&config).expect("settings");
    let swept = lychd_orchestrator::service::retention::round(&pool, &settings).await;
    assert_eq!(swept.of("transitions"), 2, "{swept:?}");
    for n in [1, 2] {
        for table in [
            "transitions",
            "transition_events",
            "transition_requests",
            "runtime_guards",
        ] {
            assert_eq!(count(su, table, n).await, 0, "{table} of {n}");
        }
    }
    for n in 3..=7 {
        assert_eq!(count(su, "transitions", n).await, 1, "transition {n} stays");
        assert_eq!(
            count(su, "transition_events", n).await,
            3,
            "events of {n} stay"
        );
        assert_eq!(
            count(su, "transition_requests", n).await,
            1,
            "request of {n} stays"
        );
    }
    assert_eq!(
        count(su, "containments", 3).await + count(su, "containments", 4).await,
        2
    );
    // A second round finds nothing more.
    let again = lychd_orchestrator::service::retention::round(&pool, &settings).await;
    assert_eq!(again.total(), 0);
}
