//! Planning (LychD design rules §23 Orchestrator, "Current conflict policy"): from fresh
//! observations of the target animator and its conflict neighbours, one plan — `NO_OP` for a
//! warm/open target, `SOFT_SWAP` for a started but not warm dedicated runtime, `HARD_SWAP`
//! (evicting the active conflict neighbours, sorted) for a down dedicated runtime — or a
//! decline. Pure: the observations are an argument; nothing here probes or reads a clock.

use std::collections::{BTreeMap, BTreeSet};

use lychd_registry::conflict::ConflictGraph;
use lychd_registry::registry::Registry;

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
    /// Declared-conflicts cost: the number of evictees.
    pub cost: u32,
    /// Active animators observed among the target and its neighbours, sorted.
    pub expected_active: Vec<String>,
    pub config_digest: String,
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
        }
    }

    pub fn animator(&self) -> &str {
        match self {
            Decline::NotManaged { animator, .. }
            | Decline::TargetError { animator }
            | Decline::TargetUnobserved { animator }
            | Decline::TargetNotServed { animator }
            | Decline::NeighbourUnobserved { animator }
            | Decline::AdmissionClosed { animator } => animator,
        }
    }

    pub fn phase(&self) -> Option<Phase> {
        match self {
            Decline::NotManaged { phase, .. } => Some(*phase),
            Decline::TargetError { .. } => Some(Phase::Error),
            Decline::TargetUnobserved { .. } | Decline::NeighbourUnobserved { .. } => {
                Some(Phase::Unknown)
            }
            Decline::TargetNotServed { .. } => Some(Phase::Cold),
            Decline::AdmissionClosed { .. } => Some(Phase::Warm),
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

/// The animators a plan for `key` must observe: the target and its conflict neighbours,
/// sorted (empty for an unknown key).
pub fn observation_set(registry: &Registry, graph: &ConflictGraph, key: &str) -> Vec<String> {
    let Some(cap) = registry.capability(key) else {
        return Vec::new();
    };
    let target = cap.animator();
    let mut set: BTreeSet<String> = graph.neighbours(target).cloned().collect();
    set.insert(target.to_owned());
    set.into_iter().collect()
}

/// Plan a transition to `key` from `world` (which holds at least [`observation_set`]).
pub fn plan(
    registry: &Registry,
    graph: &ConflictGraph,
    key: &str,
    world: &World,
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
    let managed = graph.node(&target).is_some_and(|n| n.managed);
    let make = |action: Action, evict: Vec<String>, launch: Vec<String>| Plan {
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
            None => Ok(make(Action::HardSwap, evict, vec![target.clone()])),
        },
    };
    Ok(decided)
}

#[cfg(test)]
mod tests {
    use lychd_registry::fixtures::{cap, portal, soulstone};
    use lychd_registry::registry::AnimatorDecl;

    use super::*;

    struct Fx {
        reg: Registry,
        graph: ConflictGraph,
    }

    fn fx() -> Fx {
        // a, b, c: default-exclusive (pairwise conflicts); free: explicit []; shared: not
        // dedicated; res: resident; p: portal.
        let mut shared = soulstone("shared");
        shared.dedicated = false;
        let mut res = soulstone("res");
        res.resident = true;
        let free = AnimatorDecl {
            conflict_domains: Some(vec![]),
            ..soulstone("free")
        };
        let animators = vec![
            soulstone("a"),
            soulstone("b"),
            soulstone("c"),
            free,
            shared,
            res,
            portal("p"),
        ];
        let caps: Vec<_> = animators
            .iter()
            .map(|a| cap(&a.name, "chat", "m"))
            .collect();
        let reg = Registry::build(&animators, &caps).expect("valid");
        let graph = ConflictGraph::compile(&reg).expect("compiles");
        Fx { reg, graph }
    }

    fn v(phase: Phase) -> AnimatorView {
        AnimatorView {
            phases: BTreeMap::from([("x".to_owned(), phase)]),
            admission_open: true,
        }
    }

    /// A world where every animator of the fixture is COLD except the given ones; each view's
    /// only key is the animator's `chat:m` key.
    fn world(fx: &Fx, set: &[(&str, Phase)]) -> World {
        fx.reg
            .animators()
            .map(|a| {
                let phase = set
                    .iter()
                    .find(|(n, _)| *n == a.name)
                    .map(|(_, p)| *p)
                    .unwrap_or(Phase::Cold);
                let mut view = v(phase);
                view.phases = BTreeMap::from([(format!("{}:chat:m", a.name), phase)]);
                (a.name.clone(), view)
            })
            .collect()
    }

    fn run(fx: &Fx, key: &str, w: &World) -> Result<Plan, Decline> {
        plan(&fx.reg, &fx.graph, key, w).expect("plannable")
    }

    #[test]
    fn warm_and_open_is_a_no_op_for_any_kind() {
        let fx = fx();
        for a in ["a", "free", "shared", "res", "p"] {
            let w = world(&fx, &[(a, Phase::Warm)]);
            let p = run(&fx, &format!("{a}:chat:m"), &w).expect(a);
            assert_eq!(p.action, Action::NoOp, "{a}");
            assert!(p.evict.is_empty() && p.launch.is_empty() && p.affected().is_empty());
        }
    }

    #[test]
    fn warm_but_closed_declines() {
        let fx = fx();
        let mut w = world(&fx, &[("a", Phase::Warm)]);
        w.get_mut("a").expect("a").admission_open = false;
        assert_eq!(
            run(&fx, "a:chat:m", &w),
            Err(Decline::AdmissionClosed {
                animator: "a".into()
            })
        );
    }

    #[test]
    fn started_but_not_warm_dedicated_is_a_soft_swap() {
        let fx = fx();
        for phase in [Phase::Warming, Phase::Activatable] {
            let w = world(&fx, &[("a", phase), ("b", Phase::Warm)]);
            let p = run(&fx, "a:chat:m", &w).expect("soft");
            assert_eq!(p.action, Action::SoftSwap);
            assert!(p.evict.is_empty(), "a soft swap stops nothing");
            assert_eq!(p.affected(), ["a"]);
            assert_eq!(p.cost, 0);
        }
    }

    #[test]
    fn down_dedicated_is_a_hard_swap_evicting_active_neighbours_sorted() {
        let fx = fx();
        let w = world(
            &fx,
            &[
                ("c", Phase::Warm),
                ("b", Phase::Error),
                ("free", Phase::Warm),
                ("res", Phase::Warm),
            ],
        );
        let p = run(&fx, "a:chat:m", &w).expect("hard");
        assert_eq!(p.action, Action::HardSwap);
        assert_eq!(p.evict, ["b", "c"], "active neighbours only, sorted");
        assert_eq!(p.launch, ["a"]);
        assert_eq!(p.cost, 2);
        assert_eq!(p.expected_active, ["b", "c"]);
        assert_eq!(p.affected(), ["a", "b", "c"]);
        assert_eq!(p.config_digest, fx.graph.digest());
        // Nothing active: a hard swap with no evictee.
        let p = run(&fx, "a:chat:m", &world(&fx, &[])).expect("hard");
        assert_eq!((p.action, p.cost), (Action::HardSwap, 0));
        // A coexisting animator evicts nothing.
        let w = world(&fx, &[("a", Phase::Warm)]);
        let p = run(&fx, "free:chat:m", &w).expect("hard");
        assert_eq!((p.action, p.evict.len()), (Action::HardSwap, 0));
    }

    #[test]
    fn non_warm_shared_resident_and_portal_are_refused() {
        let fx = fx();
        for a in ["shared", "res", "p"] {
            for phase in [
                Phase::Cold,
                Phase::Warming,
                Phase::Activatable,
                Phase::Error,
            ] {
                let w = world(&fx, &[(a, phase)]);
                assert_eq!(
                    run(&fx, &format!("{a}:chat:m"), &w),
                    Err(Decline::NotManaged {
                        animator: a.into(),
                        phase
                    }),
                    "{a} {phase:?}"
                );
            }
        }
    }

    #[test]
    fn unknown_or_error_target_and_unobserved_neighbour_decline() {
        let fx = fx();
        let w = world(&fx, &[("a", Phase::Unknown)]);
        assert_eq!(
            run(&fx, "a:chat:m", &w).expect_err("x").code(),
            "TARGET_UNOBSERVED"
        );
        let w = world(&fx, &[("a", Phase::Error)]);
        assert_eq!(
            run(&fx, "a:chat:m", &w).expect_err("x").code(),
            "TARGET_ERROR"
        );
        let w = world(&fx, &[("c", Phase::Unknown)]);
        assert_eq!(
            run(&fx, "a:chat:m", &w),
            Err(Decline::NeighbourUnobserved {
                animator: "c".into()
            })
        );
    }

    #[test]
    fn a_started_runtime_that_does_not_serve_the_key_declines() {
        let fx = fx();
        let mut w = world(&fx, &[]);
        w.get_mut("a")
            .expect("a")
            .phases
            .insert("a:chat:other".into(), Phase::Warm);
        assert_eq!(
            run(&fx, "a:chat:m", &w).expect_err("x").code(),
            "TARGET_NOT_SERVED"
        );
    }

    #[test]
    fn the_observation_set_is_the_target_and_its_neighbours() {
        let fx = fx();
        assert_eq!(
            observation_set(&fx.reg, &fx.graph, "a:chat:m"),
            ["a", "b", "c"]
        );
        assert_eq!(observation_set(&fx.reg, &fx.graph, "free:chat:m"), ["free"]);
        assert!(observation_set(&fx.reg, &fx.graph, "nope:chat:m").is_empty());
        let w = world(&fx, &[]);
        assert_eq!(
            plan(&fx.reg, &fx.graph, "nope:chat:m", &w),
            Err(PlanError::UnknownCapability)
        );
        let mut w = world(&fx, &[]);
        w.remove("b");
        assert_eq!(
            plan(&fx.reg, &fx.graph, "a:chat:m", &w),
            Err(PlanError::MissingObservation("b".into()))
        );
    }
}
