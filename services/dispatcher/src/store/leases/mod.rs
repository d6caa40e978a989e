//! Durable leases: registration (with its dispatch event and, under a request id, its kept
//! answer), renewal, release, lookup, listing. Expiry is decided by the database clock (`now()`)
//! inside the deciding statement. A lease belongs to the principal that obtained it
//! (`principal_id`): renew, release and reads take the caller as `owner` (`None` only for a
//! caller Ward allowed the administrative action), and another principal's lease is answered as
//! not found.
//!
//! One module per concern: `register` (a lease with its event, and the answers kept under a
//! request id), `life` (renew, release), `list` (lookup, listing), `events` (the dispatch
//! events); the row every read returns and the one liveness rule ([`LIVE`]) are here.

mod events;
mod life;
mod list;
mod register;

pub use events::*;
pub use life::*;
pub use list::*;
pub use register::*;

use lychd_runtime::feed;
use lychd_runtime::refusal::ambiguous;
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::key::CapabilityKey;
use crate::domain::lease::LeaseState;
use crate::domain::observation::Observed;
use crate::error::{DispatcherError, Result};
use crate::store::observations::{REPLACE, UNCHANGED_WITHIN};

/// A lease as recorded, with its state at the database time of the read.
#[derive(Debug, Clone)]
pub struct LeaseRow {
    pub id: Uuid,
    pub capability_key: String,
    pub animator: String,
    pub holder: String,
    pub principal_id: String,
    pub run_id: String,
    pub attempt_id: String,
    pub priority: i16,
    pub issued_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub released_at: Option<OffsetDateTime>,
    pub state: LeaseState,
    /// The request id it was asked under.
    pub request_id: Option<String>,
}

/// The live-lease rule (`live!` in `store/mod.rs`) as a value, for statements built with `format!`.
pub const LIVE: &str = live!();

/// The columns of a [`LeaseRow`], over the `leases` row aliased `l`: a lease neither released
/// nor [`LIVE`] is expired.
const COLUMNS: &str = concat!(
    "l.id, l.capability_key, l.animator, l.holder, l.principal_id, l.run_id,
     l.attempt_id, l.priority, l.issued_at, l.expires_at, l.released_at, l.request_id,
     l.released_at IS NOT NULL AS released, NOT ",
    live!(),
    " AS expired"
);

fn lease_row(r: &PgRow) -> std::result::Result<LeaseRow, sqlx::Error> {
    Ok(LeaseRow {
        id: r.try_get("id")?,
        capability_key: r.try_get("capability_key")?,
        animator: r.try_get("animator")?,
        holder: r.try_get("holder")?,
        principal_id: r.try_get("principal_id")?,
        run_id: r.try_get("run_id")?,
        attempt_id: r.try_get("attempt_id")?,
        priority: r.try_get("priority")?,
        issued_at: r.try_get("issued_at")?,
        expires_at: r.try_get("expires_at")?,
        released_at: r.try_get("released_at")?,
        state: LeaseState::of(r.try_get("released")?, r.try_get("expired")?),
        request_id: r.try_get("request_id")?,
    })
}

async fn get(pool: &PgPool, id: Uuid) -> Result<Option<(LeaseRow, bool)>> {
    let r = sqlx::query(&format!(
        "SELECT {COLUMNS},
                (SELECT open_closures = 0 FROM admission a WHERE a.animator = l.animator) AS open
           FROM leases l WHERE l.id = $1"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await?;
    match r {
        None => Ok(None),
        Some(r) => Ok(Some((
            lease_row(&r)?,
            r.try_get::<Option<bool>, _>("open")?.unwrap_or(false),
        ))),
    }
}

/// Whether `owner` (the caller; `None`: an administrator) may touch `lease`.
fn owned_by(lease: &LeaseRow, owner: Option<&str>) -> bool {
    owner.is_none_or(|o| lease.principal_id == o)
}
