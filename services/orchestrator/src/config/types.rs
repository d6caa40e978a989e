//! The `[office]` section's types: as written (deserialized, unknown fields refused) and as
//! the office runs with them ([`Settings`]), with the defaults of every budget.
//! Invariant: a [`Settings`] is only made by `load`, so every value in it was validated.

use std::path::PathBuf;
use std::time::Duration;

use lychd_registry::conflict::ConflictGraph;
use lychd_registry::memory::DeviceDecl;
use lychd_registry::registry::{AnimatorDecl, CapabilityDecl, Registry};
use serde::Deserialize;

/// `[office]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrchestratorSection {
    /// A hard swap requested below this priority (0..=100) is declined before any effect;
    /// NO_OP and SOFT_SWAP are never gated.
    #[serde(default)]
    pub min_priority_for_hard_swap: u8,
    /// One observation budget for a preflight or a replan (the complete observation set),
    /// in milliseconds (1..=60000).
    #[serde(default = "d_planning")]
    pub planning_timeout_ms: u64,
    /// How long admission may stay closed waiting for leases to drain, in milliseconds
    /// (1..=600000); then the transition reopens with no effect.
    #[serde(default = "d_drain")]
    pub drain_timeout_ms: u64,
    /// One deadline for actuation plus verification (target WARM, evictees cold), and again
    /// for a compensation, in milliseconds (1..=3600000).
    #[serde(default = "d_warmup")]
    pub warmup_timeout_ms: u64,
    /// How often verification observes again, in milliseconds (1..=10000).
    #[serde(default = "d_poll")]
    pub poll_interval_ms: u64,
    /// The longest single `AwaitDrain` call, in milliseconds (below the Dispatcher's
    /// `drain_wait_max_ms`; 1..=60000).
    #[serde(default = "d_drain_step")]
    pub drain_wait_step_ms: u32,
    /// How often an open `WatchTransitions` stream asks Ward again, in milliseconds
    /// (100..=60000).
    #[serde(default = "d_recheck")]
    pub stream_recheck_interval_ms: u64,
    /// Longest `wait_ms` a `RequestTransition` or `CancelTransition` may ask for, in
    /// milliseconds (0..server request timeout - 1000; unset: two thirds of the request
    /// timeout). A call never runs longer than the request timeout.
    #[serde(default)]
    pub max_wait_ms: Option<u64>,
    /// Most `WatchTransitions` streams at once (1..=10000).
    #[serde(default = "d_streams")]
    pub stream_limit: usize,
    /// Most of those one principal holds (1..=`stream_limit`; unset: a quarter, rounded up).
    #[serde(default)]
    pub stream_share: Option<usize>,
    /// The host this process converges (1..=63 of `a-z 0-9 . _ -`, starting with a letter or
    /// digit; default `local`): the processes configured for one host share one host lease,
    /// and only its holder records or actuates.
    #[serde(default = "d_host")]
    pub host_id: String,
    /// How long the host lease lasts past its last renewal, by the database clock, in
    /// milliseconds (500..=600000; default 15000). The holder renews it every third of it; a
    /// standby takes it over once it lapses.
    #[serde(default = "d_lease_ttl")]
    pub host_lease_ttl_ms: u64,
    /// The actuator: `{ kind = "simulated", endpoint = "http://127.0.0.1:PORT" }` (the
    /// simulated host's control API), `{ kind = "systemd", systemctl = "/usr/bin/systemctl" }`
    /// or `{ kind = "host-reactor", spool = "/path" }`. Without one every transition that
    /// needs the host is declined with no effect.
    pub actuator: Option<ActuatorDecl>,
    /// The footprint gauge (docs/orchestrator.md, "Placement by memory"): `{ kind =
    /// "nvidia-smi", command = "nvidia-smi", timeout_ms = 2000 }` (the NVIDIA driver's
    /// per-process query), `{ kind = "simulated" }` (the simulated actuator's host) or
    /// `{ kind = "none" }`. Unset: the simulated host's with the simulated actuator, else none.
    pub gauge: Option<GaugeDecl>,
    /// The host side of the `host-reactor` spool, read only by `lychd-orchestrator reactor
    /// consume` (the one-shot consumer a systemd path unit starts); the office ignores it.
    pub reactor: Option<ReactorDecl>,
    #[serde(default)]
    pub animators: Vec<AnimatorDecl>,
    #[serde(default)]
    pub capabilities: Vec<CapabilityDecl>,
    /// Devices whose memory placement plans with (`[[office.devices]]`: `name`, `memory_mib`);
    /// an animator names its own with `device` (docs/orchestrator.md, "Placement by memory").
    #[serde(default)]
    pub devices: Vec<DeviceDecl>,
}

