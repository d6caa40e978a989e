//! Containments (LychD design rules §23, "Containment and recovery"): list them; prove a
//! containment's recorded world afresh; recover — reopen admission and mark it recovered —
//! only after a proof.
//!
//! Invariant: nothing reopens without a proof from a fresh observation: the exact prior or
//! desired world, or (a soft activation's armed guard) the target animator stopped — and
//! only the holder of the host lease reopens.

use std::collections::BTreeSet;

use sqlx::PgPool;

use crate::domain::intent::{active_among, desired_reached, prior_restored, stopped};
use crate::error::{OrchestratorError, Result};
use crate::observe::Dispatcher;
use crate::service::lease::HostLease;
use crate::store;
/// A containment with what its transition recorded.
pub use crate::store::ContainmentRow;

/// Which recorded world a fresh observation proved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proved {
    /// The exact prior world (the transition's expected active set).
    Prior,
    /// The transition's desired world (its target alone active and WARM, evictees cold).
    Desired,
    /// A soft activation's target animator stopped (the only proof that clears its runtime
    /// guard: no readiness probe alone releases it).
    Stopped,
}

impl Proved {
    pub fn as_str(self) -> &'static str {
        match self {
            Proved::Prior => "PRIOR",
            Proved::Desired => "DESIRED",
            Proved::Stopped => "STOPPED",
        }
    }
}

/// Containments, newest first (at most 1000).
pub async fn list(pool: &PgPool, include_recovered: bool) -> Result<Vec<ContainmentRow>> {
    Ok(store::containments(pool, include_recovered).await?)
}

/// What examining a containment for recovery found.
pub enum Examined {
    /// Already recovered: nothing to do.
    Recovered(ContainmentRow),
    /// Still fencing, and its world proved.
    Proved(ContainmentRow, Proved),
}

/// Find containment `id` and, unless it is already recovered, prove its world afresh
/// (`WorldNotProven` when no recorded world is observed).
pub async fn examine(pool: &PgPool, dispatcher: &Dispatcher, id: i64) -> Result<Examined> {
    let row = store::containment_by_id(pool, id)
        .await?
        .ok_or(OrchestratorError::ContainmentNotFound)?;
    if row.recovered_at.is_some() {
        return Ok(Examined::Recovered(row));
    }
    let proved = if row.guard_armed {
        prove_stopped(dispatcher, &row).await
    } else {
        prove(dispatcher, &row).await
    }?
    .ok_or(OrchestratorError::WorldNotProven)?;
    Ok(Examined::Proved(row, proved))
}

/// Recover a proved containment: reopen its closure (asking for its token again when it was
/// never recorded) and mark it recovered by `by` — only under the host lease
/// (`HOST_LEASE_NOT_HELD` otherwise, before any effect); the row as recorded after.
pub async fn recover(
    pool: &PgPool,
    lease: &HostLease,
    dispatcher: &Dispatcher,
    row: &ContainmentRow,
    by: &str,
) -> Result<ContainmentRow> {
    let fence = lease.fence().ok_or(OrchestratorError::HostLeaseNotHeld)?;
    let token = match &row.closure_token {
        Some(t) => t.clone(),
        // The close is idempotent on the transition id: ask for its token again.
        None => dispatcher
            .close(&row.transition_id, &row.affected, "orchestrator transition")
            .await
            .map_err(|_| OrchestratorError::ObservationUnavailable)?,
    };
    if !lease.valid(&fence) {
        return Err(OrchestratorError::HostLeaseNotHeld);
    }
    dispatcher
        .reopen(&token)
        .await
        .map_err(|_| OrchestratorError::ObservationUnavailable)?;
    match store::recover(pool, &fence, row.id, by).await {
        Err(e) if store::lease::not_held(&e) => {
            lease.refused(&fence);
            return Err(OrchestratorError::HostLeaseNotHeld);
        }
        other => other?,
    };
    store::containment_by_id(pool, row.id)
        .await?
        .ok_or(OrchestratorError::ContainmentNotFound)
}

/// Observe a containment's animators afresh and decide whether a recorded world is proved.
/// Pure comparison after one observation; nothing changes here.
pub async fn prove(dispatcher: &Dispatcher, row: &ContainmentRow) -> Result<Option<Proved>> {
    let forward = row.forward();
    let scope: Vec<String> = forward
        .scope()
        .into_iter()
        .chain(row.affected.iter().cloned())
        .chain(std::iter::once(row.target_animator.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let world = dispatcher.observe(&scope).await?;
    if prior_restored(&forward, &world)
        && active_among(&scope, &world).is_some_and(|a| a == forward.expected_active)
    {
        return Ok(Some(Proved::Prior));
    }
    if desired_reached(&row.capability_key, &row.evict, &world)
        && active_among(&scope, &world).is_some_and(|a| a == [row.target_animator.clone()])
    {
        return Ok(Some(Proved::Desired));
    }
    Ok(None)
}

/// Observe a guarded containment's target animator afresh: proved only when it is stopped.
pub async fn prove_stopped(
    dispatcher: &Dispatcher,
    row: &ContainmentRow,
) -> Result<Option<Proved>> {
    let scope = [row.target_animator.clone()];
    let world = dispatcher.observe(&scope).await?;
    Ok(stopped(&row.target_animator, &world).then_some(Proved::Stopped))
}
