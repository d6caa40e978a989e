//! Typed demand, matching against the registry, and the deterministic candidate order.
//!
//! Order (after eligibility): admission open before closed (draining), cached non-ERROR before
//! ERROR, active animator before inactive, then cached phase (WARM, WARMING, ACTIVATABLE, COLD,
//! UNKNOWN), then animator name, then key. Cached observations only rank; the chosen record is
//! observed afresh before issue. An exact key intersects every other constraint and never
//! substitutes another candidate.

use std::collections::{BTreeMap, BTreeSet};

use super::key::{CapabilityKey, Family};
use super::observation::Phase;
use super::registry::{Capability, Modality, Registry};

/// A validated demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Demand {
    pub family: Option<Family>,
    pub key: Option<CapabilityKey>,
    /// Model id or alias.
    pub model: Option<String>,
    pub modalities: BTreeSet<Modality>,
    pub tools_required: bool,
}

/// What the registry offers for a demand.
#[derive(Debug, PartialEq)]
pub enum Matched<'r> {
    /// Eligible capabilities, not yet ordered.
    Candidates(Vec<&'r Capability>),
    /// The exact key is not registered.
    ExactUnknown,
    /// The exact key is registered but fails another constraint of the demand.
    ExactIncompatible(&'r Capability),
    /// No declaration satisfies the demand.
    None,
}

fn satisfies(reg: &Registry, cap: &Capability, d: &Demand) -> bool {
    if d.family.is_some_and(|f| cap.family() != f) {
        return false;
    }
    if let Some(m) = &d.model
        && cap.key.model_id != *m
    {
        let by_alias = reg
            .animator(cap.animator())
            .and_then(|a| a.aliases.get(m))
            .is_some_and(|target| *target == cap.key.model_id);
        if !by_alias {
            return false;
        }
    }
    if !d.modalities.is_subset(&cap.input_modalities) {
        return false;
    }
    if d.tools_required && !cap.exposes_tools() {
        return false;
    }
    true
}

/// Eligible declarations for `d`.
pub fn matching<'r>(reg: &'r Registry, d: &Demand) -> Matched<'r> {
    if let Some(key) = &d.key {
        let Some(cap) = reg.capability(&key.to_string()) else {
            return Matched::ExactUnknown;
        };
        return if satisfies(reg, cap, d) {
            Matched::Candidates(vec![cap])
        } else {
            Matched::ExactIncompatible(cap)
        };
    }
    let found: Vec<_> = reg
        .capabilities()
        .filter(|c| satisfies(reg, c, d))
        .collect();
    if found.is_empty() {
        Matched::None
    } else {
        Matched::Candidates(found)
    }
}

/// Admission as read before the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    pub generation: i64,
    pub open_closures: i32,
}

impl Admission {
    pub fn is_open(self) -> bool {
        self.open_closures == 0
    }
}

/// What the office knows, before probing, about the candidates' animators and keys.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// By animator name. A missing entry reads as closed (fail closed).
    pub admission: BTreeMap<String, Admission>,
    /// Cached phase by key; a missing entry reads as UNKNOWN.
    pub cached: BTreeMap<String, Phase>,
}

impl Snapshot {
    pub fn admission_of(&self, animator: &str) -> Option<Admission> {
        self.admission.get(animator).copied()
    }

    pub fn phase_of(&self, key: &str) -> Phase {
        self.cached.get(key).copied().unwrap_or(Phase::Unknown)
    }

    /// An animator is active when it is resident or its runtime was last seen answering.
    pub fn active(&self, reg: &Registry, animator: &str) -> bool {
        reg.animator(animator).is_some_and(|a| a.resident)
            || reg
                .keys_of(animator)
                .iter()
                .any(|k| self.phase_of(k).runtime_up())
    }
}

/// The order key of one candidate (smaller first).
fn order_key<'c>(
    reg: &Registry,
    snap: &Snapshot,
    c: &'c Capability,
) -> (bool, bool, bool, u8, &'c str, &'c str) {
    let open = snap
        .admission_of(c.animator())
        .is_some_and(Admission::is_open);
    let phase = snap.phase_of(&c.key_text);
    (
        !open,
        phase == Phase::Error,
        !snap.active(reg, c.animator()),
        phase.rank(),
        c.animator(),
        c.key_text.as_str(),
    )
}

