//! The host's own view of a transition (LychD design rules §10 Privilege, "The physical
//! transaction"; §23 "Host Mutation Port"): what systemd reports for each animator's generated
//! target and service, the unit identities generated from the registry, the classification of
//! a readback (the intent's desired world, its exact expected pre-world, or neither) and the
//! host-side recomputation of a forward intent (the consumer's independent recheck). Pure: the
//! readback is an argument; nothing here runs `systemctl` or reads a clock.

use std::collections::{BTreeMap, BTreeSet};

use lychd_registry::conflict::ConflictGraph;
use lychd_registry::registry::Registry;

use super::intent::{Operation, TransitionIntent, is_transition_id};

/// The generated target of an animator: `lychd-animator-<name>.target`.
pub fn target_unit(animator: &str) -> String {
    format!("lychd-animator-{animator}.target")
}

/// The animator's runtime service (its Quadlet container): `lychd-animator-<name>.service`.
pub fn service_unit(animator: &str) -> String {
    format!("lychd-animator-{animator}.service")
}

/// What systemd reports for one animator (its target and its service together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostState {
    /// The target or the service is active, activating, deactivating or reloading: the
    /// runtime holds (or is about to hold, or still holds) its hardware.
    Active,
    /// Both inactive (or failed): nothing runs.
    Inactive,
    /// A unit is not loaded, or the answer could not be read: nothing is proved.
    Unknown,
}

/// systemd's `ActiveState` of one unit, read as running or not; `None` for an unknown word.
pub fn running(active_state: &str) -> Option<bool> {
    match active_state {
        "active" | "activating" | "deactivating" | "reloading" | "refreshing" => Some(true),
        "inactive" | "failed" | "maintenance" => Some(false),
        _ => None,
    }
}

/// Combine the target's and the service's `(LoadState, ActiveState)` into one state.
pub fn combine(target: Option<(&str, &str)>, service: Option<(&str, &str)>) -> HostState {
    let (Some((tl, ta)), Some((sl, sa))) = (target, service) else {
        return HostState::Unknown;
    };
    // The target is generated: it must be loaded. The service may be absent only while it
    // is inactive (a Quadlet not yet generated cannot be running).
    if tl != "loaded" || !(sl == "loaded" || sl == "not-found") {
        return HostState::Unknown;
    }
    match (running(ta), running(sa)) {
        (Some(false), Some(false)) => HostState::Inactive,
        (Some(true), _) | (_, Some(true)) => HostState::Active,
        _ => HostState::Unknown,
    }
}

/// Host states by animator name.
pub type HostWorld = BTreeMap<String, HostState>;

/// The active animators of `world` among `scope`, sorted; `None` when one is unknown.
pub fn host_active(scope: &[String], world: &HostWorld) -> Option<Vec<String>> {
    let mut active = BTreeSet::new();
    for name in scope {
        match world.get(name) {
            Some(HostState::Active) => {
                active.insert(name.clone());
            }
            Some(HostState::Inactive) => {}
            Some(HostState::Unknown) | None => return None,
        }
    }
    Some(active.into_iter().collect())
}

/// The active set an intent leaves behind: its expected pre-world without the evicted,
/// with the launched; sorted.
pub fn desired_active(intent: &TransitionIntent) -> Vec<String> {
    let mut set: BTreeSet<String> = intent.expected_active.iter().cloned().collect();
    for e in &intent.evict {
        set.remove(e);
    }
    set.extend(intent.launch.iter().cloned());
    set.into_iter().collect()
}

/// Which world a readback proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readback {
    /// Exactly the desired active set among the intent's animators.
    Desired,
    /// Exactly the expected pre-world.
    Prior,
    /// Neither (or unknown).
    Neither,
}

/// Classify a readback of the intent's scope (desired wins: "exact desired state wins even
/// after a bad client return").
pub fn classify(intent: &TransitionIntent, world: &HostWorld) -> Readback {
    let Some(active) = host_active(&intent.scope(), world) else {
        return Readback::Neither;
    };
    if active == desired_active(intent) {
        Readback::Desired
    } else if active == intent.expected_active {
        Readback::Prior
    } else {
        Readback::Neither
    }
}

/// Why the host refuses an intent (the consumer's recheck), before any effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostRefusal {
    /// Not a well-formed intent for this registry (unknown or unmanaged animator, a
    /// capability of another animator, a launch other than the target, unsorted or
    /// duplicated sets): a malformed delivery, rejected.
    Malformed,
    /// Written for another configuration generation: declined.
    StaleGeneration,
    /// The host's world differs from the intent's (other evictees, another pre-world):
    /// declined.
    StaleWorld,
    /// A compensation that is not the exact inverse of a completed forward: rejected.
    ForgedCompensation,
}

