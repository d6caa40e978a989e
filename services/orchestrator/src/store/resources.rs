//! SQL of transitions as resources: the callers' requests (`transition_requests`, one per
//! principal and `request_id`) and the feed of every recorded phase (`transition_events`,
//! followed with the shared feed's gap rule, [`lychd_runtime::feed`]). Every event is written
//! in a transaction that holds its id before the sequence number is taken.

use lychd_runtime::feed;
use sqlx::{PgPool, Postgres, Row, Transaction};
use time::OffsetDateTime;

use super::lease::{self, Fence};
use crate::domain::phase::TransitionPhase;

/// A phase to append to the feed.
pub struct NewEvent<'a> {
    pub transition_id: &'a str,
    pub capability_key: &'a str,
    pub priority: u8,
    pub phase: TransitionPhase,
    pub detail: &'a str,
    /// The plan as JSON text, once computed.
    pub plan: Option<String>,
}

/// One recorded phase.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub sequence: i64,
    pub transition_id: String,
    pub capability_key: String,
    pub priority: i16,
    pub phase: String,
    pub detail: String,
    pub plan: Option<String>,
    pub recorded_at: OffsetDateTime,
}

/// A caller's request.
#[derive(Debug, Clone)]
pub struct RequestRow {
    pub transition_id: String,
    pub capability_key: String,
    pub priority: i16,
    pub joined: bool,
}

const EVENT: &str = "e.sequence, e.transition_id, e.capability_key, e.priority, e.phase, \
     e.detail, e.plan::text AS plan, e.recorded_at";

fn event(r: &sqlx::postgres::PgRow) -> Result<EventRow, sqlx::Error> {
    Ok(EventRow {
        sequence: r.try_get("sequence")?,
        transition_id: r.try_get("transition_id")?,
        capability_key: r.try_get("capability_key")?,
        priority: r.try_get("priority")?,
        phase: r.try_get("phase")?,
        detail: r.try_get("detail")?,
        plan: r.try_get("plan")?,
        recorded_at: r.try_get("recorded_at")?,
    })
}

/// Append `e` inside `tx` (which holds its transaction id first: the gap rule's premise). A
/// second final phase of one transaction is dropped (the first one stands).
pub async fn append_in(
    tx: &mut Transaction<'_, Postgres>,
    generation: i64,
    e: &NewEvent<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_current_xact_id()::text")
        .execute(&mut **tx)
        .await?;
    sqlx::query(
        "INSERT INTO orchestrator.transition_events \
         (transition_id, capability_key, priority, phase, detail, plan, final, generation) \
         VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8) \
         ON CONFLICT (transition_id) WHERE final DO NOTHING",
    )
    .bind(e.transition_id)
    .bind(e.capability_key)
    .bind(i16::from(e.priority))
    .bind(e.phase.as_str())
    .bind(e.detail)
    .bind(e.plan.as_deref())
    .bind(e.phase.is_final())
    .bind(generation)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Append one phase (its own fenced transaction).
pub async fn append(pool: &PgPool, fence: &Fence, e: &NewEvent<'_>) -> Result<(), sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    append_in(&mut tx, fence.generation, e).await?;
    tx.commit().await
}

/// Move the rite's row to `phase` (never over a containment) and append the phase to the
/// feed, in one transaction.
pub async fn set_phase_and_append(
    pool: &PgPool,
    fence: &Fence,
    e: &NewEvent<'_>,
) -> Result<(), sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    sqlx::query(
        "UPDATE orchestrator.transitions SET phase = $2, detail = $3, updated_at = now(), \
         generation = $4 WHERE id = $1 AND NOT EXISTS \
         (SELECT 1 FROM orchestrator.containments c WHERE c.transition_id = $1)",
    )
    .bind(e.transition_id)
    .bind(e.phase.as_str())
    .bind(e.detail)
    .bind(fence.generation)
    .execute(&mut *tx)
    .await?;
    append_in(&mut tx, fence.generation, e).await?;
    tx.commit().await
}

