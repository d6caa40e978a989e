//! Planning (LychD design rules §23 Orchestrator, "Current conflict policy"): from fresh
//! observations of the target animator and its conflict neighbours, one plan — `NO_OP` for a
//! warm/open target, `SOFT_SWAP` for a started but not warm dedicated runtime, `HARD_SWAP`
//! (evicting the active conflict neighbours and, on a device, whatever memory needs —
//! [`super::memory`]) for a down dedicated runtime — or a decline. Pure: the observations
//! and footprints are arguments; nothing here probes, measures or reads a clock.

use std::collections::BTreeSet;

use lychd_registry::conflict::ConflictGraph;
use lychd_registry::registry::Registry;

use super::memory::{self, Arithmetic, Memory};
pub use super::world::{AnimatorView, Phase, World};

/// What a plan does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    NoOp,
    SoftSwap,
    HardSwap,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::NoOp => "NO_OP",
            Action::SoftSwap => "SOFT_SWAP",
            Action::HardSwap => "HARD_SWAP",
        }
    }
}

/// A plan. Frozen once computed; a transition freezes its intent from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub action: Action,
    pub capability_key: String,
    pub target: String,
    /// Sorted.
    pub evict: Vec<String>,
    pub launch: Vec<String>,
    /// The number of evictees.
    pub cost: u32,
    /// Active animators observed in the observation set, sorted.
    pub expected_active: Vec<String>,
    pub config_digest: String,
    /// The memory arithmetic of a hard swap whose target is placed on a device.
    pub memory: Option<Arithmetic>,
}

impl Plan {
    /// Animators whose admission the transition closes: evictees and, unless `NO_OP`, the
    /// target; sorted.
    pub fn affected(&self) -> Vec<String> {
        if self.action == Action::NoOp {
            return Vec::new();
        }
        let mut set: BTreeSet<String> = self.evict.iter().cloned().collect();
        set.insert(self.target.clone());
        set.into_iter().collect()
    }
}

/// Why no plan can be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decline {
    /// Not WARM and not lifecycle-managed (shared, portal or resident).
    NotManaged { animator: String, phase: Phase },
    /// The target's runtime answers with an error.
    TargetError { animator: String },
    /// The target's probe failed (UNKNOWN).
    TargetUnobserved { animator: String },
    /// The target's runtime is started but does not serve the capability.
    TargetNotServed { animator: String },
    /// A conflict neighbour's probe failed: it may be active.
    NeighbourUnobserved { animator: String },
    /// WARM, but another closure holds the target's admission.
    AdmissionClosed { animator: String },
    /// The target's model does not fit on its device even with every animator memory may
    /// evict stopped (the arithmetic names them all).
    MemoryInsufficient {
        animator: String,
        arithmetic: Box<Arithmetic>,
    },
}

impl Decline {
    pub fn code(&self) -> &'static str {
        match self {
            Decline::NotManaged { .. } => "NOT_MANAGED",
            Decline::TargetError { .. } => "TARGET_ERROR",
            Decline::TargetUnobserved { .. } => "TARGET_UNOBSERVED",
            Decline::TargetNotServed { .. } => "TARGET_NOT_SERVED",
            Decline::NeighbourUnobserved { .. } => "NEIGHBOUR_UNOBSERVED",
            Decline::AdmissionClosed { .. } => "ADMISSION_CLOSED",
            Decline::MemoryInsufficient { .. } => "MEMORY_INSUFFICIENT",
        }
    }

    pub fn animator(&self) -> &str {
        match self {
            Decline::NotManaged { animator, .. }
            | Decline::TargetError { animator }
            | Decline::TargetUnobserved { animator }
            | Decline::TargetNotServed { animator }
            | Decline::NeighbourUnobserved { animator }
            | Decline::AdmissionClosed { animator }
            | Decline::MemoryInsufficient { animator, .. } => animator,
        }
    }

    pub fn phase(&self) -> Option<Phase> {
        match self {
            Decline::NotManaged { phase, .. } => Some(*phase),
            Decline::TargetError { .. } => Some(Phase::Error),
            Decline::TargetUnobserved { .. } | Decline::NeighbourUnobserved { .. } => {
                Some(Phase::Unknown)
            }
            Decline::TargetNotServed { .. } | Decline::MemoryInsufficient { .. } => {
                Some(Phase::Cold)
            }
            Decline::AdmissionClosed { .. } => Some(Phase::Warm),
        }
    }

    /// The memory arithmetic behind a `MEMORY_INSUFFICIENT`.
    pub fn memory(&self) -> Option<&Arithmetic> {
        match self {
            Decline::MemoryInsufficient { arithmetic, .. } => Some(arithmetic),
            _ => None,
        }
    }
}

