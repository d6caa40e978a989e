//! Preview a plan: fresh observations through the Dispatcher, then the pure planner. The only
//! place that combines the Dispatcher's answers with the planner; it binds nothing.

use crate::config::Settings;
use crate::domain::memory::Memory;
use crate::domain::plan::{self, Decline, Plan, PlanError};
use crate::error::{OrchestratorError, Result};
use crate::observe::Dispatcher;

/// Observe the target, its conflict neighbours and its device's other animators now and plan
/// with `memory` (the footprints and usage); binds nothing.
pub async fn preview(
    settings: &Settings,
    dispatcher: &Dispatcher,
    memory: &Memory,
    key: &str,
) -> Result<std::result::Result<Plan, Decline>> {
    if settings.registry.capability(key).is_none() {
        return Err(OrchestratorError::CapabilityUnknown);
    }
    let set = plan::observation_set(&settings.registry, &settings.graph, key);
    let world = dispatcher.observe(&set).await?;
    match plan::plan(&settings.registry, &settings.graph, key, &world, memory) {
        Ok(decided) => Ok(decided),
        Err(PlanError::UnknownCapability) => Err(OrchestratorError::CapabilityUnknown),
        // The Dispatcher answered without an animator asked for (its registry differs from
        // ours): no fresh truth, no plan.
        Err(PlanError::MissingObservation(_)) => Err(OrchestratorError::ObservationUnavailable),
    }
}
