//! The footprint port (issue 25 point 3): how much device memory an animator's runtime holds
//! now, asked once it became WARM. One trait, three gauges, chosen by `[office.gauge]`
//! (`service::startup`; by default it follows the actuator): the simulated host reports what
//! each unit holds over its control API (`GET /units`); a real NVIDIA host answers through the
//! driver's per-process query ([`NvidiaSmi`], `nvidia-smi --query-compute-apps`, mapped to the
//! animator's runtime unit by cgroup); [`Unmeasured`] answers "unmeasured" and placement keeps
//! the declared estimates.

mod nvidia;

pub use nvidia::{MAX_OUTPUT, MAX_PLAUSIBLE_MIB, NvidiaSmi, QUERY, Used, held, in_unit, parse};

use std::time::Duration;

use tokio::time::Instant;

use crate::actuator::Simulated;

/// How long one measurement may take.
const MEASURE_BUDGET: Duration = Duration::from_secs(2);

/// The one footprint port.
#[tonic::async_trait]
pub trait Gauge: Send + Sync + 'static {
    /// The memory `animator`'s runtime holds on its device now, in MiB; `None`: unmeasured
    /// (not reachable, not reported, or nothing held).
    async fn measure(&self, animator: &str) -> Option<u64>;
}

#[tonic::async_trait]
impl Gauge for Simulated {
    async fn measure(&self, animator: &str) -> Option<u64> {
        let units = self
            .get_json("/units", Instant::now() + MEASURE_BUDGET)
            .await?;
        units
            .get("units")?
            .get(animator)?
            .get("memory_mib")?
            .as_u64()
            .filter(|m| *m > 0)
    }
}

/// A host without a gauge: every measurement is "unmeasured" (the declared estimates stay).
pub struct Unmeasured;

#[tonic::async_trait]
impl Gauge for Unmeasured {
    async fn measure(&self, _animator: &str) -> Option<u64> {
        None
    }
}
