//! The frozen `TransitionIntent` (LychD design rules §10 Privilege, "Decision: authority
//! before effect"; §23 "Host Mutation Port"): a 32-hex correlation id, forward or exact
//! compensation, configuration digest, canonical animator and capability, ordered evict and
//! launch sets and the exact expected active pre-world. Logical identities only — never a
//! command, unit name, path, environment or payload. And the two worlds a transition may
//! prove: the desired one (target WARM, evictees cold) and the exact prior one.

use std::collections::BTreeSet;

use super::plan::{Action, Phase, Plan, World};

/// Forward, or the exact typed inverse of one forward intent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Forward,
    Compensation,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Forward => "forward",
            Operation::Compensation => "compensation",
        }
    }
}

/// The frozen intent handed to an actuator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionIntent {
    /// 32 lowercase hex digits.
    pub id: String,
    pub operation: Operation,
    pub config_digest: String,
    pub target_animator: String,
    pub capability_key: String,
    /// Animators to stop, in order.
    pub evict: Vec<String>,
    /// Animators to start, in order.
    pub launch: Vec<String>,
    /// The exact active world expected before this intent is applied, sorted.
    pub expected_active: Vec<String>,
}

/// Whether `s` is a transition id: 32 lowercase hex digits.
pub fn is_transition_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl TransitionIntent {
    /// Freeze the forward intent of a `HARD_SWAP` plan (a `SOFT_SWAP` or `NO_OP` invokes no
    /// actuator: `None`).
    pub fn forward(id: &str, plan: &Plan) -> Option<TransitionIntent> {
        if plan.action != Action::HardSwap || !is_transition_id(id) {
            return None;
        }
        Some(TransitionIntent {
            id: id.to_owned(),
            operation: Operation::Forward,
            config_digest: plan.config_digest.clone(),
            target_animator: plan.target.clone(),
            capability_key: plan.capability_key.clone(),
            evict: plan.evict.clone(),
            launch: plan.launch.clone(),
            expected_active: plan.expected_active.clone(),
        })
    }

    /// The exact typed inverse of a forward intent: stop what it launched, start what it
    /// evicted (in reverse order), expecting the forward's desired world.
    pub fn compensation(&self) -> TransitionIntent {
        let mut after: BTreeSet<String> = self.expected_active.iter().cloned().collect();
        for e in &self.evict {
            after.remove(e);
        }
        after.extend(self.launch.iter().cloned());
        TransitionIntent {
            id: self.id.clone(),
            operation: Operation::Compensation,
            config_digest: self.config_digest.clone(),
            target_animator: self.target_animator.clone(),
            capability_key: self.capability_key.clone(),
            evict: self.launch.iter().rev().cloned().collect(),
            launch: self.evict.iter().rev().cloned().collect(),
            expected_active: after.into_iter().collect(),
        }
    }

    /// Every animator the intent names (evict, launch, expected), sorted.
    pub fn scope(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self
            .evict
            .iter()
            .chain(&self.launch)
            .chain(&self.expected_active)
            .collect();
        set.into_iter().cloned().collect()
    }
}

/// Whether `world` shows the desired world of a forward intent: the capability WARM and every
/// evictee cold (not active, and observed).
pub fn desired_reached(capability_key: &str, evict: &[String], world: &World) -> bool {
    let target_warm = world.values().any(|v| {
        v.phases
            .get(capability_key)
            .is_some_and(|p| *p == Phase::Warm)
    });
    target_warm
        && evict
            .iter()
            .all(|e| world.get(e).is_some_and(|v| !v.active() && !v.unobserved()))
}

/// The active animators of `world` among `scope`, or `None` when one of them is unobserved
/// (UNKNOWN: nothing is proved).
pub fn active_among(scope: &[String], world: &World) -> Option<Vec<String>> {
    let mut active = Vec::new();
    for name in scope {
        let v = world.get(name)?;
        if v.unobserved() {
            return None;
        }
        if v.active() {
            active.push(name.clone());
        }
    }
    Some(active)
}

/// Whether `world` proves the exact prior world of `forward`: among the animators the intent
/// names, exactly the expected active ones are active, each WARM on every key it serves.
pub fn prior_restored(forward: &TransitionIntent, world: &World) -> bool {
    let scope = forward.scope();
    let Some(active) = active_among(&scope, world) else {
        return false;
    };
    active == forward.expected_active
        && active.iter().all(|a| {
            world
                .get(a)
                .is_some_and(|v| v.phases.values().any(|p| *p == Phase::Warm))
        })
}

/// A runtime-native activation (the `SOFT_SWAP` of a started runtime whose capability is
/// ACTIVATABLE; LychD design rules §23 "Runtime-Started Convergence"): the adapter is asked to
/// load the target capability on its already-started runtime. Logical identities only, like
/// [`TransitionIntent`]; it has no inverse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivationIntent {
    /// The transition's id (32 lowercase hex digits).
    pub id: String,
    pub config_digest: String,
    pub target_animator: String,
    pub capability_key: String,
}

impl ActivationIntent {
    /// Freeze the activation of a `SOFT_SWAP` plan (any other plan: `None`).
    pub fn of(id: &str, plan: &Plan) -> Option<ActivationIntent> {
        if plan.action != Action::SoftSwap || !is_transition_id(id) {
            return None;
        }
        Some(ActivationIntent {
            id: id.to_owned(),
            config_digest: plan.config_digest.clone(),
            target_animator: plan.target.clone(),
            capability_key: plan.capability_key.clone(),
        })
    }
}

