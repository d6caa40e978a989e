//! The Orchestrator's database gauges (issue 30 item 2): the statement the runtime's poller runs
//! counts transitions by phase (an open one, or the outcome) and action, and containments open
//! or recovered (both always reported).

use lychd_orchestrator::store::metrics::{CONTAINMENTS, TRANSITIONS, read};
use lychd_runtime::Office;
use lychd_runtime::metrics::Reading;

use crate::retention::{id, transition};

fn value(readings: &[Reading], gauge: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = readings
        .iter()
        .filter(|r| {
            r.gauge == gauge
                && labels.iter().all(|(k, v)| {
                    r.attributes
                        .iter()
                        .any(|kv| kv.key.as_str() == *k && kv.value.as_str() == *v)
                })
        })
        .map(|r| r.value)
        .collect();
    assert_eq!(found.len(), 1, "one {gauge} {labels:?}: {readings:?}");
    found[0]
}

#[tokio::test]
async fn transitions_are_counted_by_phase_and_action_and_containments_by_state() {
    let db = lychd_testkit::test_db_for(&[lychd_orchestrator::spec()]).await;
    let opts = lychd_runtime::db::connect_options(
        &db.runtime_url(Office::Orchestrator),
        None,
        Office::Orchestrator,
    )
    .expect("runtime url");
    let pool = lychd_runtime::db::pool(opts, 2)
        .await
        .expect("runtime role");
    let empty = read(pool.clone()).await.expect("read");
    assert_eq!(value(&empty, CONTAINMENTS, &[("state", "open")]), 0.0);
    assert_eq!(value(&empty, CONTAINMENTS, &[("state", "recovered")]), 0.0);
    assert!(empty.iter().all(|r| r.gauge != TRANSITIONS), "{empty:?}");

    let mut su = db.superuser().await;
    transition(&mut su, 1, "completed", "1 day", true).await;
    transition(&mut su, 2, "completed", "1 hour", true).await;
    transition(&mut su, 3, "contained_uncertain", "1 hour", true).await;
    transition(&mut su, 4, "actuating", "1 minute", false).await;
    sqlx::query(
        "INSERT INTO orchestrator.containments (transition_id, cause, recovered_at, recovered_by)
         VALUES ($1, 'uncertain', NULL, NULL)",
    )
    .bind(id(3))
    .execute(&mut su)
    .await
    .expect("containment");
    let read = read(pool).await.expect("read");
    let hard = ("action", "HARD_SWAP");
    assert_eq!(
        value(&read, TRANSITIONS, &[("phase", "completed"), hard]),
        2.0
    );
    assert_eq!(
        value(
            &read,
            TRANSITIONS,
            &[("phase", "contained_uncertain"), hard]
        ),
        1.0
    );
    assert_eq!(
        value(&read, TRANSITIONS, &[("phase", "actuating"), hard]),
        1.0
    );
    assert_eq!(value(&read, CONTAINMENTS, &[("state", "open")]), 1.0);
    assert_eq!(value(&read, CONTAINMENTS, &[("state", "recovered")]), 0.0);
}
