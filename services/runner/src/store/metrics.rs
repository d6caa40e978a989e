//! The Runner's gauges (issue 30 item 2), read from its own schema by the runtime's bounded
//! poller (`lychd_runtime::metrics::polled`), never per scrape.

use futures::future::BoxFuture;
use lychd_runtime::metrics::{Gauge, Reading};
use sqlx::PgPool;

pub const RUNS: &str = "lychd.runner.runs";
pub const BUDGET_USED: &str = "lychd.runner.budget.used";
pub const BUDGET_UTILIZATION: &str = "lychd.runner.budget.utilization";

pub static GAUGES: &[Gauge] = &[
    Gauge {
        name: RUNS,
        description: "runs kept, by state of the control FSM",
        unit: "{run}",
    },
    Gauge {
        name: BUDGET_USED,
        description: "what the runs not yet terminal consumed, summed, by budget (steps, tokens, tool_calls, cost_milli)",
        unit: "1",
    },
    Gauge {
        name: BUDGET_UTILIZATION,
        description: "the largest share of its own budget any run not yet terminal consumed, by budget (0..1)",
        unit: "1",
    },
];

/// The budgets reported, each even with no run in flight.
const BUDGETS: [&str; 4] = ["steps", "tokens", "tool_calls", "cost_milli"];

/// Every reading, in one statement (READ COMMITTED, no lock taken).
pub fn read(pool: PgPool) -> BoxFuture<'static, Result<Vec<Reading>, sqlx::Error>> {
    Box::pin(async move {
        let rows: Vec<(String, String, f64, f64)> = sqlx::query_as(
            "SELECT 'state', state, count(*)::float8, 0::float8 FROM runs GROUP BY state
             UNION ALL
             SELECT 'budget', b.budget, sum(b.used), max(b.used / b.cap)
               FROM runs r CROSS JOIN LATERAL (VALUES
                 ('steps', COALESCE((r.progress->'used'->>'steps')::float8, 0), r.max_steps::float8),
                 ('tokens', COALESCE((r.progress->'used'->>'tokens')::float8, 0), r.max_tokens::float8),
                 ('tool_calls', COALESCE((r.progress->'used'->>'tool_calls')::float8, 0), r.max_tool_calls::float8),
                 ('cost_milli', COALESCE((r.progress->'used'->>'cost_milli')::float8, 0), r.max_cost_milli::float8)
               ) AS b(budget, used, cap)
              WHERE r.terminal_category IS NULL
              GROUP BY b.budget",
        )
        .fetch_all(&pool)
        .await?;
        let mut readings = Vec::new();
        let mut seen = Vec::new();
        for (kind, key, value, share) in rows {
            if kind == "state" {
                readings.push(Reading::new(RUNS, value).with("state", key));
            } else {
                readings.push(Reading::new(BUDGET_USED, value).with("budget", key.clone()));
                readings.push(Reading::new(BUDGET_UTILIZATION, share).with("budget", key.clone()));
                seen.push(key);
            }
        }
        for budget in BUDGETS.iter().filter(|b| !seen.iter().any(|s| s == *b)) {
            readings.push(Reading::new(BUDGET_USED, 0.0).with("budget", *budget));
            readings.push(Reading::new(BUDGET_UTILIZATION, 0.0).with("budget", *budget));
        }
        Ok(readings)
    })
}
