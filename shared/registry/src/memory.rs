//! Devices and declared footprints: what placement by memory plans from (issue 25 point 3).
//!
//! A device (`[[office.devices]]`, the Orchestrator's only) is one GPU's memory: a name (slug)
//! and a capacity in MiB. An animator placed on a device (`device = "<name>"`) holds memory
//! there while its runtime is up; each of its models declares a first footprint estimate
//! (`memory_mib` on the capability, else on the animator), which the Orchestrator uses until it
//! has measured the model. Rules, each refused at start naming its field:
//! - device names are slugs, distinct; a capacity is at least 1 MiB;
//! - a placed animator is a soulstone and names a declared device;
//! - every model of a placed animator has a footprint estimate, none larger than its device;
//! - a footprint is declared only on a placed animator (an estimate without a device means
//!   nothing).
//!
//! A placed animator whose `conflict_domains` are omitted gets no `default-exclusive`: memory
//! decides what must stop (see [`crate::conflict`]); a declared domain remains an override that
//! forces an eviction even when memory fits.

use std::collections::BTreeMap;

pub use crate::device::{Device, DeviceDecl};
use crate::key::check_slug;
use crate::registry::{Animator, AnimatorDecl, DeclError, Registry};

impl Registry {
    /// Attach the devices and check every placement against them (the Orchestrator's
    /// `[[office.devices]]`; `animators` are the same declarations the registry was built
    /// from, for the fields' names). The first problem found, naming its field.
    pub fn place(
        mut self,
        animators: &[AnimatorDecl],
        devices: &[DeviceDecl],
    ) -> Result<Registry, DeclError> {
        let bad = |field: String, message: &str| DeclError {
            field,
            message: message.to_owned(),
        };
        let mut table = BTreeMap::new();
        for (i, d) in devices.iter().enumerate() {
            check_slug(&d.name).map_err(|e| bad(format!("devices[{i}].name"), e.describe()))?;
            if table.contains_key(&d.name) {
                return Err(bad(format!("devices[{i}].name"), "duplicate device name"));
            }
            if d.memory_mib == 0 {
                return Err(bad(
                    format!("devices[{i}].memory_mib"),
                    "must be at least 1",
                ));
            }
            table.insert(
                d.name.clone(),
                Device {
                    name: d.name.clone(),
                    memory_mib: d.memory_mib,
                },
            );
        }
        for (i, a) in animators.iter().enumerate() {
            let at = |f: &str| format!("animators[{i}].{f}");
            let keys = self.keys_of(&a.name);
            let Some(device) = &a.device else {
                if a.memory_mib.is_some() {
                    return Err(bad(
                        at("memory_mib"),
                        "a footprint needs a device: declare device too",
                    ));
                }
                if let Some(k) = keys
                    .iter()
                    .find(|k| self.capabilities[*k].memory_mib.is_some())
                {
                    return Err(bad(
                        at("device"),
                        &format!("{k} declares a footprint, so its animator needs a device"),
                    ));
                }
                continue;
            };
            let Some(dev) = table.get(device) else {
                return Err(bad(at("device"), "names no declared device"));
            };
            for k in keys {
                match self.capabilities[k].memory_mib {
                    None => {
                        return Err(bad(
                            at("memory_mib"),
                            &format!(
                                "{k} has no footprint estimate: declare memory_mib here or on the capability"
                            ),
                        ));
                    }
                    Some(m) if m > dev.memory_mib => {
                        return Err(bad(
                            at("memory_mib"),
                            &format!("{k}'s footprint is larger than device {device}"),
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        self.devices = table;
        Ok(self)
    }

    /// Declared devices, by name.
    pub fn devices(&self) -> impl Iterator<Item = &Device> {
        self.devices.values()
    }

    pub fn device(&self, name: &str) -> Option<&Device> {
        self.devices.get(name)
    }

    /// The animators placed on `device`, by name.
    pub fn placed_on<'a>(&'a self, device: &'a str) -> impl Iterator<Item = &'a Animator> + 'a {
        self.animators
            .values()
            .filter(move |a| a.device.as_deref() == Some(device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conflict::ConflictGraph;
    use crate::fixtures::{cap, portal, soulstone};
    use crate::registry::CapabilityDecl;

    fn placed(name: &str, device: &str, mib: Option<u64>) -> AnimatorDecl {
        AnimatorDecl {
            device: Some(device.into()),
            memory_mib: mib,
            ..soulstone(name)
        }
    }

    fn gpu(name: &str, mib: u64) -> DeviceDecl {
        DeviceDecl {
            name: name.into(),
            memory_mib: mib,
        }
    }

    fn place(
        a: &[AnimatorDecl],
        c: &[CapabilityDecl],
        d: &[DeviceDecl],
    ) -> Result<Registry, DeclError> {
        Registry::build(a, c)?.place(a, d)
    }

    #[test]
    fn placements_build_with_declared_footprints() {
        let a = [placed("a", "gpu0", Some(4000)), placed("b", "gpu0", None)];
        let mut own = cap("b", "chat", "m");
        own.memory_mib = Some(9000);
        let reg = place(&a, &[cap("a", "chat", "m"), own], &[gpu("gpu0", 24000)]).expect("ok");
        assert_eq!(reg.device("gpu0").expect("declared").memory_mib, 24000);
        assert_eq!(
            reg.capability("a:chat:m").expect("a").memory_mib,
            Some(4000)
        );
        assert_eq!(
            reg.capability("b:chat:m").expect("b").memory_mib,
            Some(9000)
        );
        let on: Vec<_> = reg.placed_on("gpu0").map(|a| a.name.as_str()).collect();
        assert_eq!(on, ["a", "b"]);
        // Placed animators with omitted domains coexist: memory decides.
        let g = ConflictGraph::compile(&reg).expect("compiles");
        assert!(!g.conflict("a", "b"));
        assert!(g.node("a").expect("a").domains.is_empty());
    }

    #[test]
    fn placements_are_planning_inputs_of_the_digest_and_nothing_else_moves() {
        let digest = |a: &[AnimatorDecl], c: &[CapabilityDecl], d: &[DeviceDecl]| {
            ConflictGraph::compile(&place(a, c, d).expect("ok"))
                .expect("compiles")
                .digest()
                .to_owned()
        };
        let caps = [cap("a", "chat", "m")];
        let unplaced = digest(&[soulstone("a")], &caps, &[]);
        let plain = ConflictGraph::compile(&Registry::build(&[soulstone("a")], &caps).expect("ok"))
            .expect("compiles");
        assert_eq!(
            unplaced,
            plain.digest(),
            "no devices: the digest is unchanged"
        );
        let on_gpu = digest(&[placed("a", "gpu0", Some(10))], &caps, &[gpu("gpu0", 20)]);
        let bigger = digest(&[placed("a", "gpu0", Some(10))], &caps, &[gpu("gpu0", 30)]);
        assert!(on_gpu != unplaced && on_gpu != bigger);
    }

    #[test]
    fn bad_placements_name_their_field() {
        let c = [cap("a", "chat", "m")];
        let e = place(&[placed("a", "gpu1", Some(1))], &c, &[gpu("gpu0", 10)]).expect_err("x");
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("animators[0].device", "names no declared device")
        );
        let e = place(&[placed("a", "gpu0", None)], &c, &[gpu("gpu0", 10)]).expect_err("x");
        assert_eq!(e.field, "animators[0].memory_mib");
        assert!(e.message.contains("a:chat:m"), "{e:?}");
        let e = place(&[placed("a", "gpu0", Some(11))], &c, &[gpu("gpu0", 10)]).expect_err("x");
        assert_eq!(e.field, "animators[0].memory_mib");
        assert!(e.message.contains("larger"), "{e:?}");
        let e = place(&[placed("a", "gpu0", Some(1))], &c, &[gpu("gpu0", 0)]).expect_err("x");
        assert_eq!(e.field, "devices[0].memory_mib");
        let e = place(&[], &[], &[gpu("gpu0", 1), gpu("gpu0", 2)]).expect_err("x");
        assert_eq!(e.field, "devices[1].name");
        let e = place(&[], &[], &[gpu("GPU", 1)]).expect_err("x");
        assert_eq!(e.field, "devices[0].name");
        let e = place(&[placed("a", "gpu0", Some(0))], &c, &[gpu("gpu0", 9)]).expect_err("x");
        assert_eq!(e.field, "animators[0].memory_mib");
        let e = place(&[placed("a", "Bad", Some(1))], &c, &[]).expect_err("x");
        assert_eq!(e.field, "animators[0].device");
        let mut p = portal("p");
        p.device = Some("gpu0".into());
        let e = place(&[p], &[], &[gpu("gpu0", 9)]).expect_err("x");
        assert_eq!(e.field, "animators[0].device");
        let unplaced = AnimatorDecl {
            memory_mib: Some(5),
            ..soulstone("a")
        };
        let e = place(&[unplaced], &c, &[]).expect_err("x");
        assert_eq!(e.field, "animators[0].memory_mib");
        let mut own = cap("a", "chat", "m");
        own.memory_mib = Some(5);
        let e = place(&[soulstone("a")], &[own], &[]).expect_err("x");
        assert_eq!(e.field, "animators[0].device");
        let mut zero = cap("a", "chat", "m");
        zero.memory_mib = Some(0);
        let e = place(&[placed("a", "gpu0", None)], &[zero], &[gpu("gpu0", 9)]).expect_err("x");
        assert_eq!(e.field, "capabilities[0].memory_mib");
    }
}
