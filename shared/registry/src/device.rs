//! Devices as declared (`[[office.devices]]`) and validated: one GPU's memory. Placement by
//! memory is [`crate::memory`].

use serde::Deserialize;

/// One `[[office.devices]]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceDecl {
    /// Slug, e.g. `gpu0`.
    pub name: String,
    /// Memory the runtimes placed on it may use, in MiB (at least 1).
    pub memory_mib: u64,
}

/// A validated device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub memory_mib: u64,
}
