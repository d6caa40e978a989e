//! The Orchestrator's gauges (issue 30 item 2), read from its own schema in one statement by
//! the runtime's bounded poller (`lychd_runtime::metrics::polled`), never per scrape.

use futures::future::BoxFuture;
use lychd_runtime::metrics::{Gauge, Reading};
use sqlx::PgPool;

pub const TRANSITIONS: &str = "lychd.orchestrator.transitions";
pub const CONTAINMENTS: &str = "lychd.orchestrator.containments";

pub static GAUGES: &[Gauge] = &[
    Gauge {
        name: TRANSITIONS,
        description: "transitions kept, by phase (an open phase, or the final one: the outcome) and action",
        unit: "{transition}",
    },
    Gauge {
        name: CONTAINMENTS,
        description: "containments by state: open (fencing the host), recovered",
        unit: "{containment}",
    },
];

/// Every reading, in one statement (READ COMMITTED, no lock taken).
pub fn read(pool: PgPool) -> BoxFuture<'static, Result<Vec<Reading>, sqlx::Error>> {
    Box::pin(async move {
        let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
            "SELECT 't', phase, action, count(*) FROM transitions GROUP BY phase, action
             UNION ALL
             SELECT 'c', CASE WHEN recovered_at IS NULL THEN 'open' ELSE 'recovered' END, '', count(*)
               FROM containments GROUP BY 2",
        )
        .fetch_all(&pool)
        .await?;
        let mut open_or_recovered = [false, false];
        let mut readings: Vec<Reading> = rows
            .into_iter()
            .map(|(kind, state, action, n)| {
                if kind == "t" {
                    Reading::new(TRANSITIONS, n as f64)
                        .with("phase", state)
                        .with("action", action)
                } else {
                    open_or_recovered[usize::from(state == "recovered")] = true;
                    Reading::new(CONTAINMENTS, n as f64).with("state", state)
                }
            })
            .collect();
        // Both containment states are always reported (0 when there is none).
        for (seen, state) in open_or_recovered.into_iter().zip(["open", "recovered"]) {
            if !seen {
                readings.push(Reading::new(CONTAINMENTS, 0.0).with("state", state));
            }
        }
        Ok(readings)
    })
}