impl HostRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            HostRefusal::Malformed => "MALFORMED",
            HostRefusal::StaleGeneration => "STALE_GENERATION",
            HostRefusal::StaleWorld => "STALE_WORLD",
            HostRefusal::ForgedCompensation => "FORGED_COMPENSATION",
        }
    }
}

fn sorted_unique(v: &[String]) -> bool {
    v.windows(2).all(|w| w[0] < w[1])
}

/// The animators a host recheck of `intent` reads: its target, the target's conflict
/// neighbours and every animator it names; sorted.
pub fn recheck_scope(graph: &ConflictGraph, intent: &TransitionIntent) -> Vec<String> {
    let mut set: BTreeSet<String> = graph.neighbours(&intent.target_animator).cloned().collect();
    set.insert(intent.target_animator.clone());
    set.extend(intent.scope());
    set.into_iter().collect()
}

/// Structural checks every intent passes before anything else: the id, the capability of
/// the target, managed animators only, sorted sets.
pub fn well_formed(
    registry: &Registry,
    graph: &ConflictGraph,
    intent: &TransitionIntent,
) -> Result<(), HostRefusal> {
    let managed = |a: &String| graph.node(a).is_some_and(|n| n.managed);
    let ok = is_transition_id(&intent.id)
        && registry
            .capability(&intent.capability_key)
            .is_some_and(|c| c.animator() == intent.target_animator)
        && managed(&intent.target_animator)
        && intent.scope().iter().all(managed)
        && sorted_unique(&intent.expected_active)
        && intent.evict.len() <= 256
        && intent.launch.len() <= 256;
    if ok {
        Ok(())
    } else {
        Err(HostRefusal::Malformed)
    }
}

/// The consumer's independent recheck of a forward intent: same configuration digest, and the
/// plan the host recomputes from its own readback — evict the active conflict neighbours
/// (sorted), launch the target, expect exactly the active set among the target and its
/// neighbours — equals the intent's.
pub fn recheck_forward(
    registry: &Registry,
    graph: &ConflictGraph,
    intent: &TransitionIntent,
    world: &HostWorld,
) -> Result<(), HostRefusal> {
    if intent.operation != Operation::Forward {
        return Err(HostRefusal::Malformed);
    }
    well_formed(registry, graph, intent)?;
    if intent.launch != [intent.target_animator.clone()]
        || !sorted_unique(&intent.evict)
        || intent
            .evict
            .iter()
            .any(|e| !graph.conflict(&intent.target_animator, e))
    {
        return Err(HostRefusal::Malformed);
    }
    if intent.config_digest != graph.digest() {
        return Err(HostRefusal::StaleGeneration);
    }
    let scope = recheck_scope(graph, intent);
    let Some(active) = host_active(&scope, world) else {
        return Err(HostRefusal::StaleWorld);
    };
    let evict: Vec<String> = active
        .iter()
        .filter(|a| graph.conflict(&intent.target_animator, a))
        .cloned()
        .collect();
    if active.contains(&intent.target_animator)
        || evict != intent.evict
        || active != intent.expected_active
    {
        return Err(HostRefusal::StaleWorld);
    }
    Ok(())
}

