//! Per-animator lease admission: counted closures, generations, drain accounting. A closure
//! belongs to the principal that closed it (`closed_by`): its request id is that principal's
//! own, and only it (or an administrator) reopens it.
//!
//! Lock order everywhere: `admission` rows (in animator-name order) before `closures` rows
//! before `leases` rows. A lease registration takes its animator's admission row FOR SHARE, a
//! close or reopen takes it FOR UPDATE, so the two are ordered by the database.

use sqlx::{PgPool, Row};
use uuid::Uuid;

use lychd_runtime::refusal::is_unique_violation;

use crate::error::{DispatcherError, Result};

/// Admission of one animator, with its live leases counted by the database clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionRow {
    pub animator: String,
    pub generation: i64,
    pub open_closures: i32,
    pub live_leases: i64,
}

/// Make sure every declared animator has an admission row (open, generation 0 when new).
pub async fn ensure(pool: &PgPool, animators: &[String]) -> Result<()> {
    sqlx::query("INSERT INTO admission (animator) SELECT unnest($1::text[]) ON CONFLICT (animator) DO NOTHING")
        .bind(animators)
        .execute(pool)
        .await?;
    Ok(())
}

/// Live leases by [`super::leases::LIVE`].
const STATES: &str = concat!(
    "SELECT a.animator, a.generation, a.open_closures,
        (SELECT count(*) FROM leases l WHERE l.animator = a.animator AND ",
    live!(),
    ") AS live
   FROM admission a WHERE a.animator = ANY($1::text[]) ORDER BY a.animator"
);

fn row(r: &sqlx::postgres::PgRow) -> std::result::Result<AdmissionRow, sqlx::Error> {
    Ok(AdmissionRow {
        animator: r.try_get("animator")?,
        generation: r.try_get("generation")?,
        open_closures: r.try_get("open_closures")?,
        live_leases: r.try_get("live")?,
    })
}

/// Admission and live leases of `animators` now (READ COMMITTED, no locks).
pub async fn states<'e, E>(exec: E, animators: &[String]) -> Result<Vec<AdmissionRow>>
where
    E: sqlx::PgExecutor<'e>,
{
    let rows = sqlx::query(STATES).bind(animators).fetch_all(exec).await?;
    Ok(rows
        .iter()
        .map(row)
        .collect::<std::result::Result<_, _>>()?)
}

/// The result of a close.
#[derive(Debug, Clone)]
pub struct Closed {
    pub token: Uuid,
    pub states: Vec<AdmissionRow>,
    pub replayed: bool,
}

/// Close admission on `animators` (sorted, distinct, declared) for `principal`; its
/// `request_id` replays only `principal`'s own closure.
pub async fn close(
    pool: &PgPool,
    request_id: &str,
    animators: &[String],
    reason: &str,
    principal: &str,
) -> Result<Closed> {
    // READ COMMITTED. Lock order: admission rows FOR UPDATE in name order (waits for leases
    // being registered under FOR SHARE, so every lease that got in is counted by the drain),
    // then the closure rows.
    let mut tx = pool.begin().await?;
    let locked: Vec<String> = sqlx::query_scalar(
        "SELECT animator FROM admission WHERE animator = ANY($1::text[]) ORDER BY animator FOR UPDATE",
    )
    .bind(animators)
    .fetch_all(&mut *tx)
    .await?;
    if locked.len() != animators.len() {
        // Every declared animator has a row from start-up; a missing one is a stale replica.
        return Err(DispatcherError::Conflict);
    }
    let existing = sqlx::query(
        "SELECT c.token, array_agg(ca.animator ORDER BY ca.animator) AS animators
           FROM closures c JOIN closure_animators ca USING (token)
          WHERE c.closed_by = $1 AND c.request_id = $2 GROUP BY c.token",
    )
    .bind(principal)
    .bind(request_id)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(r) = existing {
        let token: Uuid = r.try_get("token")?;
        let named: Vec<String> = r.try_get("animators")?;
        if named != animators {
            return Err(DispatcherError::ClosureRequestConflict);
        }
        let states = states(&mut *tx, animators).await?;
        lychd_runtime::refusal::commit(tx).await?;
        return Ok(Closed {
            token,
            states,
            replayed: true,
        });
    }
    let token = Uuid::new_v4();
    let inserted = sqlx::query(
        "INSERT INTO closures (token, request_id, reason, closed_by) VALUES ($1, $2, $3, $4)",
    )
    .bind(token)
    .bind(request_id)
    .bind(reason)
    .bind(principal)
    .execute(&mut *tx)
    .await;
    if let Err(e) = inserted {
        // The same principal's request id closing a disjoint set concurrently.
        if is_unique_violation(&e, "closures_request_key") {
            return Err(DispatcherError::ClosureRequestConflict);
        }
        return Err(e.into());
    }
    sqlx::query("INSERT INTO closure_animators (token, animator) SELECT $1, unnest($2::text[])")
        .bind(token)
        .bind(animators)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE admission SET generation = generation + 1, open_closures = open_closures + 1,
                updated_at = now()
          WHERE animator = ANY($1::text[])",
    )
    .bind(animators)
    .execute(&mut *tx)
    .await?;
    let states = states(&mut *tx, animators).await?;
    lychd_runtime::refusal::commit(tx).await?;
    Ok(Closed {
        token,
        states,
        replayed: false,
    })
}

