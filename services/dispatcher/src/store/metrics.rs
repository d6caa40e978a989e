//! The Dispatcher's gauges (issue 30 item 2), read from its own schema in one statement by the
//! runtime's bounded poller (`lychd_runtime::metrics::polled`), never per scrape.

use futures::future::BoxFuture;
use lychd_runtime::metrics::{Gauge, Reading};
use sqlx::PgPool;

pub const LEASES: &str = "lychd.dispatcher.leases";
pub const ADMISSION_CLOSED: &str = "lychd.dispatcher.admission.closed";
pub const CLOSURES_OPEN: &str = "lychd.dispatcher.closures.open";

pub static GAUGES: &[Gauge] = &[
    Gauge {
        name: LEASES,
        description: "leases by state: active (live), expired (past their deadline, never released)",
        unit: "{lease}",
    },
    Gauge {
        name: ADMISSION_CLOSED,
        description: "animators whose lease admission is closed",
        unit: "{animator}",
    },
    Gauge {
        name: CLOSURES_OPEN,
        description: "admission closures not reopened",
        unit: "{closure}",
    },
];

/// Every reading, in one statement (READ COMMITTED, no lock taken).
pub fn read(pool: PgPool) -> BoxFuture<'static, Result<Vec<Reading>, sqlx::Error>> {
    Box::pin(async move {
        // Liveness by its one definition (`live!`): expired is neither live nor released.
        let (active, expired, closed, open): (i64, i64, i64, i64) = sqlx::query_as(concat!(
            "SELECT count(*) FILTER (WHERE live), count(*) FILTER (WHERE NOT live AND NOT released),
                    (SELECT count(*) FROM admission WHERE open_closures > 0),
                    (SELECT count(*) FROM closures WHERE reopened_at IS NULL)
               FROM (SELECT ",
            live!(),
            " AS live,
                            l.released_at IS NOT NULL AS released FROM leases l) s"
        ))
        .fetch_one(&pool)
        .await?;
        Ok(vec![
            Reading::new(LEASES, active as f64).with("state", "active"),
            Reading::new(LEASES, expired as f64).with("state", "expired"),
            Reading::new(ADMISSION_CLOSED, closed as f64),
            Reading::new(CLOSURES_OPEN, open as f64),
        ])
    })
}