/// A compensation is accepted only as the exact typed inverse of a forward the host itself
/// completed (`completed_forward`, read from the host's custody copy).
pub fn recheck_compensation(
    graph: &ConflictGraph,
    intent: &TransitionIntent,
    completed_forward: Option<&TransitionIntent>,
) -> Result<(), HostRefusal> {
    let Some(forward) = completed_forward else {
        return Err(HostRefusal::ForgedCompensation);
    };
    if forward.operation != Operation::Forward || *intent != forward.compensation() {
        return Err(HostRefusal::ForgedCompensation);
    }
    if intent.config_digest != graph.digest() {
        return Err(HostRefusal::StaleGeneration);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use lychd_registry::fixtures::{cap, soulstone};

    use super::*;
    use crate::domain::plan::{Action, Plan};

    const ID: &str = "0123456789abcdef0123456789abcdef";

    fn fx() -> (Registry, ConflictGraph) {
        let animators = vec![soulstone("a"), soulstone("b"), soulstone("c")];
        let caps: Vec<_> = animators
            .iter()
            .map(|a| cap(&a.name, "chat", "m"))
            .collect();
        let reg = Registry::build(&animators, &caps).expect("valid");
        let graph = ConflictGraph::compile(&reg).expect("compiles");
        (reg, graph)
    }

    fn forward(graph: &ConflictGraph) -> TransitionIntent {
        TransitionIntent::forward(
            ID,
            &Plan {
                action: Action::HardSwap,
                capability_key: "a:chat:m".into(),
                target: "a".into(),
                evict: vec!["b".into()],
                launch: vec!["a".into()],
                cost: 1,
                expected_active: vec!["b".into()],
                config_digest: graph.digest().to_owned(),
                memory: None,
            },
        )
        .expect("hard swap")
    }

    fn world(active: &[&str]) -> HostWorld {
        ["a", "b", "c"]
            .iter()
            .map(|n| {
                let s = if active.contains(n) {
                    HostState::Active
                } else {
                    HostState::Inactive
                };
                ((*n).to_owned(), s)
            })
            .collect()
    }

    #[test]
    fn target_and_service_states_combine() {
        let l = |a| Some(("loaded", a));
        assert_eq!(combine(l("inactive"), l("failed")), HostState::Inactive);
        assert_eq!(combine(l("active"), l("inactive")), HostState::Active);
        assert_eq!(combine(l("inactive"), l("deactivating")), HostState::Active);
        assert_eq!(
            combine(Some(("not-found", "inactive")), l("inactive")),
            HostState::Unknown
        );
        assert_eq!(combine(l("inactive"), None), HostState::Unknown);
        assert_eq!(combine(l("bogus"), l("inactive")), HostState::Unknown);
        assert_eq!(target_unit("a"), "lychd-animator-a.target");
    }

    #[test]
    fn a_readback_is_the_desired_world_the_prior_one_or_neither() {
        let (_, graph) = fx();
        let f = forward(&graph);
        assert_eq!(classify(&f, &world(&["a"])), Readback::Desired);
        assert_eq!(classify(&f, &world(&["b"])), Readback::Prior);
        assert_eq!(classify(&f, &world(&[])), Readback::Neither);
        assert_eq!(classify(&f, &world(&["a", "b"])), Readback::Neither);
        let mut unknown = world(&["a"]);
        unknown.insert("b".into(), HostState::Unknown);
        assert_eq!(classify(&f, &unknown), Readback::Neither);
        let c = f.compensation();
        assert_eq!(classify(&c, &world(&["b"])), Readback::Desired);
        assert_eq!(classify(&c, &world(&["a"])), Readback::Prior);
    }

    #[test]
    fn the_host_recomputes_the_forward_plan_from_its_own_readback() {
        let (reg, graph) = fx();
        let f = forward(&graph);
        assert_eq!(recheck_forward(&reg, &graph, &f, &world(&["b"])), Ok(()));
        assert_eq!(
            recheck_forward(&reg, &graph, &f, &world(&["c"])),
            Err(HostRefusal::StaleWorld)
        );
        assert_eq!(
            recheck_forward(&reg, &graph, &f, &world(&["b", "c"])),
            Err(HostRefusal::StaleWorld)
        );
        let mut stale = f.clone();
        stale.config_digest = "0".repeat(64);
        assert_eq!(
            recheck_forward(&reg, &graph, &stale, &world(&["b"])),
            Err(HostRefusal::StaleGeneration)
        );
        let mut odd = f.clone();
        odd.launch = vec!["c".into()];
        assert_eq!(
            recheck_forward(&reg, &graph, &odd, &world(&["b"])),
            Err(HostRefusal::Malformed)
        );
        let mut unknown = f.clone();
        unknown.evict = vec!["zz".into()];
        assert_eq!(
            recheck_forward(&reg, &graph, &unknown, &world(&["b"])),
            Err(HostRefusal::Malformed)
        );
    }

    #[test]
    fn only_the_exact_inverse_of_a_completed_forward_is_a_compensation() {
        let (_, graph) = fx();
        let f = forward(&graph);
        let c = f.compensation();
        assert_eq!(recheck_compensation(&graph, &c, Some(&f)), Ok(()));
        assert_eq!(
            recheck_compensation(&graph, &c, None),
            Err(HostRefusal::ForgedCompensation)
        );
        let mut forged = c.clone();
        forged.launch = vec!["c".into()];
        assert_eq!(
            recheck_compensation(&graph, &forged, Some(&f)),
            Err(HostRefusal::ForgedCompensation)
        );
    }
}
