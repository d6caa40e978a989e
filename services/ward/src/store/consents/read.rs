//! Reading consents: one, a listing, the owner of one, and the feed of changes.
//!
//! Invariant: every read runs the expiry sweep first (a pending consent past its TTL is never
//! seen pending), except the feed, which reads recorded changes only.

use sqlx::postgres::PgPool;
use uuid::Uuid;

use super::record::*;
use crate::domain::consent::ConsentState;
use crate::domain::paging::{self, List};
use crate::error::Result;
use crate::store::{Page, paginate};

/// One consent, `None` when no consent has the id.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<ConsentRecord>> {
    let mut conn = pool.acquire().await?;
    expire_due(&mut conn).await?;
    read(&mut conn, id).await
}

pub(crate) async fn read(conn: &mut sqlx::PgConnection, id: Uuid) -> Result<Option<ConsentRecord>> {
    sqlx::query_as::<_, Row>(&format!(
        "SELECT {COLUMNS} FROM ward.consents c WHERE c.id = $1"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .map(Row::record)
    .transpose()
}

/// Consent `id` locked for this transaction (`FOR UPDATE`: no verdict, consumption or
/// revocation of it interleaves until the transaction ends), `None` when unknown.
pub(crate) async fn lock(conn: &mut sqlx::PgConnection, id: Uuid) -> Result<Option<ConsentRecord>> {
    sqlx::query_as::<_, Row>(&format!(
        "SELECT {COLUMNS} FROM ward.consents c WHERE c.id = $1 FOR UPDATE"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .map(Row::record)
    .transpose()
}

/// The effect owner of consent `id` (to decide who may act on it), `None` when unknown.
pub async fn owner_of(pool: &PgPool, id: Uuid) -> Result<Option<String>> {
    Ok(
        sqlx::query_scalar("SELECT effect_owner FROM ward.consents WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// Consents newest first, optionally of one run and in one state, `size` a page, after the
/// consent with sequence number `before`.
pub async fn list(
    pool: &PgPool,
    run_id: Option<&str>,
    state: Option<ConsentState>,
    size: u32,
    before: Option<i64>,
) -> Result<Page<ConsentRecord>> {
    let mut conn = pool.acquire().await?;
    expire_due(&mut conn).await?;
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM ward.consents c
         WHERE ($1::text IS NULL OR c.run_id = $1) AND ($2::text IS NULL OR c.state = $2)
           AND ($3::bigint IS NULL OR c.seq < $3)
         ORDER BY c.seq DESC LIMIT $4"
    ))
    .bind(run_id)
    .bind(state.map(ConsentState::as_str))
    .bind(before)
    .bind(i64::from(size) + 1)
    .fetch_all(&mut *conn)
    .await?;
    let records = rows
        .into_iter()
        .map(Row::record)
        .collect::<Result<Vec<_>>>()?;
    Ok(paginate(records, size, |c| {
        paging::seq_token(List::Consents, c.seq)
    }))
}

/// One recorded change of a consent, with the consent as it stands now.
#[derive(Debug, Clone)]
pub struct Change {
    pub seq: i64,
    pub changed_to: ConsentState,
    pub consent: ConsentRecord,
    /// What the read that returned it saw (the feed's gap rule needs it).
    pub seen: lychd_runtime::feed::Seen,
}

#[derive(sqlx::FromRow)]
pub(crate) struct ChangeRow {
    change_seq: i64,
    changed_to: String,
    feed_xmin: i64,
    feed_xmax: i64,
    feed_xip: Vec<i64>,
    feed_holders: Vec<i64>,
    #[sqlx(flatten)]
    row: Row,
}

/// Up to `limit` changes after `after`, in sequence order (every run: a filter is applied by
/// the reader, after the gap rule, which needs the unfiltered sequence). The gap rule
/// (`lychd_runtime::feed`) relies on a change's number being taken after its transaction holds
/// an id: it is, since the change row is appended by an AFTER ROW trigger of the consent row
/// written first.
pub async fn changes_after(pool: &PgPool, after: i64, limit: i64) -> Result<Vec<Change>> {
    let mut conn = pool.acquire().await?;
    expire_due(&mut conn).await?;
    let rows: Vec<ChangeRow> = sqlx::query_as(&format!(
        "SELECT e.seq AS change_seq, e.state AS changed_to, {COLUMNS}, {seen}
         FROM ward.consent_changes e JOIN ward.consents c ON c.id = e.consent_id
              CROSS JOIN {seen_from}
         WHERE e.seq > $1 ORDER BY e.seq LIMIT $2",
        seen = lychd_runtime::feed::SEEN_COLUMNS,
        seen_from = lychd_runtime::feed::seen_from("ward.consent_changes"),
    ))
    .bind(after)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter()
        .map(|r| {
            let id = r.row.id;
            Ok(Change {
                seq: r.change_seq,
                changed_to: ConsentState::parse(&r.changed_to)
                    .ok_or_else(|| corrupt(id, "change state"))?,
                consent: r.row.record()?,
                seen: lychd_runtime::feed::Seen {
                    xmin: r.feed_xmin,
                    xmax: r.feed_xmax,
                    xip: r.feed_xip,
                    holders: r.feed_holders,
                },
            })
        })
        .collect()
}
