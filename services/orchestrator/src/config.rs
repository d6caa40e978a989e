//! The `[office]` section of the Orchestrator's configuration: the animator registry — the
//! same `[[office.animators]]` and `[[office.capabilities]]` declarations the Dispatcher reads,
//! parsed and validated by the one shared registry (`lychd-registry`) — compiled into the
//! conflict graph. Validated once at start; every error names the file and the field and
//! refuses start-up (exit 2).

use std::time::Duration;

use lychd_registry::conflict::ConflictGraph;
use lychd_registry::registry::{AnimatorDecl, CapabilityDecl, Registry};
use lychd_runtime::config::{ConfigError, OfficeConfig};
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
    /// Most `WatchTransitions` streams at once (1..=10000).
    #[serde(default = "d_streams")]
    pub stream_limit: usize,
    /// The actuator: `{ kind = "simulated", endpoint = "http://127.0.0.1:PORT" }` (the
    /// simulated host's control API). Without one every transition that needs the host is
    /// declined with no effect.
    pub actuator: Option<ActuatorDecl>,
    #[serde(default)]
    pub animators: Vec<AnimatorDecl>,
    #[serde(default)]
    pub capabilities: Vec<CapabilityDecl>,
}

/// `[office.actuator]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActuatorDecl {
    pub kind: ActuatorKind,
    pub endpoint: String,
}

/// Actuator kinds built so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActuatorKind {
    Simulated,
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
    pub stream_limit: usize,
    /// The simulated host's control endpoint, when configured.
    pub simulated_host: Option<String>,
}

/// Read and validate `[office]`.
pub fn load(cfg: &OfficeConfig) -> Result<Settings, ConfigError> {
    let section: OrchestratorSection = cfg.office_section()?;
    let origin = cfg
        .source
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "configuration".into());
    let bad = |field: &str, message: &str| ConfigError::Invalid {
        origin: origin.clone(),
        field: format!("office.{field}"),
        message: message.into(),
    };
    let range = |field: &str, v: u64, lo: u64, hi: u64| {
        if (lo..=hi).contains(&v) {
            Ok(Duration::from_millis(v))
        } else {
            Err(bad(field, &format!("must be between {lo} and {hi}")))
        }
    };
    if section.min_priority_for_hard_swap > 100 {
        return Err(bad(
            "min_priority_for_hard_swap",
            "must be between 0 and 100",
        ));
    }
    let planning_timeout = range(
        "planning_timeout_ms",
        section.planning_timeout_ms,
        1,
        60_000,
    )?;
    let drain_timeout = range("drain_timeout_ms", section.drain_timeout_ms, 1, 600_000)?;
    let warmup_timeout = range("warmup_timeout_ms", section.warmup_timeout_ms, 1, 3_600_000)?;
    let poll_interval = range("poll_interval_ms", section.poll_interval_ms, 1, 10_000)?;
    range(
        "drain_wait_step_ms",
        u64::from(section.drain_wait_step_ms),
        1,
        60_000,
    )?;
    let stream_recheck_interval = range(
        "stream_recheck_interval_ms",
        section.stream_recheck_interval_ms,
        100,
        60_000,
    )?;
    if !(1..=10_000).contains(&section.stream_limit) {
        return Err(bad("stream_limit", "must be between 1 and 10000"));
    }
    let simulated_host = match &section.actuator {
        None => None,
        Some(a) => {
            crate::actuator::Simulated::new(&a.endpoint)
                .map_err(|e| bad("actuator.endpoint", e))?;
            Some(a.endpoint.clone())
        }
    };
    let registry = Registry::build(&section.animators, &section.capabilities)
        .map_err(|e| bad(&e.field, &e.message))?;
    let graph = ConflictGraph::compile(&registry).map_err(|e| bad(&e.field, &e.message))?;
    Ok(Settings {
        registry,
        graph,
        min_priority_for_hard_swap: section.min_priority_for_hard_swap,
        planning_timeout,
        drain_timeout,
        warmup_timeout,
        poll_interval,
        drain_wait_step_ms: section.drain_wait_step_ms,
        stream_recheck_interval,
        stream_limit: section.stream_limit,
        simulated_host,
    })
}

/// Capability key → the model name its runtime lists and accepts (what the simulated
/// actuator's host boundary resolves an activation's logical identity to).
pub fn runtime_models(s: &Settings) -> std::collections::BTreeMap<String, String> {
    s.registry
        .capabilities()
        .map(|c| (c.key_text.clone(), c.runtime_model.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use lychd_runtime::Office;

    use super::*;

    fn load_text(dir: &Path, text: &str) -> Result<Settings, String> {
        let p = dir.join("orchestrator.toml");
        std::fs::write(&p, text).expect("write");
        let cfg = OfficeConfig::load(Office::Orchestrator, Some(&p), Vec::new())
            .map_err(|e| e.to_string())?;
        load(&cfg).map_err(|e| e.to_string())
    }

    const A: &str = "[[office.animators]]\nname = \"a\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"http://127.0.0.1:1\"\ndedicated = true\n";
    const B: &str = "[[office.animators]]\nname = \"b\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"http://127.0.0.1:2\"\ndedicated = true\n";

    #[test]
    fn the_deploy_example_compiles() {
        let file =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/orchestrator.toml");
        let cfg = OfficeConfig::load(Office::Orchestrator, Some(&file), Vec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let s = load(&cfg).unwrap_or_else(|e| panic!("{e}"));
        let managed = s.graph.node("gpu0-qwen").expect("declared");
        assert!(managed.managed && managed.default_exclusive);
        assert!(s.simulated_host.is_none());
    }

    #[test]
    fn the_registry_compiles_into_the_graph() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = load_text(dir.path(), &format!("{A}{B}")).expect("valid");
        assert_eq!(s.graph.edges().count(), 1);
        assert_eq!(s.graph.digest().len(), 64);
    }

    #[test]
    fn a_coven_with_an_internal_conflict_refuses_start_up_naming_file_and_field() {
        let dir = tempfile::tempdir().expect("tmp");
        let text = format!("{A}groups = [\"duo\"]\n{B}groups = [\"duo\"]\n");
        let e = load_text(dir.path(), &text).expect_err("refused");
        assert!(e.contains("office.groups.duo"), "{e}");
        assert!(e.contains("orchestrator.toml"), "{e}");
        let text = format!("{A}resident = true\nconflict_domains = [\"gpu0\"]\n");
        let e = load_text(dir.path(), &text).expect_err("refused");
        assert!(e.contains("office.animators[0].conflict_domains"), "{e}");
    }
}
