//! A lease's life after its issue: renewal and (idempotent) release, each one guarded
//! statement, diagnosed from the current row when the guard fails.

use super::*;

/// Renew a live lease of `owner` (`None`: any principal's): expiry becomes now +
/// `ttl_seconds`. Another principal's lease is [`DispatcherError::LeaseNotOwned`].
pub async fn renew(
    pool: &PgPool,
    id: Uuid,
    holder: &str,
    ttl_seconds: i32,
    owner: Option<&str>,
) -> Result<LeaseRow> {
    // One statement (READ COMMITTED). Lock order: the animator's admission row FOR SHARE (a
    // lease on an animator being drained cannot be extended), then the lease row by the
    // guarded UPDATE (its owner and holder among the guards). Liveness by the database clock.
    let r = sqlx::query(&format!(
        "WITH adm AS (
             SELECT a.animator FROM admission a JOIN leases x ON x.animator = a.animator
              WHERE x.id = $1 AND a.open_closures = 0
                FOR SHARE OF a
         )
         UPDATE leases l SET expires_at = now() + $3::int * interval '1 second', renewed_at = now()
           FROM adm
          WHERE l.id = $1 AND l.animator = adm.animator AND l.holder = $2
            AND ($4::text IS NULL OR l.principal_id = $4) AND {LIVE}
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(holder)
    .bind(ttl_seconds)
    .bind(owner)
    .fetch_optional(&mut *pool.acquire().await?)
    .await
    .map_err(ambiguous)?;
    if let Some(r) = r {
        return Ok(lease_row(&r)?);
    }
    // Why not: diagnose from the current row (the answer is as of this read).
    let Some((lease, open)) = get(pool, id).await? else {
        return Err(DispatcherError::LeaseNotFound);
    };
    if !owned_by(&lease, owner) {
        return Err(DispatcherError::LeaseNotOwned);
    }
    Err(if lease.holder != holder {
        DispatcherError::HolderMismatch
    } else {
        match lease.state {
            LeaseState::Released => DispatcherError::LeaseReleased,
            LeaseState::Expired => DispatcherError::LeaseExpired,
            LeaseState::Active if !open => DispatcherError::AdmissionClosed,
            LeaseState::Active => DispatcherError::Conflict,
        }
    })
}

/// Release a lease of `owner` (`None`: any principal's). Idempotent: a lease already released
/// or expired is returned unchanged with `already_over = true`. Another principal's lease is
/// [`DispatcherError::LeaseNotOwned`].
pub async fn release(
    pool: &PgPool,
    id: Uuid,
    holder: &str,
    owner: Option<&str>,
) -> Result<(LeaseRow, bool)> {
    // One guarded UPDATE on the lease row (READ COMMITTED; no other lock).
    let r = sqlx::query(&format!(
        "UPDATE leases l SET released_at = now()
          WHERE l.id = $1 AND l.holder = $2 AND ($3::text IS NULL OR l.principal_id = $3)
            AND {LIVE}
         RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(holder)
    .bind(owner)
    .fetch_optional(&mut *pool.acquire().await?)
    .await
    .map_err(ambiguous)?;
    if let Some(r) = r {
        return Ok((lease_row(&r)?, false));
    }
    let Some((lease, _)) = get(pool, id).await? else {
        return Err(DispatcherError::LeaseNotFound);
    };
    if !owned_by(&lease, owner) {
        return Err(DispatcherError::LeaseNotOwned);
    }
    if lease.holder != holder {
        return Err(DispatcherError::HolderMismatch);
    }
    match lease.state {
        LeaseState::Active => Err(DispatcherError::Conflict),
        _ => Ok((lease, true)),
    }
}
