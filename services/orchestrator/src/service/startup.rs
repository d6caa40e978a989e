//! What runs before the office serves: the host lease is asked for and, when this process
//! takes it, the host is taken over ([`super::lease::take_over`]: transitions a previous
//! process left unfinished are contained and settled, under the new generation); the
//! actuator `[office.actuator]` chose is built (and the footprint gauge that goes with it), the
//! measured footprints are loaded, and the transition engine starts with them. A process that
//! does not take the lease serves as a standby: reads only, until the lease lapses and its
//! keeper takes the host over the same way.
//!
//! Invariant: nothing is actuated before every interrupted transition (and every armed
//! runtime guard) is contained — nothing reopens without proof.

use std::sync::Arc;

use lychd_runtime::health::HealthState;
use lychd_runtime::server::Finishing;
use sqlx::PgPool;

use super::lease::HostLease;
use super::memory::MemoryBook;
use super::transition::Transitions;
use crate::actuator::{Actuator, Simulated, Unconfigured, systemd};
use crate::config::{GaugeSettings, Settings, runtime_models};
use crate::gauge::{Gauge, NvidiaSmi, Unmeasured};
use crate::observe::Dispatcher;
use crate::reactor::producer::HostReactor;

/// Ask for the host lease (taking the host over when granted), build the actuator and the
/// engine, and keep the lease in the background (`health`: the office's service name, held
/// back unless this process holds the lease).
pub async fn engine(
    settings: Arc<Settings>,
    dispatcher: Dispatcher,
    pool: PgPool,
    health: (HealthState, &'static str),
    finishing: &Finishing,
) -> anyhow::Result<Arc<Transitions>> {
    let actuator = actuator(&settings)?;
    let lease = HostLease::new(&settings, pool.clone(), Some(health));
    if !lease.acquire().await? {
        tracing::warn!(
            host = %settings.host_id,
            "another orchestrator process holds this host's lease: serving as a standby (reads only) until it lapses"
        );
    }
    finishing.push(tokio::spawn(lease.clone().keep()));
    let memory = MemoryBook::load(pool.clone(), gauge(&settings)?).await?;
    Ok(Transitions::new(
        settings,
        dispatcher,
        actuator,
        pool,
        lease,
        Arc::new(memory),
    ))
}

/// The footprint gauge `[office.gauge]` chose (by default the one that goes with the
/// actuator): the simulated host's, `nvidia-smi`'s per-process query, or none
/// ([`Unmeasured`]: the declared estimates stay).
pub fn gauge(settings: &Settings) -> anyhow::Result<Arc<dyn Gauge>> {
    match (&settings.gauge, &settings.simulated_host) {
        (GaugeSettings::Simulated, Some(endpoint)) => {
            Ok(Arc::new(Simulated::new(endpoint).map_err(|e| {
                anyhow::anyhow!("office.actuator.endpoint {e}")
            })?))
        }
        (GaugeSettings::NvidiaSmi { command, timeout }, _) => {
            Ok(Arc::new(NvidiaSmi::new(command.clone(), *timeout)))
        }
        (GaugeSettings::Simulated | GaugeSettings::None, _) => Ok(Arc::new(Unmeasured)),
    }
}

/// The actuator `[office.actuator]` chose (refused start-up, naming the field, when its
/// `systemctl` fails attestation or its spool is unsafe).
pub fn actuator(settings: &Settings) -> anyhow::Result<Arc<dyn Actuator>> {
    if let Some(endpoint) = &settings.simulated_host {
        let sim = Simulated::new(endpoint)
            .map_err(|e| anyhow::anyhow!("office.actuator.endpoint {e}"))?
            .with_runtime_models(runtime_models(settings));
        return Ok(Arc::new(sim));
    }
    if let Some(sd) = &settings.systemd {
        let actuator = systemd::Systemd::new(&sd.systemctl, &sd.lock_file)
            .map_err(|e| anyhow::anyhow!("office.actuator.systemctl {e}"))?
            .with_sources(&settings.graph);
        return Ok(Arc::new(actuator));
    }
    if let Some(hr) = &settings.host_reactor {
        let producer = HostReactor::new(&hr.spool, hr.claim_deadline)
            .map_err(|e| anyhow::anyhow!("office.actuator.spool {e}"))?;
        return Ok(Arc::new(producer));
    }
    Ok(Arc::new(Unconfigured))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use lychd_runtime::Office;
    use lychd_runtime::config::OfficeConfig;

    use super::*;

    fn settings(dir: &Path, actuator: &str) -> crate::config::Settings {
        let p = dir.join("orchestrator.toml");
        std::fs::write(&p, format!("[office.actuator]\n{actuator}")).expect("write");
        let cfg = OfficeConfig::load(Office::Orchestrator, Some(&p), Vec::new()).expect("cfg");
        crate::config::load(&cfg).expect("settings")
    }

    #[test]
    fn an_unattested_systemctl_or_an_unsafe_spool_refuses_start_up_naming_the_field() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = settings(
            dir.path(),
            "kind = \"systemd\"\nsystemctl = \"/nonexistent/systemctl\"\n",
        );
        let e = actuator(&s).err().expect("refused").to_string();
        assert!(e.starts_with("office.actuator.systemctl"), "{e}");
        let spool = dir.path().join("spool");
        std::fs::create_dir(&spool).expect("mkdir");
        std::os::unix::fs::symlink(dir.path(), spool.join("inbox")).expect("link");
        let s = settings(
            dir.path(),
            &format!("kind = \"host-reactor\"\nspool = \"{}\"\n", spool.display()),
        );
        let e = actuator(&s).err().expect("refused").to_string();
        assert!(e.starts_with("office.actuator.spool"), "{e}");
    }
}
