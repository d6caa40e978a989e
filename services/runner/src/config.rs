//! The `[office]` section of the Runner's configuration: its step loop (whether this process
//! drives runs, its lease and polling, how long a `task` step's no-op takes). Validated once at
//! start; every error names the file and the field, and refuses start-up (exit 2).

use lychd_runtime::config::{ConfigError, OfficeConfig};
use serde::Deserialize;

/// `[office]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerSection {
    /// Whether this process runs the step loop (a replica that only serves reads: `false`).
    #[serde(default = "d_drive")]
    pub drive: bool,
    /// How long a run's lease lasts without a heartbeat, in ms (500..=600000); a crashed
    /// runner's runs are taken over after it. Heartbeats renew it every third of it.
    #[serde(default = "d_ttl")]
    pub lease_ttl_ms: u64,
    /// How often an idle runner looks for a claimable run, in ms (10..=60000).
    #[serde(default = "d_poll")]
    pub poll_ms: u64,
    /// Runs one runner process drives at once (1..=64).
    #[serde(default = "d_concurrency")]
    pub concurrency: usize,
    /// How long a `task` step's deterministic no-op takes, in ms (0..=60000): Runner I's task
    /// steps do nothing but record their result digest; this stands for their work.
    #[serde(default)]
    pub task_step_ms: u64,
}

fn d_drive() -> bool {
    true
}
fn d_ttl() -> u64 {
    10_000
}
fn d_poll() -> u64 {
    200
}
fn d_concurrency() -> usize {
    4
}

/// The validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub drive: bool,
    pub lease_ttl_ms: u64,
    pub poll_ms: u64,
    pub concurrency: usize,
    pub task_step_ms: u64,
}

pub fn load(cfg: &OfficeConfig) -> Result<Settings, ConfigError> {
    let s: RunnerSection = cfg.office_section()?;
    let bad = |field: &str, message: &str| cfg.invalid_office(field, message);
    if !(500..=600_000).contains(&s.lease_ttl_ms) {
        return Err(bad("lease_ttl_ms", "must be between 500 and 600000"));
    }
    if !(10..=60_000).contains(&s.poll_ms) {
        return Err(bad("poll_ms", "must be between 10 and 60000"));
    }
    if !(1..=64).contains(&s.concurrency) {
        return Err(bad("concurrency", "must be between 1 and 64"));
    }
    if s.task_step_ms > 60_000 {
        return Err(bad("task_step_ms", "must be at most 60000"));
    }
    Ok(Settings {
        drive: s.drive,
        lease_ttl_ms: s.lease_ttl_ms,
        poll_ms: s.poll_ms,
        concurrency: s.concurrency,
        task_step_ms: s.task_step_ms,
    })
}
