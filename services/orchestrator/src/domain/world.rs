//! The world as freshly observed (the Dispatcher's `ObserveAnimators`): each animator's phases,
//! admission and live leases — what the planner and placement by memory read.

use std::collections::BTreeMap;

/// Observed readiness of one capability (the Dispatcher's phases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Cold,
    Activatable,
    Warming,
    Warm,
    Error,
    Unknown,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Cold => "COLD",
            Phase::Activatable => "ACTIVATABLE",
            Phase::Warming => "WARMING",
            Phase::Warm => "WARM",
            Phase::Error => "ERROR",
            Phase::Unknown => "UNKNOWN",
        }
    }
}

/// One animator as freshly observed (one `AnimatorObservation` of `ObserveAnimators`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnimatorView {
    /// Phase of each of its capability keys.
    pub phases: BTreeMap<String, Phase>,
    /// No closure holds its lease admission.
    pub admission_open: bool,
    /// Live leases on it now (the Dispatcher's count): leased work is disrupted by an eviction.
    pub live_leases: u32,
}

impl AnimatorView {
    /// Its runtime answers for something (any key WARM, WARMING, ACTIVATABLE or ERROR): it is
    /// running and holds hardware.
    pub fn active(&self) -> bool {
        self.phases.values().any(|p| {
            matches!(
                p,
                Phase::Warm | Phase::Warming | Phase::Activatable | Phase::Error
            )
        })
    }

    /// Some key is UNKNOWN: the probe failed, whether it runs is not known.
    pub fn unobserved(&self) -> bool {
        self.phases.values().any(|p| *p == Phase::Unknown)
    }
}

/// Fresh observations by animator name.
pub type World = BTreeMap<String, AnimatorView>;
