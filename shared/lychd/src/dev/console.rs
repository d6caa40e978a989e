//! The operators' console in the dev stack (`apps/console`): a client of Ward like grpcurl,
//! started once every office serves, holding no credential — the operator signs in with the
//! credential of `dev/operator.credential`. It listens on loopback, on the console's default
//! port offset from the base port when that is free, else on any free port; the address it
//! bound is in `dev/console.address`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use lychd_runtime::Office;

use super::configuration::{Layout, loopback_url};
use super::supervision::CONSOLE;

/// How far the console's port is from the base port (50080 for the default base 50051).
const PORT_OFFSET: u16 = 29;
/// How long the console has to listen.
const START: Duration = Duration::from_secs(15);
/// How long it has to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(5);

pub(super) struct Console {
    child: tokio::process::Child,
    /// `http://127.0.0.1:<port>/`.
    pub url: String,
}

impl Console {
    /// Start the console against the offices on `ports` (Ward, the Orchestrator and the
    /// Dispatcher) and wait until it listens.
    pub async fn start(
        bin_dir: &Path,
        layout: &Layout,
        base_port: u16,
        ports: &BTreeMap<Office, u16>,
    ) -> anyhow::Result<Self> {
        let preferred = base_port.saturating_add(PORT_OFFSET);
        match Self::spawn(bin_dir, layout, preferred, ports).await {
            Ok(console) => Ok(console),
            // Taken between the check and the bind, or by anyone else: any free port.
            Err(_) if preferred != 0 => Self::spawn(bin_dir, layout, 0, ports).await,
            Err(e) => Err(e),
        }
    }

    async fn spawn(
        bin_dir: &Path,
        layout: &Layout,
        port: u16,
        ports: &BTreeMap<Office, u16>,
    ) -> anyhow::Result<Self> {
        let address = layout.console_address();
        let _ = std::fs::remove_file(&address);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(layout.console_log())?;
        let mut child = tokio::process::Command::new(bin_dir.join(CONSOLE))
            .arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--ward")
            .arg(loopback_url(ports[&Office::Ward]))
            .arg("--orchestrator")
            .arg(loopback_url(ports[&Office::Orchestrator]))
            .arg("--dispatcher")
            .arg(loopback_url(ports[&Office::Dispatcher]))
            .arg("--runner")
            .arg(loopback_url(ports[&Office::Runner]))
            .arg("--address-file")
            .arg(&address)
            .args(
                super::tls::ca_file()
                    .map(|ca| [std::ffi::OsStr::new("--ca-file"), ca.as_os_str()])
                    .into_iter()
                    .flatten(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("start {CONSOLE}"))?;
        let deadline = Instant::now() + START;
        loop {
            if let Ok(bound) = std::fs::read_to_string(&address) {
                return Ok(Console {
                    child,
                    url: format!("http://{}/", bound.trim()),
                });
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "{CONSOLE} exited ({status}) before listening; see {}",
                    layout.console_log().display()
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill().await;
                bail!("{CONSOLE} did not listen within {} s", START.as_secs());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, then a kill if it has not exited within [`STOP_GRACE`].
    pub async fn stop(mut self, layout: &Layout) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        match tokio::time::timeout(STOP_GRACE, self.child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => eprintln!("{CONSOLE} stopped with {status}"),
            _ => {
                eprintln!("{CONSOLE} did not stop in time; killing");
                let _ = self.child.kill().await;
            }
        }
        let _ = std::fs::remove_file(layout.console_address());
    }
}
