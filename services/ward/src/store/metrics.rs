//! Ward's gauges (issue 30 item 2), read from its own schema in one statement by the runtime's
//! bounded poller (`lychd_runtime::metrics::polled`), never per scrape.

use futures::future::BoxFuture;
use lychd_runtime::metrics::{Gauge, Reading};
use sqlx::PgPool;

pub const PENDING: &str = "lychd.ward.consents.pending";
pub const PENDING_AGE: &str = "lychd.ward.consents.pending.age";

pub static GAUGES: &[Gauge] = &[
    Gauge {
        name: PENDING,
        description: "consents waiting for a verdict (not yet expired by the database clock), by effect class",
        unit: "{consent}",
    },
    Gauge {
        name: PENDING_AGE,
        description: "age of the oldest consent waiting for a verdict, by effect class (0: none waits)",
        unit: "s",
    },
];

/// Every effect class (the `consents.effect_class` check), each reported even with no consent.
const CLASSES: &[&str] = &[
    "standard",
    "bounded",
    "core_mutation",
    "migration",
    "destructive_deletion",
    "secret_or_authority_change",
    "host_lifecycle",
];

/// Every reading, in one statement (READ COMMITTED, no lock taken; ages by the database clock).
pub fn read(pool: PgPool) -> BoxFuture<'static, Result<Vec<Reading>, sqlx::Error>> {
    Box::pin(async move {
        let rows: Vec<(String, i64, f64)> = sqlx::query_as(
            "SELECT c.class, count(k.id),
                    COALESCE(EXTRACT(EPOCH FROM now() - min(k.created_at))::float8, 0)
               FROM unnest($1::text[]) AS c(class)
               LEFT JOIN consents k
                 ON k.effect_class = c.class AND k.state = 'pending' AND k.expires_at > now()
              GROUP BY c.class",
        )
        .bind(CLASSES)
        .fetch_all(&pool)
        .await?;
        Ok(rows
            .into_iter()
            .flat_map(|(class, pending, age)| {
                [
                    Reading::new(PENDING, pending as f64).with("class", class.clone()),
                    Reading::new(PENDING_AGE, age).with("class", class),
                ]
            })
            .collect())
    })
}