/// The result of a reopen.
#[derive(Debug, Clone)]
pub struct Reopened {
    pub states: Vec<AdmissionRow>,
    pub already_reopened: bool,
}

/// A closure as recorded: the animators it names (sorted) and who closed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closure {
    pub animators: Vec<String>,
    pub closed_by: String,
}

/// The closure `token`, if there is one (READ COMMITTED, no locks: membership and closer never
/// change).
pub async fn closure(pool: &PgPool, token: Uuid) -> Result<Option<Closure>> {
    let r = sqlx::query(
        "SELECT c.closed_by, array_agg(ca.animator ORDER BY ca.animator) AS animators
           FROM closures c JOIN closure_animators ca USING (token)
          WHERE c.token = $1 GROUP BY c.token",
    )
    .bind(token)
    .fetch_optional(pool)
    .await?;
    match r {
        None => Ok(None),
        Some(r) => Ok(Some(Closure {
            animators: r.try_get("animators")?,
            closed_by: r.try_get("closed_by")?,
        })),
    }
}

/// Reopen the closure `token` as `principal`, if `owner` closed it (`None`: whoever did);
/// another principal's closure is [`DispatcherError::ClosureNotOwned`].
pub async fn reopen(
    pool: &PgPool,
    token: Uuid,
    principal: &str,
    owner: Option<&str>,
) -> Result<Reopened> {
    // READ COMMITTED. Lock order as in `close`: admission rows FOR UPDATE in name order, then
    // the closure row FOR UPDATE (its membership never changes, so reading it first is safe).
    let mut tx = pool.begin().await?;
    let animators: Vec<String> = sqlx::query_scalar(
        "SELECT animator FROM closure_animators WHERE token = $1 ORDER BY animator",
    )
    .bind(token)
    .fetch_all(&mut *tx)
    .await?;
    if animators.is_empty() {
        return Err(DispatcherError::ClosureNotFound);
    }
    sqlx::query("SELECT animator FROM admission WHERE animator = ANY($1::text[]) ORDER BY animator FOR UPDATE")
        .bind(&animators)
        .execute(&mut *tx)
        .await?;
    let (reopened, closed_by): (bool, String) = sqlx::query_as(
        "SELECT reopened_at IS NOT NULL, closed_by FROM closures WHERE token = $1 FOR UPDATE",
    )
    .bind(token)
    .fetch_one(&mut *tx)
    .await?;
    if owner.is_some_and(|o| o != closed_by) {
        return Err(DispatcherError::ClosureNotOwned);
    }
    if reopened {
        let states = states(&mut *tx, &animators).await?;
        lychd_runtime::refusal::commit(tx).await?;
        return Ok(Reopened {
            states,
            already_reopened: true,
        });
    }
    sqlx::query("UPDATE closures SET reopened_at = now(), reopened_by = $2 WHERE token = $1")
        .bind(token)
        .bind(principal)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE admission SET generation = generation + 1, open_closures = open_closures - 1,
                updated_at = now()
          WHERE animator = ANY($1::text[])",
    )
    .bind(&animators)
    .execute(&mut *tx)
    .await?;
    let states = states(&mut *tx, &animators).await?;
    lychd_runtime::refusal::commit(tx).await?;
    Ok(Reopened {
        states,
        already_reopened: false,
    })
}
