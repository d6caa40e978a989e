//! Dispatch events in sequence order, with what the read saw (the feed's gap rule).

use super::*;

/// A dispatch event.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub sequence: i64,
    pub lease_id: Uuid,
    /// The principal that obtained the lease (never sent: it decides who may see the event).
    pub owner: String,
    pub capability_key: String,
    pub animator: String,
    pub holder: String,
    pub run_id: String,
    pub attempt_id: String,
    pub priority: i16,
    pub admitted_at: OffsetDateTime,
    /// What the read that returned it saw (never sent).
    pub seen: feed::Seen,
}

/// Events with `sequence > after`, in order, each with its lease's owner (every event, whoever
/// owns it: the reader's sequence gaps are judged on all of them, and it filters) and what the
/// read saw ([`lychd_runtime::feed::Seen`]: the gap rule's evidence).
pub async fn events_after(pool: &PgPool, after: i64, limit: i64) -> Result<Vec<EventRow>> {
    let rows = sqlx::query(&format!(
        "SELECT e.sequence, e.lease_id, l.principal_id, e.capability_key, e.animator, e.holder,
                e.run_id, e.attempt_id, e.priority, e.admitted_at, {seen}
           FROM dispatch_events e JOIN leases l ON l.id = e.lease_id CROSS JOIN {seen_from}
          WHERE e.sequence > $1 ORDER BY e.sequence LIMIT $2",
        seen = feed::SEEN_COLUMNS,
        seen_from = feed::seen_from("dispatch_events"),
    ))
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(EventRow {
                sequence: r.try_get("sequence")?,
                lease_id: r.try_get("lease_id")?,
                owner: r.try_get("principal_id")?,
                capability_key: r.try_get("capability_key")?,
                animator: r.try_get("animator")?,
                holder: r.try_get("holder")?,
                run_id: r.try_get("run_id")?,
                attempt_id: r.try_get("attempt_id")?,
                priority: r.try_get("priority")?,
                admitted_at: r.try_get("admitted_at")?,
                seen: feed::Seen {
                    xmin: r.try_get("feed_xmin")?,
                    xmax: r.try_get("feed_xmax")?,
                    xip: r.try_get("feed_xip")?,
                    holders: r.try_get("feed_holders")?,
                },
            })
        })
        .collect::<std::result::Result<_, sqlx::Error>>()
        .map_err(Into::into)
}
