//! The `[office]` section of the Orchestrator's configuration: the animator registry — the
//! same `[[office.animators]]` and `[[office.capabilities]]` declarations the Dispatcher reads,
//! parsed and validated by the one shared registry (`lychd-registry`) — compiled into the
//! conflict graph. Validated once at start; every error names the file and the field and
//! refuses start-up (exit 2).

use std::path::PathBuf;
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
    /// simulated host's control API), `{ kind = "systemd", systemctl = "/usr/bin/systemctl" }`
    /// or `{ kind = "host-reactor", spool = "/path" }`. Without one every transition that
    /// needs the host is declined with no effect.
    pub actuator: Option<ActuatorDecl>,
    /// The host side of the `host-reactor` spool, read only by `lychd-orchestrator reactor
    /// consume` (the one-shot consumer a systemd path unit starts); the office ignores it.
    pub reactor: Option<ReactorDecl>,
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
    /// The `systemd` actuator, when configured.
    pub systemd: Option<SystemdSettings>,
    /// The `host-reactor` actuator (the producer side), when configured.
    pub host_reactor: Option<SpoolSettings>,
    /// The host consumer (`[office.reactor]`), when configured.
    pub reactor: Option<ReactorSettings>,
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
    let (simulated_host, systemd, host_reactor) = actuators(section.actuator.as_ref(), &bad)?;
    let reactor = match &section.reactor {
        None => None,
        Some(r) => Some(reactor(r, &bad)?),
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
        systemd,
        host_reactor,
        reactor,
    })
}

type Chosen = (
    Option<String>,
    Option<SystemdSettings>,
    Option<SpoolSettings>,
);

fn absolute(
    bad: &dyn Fn(&str, &str) -> ConfigError,
    field: &str,
    p: Option<&PathBuf>,
) -> Result<PathBuf, ConfigError> {
    match p {
        Some(p) if p.is_absolute() => Ok(p.clone()),
        Some(_) => Err(bad(field, "must be an absolute path")),
        None => Err(bad(field, "is required for this actuator kind")),
    }
}

/// `[office.actuator]`: each kind takes its own fields and no other kind's.
fn actuators(
    decl: Option<&ActuatorDecl>,
    bad: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<Chosen, ConfigError> {
    let Some(a) = decl else {
        return Ok((None, None, None));
    };
    let stray = |field: &str, set: bool| {
        if set {
            Err(bad(
                &format!("actuator.{field}"),
                "is not used by this actuator kind",
            ))
        } else {
            Ok(())
        }
    };
    let lock = |a: &ActuatorDecl| {
        let p = a
            .lock_file
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_LOCK_FILE));
        absolute(bad, "actuator.lock_file", Some(&p))
    };
    match a.kind {
        ActuatorKind::Simulated => {
            stray("systemctl", a.systemctl.is_some())?;
            stray("lock_file", a.lock_file.is_some())?;
            stray("spool", a.spool.is_some())?;
            stray("claim_deadline_ms", a.claim_deadline_ms.is_some())?;
            crate::actuator::Simulated::new(&a.endpoint)
                .map_err(|e| bad("actuator.endpoint", e))?;
            Ok((Some(a.endpoint.clone()), None, None))
        }
        ActuatorKind::Systemd => {
            stray("endpoint", !a.endpoint.is_empty())?;
            stray("spool", a.spool.is_some())?;
            stray("claim_deadline_ms", a.claim_deadline_ms.is_some())?;
            let systemctl = absolute(bad, "actuator.systemctl", a.systemctl.as_ref())?;
            Ok((
                None,
                Some(SystemdSettings {
                    systemctl,
                    lock_file: lock(a)?,
                }),
                None,
            ))
        }
        ActuatorKind::HostReactor => {
            stray("endpoint", !a.endpoint.is_empty())?;
            stray("systemctl", a.systemctl.is_some())?;
            stray("lock_file", a.lock_file.is_some())?;
            let spool = absolute(bad, "actuator.spool", a.spool.as_ref())?;
            let ms = a.claim_deadline_ms.unwrap_or(30_000);
            if !(1..=3_600_000).contains(&ms) {
                return Err(bad(
                    "actuator.claim_deadline_ms",
                    "must be between 1 and 3600000",
                ));
            }
            Ok((
                None,
                None,
                Some(SpoolSettings {
                    spool,
                    claim_deadline: Duration::from_millis(ms),
                }),
            ))
        }
    }
}

