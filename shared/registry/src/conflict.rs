//! The compiled conflict graph (LychD design rules §8 Containers, "Current unit graph"; §23
//! Orchestrator, "Current conflict policy"): from the validated registry, each animator's
//! effective conflict domains, the undirected conflict edges (one per pair, lexically
//! ordered), the covens and the digest of everything the Orchestrator plans from.
//!
//! Rules:
//! - an omitted `conflict_domains` on a dedicated non-resident soulstone is the compiler's
//!   `default-exclusive`, which conflicts with every animator whose effective set is non-empty
//!   — unless it is placed on a device (`device`), where memory decides (see [`crate::memory`]);
//! - an explicit `[]` declares coexistence (no edge at all);
//! - residents and shared runtimes have no conflicts (declaring any is refused by the
//!   registry);
//! - two animators conflict when their effective sets share a label;
//! - a coven (`groups`) never creates or relaxes a conflict, and a coven with an internal
//!   conflict refuses compilation.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::registry::{DEFAULT_EXCLUSIVE, DeclError, Registry, SourceKind};

/// One animator as the graph sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    /// Lifecycle-managed: a dedicated, non-resident soulstone (the only kind the Orchestrator
    /// starts or stops).
    pub managed: bool,
    pub resident: bool,
    /// Effective conflict domains (with `default-exclusive` where the compiler put it).
    pub domains: BTreeSet<String>,
    /// True when the domains were omitted and the compiler chose `default-exclusive`.
    pub default_exclusive: bool,
    pub groups: BTreeSet<String>,
}

/// The compiled graph. Built once from a validated [`Registry`]; frozen.
#[derive(Debug, Clone)]
pub struct ConflictGraph {
    nodes: BTreeMap<String, Node>,
    /// Undirected edges, each `(a, b)` with `a < b`, in lexical order.
    edges: BTreeSet<(String, String)>,
    neighbours: BTreeMap<String, BTreeSet<String>>,
    covens: BTreeMap<String, BTreeSet<String>>,
    digest: String,
}

fn conflicts(a: &Node, b: &Node) -> bool {
    if a.domains.is_empty() || b.domains.is_empty() {
        return false;
    }
    a.domains.contains(DEFAULT_EXCLUSIVE)
        || b.domains.contains(DEFAULT_EXCLUSIVE)
        || a.domains.intersection(&b.domains).next().is_some()
}

