//! The `[office]` section of the HelmLoop office's configuration: its limits. Validated once at
//! start; every error names the file and the field and refuses start-up (exit 2).
//!
//! The transport caps a request first (`server.max_message_bytes`, 4 MiB by default): an
//! evaluation input up to `max_input_bytes` also needs a message cap above it.

use lychd_runtime::config::{ConfigError, OfficeConfig};
use serde::Deserialize;

/// `[office]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelmLoopSection {
    /// Most records one `AppendRecords` may carry (1..=10000).
    #[serde(default = "d_max_records")]
    pub max_records_per_append: usize,
    /// Longest single record body, in bytes (1 KiB..=8 MiB): its strict-parse cap.
    #[serde(default = "d_max_record")]
    pub max_record_bytes: usize,
    /// Longest sum of the record bodies of one `AppendRecords`, in bytes (1 KiB..=64 MiB).
    #[serde(default = "d_max_append")]
    pub max_append_bytes: usize,
    /// Longest evaluation input of `Reduce` and document of `Validate`/`Digest`, in bytes
    /// (1 KiB..=64 MiB; the reducer's own default cap is 8 MiB).
    #[serde(default = "d_max_input")]
    pub max_input_bytes: usize,
    /// Most distinct stored bodies one `ReduceStored` reduces (1..=100000).
    #[serde(default = "d_max_stored")]
    pub max_stored_records: usize,
    /// Reductions running at once on the blocking pool (0: the number of cores, at least 2).
    #[serde(default)]
    pub reduce_workers: usize,
    /// Reductions waiting for a worker before another is refused `REDUCER_BUSY` (1..=100000).
    #[serde(default = "d_queue")]
    pub reduce_queue: usize,
}

fn d_max_records() -> usize {
    1_000
}
fn d_max_record() -> usize {
    1024 * 1024
}
fn d_max_append() -> usize {
    8 * 1024 * 1024
}
fn d_max_input() -> usize {
    lychd_helmloop::DEFAULT_MAX_BYTES
}
fn d_max_stored() -> usize {
    10_000
}
fn d_queue() -> usize {
    1_024
}

/// The validated limits.
#[derive(Debug, Clone)]
pub struct Settings {
    pub max_records_per_append: usize,
    pub max_record_bytes: usize,
    pub max_append_bytes: usize,
    pub max_input_bytes: usize,
    pub max_stored_records: usize,
    pub reduce_workers: usize,
    pub reduce_queue: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_records_per_append: d_max_records(),
            max_record_bytes: d_max_record(),
            max_append_bytes: d_max_append(),
            max_input_bytes: d_max_input(),
            max_stored_records: d_max_stored(),
            reduce_workers: default_workers(),
            reduce_queue: d_queue(),
        }
    }
}

/// The number of cores, at least 2 (so one large reduction never holds every worker).
fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(2)
        .max(2)
}

/// Read and validate `[office]`.
pub fn load(cfg: &OfficeConfig) -> Result<Settings, ConfigError> {
    let s: HelmLoopSection = cfg.office_section()?;
    let bad = |field: &str, message: &str| cfg.invalid_office(field, message);
    const KIB: usize = 1024;
    const MIB: usize = 1024 * 1024;
    if !(1..=10_000).contains(&s.max_records_per_append) {
        return Err(bad("max_records_per_append", "must be between 1 and 10000"));
    }
    if !(KIB..=8 * MIB).contains(&s.max_record_bytes) {
        return Err(bad("max_record_bytes", "must be between 1024 and 8388608"));
    }
    if !(KIB..=64 * MIB).contains(&s.max_append_bytes) {
        return Err(bad("max_append_bytes", "must be between 1024 and 67108864"));
    }
    if !(KIB..=64 * MIB).contains(&s.max_input_bytes) {
        return Err(bad("max_input_bytes", "must be between 1024 and 67108864"));
    }
    if !(1..=100_000).contains(&s.max_stored_records) {
        return Err(bad("max_stored_records", "must be between 1 and 100000"));
    }
    if s.reduce_workers > 1024 {
        return Err(bad("reduce_workers", "must be at most 1024"));
    }
    if !(1..=100_000).contains(&s.reduce_queue) {
        return Err(bad("reduce_queue", "must be between 1 and 100000"));
    }
    Ok(Settings {
        max_records_per_append: s.max_records_per_append,
        max_record_bytes: s.max_record_bytes,
        max_append_bytes: s.max_append_bytes,
        max_input_bytes: s.max_input_bytes,
        max_stored_records: s.max_stored_records,
        reduce_workers: match s.reduce_workers {
            0 => default_workers(),
            n => n,
        },
        reduce_queue: s.reduce_queue,
    })
}
