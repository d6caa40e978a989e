//! Placement by measured memory (issue 25 point 3): which running animators a hard swap must
//! stop so that the target's model fits on its device, and the arithmetic behind it. Pure:
//! the footprints (measured and declared), the usage book and the observations are arguments;
//! nothing here measures, probes or reads a clock.
//!
//! The rule (docs/orchestrator.md, "Placement by memory"):
//! - a model's footprint is its measured value for (animator, model, context size) when there
//!   is one, else its declared estimate;
//! - an active animator holds the footprints of its models that are loaded or loading (WARM,
//!   WARMING); one that answers without either (ACTIVATABLE, ERROR) holds its largest model's;
//! - the target fits when `used − freed + needed ≤ capacity` on its device, where `freed`
//!   counts the conflict evictees placed there (a declared conflict evicts even when memory
//!   fits);
//! - otherwise the candidates — the other active, lifecycle-managed animators on the device
//!   (never a resident, never a shared runtime) — are ordered by disruption: lower priority
//!   first, then idle before leased, then least recently used, then by name; the plan evicts
//!   the shortest prefix of that order that frees enough (so its most disruptive evictee is as
//!   little disruptive as any sufficient set allows), then drops every member of the prefix
//!   not needed to fit, the more disruptive first;
//! - no sufficient set: declined `MEMORY_INSUFFICIENT`.
//!
//! Sorting dominates: O(n log n) in the animators on the device.

use std::collections::BTreeMap;

use lychd_registry::registry::Registry;

use super::world::{AnimatorView, Phase};

/// A measured footprint's identity: the same model at another context size is another entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FootprintKey {
    pub animator: String,
    pub model_id: String,
    pub context_tokens: u32,
}

impl FootprintKey {
    /// The identity of a declared capability's footprint.
    pub fn of(registry: &Registry, key: &str) -> Option<FootprintKey> {
        let cap = registry.capability(key)?;
        Some(FootprintKey {
            animator: cap.animator().to_owned(),
            model_id: cap.key.model_id.clone(),
            context_tokens: cap.context_tokens,
        })
    }
}

/// Where a footprint value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Measured after the animator became WARM.
    Measured,
    /// The declared first estimate (`memory_mib`), before any measurement.
    Declared,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Measured => "MEASURED",
            Source::Declared => "DECLARED",
        }
    }
}

/// What the service remembers of an animator's use: the priority of the last request for one
/// of its capabilities and when (a counter that only grows; 0: never, least recent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub priority: u8,
    pub recency: u64,
}

/// The memory inputs of a plan (default: nothing measured, nothing used).
#[derive(Debug, Clone, Default)]
pub struct Memory {
    pub measured: BTreeMap<FootprintKey, u64>,
    pub usage: BTreeMap<String, Usage>,
}

impl Memory {
    /// The footprint of `key` (a declared capability): measured, else declared. `None` when
    /// neither exists (an unplaced animator).
    pub fn footprint(&self, registry: &Registry, key: &str) -> Option<(u64, Source)> {
        let cap = registry.capability(key)?;
        if self.measured.is_empty() {
            return cap.memory_mib.map(|m| (m, Source::Declared));
        }
        match self.measured.get(&FootprintKey::of(registry, key)?) {
            Some(m) => Some((*m, Source::Measured)),
            None => cap.memory_mib.map(|m| (m, Source::Declared)),
        }
    }

    /// What an active animator holds (see the module's rule).
    pub fn held(&self, registry: &Registry, animator: &str, view: &AnimatorView) -> u64 {
        let keys = registry.keys_of(animator);
        let loaded: u64 = keys
            .iter()
            .filter(|k| matches!(view.phases.get(*k), Some(Phase::Warm | Phase::Warming)))
            .filter_map(|k| self.footprint(registry, k))
            .map(|(m, _)| m)
            .sum();
        if loaded > 0 {
            return loaded;
        }
        keys.iter()
            .filter_map(|k| self.footprint(registry, k))
            .map(|(m, _)| m)
            .max()
            .unwrap_or(0)
    }
}

/// Why an evictee is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A declared conflict (`conflict_domains`), whatever memory says.
    Conflict,
    /// Memory: the target does not fit otherwise.
    Memory,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Conflict => "CONFLICT",
            Cause::Memory => "MEMORY",
        }
    }
}

/// One evictee on the device and what stopping it frees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freed {
    pub animator: String,
    pub mib: u64,
    pub cause: Cause,
}

/// The memory arithmetic of a plan on the target's device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arithmetic {
    pub device: String,
    pub capacity_mib: u64,
    /// Held by the active animators on the device now.
    pub used_mib: u64,
    /// The target model's footprint.
    pub needed_mib: u64,
    pub needed_source: Source,
    /// The evictees on the device, by name (for a decline: every one memory could evict).
    pub freed: Vec<Freed>,
}

impl Arithmetic {
    pub fn freed_mib(&self) -> u64 {
        self.freed.iter().map(|f| f.mib).sum()
    }