/// The request `request_id` of `by`, if made.
pub async fn request(
    pool: &PgPool,
    by: &str,
    request_id: &str,
) -> Result<Option<RequestRow>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT transition_id, capability_key, priority, joined \
         FROM orchestrator.transition_requests WHERE requested_by = $1 AND request_id = $2",
    )
    .bind(by)
    .bind(request_id)
    .fetch_optional(pool)
    .await?;
    row.map(|r| {
        Ok(RequestRow {
            transition_id: r.try_get("transition_id")?,
            capability_key: r.try_get("capability_key")?,
            priority: r.try_get("priority")?,
            joined: r.try_get("joined")?,
        })
    })
    .transpose()
}

/// Record request `request_id` of `by` for `transition_id` and, when it owns the transition,
/// its `requested` phase — one transaction. `false` when that request id was already taken
/// (nothing written).
pub async fn record_request(
    pool: &PgPool,
    fence: &Fence,
    by: &str,
    request_id: &str,
    joined: bool,
    requested: &NewEvent<'_>,
) -> Result<bool, sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    let r = sqlx::query(
        "INSERT INTO orchestrator.transition_requests \
         (requested_by, request_id, transition_id, capability_key, priority, joined) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (requested_by, request_id) DO NOTHING",
    )
    .bind(by)
    .bind(request_id)
    .bind(requested.transition_id)
    .bind(requested.capability_key)
    .bind(i16::from(requested.priority))
    .bind(joined)
    .execute(&mut *tx)
    .await?;
    if r.rows_affected() == 0 {
        tx.rollback().await?;
        return Ok(false);
    }
    if !joined {
        append_in(&mut tx, fence.generation, requested).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// Whether `by` made or joined transition `id` (`Some(joined)`), or not (`None`).
pub async fn requested_by(pool: &PgPool, id: &str, by: &str) -> Result<Option<bool>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT bool_and(joined) FROM orchestrator.transition_requests \
         WHERE transition_id = $1 AND requested_by = $2",
    )
    .bind(id)
    .bind(by)
    .fetch_one(pool)
    .await
}

/// Every recorded phase of transition `id`, in order (empty: unknown).
pub async fn events_of(pool: &PgPool, id: &str) -> Result<Vec<EventRow>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "SELECT {EVENT} FROM orchestrator.transition_events e \
         WHERE e.transition_id = $1 ORDER BY e.sequence"
    ))
    .bind(id)
    .fetch_all(pool)
    .await?;
    rows.iter().map(event).collect()
}

/// A listed transition: its `requested` event (the page cursor) and its last one.
#[derive(Debug, Clone)]
pub struct Listed {
    pub requested: EventRow,
    pub last: EventRow,
    pub joined: bool,
}

/// Transitions requested before sequence `before` (newest first, at most `limit`): those `by`
/// made or joined, or every one when `by` is `None`.
pub async fn list(
    pool: &PgPool,
    by: Option<&str>,
    before: i64,
    limit: i64,
) -> Result<Vec<Listed>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "SELECT {EVENT}, l.sequence AS l_sequence, l.phase AS l_phase, l.detail AS l_detail, \
                l.plan::text AS l_plan, l.recorded_at AS l_recorded_at, \
                COALESCE((SELECT bool_and(r.joined) FROM orchestrator.transition_requests r \
                          WHERE r.transition_id = e.transition_id AND r.requested_by = $1), \
                         false) AS joined \
           FROM orchestrator.transition_events e \
           CROSS JOIN LATERAL (SELECT x.sequence, x.phase, x.detail, x.plan, x.recorded_at \
                                 FROM orchestrator.transition_events x \
                                WHERE x.transition_id = e.transition_id \
                                ORDER BY x.sequence DESC LIMIT 1) l \
          WHERE e.phase = 'requested' AND e.sequence < $2 \
            AND ($1::text IS NULL OR EXISTS (SELECT 1 FROM orchestrator.transition_requests r \
                 WHERE r.transition_id = e.transition_id AND r.requested_by = $1)) \
          ORDER BY e.sequence DESC LIMIT $3"
    ))
    .bind(by)
    .bind(before)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            let requested = event(r)?;
            let last = EventRow {
                sequence: r.try_get("l_sequence")?,
                phase: r.try_get("l_phase")?,
                detail: r.try_get("l_detail")?,
                plan: r.try_get("l_plan")?,
                recorded_at: r.try_get("l_recorded_at")?,
                ..requested.clone()
            };
            Ok(Listed {
                requested,
                last,
                joined: r.try_get("joined")?,
            })
        })
        .collect()
}

