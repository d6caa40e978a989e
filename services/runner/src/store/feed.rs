//! The feed of every run's transitions (`runner.run_transitions`, ordered by `sequence`), read
//! with the shared gap rule (`lychd_runtime::feed`): each read also returns what its snapshot
//! saw, so a reader resuming from a cursor misses no committed transition.

use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::transitions::{TRANSITION, TransitionRow, transition};

/// A feed row: the transition, whether it is of the watched run, and what the read saw.
#[derive(Debug, Clone)]
pub struct FedRow {
    pub transition: TransitionRow,
    pub visible: bool,
    pub seen: lychd_runtime::feed::Seen,
}

/// Every transition with `sequence > after`, in order (the reader judges gaps on all of them
/// and delivers those of run `id`).
pub async fn feed_after(
    pool: &PgPool,
    id: Uuid,
    after: i64,
    limit: i64,
) -> Result<Vec<FedRow>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "SELECT {TRANSITION}, t.run_id = $1 AS visible, {seen} \
           FROM runner.run_transitions t CROSS JOIN {seen_from} \
          WHERE t.sequence > $2 ORDER BY t.sequence LIMIT $3",
        seen = lychd_runtime::feed::SEEN_COLUMNS,
        seen_from = lychd_runtime::feed::seen_from("runner.run_transitions"),
    ))
    .bind(id)
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(FedRow {
                transition: transition(r)?,
                visible: r.try_get("visible")?,
                seen: lychd_runtime::feed::Seen {
                    xmin: r.try_get("feed_xmin")?,
                    xmax: r.try_get("feed_xmax")?,
                    xip: r.try_get("feed_xip")?,
                    holders: r.try_get("feed_holders")?,
                },
            })
        })
        .collect()
}