impl ConflictGraph {
    /// Compile the graph. Refused (naming the field): a coven with an internal conflict.
    pub fn compile(registry: &Registry) -> Result<ConflictGraph, DeclError> {
        let mut nodes = BTreeMap::new();
        for a in registry.animators() {
            let managed = a.source == SourceKind::Soulstone && a.dedicated && !a.resident;
            let (domains, default_exclusive) = match &a.conflict_domains {
                Some(d) => (d.clone(), false),
                None if managed && a.device.is_none() => {
                    (BTreeSet::from([DEFAULT_EXCLUSIVE.to_owned()]), true)
                }
                None => (BTreeSet::new(), false),
            };
            nodes.insert(
                a.name.clone(),
                Node {
                    name: a.name.clone(),
                    managed,
                    resident: a.resident,
                    domains,
                    default_exclusive,
                    groups: a.groups.clone(),
                },
            );
        }
        let mut edges = BTreeSet::new();
        let mut neighbours: BTreeMap<String, BTreeSet<String>> =
            nodes.keys().map(|n| (n.clone(), BTreeSet::new())).collect();
        // Only animators with a non-empty effective set can conflict; the pairwise check runs
        // over those (the map is ordered, so `a < b`).
        let contenders: Vec<&Node> = nodes.values().filter(|n| !n.domains.is_empty()).collect();
        for (i, a) in contenders.iter().enumerate() {
            for b in &contenders[i + 1..] {
                if conflicts(a, b) {
                    edges.insert((a.name.clone(), b.name.clone()));
                    neighbours
                        .get_mut(&a.name)
                        .expect("invariant: every node has a neighbour set")
                        .insert(b.name.clone());
                    neighbours
                        .get_mut(&b.name)
                        .expect("invariant: every node has a neighbour set")
                        .insert(a.name.clone());
                }
            }
        }
        let mut covens: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for n in nodes.values() {
            for g in &n.groups {
                covens.entry(g.clone()).or_default().insert(n.name.clone());
            }
        }
        for (coven, members) in &covens {
            for a in members {
                if let Some(b) = neighbours[a].iter().find(|b| members.contains(*b)) {
                    return Err(DeclError {
                        field: format!("groups.{coven}"),
                        message: format!(
                            "coven {coven} has an internal conflict between {a} and {b}"
                        ),
                    });
                }
            }
        }
        let digest = digest(registry, &nodes, &edges);
        Ok(ConflictGraph {
            nodes,
            edges,
            neighbours,
            covens,
            digest,
        })
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// Undirected edges, `(a, b)` with `a < b`, in lexical order.
    pub fn edges(&self) -> impl Iterator<Item = &(String, String)> {
        self.edges.iter()
    }

    /// The animators `name` conflicts with, sorted (empty for an unknown name).
    pub fn neighbours(&self, name: &str) -> impl Iterator<Item = &String> {
        self.neighbours.get(name).into_iter().flatten()
    }

    pub fn conflict(&self, a: &str, b: &str) -> bool {
        self.neighbours.get(a).is_some_and(|n| n.contains(b))
    }

    /// Covens by name, each with its members (sorted).
    pub fn covens(&self) -> &BTreeMap<String, BTreeSet<String>> {
        &self.covens
    }

    /// SHA-256 (hex) of the canonical text of the declarations the Orchestrator plans from
    /// (animators, their kinds and effective domains, covens, capability keys) and the
    /// edges: two configurations with the same digest compile to the same plan inputs.
    pub fn digest(&self) -> &str {
        &self.digest
    }
}

fn digest(
    registry: &Registry,
    nodes: &BTreeMap<String, Node>,
    edges: &BTreeSet<(String, String)>,
) -> String {
    let mut h = Sha256::new();
    h.update(b"lychd-conflict-graph-v1\n");
    for n in nodes.values() {
        let a = registry
            .animator(&n.name)
            .expect("invariant: nodes are the registry's animators");
        let line = format!(
            "animator {} source={:?} dedicated={} resident={} dynamic={} domains={} omitted={} groups={}\n",
            n.name,
            a.source,
            a.dedicated,
            a.resident,
            a.dynamic,
            n.domains.iter().cloned().collect::<Vec<_>>().join(","),
            n.default_exclusive,
            n.groups.iter().cloned().collect::<Vec<_>>().join(","),
        );
        h.update(line.as_bytes());
        // Placement lines only where declared: a configuration without devices keeps its digest.
        if let Some(d) = &a.device {
            h.update(format!("placed {} device={d}\n", n.name).as_bytes());
        }
        for k in registry.keys_of(&n.name) {
            h.update(format!("capability {k}\n").as_bytes());
            if let Some(m) = registry.capability(k).and_then(|c| c.memory_mib) {
                h.update(format!("footprint {k} mib={m}\n").as_bytes());
            }
        }
    }
    for d in registry.devices() {
        h.update(format!("device {} mib={}\n", d.name, d.memory_mib).as_bytes());
    }
    for (a, b) in edges {
        h.update(format!("edge {a} {b}\n").as_bytes());
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{cap, portal, soulstone};
    use crate::registry::AnimatorDecl;

    fn domains(a: AnimatorDecl, d: &[&str]) -> AnimatorDecl {
        AnimatorDecl {
            conflict_domains: Some(d.iter().map(|s| s.to_string()).collect()),
            ..a
        }
    }

    fn graph(a: &[AnimatorDecl]) -> Result<ConflictGraph, DeclError> {
        let caps: Vec<_> = a.iter().map(|a| cap(&a.name, "chat", "m")).collect();
        let reg = Registry::build(a, &caps)?;
        ConflictGraph::compile(&reg)
    }

    fn edges(g: &ConflictGraph) -> Vec<(&str, &str)> {
        g.edges().map(|(a, b)| (a.as_str(), b.as_str())).collect()
    }

    #[test]
    fn omitted_domains_on_a_dedicated_non_resident_are_default_exclusive() {
        let g = graph(&[soulstone("a"), soulstone("b"), soulstone("c")]).expect("compiles");
        let a = g.node("a").expect("a");
        assert!(a.managed && a.default_exclusive);
        assert_eq!(a.domains, BTreeSet::from([DEFAULT_EXCLUSIVE.to_owned()]));
        assert_eq!(edges(&g), [("a", "b"), ("a", "c"), ("b", "c")]);
    }

    #[test]
    fn default_exclusive_conflicts_with_every_non_empty_set() {
        let g = graph(&[
            soulstone("plain"),
            domains(soulstone("gpu"), &["gpu0"]),
            domains(soulstone("free"), &[]),
        ])
        .expect("compiles");
        assert_eq!(edges(&g), [("gpu", "plain")]);
        assert!(g.conflict("plain", "gpu") && g.conflict("gpu", "plain"));
        assert!(!g.conflict("plain", "free"));
    }

    #[test]
    fn explicit_empty_declares_coexistence() {
        let g =
            graph(&[domains(soulstone("a"), &[]), domains(soulstone("b"), &[])]).expect("compiles");
        assert_eq!(edges(&g), Vec::<(&str, &str)>::new());
        let a = g.node("a").expect("a");
        assert!(a.managed && !a.default_exclusive && a.domains.is_empty());
    }

    #[test]
    fn shared_labels_conflict_and_disjoint_labels_coexist() {
        let g = graph(&[
            domains(soulstone("a"), &["gpu0"]),
            domains(soulstone("b"), &["gpu0", "gpu1"]),
            domains(soulstone("c"), &["gpu1"]),
            domains(soulstone("d"), &["gpu2"]),
        ])
        .expect("compiles");
        assert_eq!(edges(&g), [("a", "b"), ("b", "c")]);
        assert_eq!(g.neighbours("b").collect::<Vec<_>>(), ["a", "c"]);
        assert_eq!(g.neighbours("d").count(), 0);
    }

    #[test]
    fn residents_and_shared_runtimes_have_no_conflicts_and_may_declare_none() {
        let mut r = soulstone("res");
        r.resident = true;
        let mut s = soulstone("shared");
        s.dedicated = false;
        let g = graph(&[soulstone("a"), r.clone(), s.clone(), portal("p")]).expect("compiles");
        for n in ["res", "shared", "p"] {
            let node = g.node(n).expect(n);
            assert!(!node.managed && node.domains.is_empty(), "{n}");
            assert_eq!(g.neighbours(n).count(), 0, "{n}");
        }
        let e = graph(&[domains(r, &["gpu0"])]).expect_err("resident with conflicts");
        assert_eq!(e.field, "animators[0].conflict_domains");
        assert!(e.message.contains("resident"), "{e:?}");
        let e = graph(&[domains(s, &["gpu0"])]).expect_err("shared with conflicts");
        assert_eq!(e.field, "animators[0].conflict_domains");
        assert!(e.message.contains("shared"), "{e:?}");
    }

    #[test]
    fn labels_follow_the_slug_grammar_and_default_exclusive_is_reserved() {
        for (bad, why) in [
            ("GPU", "lowercase"),
            ("gpu 0", "char"),
            ("", "empty"),
            ("default-exclusive", "compiler"),
        ] {
            let e = graph(&[domains(soulstone("a"), &[bad])]).expect_err(bad);
            assert_eq!(e.field, "animators[0].conflict_domains[0]", "{bad}: {why}");
        }
        let e = graph(&[domains(soulstone("a"), &["x", "x"])]).expect_err("duplicate");
        assert_eq!(e.field, "animators[0].conflict_domains[1]");
        let mut a = soulstone("a");
        a.groups = vec!["Bad".into()];
        assert_eq!(
            graph(&[a]).expect_err("group").field,
            "animators[0].groups[0]"
        );
        let mut a = soulstone("a");
        a.groups = vec!["g".into(), "g".into()];
        assert_eq!(
            graph(&[a]).expect_err("group").field,
            "animators[0].groups[1]"
        );
    }

    #[test]
    fn a_coven_with_an_internal_conflict_refuses_and_groups_change_no_edge() {
        let mut a = soulstone("a");
        a.groups = vec!["duo".into()];
        let mut b = soulstone("b");
        b.groups = vec!["duo".into()];
        let e = graph(&[a.clone(), b.clone()]).expect_err("internal conflict");
        assert_eq!(e.field, "groups.duo");
        assert!(e.message.contains("a and b"), "{e:?}");
        // Coexisting members are a valid coven; the grouping adds no edge and removes none.
        let a = domains(a, &[]);
        let b = domains(b, &[]);
        let mut c = soulstone("c");
        c.groups = vec!["solo".into()];
        let g = graph(&[a, b, c]).expect("compiles");
        assert_eq!(g.covens()["duo"], BTreeSet::from(["a".into(), "b".into()]));
        assert_eq!(edges(&g), Vec::<(&str, &str)>::new());
    }

    #[test]
    fn the_digest_is_stable_and_follows_every_planning_input() {
        let base = || vec![soulstone("a"), domains(soulstone("b"), &["gpu0"])];
        let d0 = graph(&base()).expect("c").digest().to_owned();
        assert_eq!(d0.len(), 64);
        assert_eq!(graph(&base()).expect("c").digest(), d0);
        let mut changed = base();
        changed[1].conflict_domains = Some(vec![]);
        assert_ne!(graph(&changed).expect("c").digest(), d0);
        let mut changed = base();
        changed[0].groups = vec!["g".into()];
        assert_ne!(graph(&changed).expect("c").digest(), d0);
        let mut changed = base();
        changed.push(soulstone("c"));
        assert_ne!(graph(&changed).expect("c").digest(), d0);
        // Endpoints are not a planning input.
        let mut same = base();
        same[0].endpoint = "http://127.0.0.1:9".into();
        assert_eq!(graph(&same).expect("c").digest(), d0);
    }
}