    /// Whether the target fits once the evictees are stopped.
    pub fn fits(&self) -> bool {
        self.used_mib.saturating_sub(self.freed_mib()) + self.needed_mib <= self.capacity_mib
    }
}

/// A running animator memory may evict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub animator: String,
    pub mib: u64,
    pub priority: u8,
    pub leased: bool,
    pub recency: u64,
}

impl Candidate {
    /// The disruption order: lower priority, idle before leased, least recently used, name.
    fn order(&self) -> (u8, bool, u64, &str) {
        (self.priority, self.leased, self.recency, &self.animator)
    }
}

/// The least disruptive set of `candidates` whose release frees `deficit` MiB (see the
/// module's rule), in disruption order; `Err` with every candidate (in disruption order) when
/// even all of them together do not free enough.
pub fn choose(
    deficit: u64,
    mut candidates: Vec<Candidate>,
) -> Result<Vec<Candidate>, Vec<Candidate>> {
    if deficit == 0 {
        return Ok(Vec::new());
    }
    candidates.sort_unstable_by(|a, b| a.order().cmp(&b.order()));
    let mut sum = 0u64;
    let mut end = None;
    for (i, c) in candidates.iter().enumerate() {
        sum = sum.saturating_add(c.mib);
        if sum >= deficit {
            end = Some(i);
            break;
        }
    }
    let Some(end) = end else {
        return Err(candidates);
    };
    candidates.truncate(end + 1);
    // The last member is needed (the prefix before it was short); drop the others that are
    // not, the more disruptive first.
    let mut keep = vec![true; candidates.len()];
    for i in (0..end).rev() {
        if sum - candidates[i].mib >= deficit {
            sum -= candidates[i].mib;
            keep[i] = false;
        }
    }
    let mut flags = keep.into_iter();
    candidates.retain(|_| flags.next().unwrap_or(true));
    Ok(candidates)
}

/// What memory adds to a hard swap: the further evictees (by name) and the arithmetic, or the
/// arithmetic of a decline. `None` when the target is not placed on a device.
pub struct Placed {
    pub evict: Vec<String>,
    pub arithmetic: Arithmetic,
}

/// The device's side of a hard swap to `key`. `conflict_evict` are the conflict evictees;
/// `cotenants` every other animator placed on the device with its view (all observed). Only
/// managed animators (`managed(name)`) are candidates.
pub fn place(
    registry: &Registry,
    memory: &Memory,
    key: &str,
    conflict_evict: &[String],
    cotenants: &[(&str, &AnimatorView)],
    managed: &dyn Fn(&str) -> bool,
) -> Option<Result<Placed, Arithmetic>> {
    let cap = registry.capability(key)?;
    let device = registry.animator(cap.animator())?.device.as_deref()?;
    let capacity_mib = registry.device(device)?.memory_mib;
    let (needed_mib, needed_source) = memory.footprint(registry, key)?;
    let mut used_mib = 0u64;
    let mut freed = Vec::new();
    let mut candidates = Vec::new();
    for (name, view) in cotenants {
        if !view.active() {
            continue;
        }
        let mib = memory.held(registry, name, view);
        used_mib = used_mib.saturating_add(mib);
        if conflict_evict.iter().any(|e| e == name) {
            freed.push(Freed {
                animator: (*name).to_owned(),
                mib,
                cause: Cause::Conflict,
            });
        } else if managed(name) {
            let usage = memory.usage.get(*name).copied().unwrap_or_default();
            candidates.push(Candidate {
                animator: (*name).to_owned(),
                mib,
                priority: usage.priority,
                leased: view.live_leases > 0,
                recency: usage.recency,
            });
        }
    }
    let conflict_freed: u64 = freed.iter().map(|f: &Freed| f.mib).sum();
    let deficit =
        (used_mib.saturating_sub(conflict_freed) + needed_mib).saturating_sub(capacity_mib);
    let mut arithmetic = Arithmetic {
        device: device.to_owned(),
        capacity_mib,
        used_mib,
        needed_mib,
        needed_source,
        freed,
    };
    let chosen = match choose(deficit, candidates) {
        Ok(chosen) => chosen,
        Err(all) => {
            arithmetic.freed.extend(all.into_iter().map(|c| Freed {
                animator: c.animator,
                mib: c.mib,
                cause: Cause::Memory,
            }));
            arithmetic.freed.sort_by(|a, b| a.animator.cmp(&b.animator));
            return Some(Err(arithmetic));
        }
    };
    let evict: Vec<String> = chosen.iter().map(|c| c.animator.clone()).collect();
    arithmetic.freed.extend(chosen.into_iter().map(|c| Freed {
        animator: c.animator,
        mib: c.mib,
        cause: Cause::Memory,
    }));
    arithmetic.freed.sort_by(|a, b| a.animator.cmp(&b.animator));
    Some(Ok(Placed { evict, arithmetic }))
}

#[cfg(test)]
mod tests;