/// Order candidates deterministically.
pub fn order<'r>(
    reg: &Registry,
    snap: &Snapshot,
    mut candidates: Vec<&'r Capability>,
) -> Vec<&'r Capability> {
    candidates.sort_by_cached_key(|c| order_key(reg, snap, c));
    candidates
}

#[cfg(test)]
mod tests {
    use super::super::registry::tests::{cap, portal, soulstone};
    use super::super::registry::{CapabilityDecl, Registry};
    use super::*;

    fn demand() -> Demand {
        Demand {
            family: Some(Family::Chat),
            key: None,
            model: None,
            modalities: BTreeSet::new(),
            tools_required: false,
        }
    }

    fn reg() -> Registry {
        let mut b = soulstone("b");
        b.aliases.insert("gpt-4o".into(), "m1".into());
        Registry::build(
            &[soulstone("a"), b, soulstone("c"), portal("p")],
            &[
                cap("a", "chat", "m1"),
                cap("b", "chat", "m1"),
                CapabilityDecl {
                    input_modalities: vec![Modality::Text, Modality::Image],
                    supports_tools: true,
                    ..cap("c", "chat", "m2")
                },
                cap("c", "embedding", "e1"),
                cap("p", "chat", "m1"),
            ],
        )
        .expect("valid")
    }

    fn keys(v: &[&Capability]) -> Vec<String> {
        v.iter().map(|c| c.key_text.clone()).collect()
    }