/// `[office.actuator]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActuatorDecl {
    pub kind: ActuatorKind,
    /// `simulated`: the control API, `http://host:port`.
    #[serde(default)]
    pub endpoint: String,
    /// `systemd`: the absolute path of `systemctl` (attested at start).
    pub systemctl: Option<PathBuf>,
    /// `systemd`: the lifecycle lock file (default `/tmp/lychd-lifecycle.lock`).
    pub lock_file: Option<PathBuf>,
    /// `host-reactor`: the spool directory (its `inbox/` and `journal/`).
    pub spool: Option<PathBuf>,
    /// `host-reactor`: how long a published intent may stay unclaimed before it is retracted
    /// (a no-effect decline), in milliseconds (1..=3600000; default 30000).
    pub claim_deadline_ms: Option<u64>,
}

/// `[office.gauge]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaugeDecl {
    pub kind: GaugeKind,
    /// `nvidia-smi`: the tool, an absolute path or a bare name looked up on `PATH` (default
    /// `nvidia-smi`).
    pub command: Option<PathBuf>,
    /// `nvidia-smi`: one query's budget, in milliseconds (1..=60000; default 2000); past it
    /// the tool is killed and the footprint is unmeasured.
    pub timeout_ms: Option<u64>,
}

/// Gauge kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GaugeKind {
    Simulated,
    #[serde(rename = "nvidia-smi")]
    NvidiaSmi,
    None,
}

/// The footprint gauge the office runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GaugeSettings {
    /// The simulated host's `GET /units` (needs the simulated actuator).
    Simulated,
    /// `nvidia-smi`'s per-process query.
    NvidiaSmi { command: PathBuf, timeout: Duration },
    /// Every footprint unmeasured: the declared estimates stay.
    None,
}

/// Actuator kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActuatorKind {
    Simulated,
    Systemd,
    #[serde(rename = "host-reactor")]
    HostReactor,
}

/// `[office.reactor]`: the host consumer's own settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReactorDecl {
    /// The spool directory (the same as the producer's `office.actuator.spool`).
    pub spool: PathBuf,
    /// The absolute path of `systemctl` (attested).
    pub systemctl: PathBuf,
    /// The lifecycle lock file (default `/tmp/lychd-lifecycle.lock`).
    pub lock_file: Option<PathBuf>,
    /// The uid that must own every published intent (default: the consumer's own).
    pub producer_uid: Option<u32>,
    /// Bound of one systemd transaction, in milliseconds (1..=3600000; default 120000).
    pub job_timeout_ms: Option<u64>,
}

/// The default lifecycle lock file.
pub const DEFAULT_LOCK_FILE: &str = "/tmp/lychd-lifecycle.lock";

/// The `systemd` actuator's settings.
#[derive(Debug, Clone)]
pub struct SystemdSettings {
    pub systemctl: PathBuf,
    pub lock_file: PathBuf,
}

/// The `host-reactor` producer's settings.
#[derive(Debug, Clone)]
pub struct SpoolSettings {
    pub spool: PathBuf,
    pub claim_deadline: Duration,
}

/// The host consumer's settings (`[office.reactor]`).
#[derive(Debug, Clone)]
pub struct ReactorSettings {
    pub spool: PathBuf,
    pub systemd: SystemdSettings,
    pub producer_uid: u32,
    pub job_timeout: Duration,
}

fn d_planning() -> u64 {
    5_000
}
fn d_drain() -> u64 {
    30_000
}
fn d_warmup() -> u64 {
    120_000
}
fn d_poll() -> u64 {
    100
}
fn d_drain_step() -> u32 {
    5_000
}
fn d_recheck() -> u64 {
    2_000
}
fn d_streams() -> usize {
    64
}
fn d_host() -> String {
    "local".into()
}
fn d_lease_ttl() -> u64 {
    15_000
}

/// What the office runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub registry: Registry,
    pub graph: ConflictGraph,
    pub min_priority_for_hard_swap: u8,
    pub planning_timeout: Duration,
    pub drain_timeout: Duration,
    pub warmup_timeout: Duration,
    pub poll_interval: Duration,
    pub drain_wait_step_ms: u32,
    pub stream_recheck_interval: Duration,
    /// The longest wait a caller may ask for (below the server's request timeout).
    pub max_wait: Duration,
    pub stream_limit: usize,
    pub stream_share: usize,
    /// The host whose lease this process takes (`host_id`).
    pub host_id: String,
    /// The host lease's time to live (`host_lease_ttl_ms`).
    pub host_lease_ttl: Duration,
    /// The simulated host's control endpoint, when configured.
    pub simulated_host: Option<String>,
    /// The `systemd` actuator, when configured.
    pub systemd: Option<SystemdSettings>,
    /// The `host-reactor` actuator (the producer side), when configured.
    pub host_reactor: Option<SpoolSettings>,
    /// The host consumer (`[office.reactor]`), when configured.
    pub reactor: Option<ReactorSettings>,
    /// The footprint gauge (`[office.gauge]`).
    pub gauge: GaugeSettings,
}
