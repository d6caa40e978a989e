//! The Runner's database gauges (issue 30 item 2): the statement the runtime's poller runs
//! counts runs by state, and sums what the runs not yet terminal consumed with the largest
//! share of its own budget any of them used; a terminal run's consumption leaves them.

use lychd_runner::store::metrics::{BUDGET_USED, BUDGET_UTILIZATION, RUNS, read};
use lychd_runtime::metrics::Reading;

use crate::common::*;

fn value(readings: &[Reading], gauge: &str, key: &str, label: &str) -> f64 {
    let found: Vec<f64> = readings
        .iter()
        .filter(|r| {
            r.gauge == gauge
                && r.attributes
                    .iter()
                    .any(|kv| kv.key.as_str() == key && kv.value.as_str() == label)
        })
        .map(|r| r.value)
        .collect();
    assert_eq!(found.len(), 1, "one {gauge} {key}={label}: {readings:?}");
    found[0]
}

#[tokio::test]
async fn runs_are_counted_by_state_and_budgets_in_flight_summed_with_the_largest_share() {
    let mut s = stack().await;
    let pool = s.spawned.ctx.pool.clone();
    let empty = read(pool.clone()).await.expect("read");
    assert_eq!(value(&empty, BUDGET_USED, "budget", "tokens"), 0.0);
    assert_eq!(value(&empty, BUDGET_UTILIZATION, "budget", "steps"), 0.0);

    let a = start(&mut s.client, "metrics-a", "{}").await;
    let b = start(&mut s.client, "metrics-b", "{}").await;
    let c = start(&mut s.client, "metrics-c", "{}").await;
    let mut db = s.db().await;
    // a: 2 of its steps and 300 tokens; b: 1 step and 100 tokens; c: terminal, not counted.
    for (run, steps, tokens) in [(&a, 2, 300), (&b, 1, 100), (&c, 9, 900)] {
        sqlx::query(
            "UPDATE runner.runs SET max_steps = 8, max_tokens = 1000,
                    progress = jsonb_build_object('used', jsonb_build_object('steps', $2::int, 'tokens', $3::int))
              WHERE id = $1::uuid",
        )
        .bind(&run.run_id)
        .bind(steps)
        .bind(tokens)
        .execute(&mut db)
        .await
        .expect("progress");
    }
    force_state(&s, &c.run_id, "SUCCEEDED", Some("succeeded")).await;
    let readings = read(pool).await.expect("read");
    assert_eq!(value(&readings, RUNS, "state", "SUCCEEDED"), 1.0);
    assert_eq!(
        value(&readings, RUNS, "state", &a.state),
        2.0,
        "{readings:?}"
    );
    assert_eq!(value(&readings, BUDGET_USED, "budget", "steps"), 3.0);
    assert_eq!(value(&readings, BUDGET_USED, "budget", "tokens"), 400.0);
    assert_eq!(value(&readings, BUDGET_USED, "budget", "tool_calls"), 0.0);
    assert_eq!(
        value(&readings, BUDGET_UTILIZATION, "budget", "steps"),
        0.25
    );
    assert_eq!(
        value(&readings, BUDGET_UTILIZATION, "budget", "tokens"),
        0.3
    );
}