/// The last sequence committed (0: none).
pub async fn last_sequence(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT COALESCE(max(sequence), 0) FROM orchestrator.transition_events")
        .fetch_one(pool)
        .await
}

/// A feed event, whether `by` may see it, and what the read saw.
#[derive(Debug, Clone)]
pub struct FedRow {
    pub event: EventRow,
    pub visible: bool,
    pub seen: feed::Seen,
}

/// Events with `sequence > after`, in order, every one (the reader judges gaps on all and
/// filters on `visible`: those `by` made or joined; every one when `by` is `None`).
pub async fn events_after(
    pool: &PgPool,
    by: Option<&str>,
    after: i64,
    limit: i64,
) -> Result<Vec<FedRow>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "SELECT {EVENT}, ($1::text IS NULL OR EXISTS (SELECT 1 \
                FROM orchestrator.transition_requests r \
                WHERE r.transition_id = e.transition_id AND r.requested_by = $1)) AS visible, \
                {seen} \
           FROM orchestrator.transition_events e CROSS JOIN {seen_from} \
          WHERE e.sequence > $2 ORDER BY e.sequence LIMIT $3",
        seen = feed::SEEN_COLUMNS,
        seen_from = feed::seen_from("orchestrator.transition_events"),
    ))
    .bind(by)
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(FedRow {
                event: event(r)?,
                visible: r.try_get("visible")?,
                seen: feed::Seen {
                    xmin: r.try_get("feed_xmin")?,
                    xmax: r.try_get("feed_xmax")?,
                    xip: r.try_get("feed_xip")?,
                    holders: r.try_get("feed_holders")?,
                },
            })
        })
        .collect()
}

/// On taking the lease: every transition of the feed without a final phase (its process is gone) gets
/// one — the phase its rite row recorded when that one is final (a containment of an
/// interrupted rite included), else `declined_no_effect` `INTERRUPTED` (it never entered the
/// rite: nothing was closed or invoked). Returns how many.
pub async fn settle_interrupted(pool: &PgPool, fence: &Fence) -> Result<u64, sqlx::Error> {
    let mut tx = lease::fenced(pool, fence).await?;
    sqlx::query("SELECT pg_current_xact_id()::text")
        .execute(&mut *tx)
        .await?;
    let r = sqlx::query(
        "INSERT INTO orchestrator.transition_events \
         (transition_id, capability_key, priority, phase, detail, plan, final, generation) \
         SELECT q.transition_id, q.capability_key, q.priority, \
                COALESCE(CASE WHEN t.phase = ANY($1) THEN t.phase END, 'declined_no_effect'), \
                CASE WHEN t.phase = ANY($1) THEN t.detail ELSE 'INTERRUPTED' END, \
                (SELECT x.plan FROM orchestrator.transition_events x \
                  WHERE x.transition_id = q.transition_id AND x.plan IS NOT NULL \
                  ORDER BY x.sequence DESC LIMIT 1), true, $2 \
           FROM orchestrator.transition_events q \
           LEFT JOIN orchestrator.transitions t ON t.id = q.transition_id \
          WHERE q.phase = 'requested' AND NOT EXISTS (SELECT 1 FROM orchestrator.transition_events f \
                WHERE f.transition_id = q.transition_id AND f.final) \
          ORDER BY q.sequence \
         ON CONFLICT (transition_id) WHERE final DO NOTHING",
    )
    .bind(
        TransitionPhase::ALL
            .into_iter()
            .filter(|p| p.is_final())
            .map(|p| p.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(fence.generation)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(r.rows_affected())
}