/// Whether `world` shows `capability_key` ACTIVATABLE: started, not loaded, and only a
/// runtime-native activation would load it (WARMING and a static started route simply await
/// warmth).
pub fn needs_activation(capability_key: &str, world: &World) -> bool {
    world.values().any(|v| {
        v.phases
            .get(capability_key)
            .is_some_and(|p| *p == Phase::Activatable)
    })
}

/// Whether `world` shows `animator` stopped: observed, and no key of it active (what a soft
/// activation's containment needs before its runtime guard may be cleared; readiness alone
/// never does).
pub fn stopped(animator: &str, world: &World) -> bool {
    world
        .get(animator)
        .is_some_and(|v| !v.active() && !v.unobserved())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::domain::plan::AnimatorView;

    fn plan() -> Plan {
        Plan {
            action: Action::HardSwap,
            capability_key: "a:chat:m".into(),
            target: "a".into(),
            evict: vec!["b".into(), "c".into()],
            launch: vec!["a".into()],
            cost: 2,
            expected_active: vec!["b".into(), "c".into()],
            config_digest: "d".repeat(64),
            memory: None,
        }
    }

    fn world(set: &[(&str, Phase)]) -> World {
        set.iter()
            .map(|(n, p)| {
                (
                    (*n).to_owned(),
                    AnimatorView {
                        phases: BTreeMap::from([(format!("{n}:chat:m"), *p)]),
                        admission_open: false,
                        live_leases: 0,
                    },
                )
            })
            .collect()
    }

    const ID: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_forward_intent_carries_logical_identities_and_its_exact_inverse() {
        let f = TransitionIntent::forward(ID, &plan()).expect("hard swap");
        assert_eq!(f.operation, Operation::Forward);
        assert_eq!(
            (f.evict.len(), f.launch.as_slice()),
            (2, &["a".to_owned()][..])
        );
        let c = f.compensation();
        assert_eq!(c.operation, Operation::Compensation);
        assert_eq!(c.evict, ["a"]);
        assert_eq!(c.launch, ["c", "b"]);
        assert_eq!(
            c.expected_active,
            ["a"],
            "the inverse expects the desired world"
        );
        assert_eq!(f.scope(), ["a", "b", "c"]);
        // Only a hard swap invokes the actuator; ids are 32 lowercase hex.
        let mut soft = plan();
        soft.action = Action::SoftSwap;
        assert!(TransitionIntent::forward(ID, &soft).is_none());
        assert!(TransitionIntent::forward("XYZ", &plan()).is_none());
        assert!(!is_transition_id(&ID.to_uppercase()));
    }

    #[test]
    fn the_desired_world_needs_the_target_warm_and_every_evictee_cold() {
        let f = TransitionIntent::forward(ID, &plan()).expect("hard swap");
        let ok = world(&[("a", Phase::Warm), ("b", Phase::Cold), ("c", Phase::Cold)]);
        assert!(desired_reached(&f.capability_key, &f.evict, &ok));
        let loading = world(&[
            ("a", Phase::Warming),
            ("b", Phase::Cold),
            ("c", Phase::Cold),
        ]);
        assert!(!desired_reached(&f.capability_key, &f.evict, &loading));
        let still = world(&[("a", Phase::Warm), ("b", Phase::Warm), ("c", Phase::Cold)]);
        assert!(!desired_reached(&f.capability_key, &f.evict, &still));
        let unknown = world(&[
            ("a", Phase::Warm),
            ("b", Phase::Unknown),
            ("c", Phase::Cold),
        ]);
        assert!(!desired_reached(&f.capability_key, &f.evict, &unknown));
    }

    #[test]
    fn an_activation_is_frozen_from_a_soft_swap_only_and_needs_an_activatable_key() {
        let mut soft = plan();
        soft.action = Action::SoftSwap;
        let a = ActivationIntent::of(ID, &soft).expect("soft swap");
        assert_eq!(
            (a.target_animator.as_str(), a.capability_key.as_str()),
            ("a", "a:chat:m")
        );
        assert!(ActivationIntent::of(ID, &plan()).is_none(), "a hard swap");
        assert!(ActivationIntent::of("XYZ", &soft).is_none());
        assert!(needs_activation(
            "a:chat:m",
            &world(&[("a", Phase::Activatable)])
        ));
        assert!(!needs_activation(
            "a:chat:m",
            &world(&[("a", Phase::Warming)])
        ));
        assert!(stopped("a", &world(&[("a", Phase::Cold)])));
        for p in [
            Phase::Warm,
            Phase::Activatable,
            Phase::Error,
            Phase::Unknown,
        ] {
            assert!(!stopped("a", &world(&[("a", p)])), "{p:?}");
        }
        assert!(!stopped("z", &world(&[("a", Phase::Cold)])), "unobserved");
    }

    #[test]
    fn only_the_exact_prior_world_proves_restoration() {
        let f = TransitionIntent::forward(ID, &plan()).expect("hard swap");
        let prior = world(&[("a", Phase::Cold), ("b", Phase::Warm), ("c", Phase::Warm)]);
        assert!(prior_restored(&f, &prior));
        let half = world(&[("a", Phase::Cold), ("b", Phase::Warm), ("c", Phase::Cold)]);
        assert!(!prior_restored(&f, &half));
        let extra = world(&[
            ("a", Phase::Warming),
            ("b", Phase::Warm),
            ("c", Phase::Warm),
        ]);
        assert!(!prior_restored(&f, &extra));
        let unknown = world(&[
            ("a", Phase::Unknown),
            ("b", Phase::Warm),
            ("c", Phase::Warm),
        ]);
        assert!(!prior_restored(&f, &unknown));
        let loading = world(&[
            ("a", Phase::Cold),
            ("b", Phase::Warming),
            ("c", Phase::Warm),
        ]);
        assert!(!prior_restored(&f, &loading));
    }
}
