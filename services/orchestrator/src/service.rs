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
