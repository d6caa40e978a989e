//! Reading and validating `[office]` into [`Settings`]: every bound checked, each actuator
//! kind taking its own fields and no other kind's, the registry (with its devices) and its
//! conflict graph compiled. Invariant: every error names the file and the field.

use std::path::PathBuf;
use std::time::Duration;

use lychd_registry::conflict::ConflictGraph;
use lychd_registry::registry::Registry;
use lychd_runtime::config::{ConfigError, OfficeConfig};

use super::types::{
    ActuatorDecl, ActuatorKind, DEFAULT_LOCK_FILE, OrchestratorSection, ReactorDecl,
    ReactorSettings, Settings, SpoolSettings, SystemdSettings,
};

/// Read and validate `[office]`.
pub fn load(cfg: &OfficeConfig) -> Result<Settings, ConfigError> {
    let section: OrchestratorSection = cfg.office_section()?;
    let bad = |field: &str, message: &str| cfg.invalid_office(field, message);
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
    // A call waits at most `max_wait`, and returns before the server's request timeout cuts
    // it (a second of margin for the answer itself).
    let timeout_ms = u64::try_from(cfg.request_timeout().as_millis()).unwrap_or(u64::MAX);
    let ceiling = timeout_ms.saturating_sub(1000);
    let max_wait = match section.max_wait_ms {
        None => Duration::from_millis(timeout_ms * 2 / 3),
        Some(ms) if ms <= ceiling => Duration::from_millis(ms),
        Some(_) => {
            return Err(bad(
                "max_wait_ms",
                "must be at most the server's request_timeout_ms minus 1000",
            ));
        }
    };
    let (stream_limit, stream_share) =
        lychd_runtime::streams::check(section.stream_limit, section.stream_share)
            .map_err(|(field, message)| bad(field, &message))?;
    let host_ok = |h: &str| {
        (1..=63).contains(&h.len())
            && h.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && h.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
            })
    };
    if !host_ok(&section.host_id) {
        return Err(bad(
            "host_id",
            "must be 1 to 63 of a-z 0-9 . _ -, starting with a letter or digit",
        ));
    }
    let host_lease_ttl = range("host_lease_ttl_ms", section.host_lease_ttl_ms, 500, 600_000)?;
    let (simulated_host, systemd, host_reactor) = actuators(section.actuator.as_ref(), &bad)?;
    let gauge = super::gauge::gauge(section.gauge.as_ref(), simulated_host.is_some(), &bad)?;
    let reactor = match &section.reactor {
        None => None,
        Some(r) => Some(reactor(r, &bad)?),
    };
    let registry = Registry::build(&section.animators, &section.capabilities)
        .and_then(|r| r.place(&section.animators, &section.devices))
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
        max_wait,
        stream_limit,
        stream_share,
        host_id: section.host_id,
        host_lease_ttl,
        simulated_host,
        systemd,
        host_reactor,
        reactor,
        gauge,
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
    fn devices_place_animators_and_a_bad_placement_names_its_field() {
        let dir = tempfile::tempdir().expect("tmp");
        let cap = "[[office.capabilities]]\nanimator = \"a\"\nfamily = \"chat\"\nmodel_id = \"m\"\nmemory_mib = 4000\n";
        let gpu = "[[office.devices]]\nname = \"gpu0\"\nmemory_mib = 24000\n";
        let s =
            load_text(dir.path(), &format!("{gpu}{A}device = \"gpu0\"\n{B}{cap}")).expect("placed");
        assert_eq!(
            s.registry.device("gpu0").expect("declared").memory_mib,
            24000
        );
        let a = s.graph.node("a").expect("a");
        assert!(a.domains.is_empty(), "placed: memory decides");
        assert!(s.graph.node("b").expect("b").default_exclusive);
        let e = load_text(dir.path(), &format!("{A}device = \"gpu1\"\n{cap}"))
            .expect_err("no such device");
        assert!(e.contains("office.animators[0].device"), "{e}");
        let e = load_text(
            dir.path(),
            "[[office.devices]]\nname = \"gpu0\"\nmemory_mib = 0\n",
        )
        .expect_err("empty device");
        assert!(e.contains("office.devices[0].memory_mib"), "{e}");
        let e = load_text(
            dir.path(),
            "[[office.devices]]\nname = \"gpu0\"\nmemory_gb = 8\n",
        )
        .expect_err("unknown field");
        assert!(e.contains("memory_gb"), "{e}");
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
    fn the_host_and_its_lease_ttl_are_checked() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = load_text(dir.path(), A).expect("defaults");
        assert_eq!(s.host_id, "local");
        assert_eq!(s.host_lease_ttl, Duration::from_secs(15));
        let s = load_text(
            dir.path(),
            &format!("[office]\nhost_id = \"gpu-box.1\"\nhost_lease_ttl_ms = 2000\n{A}"),
        )
        .expect("set");
        assert_eq!(s.host_id, "gpu-box.1");
        for bad in [
            "host_id = \"\"",
            "host_id = \"Box\"",
            "host_id = \"-a\"",
            "host_lease_ttl_ms = 10",
        ] {
            let e = load_text(dir.path(), &format!("[office]\n{bad}\n{A}")).expect_err(bad);
            assert!(e.contains("office.host"), "{e}");
        }
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
