//! Use cases: preview a plan (fresh observations through the Dispatcher, then the pure
//! planner). The only place that combines the Dispatcher's answers with the domain.

use crate::config::Settings;
use crate::domain::plan::{self, Decline, Plan, PlanError};
use crate::error::{OrchestratorError, Result};
use crate::observe::Dispatcher;

/// Observe the target and its conflict neighbours now and plan; binds nothing.
pub async fn preview(
    settings: &Settings,
    dispatcher: &Dispatcher,
    key: &str,
) -> Result<std::result::Result<Plan, Decline>> {
    if settings.registry.capability(key).is_none() {
        return Err(OrchestratorError::CapabilityUnknown);
    }
    let set = plan::observation_set(&settings.registry, &settings.graph, key);
    let world = dispatcher.observe(&set).await?;
    match plan::plan(&settings.registry, &settings.graph, key, &world) {
        Ok(decided) => Ok(decided),
        Err(PlanError::UnknownCapability) => Err(OrchestratorError::CapabilityUnknown),
        // The Dispatcher answered without an animator asked for (its registry differs from
        // ours): no fresh truth, no plan.
        Err(PlanError::MissingObservation(_)) => Err(OrchestratorError::ObservationUnavailable),
    }
}

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

/// Observe a containment's animators afresh and decide whether a recorded world is proved.
/// Pure comparison after one observation; nothing changes here.
pub async fn prove(
    dispatcher: &Dispatcher,
    row: &crate::store::ContainmentRow,
) -> Result<Option<Proved>> {
    use std::collections::BTreeSet;

    use crate::domain::intent::{active_among, desired_reached, prior_restored};
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
    row: &crate::store::ContainmentRow,
) -> Result<Option<Proved>> {
    let scope = [row.target_animator.clone()];
    let world = dispatcher.observe(&scope).await?;
    Ok(crate::domain::intent::stopped(&row.target_animator, &world).then_some(Proved::Stopped))
}