    fn cands<'r>(m: Matched<'r>) -> Vec<&'r Capability> {
        match m {
            Matched::Candidates(v) => v,
            other => panic!("expected candidates, got {other:?}"),
        }
    }

    #[test]
    fn family_model_alias_modalities_and_tools_filter() {
        let r = reg();
        let all = cands(matching(&r, &demand()));
        assert_eq!(
            keys(&all),
            ["a:chat:m1", "b:chat:m1", "c:chat:m2", "p:chat:m1"]
        );
        let m1 = cands(matching(
            &r,
            &Demand {
                model: Some("m1".into()),
                ..demand()
            },
        ));
        assert_eq!(keys(&m1), ["a:chat:m1", "b:chat:m1", "p:chat:m1"]);
        // An alias names the pool of the animators that declare it.
        let alias = cands(matching(
            &r,
            &Demand {
                model: Some("gpt-4o".into()),
                ..demand()
            },
        ));
        assert_eq!(keys(&alias), ["b:chat:m1"]);
        let img = cands(matching(
            &r,
            &Demand {
                modalities: [Modality::Image].into(),
                ..demand()
            },
        ));
        assert_eq!(keys(&img), ["c:chat:m2"]);
        let tools = cands(matching(
            &r,
            &Demand {
                tools_required: true,
                ..demand()
            },
        ));
        assert_eq!(keys(&tools), ["c:chat:m2"]);
        assert_eq!(
            matching(
                &r,
                &Demand {
                    family: Some(Family::Rerank),
                    ..demand()
                }
            ),
            Matched::None
        );
        let emb = cands(matching(
            &r,
            &Demand {
                family: Some(Family::Embedding),
                ..demand()
            },
        ));
        assert_eq!(keys(&emb), ["c:embedding:e1"]);
    }

    #[test]
    fn exact_key_never_substitutes() {
        let r = reg();
        let key = |s: &str| Some(super::super::key::parse_v1(s).expect("key"));
        let exact = cands(matching(
            &r,
            &Demand {
                key: key("b:chat:m1"),
                family: None,
                ..demand()
            },
        ));
        assert_eq!(keys(&exact), ["b:chat:m1"]);
        assert_eq!(
            matching(
                &r,
                &Demand {
                    key: key("z:chat:m1"),
                    ..demand()
                }
            ),
            Matched::ExactUnknown
        );
        // The key intersects every other constraint.
        match matching(
            &r,
            &Demand {
                key: key("a:chat:m1"),
                tools_required: true,
                ..demand()
            },
        ) {
            Matched::ExactIncompatible(c) => assert_eq!(c.key_text, "a:chat:m1"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            matching(
                &r,
                &Demand {
                    key: key("a:chat:m1"),
                    model: Some("m2".into()),
                    ..demand()
                }
            ),
            Matched::ExactIncompatible(_)
        ));
        assert!(matches!(
            matching(
                &r,
                &Demand {
                    key: key("c:embedding:e1"),
                    family: Some(Family::Chat),
                    ..demand()
                }
            ),
            Matched::ExactIncompatible(_)
        ));
    }

    fn snap(open: &[(&str, bool)], cached: &[(&str, Phase)]) -> Snapshot {
        Snapshot {
            admission: open
                .iter()
                .map(|(a, o)| {
                    (
                        (*a).to_owned(),
                        Admission {
                            generation: 1,
                            open_closures: if *o { 0 } else { 1 },
                        },
                    )
                })
                .collect(),
            cached: cached.iter().map(|(k, p)| ((*k).to_owned(), *p)).collect(),
        }
    }

    fn ordered(s: &Snapshot, model: &str) -> Vec<String> {
        let r = reg();
        let c = cands(matching(
            &r,
            &Demand {
                model: Some(model.into()),
                ..demand()
            },
        ));
        keys(&order(&r, s, c))
    }

    #[test]
    fn open_before_draining() {
        let s = snap(
            &[("a", false), ("b", true), ("p", true)],
            &[("a:chat:m1", Phase::Warm)],
        );
        assert_eq!(ordered(&s, "m1")[0], "b:chat:m1");
        // Unknown admission (no row) reads as closed.
        let s = snap(&[("b", true)], &[]);
        assert_eq!(ordered(&s, "m1"), ["b:chat:m1", "a:chat:m1", "p:chat:m1"]);
    }

    #[test]
    fn error_behind_others_with_the_same_admission() {
        let s = snap(
            &[("a", true), ("b", true), ("p", true)],
            &[("a:chat:m1", Phase::Error), ("b:chat:m1", Phase::Cold)],
        );
        assert_eq!(ordered(&s, "m1"), ["b:chat:m1", "p:chat:m1", "a:chat:m1"]);
    }

    #[test]
    fn active_before_inactive_then_warm_before_warming() {
        // b's runtime is up (another of its keys would do too); a is inactive and cold.
        let s = snap(
            &[("a", true), ("b", true), ("p", true)],
            &[
                ("a:chat:m1", Phase::Cold),
                ("b:chat:m1", Phase::Activatable),
            ],
        );
        assert_eq!(ordered(&s, "m1"), ["b:chat:m1", "a:chat:m1", "p:chat:m1"]);
        let s = snap(
            &[("a", true), ("b", true), ("p", true)],
            &[("a:chat:m1", Phase::Warming), ("b:chat:m1", Phase::Warm)],
        );
        assert_eq!(ordered(&s, "m1"), ["b:chat:m1", "a:chat:m1", "p:chat:m1"]);
    }

    #[test]
    fn then_name_and_key() {
        let s = snap(&[("a", true), ("b", true), ("p", true)], &[]);
        assert_eq!(ordered(&s, "m1"), ["a:chat:m1", "b:chat:m1", "p:chat:m1"]);
        let r = reg();
        let c = cands(matching(&r, &demand()));
        let s = snap(&[("a", true), ("b", true), ("c", true), ("p", true)], &[]);
        assert_eq!(
            keys(&order(&r, &s, c)),
            ["a:chat:m1", "b:chat:m1", "c:chat:m2", "p:chat:m1"]
        );
    }

    #[test]
    fn order_is_independent_of_input_order() {
        let r = reg();
        let s = snap(
            &[("a", true), ("b", false), ("c", true), ("p", true)],
            &[("c:chat:m2", Phase::Warm), ("a:chat:m1", Phase::Warming)],
        );
        let mut c = cands(matching(&r, &demand()));
        let first = keys(&order(&r, &s, c.clone()));
        c.reverse();
        assert_eq!(keys(&order(&r, &s, c)), first);
        assert_eq!(first, ["c:chat:m2", "a:chat:m1", "p:chat:m1", "b:chat:m1"]);
    }
}