/// Why planning could not start at all (programming or input errors, not plan outcomes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// The key names no declared capability.
    UnknownCapability,
    /// An animator the plan needs is missing from the observations.
    MissingObservation(String),
}

/// The animators a plan for `key` must observe: the target, its conflict neighbours and the
/// other animators placed on its device, sorted (empty for an unknown key).
pub fn observation_set(registry: &Registry, graph: &ConflictGraph, key: &str) -> Vec<String> {
    let Some(cap) = registry.capability(key) else {
        return Vec::new();
    };
    let target = cap.animator();
    let mut set: BTreeSet<String> = graph.neighbours(target).cloned().collect();
    set.extend(cotenants(registry, target).map(str::to_owned));
    set.insert(target.to_owned());
    set.into_iter().collect()
}

/// The other animators placed on `target`'s device (none when it is not placed).
fn cotenants<'a>(registry: &'a Registry, target: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    let device = registry.animator(target).and_then(|a| a.device.as_deref());
    device
        .into_iter()
        .flat_map(move |d| registry.placed_on(d))
        .map(|a| a.name.as_str())
        .filter(move |n| *n != target)
}

/// Plan a transition to `key` from `world` (which holds at least [`observation_set`]) and the
/// footprints and usage of `memory`.
pub fn plan(
    registry: &Registry,
    graph: &ConflictGraph,
    key: &str,
    world: &World,
    memory: &Memory,
) -> Result<Result<Plan, Decline>, PlanError> {
    let cap = registry
        .capability(key)
        .ok_or(PlanError::UnknownCapability)?;
    let target = cap.animator().to_owned();
    let view = |name: &str| {
        world
            .get(name)
            .ok_or_else(|| PlanError::MissingObservation(name.to_owned()))
    };
    let tv = view(&target)?;
    let phase = tv.phases.get(key).copied().unwrap_or(Phase::Unknown);
    let neighbours: Vec<&String> = graph.neighbours(&target).collect();
    let mut expected_active = BTreeSet::new();
    if tv.active() {
        expected_active.insert(target.clone());
    }
    let mut evict = Vec::new();
    let mut unobserved = None;
    for n in &neighbours {
        let nv = view(n)?;
        if nv.active() {
            expected_active.insert((*n).clone());
            evict.push((*n).clone());
        } else if nv.unobserved() && unobserved.is_none() {
            unobserved = Some((*n).clone());
        }
    }
    let mut tenants = Vec::new();
    for n in cotenants(registry, &target) {
        let nv = view(n)?;
        if nv.active() {
            expected_active.insert(n.to_owned());
        } else if nv.unobserved() && unobserved.is_none() {
            unobserved = Some(n.to_owned());
        }
        tenants.push((n, nv));
    }
    let managed = graph.node(&target).is_some_and(|n| n.managed);
    let make = |action: Action, evict: Vec<String>, launch: Vec<String>| Plan {
        memory: None,
        action,
        capability_key: key.to_owned(),
        target: target.clone(),
        cost: u32::try_from(evict.len()).unwrap_or(u32::MAX),
        evict,
        launch,
        expected_active: expected_active.iter().cloned().collect(),
        config_digest: graph.digest().to_owned(),
    };
    let decided = match phase {
        Phase::Warm if tv.admission_open => Ok(make(Action::NoOp, Vec::new(), Vec::new())),
        Phase::Warm => Err(Decline::AdmissionClosed {
            animator: target.clone(),
        }),
        Phase::Unknown => Err(Decline::TargetUnobserved {
            animator: target.clone(),
        }),
        _ if !managed => Err(Decline::NotManaged {
            animator: target.clone(),
            phase,
        }),
        Phase::Error => Err(Decline::TargetError {
            animator: target.clone(),
        }),
        Phase::Warming | Phase::Activatable => Ok(make(Action::SoftSwap, Vec::new(), Vec::new())),
        Phase::Cold if tv.active() => Err(Decline::TargetNotServed {
            animator: target.clone(),
        }),
        Phase::Cold => match unobserved {
            Some(animator) => Err(Decline::NeighbourUnobserved { animator }),
            None => {
                let managed = |n: &str| graph.node(n).is_some_and(|n| n.managed);
                match memory::place(registry, memory, key, &evict, &tenants, &managed) {
                    None => Ok(make(Action::HardSwap, evict, vec![target.clone()])),
                    Some(Err(arithmetic)) => Err(Decline::MemoryInsufficient {
                        animator: target.clone(),
                        arithmetic: Box::new(arithmetic),
                    }),
                    Some(Ok(placed)) => {
                        let mut all = evict;
                        all.extend(placed.evict);
                        all.sort();
                        let mut p = make(Action::HardSwap, all, vec![target.clone()]);
                        p.memory = Some(placed.arithmetic);
                        Ok(p)
                    }
                }
            }
        },
    };
    Ok(decided)
}

#[cfg(test)]
mod tests;