fn reactor(
    r: &ReactorDecl,
    bad: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<ReactorSettings, ConfigError> {
    let spool = absolute(bad, "reactor.spool", Some(&r.spool))?;
    let systemctl = absolute(bad, "reactor.systemctl", Some(&r.systemctl))?;
    let lock_file = r
        .lock_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_LOCK_FILE));
    let lock_file = absolute(bad, "reactor.lock_file", Some(&lock_file))?;
    let ms = r.job_timeout_ms.unwrap_or(120_000);
    if !(1..=3_600_000).contains(&ms) {
        return Err(bad(
            "reactor.job_timeout_ms",
            "must be between 1 and 3600000",
        ));
    }
    Ok(ReactorSettings {
        spool,
        systemd: SystemdSettings {
            systemctl,
            lock_file,
        },
        producer_uid: r
            .producer_uid
            .unwrap_or_else(|| nix::unistd::geteuid().as_raw()),
        job_timeout: Duration::from_millis(ms),
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
    fn the_shipped_path_unit_starts_the_one_shot_consumer_on_a_published_intent() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd");
        let path = std::fs::read_to_string(dir.join("lychd-reactor.path")).expect("path unit");
        assert!(path.contains("PathExistsGlob=%h/.local/state/lychd/reactor/inbox/*.json"));
        assert!(path.contains("Unit=lychd-reactor.service"));
        let service =
            std::fs::read_to_string(dir.join("lychd-reactor.service")).expect("service unit");
        assert!(service.contains("Type=oneshot"));
        assert!(service.contains("lychd-orchestrator reactor consume --config "));
        assert!(service.contains("SuccessExitStatus=75"));
        // The commented deployment example names the same spool the path unit watches.
        let example = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/orchestrator.toml"),
        )
        .expect("example");
        assert!(example.contains("# spool = \"/home/lychd/.local/state/lychd/reactor\""));
    }

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
    fn the_actuator_is_chosen_per_host_and_each_kind_takes_only_its_own_fields() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = load_text(
            dir.path(),
            &format!(
                "[office.actuator]\nkind = \"systemd\"\nsystemctl = \"/usr/bin/systemctl\"\n{A}"
            ),
        )
        .expect("systemd");
        let sd = s.systemd.expect("systemd chosen");
        assert_eq!(sd.lock_file, PathBuf::from(DEFAULT_LOCK_FILE));
        assert!(s.simulated_host.is_none() && s.host_reactor.is_none());
        let s = load_text(
            dir.path(),
            &format!("[office.actuator]\nkind = \"host-reactor\"\nspool = \"/run/lychd/spool\"\nclaim_deadline_ms = 500\n{A}"),
        )
        .expect("host-reactor");
        let hr = s.host_reactor.expect("host-reactor chosen");
        assert_eq!(hr.claim_deadline, Duration::from_millis(500));
        let e = load_text(
            dir.path(),
            &format!("[office.actuator]\nkind = \"systemd\"\nsystemctl = \"systemctl\"\n{A}"),
        )
        .expect_err("relative");
        assert!(e.contains("office.actuator.systemctl"), "{e}");
        let e = load_text(
            dir.path(),
            &format!("[office.actuator]\nkind = \"host-reactor\"\nspool = \"/s\"\nsystemctl = \"/usr/bin/systemctl\"\n{A}"),
        )
        .expect_err("stray");
        assert!(e.contains("office.actuator.systemctl"), "{e}");
        let e = load_text(
            dir.path(),
            &format!("[office.actuator]\nkind = \"host-reactor\"\n{A}"),
        )
        .expect_err("no spool");
        assert!(e.contains("office.actuator.spool"), "{e}");
        let s = load_text(
            dir.path(),
            &format!("[office.reactor]\nspool = \"/s\"\nsystemctl = \"/usr/bin/systemctl\"\nproducer_uid = 1234\n{A}"),
        )
        .expect("reactor");
        let r = s.reactor.expect("reactor settings");
        assert_eq!(r.producer_uid, 1234);
        assert_eq!(r.job_timeout, Duration::from_secs(120));
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
