//! Cached readiness observations (shared by replicas; they only rank candidates — the chosen
//! record is always observed afresh) and the pre-probe snapshot of admission.

use std::collections::BTreeMap;

use sqlx::{PgPool, Row};
use time::OffsetDateTime;

use crate::domain::demand::{Admission, Snapshot};
use crate::domain::observation::{Observed, Phase};
use crate::error::Result;

/// animator, generation, open_closures, then one cached key and its phase (if any).
type SnapshotRow = (String, i64, i32, Option<String>, Option<String>);

/// Admission of `animators` and the cached phases of all their keys, in one read
/// (READ COMMITTED, no locks: the generation read here is re-checked under lock at issue).
pub async fn snapshot(pool: &PgPool, animators: &[String]) -> Result<Snapshot> {
    let rows: Vec<SnapshotRow> = sqlx::query_as(
        "SELECT a.animator, a.generation, a.open_closures, o.capability_key, o.phase
           FROM admission a LEFT JOIN observations o ON o.animator = a.animator
          WHERE a.animator = ANY($1::text[])",
    )
    .bind(animators)
    .fetch_all(pool)
    .await?;
    let mut snap = Snapshot::default();
    for (animator, generation, open_closures, key, phase) in rows {
        if let (Some(k), Some(p)) = (key, phase) {
            snap.cached
                .insert(k, Phase::parse(&p).unwrap_or(Phase::Unknown));
        }
        // An animator has a row per cached key: its admission is taken once.
        snap.admission.entry(animator).or_insert(Admission {
            generation,
            open_closures,
        });
    }
    Ok(snap)
}

/// The tail of an insert into `observations` that replaces the cached row of its key.
pub(crate) const REPLACE: &str = "ON CONFLICT (capability_key) DO UPDATE
            SET animator = excluded.animator, phase = excluded.phase,
                reason = excluded.reason, observed_at = excluded.observed_at";

/// How long a lease's fresh observation that equals the cached one (same phase and reason) is
/// not written again. The cached row only ranks candidates (the chosen record is always probed
/// afresh); rewriting an unchanged row on every grant made every lease of a capability queue on
/// that row's lock and write a new row version. The cached `observed_at` of a capability leased
/// without pause therefore lags its latest probe by less than this; `ObserveAnimators` and the
/// answers that are not grants always write.
pub(crate) const UNCHANGED_WITHIN: &str = "interval '1 second'";

/// Replace the cached observations of `animator`'s keys in `obs` as one statement.
pub async fn record(pool: &PgPool, animator: &str, obs: &BTreeMap<String, Observed>) -> Result<()> {
    if obs.is_empty() {
        return Ok(());
    }
    let keys: Vec<&str> = obs.keys().map(String::as_str).collect();
    let phases: Vec<&str> = obs.values().map(|o| o.phase.as_str()).collect();
    let reasons: Vec<&str> = obs.values().map(|o| o.reason.as_str()).collect();
    sqlx::query(&format!(
        "INSERT INTO observations (capability_key, animator, phase, reason, observed_at)
         SELECT k, $1, p, r, now() FROM unnest($2::text[], $3::text[], $4::text[]) AS t (k, p, r)
         {REPLACE}"
    ))
    .bind(animator)
    .bind(&keys)
    .bind(&phases)
    .bind(&reasons)
    .execute(pool)
    .await?;
    Ok(())
}

/// A cached observation.
#[derive(Debug, Clone)]
pub struct Cached {
    pub observed: Observed,
    pub observed_at: OffsetDateTime,
}

/// Every cached observation, by key.
pub async fn all(pool: &PgPool) -> Result<BTreeMap<String, Cached>> {
    let rows = sqlx::query("SELECT capability_key, phase, reason, observed_at FROM observations")
        .fetch_all(pool)
        .await?;
    let mut out = BTreeMap::new();
    for r in rows {
        let phase: String = r.try_get("phase")?;
        out.insert(
            r.try_get("capability_key")?,
            Cached {
                observed: Observed::with_reason(
                    Phase::parse(&phase).unwrap_or(Phase::Unknown),
                    r.try_get::<String, _>("reason")?,
                ),
                observed_at: r.try_get("observed_at")?,
            },
        );
    }
    Ok(out)
}

/// Cached observations of `keys` (after a `record`, to answer with database times).
pub async fn of_keys(pool: &PgPool, keys: &[String]) -> Result<BTreeMap<String, Cached>> {
    let rows = sqlx::query(
        "SELECT capability_key, phase, reason, observed_at FROM observations
          WHERE capability_key = ANY($1::text[])",
    )
    .bind(keys)
    .fetch_all(pool)
    .await?;
    let mut out = BTreeMap::new();
    for r in rows {
        let phase: String = r.try_get("phase")?;
        out.insert(
            r.try_get("capability_key")?,
            Cached {
                observed: Observed::with_reason(
                    Phase::parse(&phase).unwrap_or(Phase::Unknown),
                    r.try_get::<String, _>("reason")?,
                ),
                observed_at: r.try_get("observed_at")?,
            },
        );
    }
    Ok(out)
}
