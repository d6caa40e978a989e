//! The Dispatcher's database gauges (issue 30 item 2): the statement the runtime's poller runs
//! counts live leases as `active` by the one `live!` rule and unreleased ones past their
//! deadline as `expired`, released ones not at all, and animators whose admission is closed.

use lychd_dispatcher::store::metrics::{ADMISSION_CLOSED, CLOSURES_OPEN, LEASES, read};
use lychd_runtime::Office;
use lychd_runtime::metrics::Reading;
use uuid::Uuid;

fn value(readings: &[Reading], gauge: &str, state: Option<&str>) -> f64 {
    let found: Vec<f64> = readings
        .iter()
        .filter(|r| {
            r.gauge == gauge
                && state.is_none_or(|s| {
                    r.attributes
                        .iter()
                        .any(|kv| kv.key.as_str() == "state" && kv.value.as_str() == s)
                })
        })
        .map(|r| r.value)
        .collect();
    assert_eq!(found.len(), 1, "one {gauge} {state:?}: {readings:?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread")]
async fn leases_are_counted_active_or_expired_and_closures_and_closed_animators_counted() {
    let db = lychd_testkit::test_db_for(&[lychd_dispatcher::spec()]).await;
    let opts = lychd_runtime::db::connect_options(
        &db.runtime_url(Office::Dispatcher),
        None,
        Office::Dispatcher,
    )
    .expect("runtime url");
    let pool = lychd_runtime::db::pool(opts, 2).await.expect("connects");
    let empty = read(pool.clone()).await.expect("read");
    assert_eq!(value(&empty, LEASES, Some("active")), 0.0);
    assert_eq!(value(&empty, LEASES, Some("expired")), 0.0);
    assert_eq!(value(&empty, CLOSURES_OPEN, None), 0.0);

    sqlx::query("INSERT INTO admission (animator, open_closures) VALUES ('a', 1), ('b', 0)")
        .execute(&pool)
        .await
        .expect("admission rows");
    for (request_id, reopened) in [("t-1", "NULL, NULL"), ("t-2", "'orchestrator', now()")] {
        sqlx::query(&format!(
            "INSERT INTO closures (token, request_id, reason, closed_by, reopened_by, reopened_at)
             VALUES ($1, $2, 'metrics', 'orchestrator', {reopened})"
        ))
        .bind(Uuid::new_v4())
        .bind(request_id)
        .execute(&pool)
        .await
        .expect("closure written");
    }
    // (expires_at, released_at): two live, one expired unreleased, two released.
    for (expires_at, released_at) in [
        ("now() + interval '1 hour'", "NULL"),
        ("now() + interval '1 minute'", "NULL"),
        ("now() - interval '1 minute'", "NULL"),
        ("now() + interval '1 hour'", "now()"),
        ("now() - interval '1 hour'", "now() - interval '2 hours'"),
    ] {
        sqlx::query(&format!(
            "INSERT INTO leases (id, capability_key, family, model_id, animator, holder,
                                 principal_id, priority, admission_generation, issued_at,
                                 expires_at, released_at)
             VALUES ($1, 'metrics-key', 'chat', 'm', 'b', 'holder', 'principal', 1, 0,
                     now() - interval '3 hours', {expires_at}, {released_at})"
        ))
        .bind(Uuid::new_v4())
        .execute(&pool)
        .await
        .expect("lease written");
    }
    let read = read(pool).await.expect("read");
    assert_eq!(value(&read, LEASES, Some("active")), 2.0);
    assert_eq!(value(&read, LEASES, Some("expired")), 1.0);
    assert_eq!(value(&read, ADMISSION_CLOSED, None), 1.0);
    assert_eq!(value(&read, CLOSURES_OPEN, None), 1.0);
}
