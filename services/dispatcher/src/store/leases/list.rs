//! Reads: one lease by id or request id, and keyset listings newest first.

use super::*;

/// A keyset position for listing (newest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub issued_at: OffsetDateTime,
    pub id: Uuid,
}

/// What to list.
#[derive(Debug, Clone, Copy)]
pub struct Filter<'a> {
    /// Only leases on these animators (empty: all).
    pub animators: &'a [String],
    pub include_inactive: bool,
    /// Only this principal's leases (`None`: every principal's).
    pub owner: Option<&'a str>,
    /// Only the lease asked under this request id.
    pub request_id: Option<&'a str>,
}

/// List leases newest first.
pub async fn list(
    pool: &PgPool,
    filter: Filter<'_>,
    after: Option<Cursor>,
    limit: i64,
) -> Result<Vec<LeaseRow>> {
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM leases l
          WHERE (cardinality($1::text[]) = 0 OR l.animator = ANY($1::text[]))
            AND ($2 OR {LIVE})
            AND ($3::timestamptz IS NULL OR (l.issued_at, l.id) < ($3::timestamptz, $4::uuid))
            AND ($6::text IS NULL OR l.principal_id = $6)
            AND ($7::text IS NULL OR l.request_id = $7)
          ORDER BY l.issued_at DESC, l.id DESC
          LIMIT $5"
    ))
    .bind(filter.animators)
    .bind(filter.include_inactive)
    .bind(after.map(|c| c.issued_at))
    .bind(after.map(|c| c.id))
    .bind(limit)
    .bind(filter.owner)
    .bind(filter.request_id)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .iter()
        .map(lease_row)
        .collect::<std::result::Result<_, _>>()?)
}

/// How a caller names one lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<'a> {
    Id(Uuid),
    /// The request id the owner asked under (request ids are their principal's own).
    Request(&'a str),
}

/// One lease, if `owner` may see it (`None`: any principal's). By request id, only the
/// caller's own request ids are meant: `caller` is the principal whose request id it is.
pub async fn find(
    pool: &PgPool,
    lookup: Lookup<'_>,
    caller: &str,
    owner: Option<&str>,
) -> Result<LeaseRow> {
    let r = match lookup {
        Lookup::Id(id) => {
            sqlx::query(&format!("SELECT {COLUMNS} FROM leases l WHERE l.id = $1"))
                .bind(id)
                .fetch_optional(pool)
                .await?
        }
        Lookup::Request(request_id) => {
            sqlx::query(&format!(
                "SELECT {COLUMNS} FROM leases l WHERE l.principal_id = $1 AND l.request_id = $2"
            ))
            .bind(caller)
            .bind(request_id)
            .fetch_optional(pool)
            .await?
        }
    };
    let lease = match r {
        Some(r) => lease_row(&r)?,
        None => return Err(DispatcherError::LeaseNotFound),
    };
    if owned_by(&lease, owner) {
        Ok(lease)
    } else {
        Err(DispatcherError::LeaseNotFound)
    }
}
