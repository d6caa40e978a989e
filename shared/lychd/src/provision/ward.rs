//! Ward's bootstrap: the first operator and its standing credential, through the Ward binary's
//! own `bootstrap` command (only Ward writes Ward's tables), written once to a secret file.
//! For a deployment whose Ward does not run yet ([`TemporaryWard`]): Ward served on a loopback
//! port of its own, without a credential of its own (Ward issues it), long enough to enroll.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

use super::secrets;

/// Create the first operator with `<ward_bin> --config <config> bootstrap` and write its
/// credential to `out`, unless `out` exists (then nothing is done: returns false). Ward refuses
/// a second bootstrap of one database, so a lost credential file is an error, never a second
/// operator.
pub async fn bootstrap(ward_bin: &Path, config: &Path, out: &Path) -> anyhow::Result<bool> {
    if out.is_file() {
        return Ok(false);
    }
    let output = Command::new(ward_bin)
        .arg("--config")
        .arg(config)
        .arg("bootstrap")
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("run {}", ward_bin.display()))?;
    if !output.status.success() {
        bail!(
            "ward bootstrap failed: {} (a database bootstrapped before keeps its first operator: \
             recover that operator's credential file, {}, from its backup)",
            String::from_utf8_lossy(&output.stderr).trim(),
            out.display()
        );
    }
    let credential = String::from_utf8(output.stdout).context("ward's answer is not text")?;
    let credential = credential.trim();
    anyhow::ensure!(
        !credential.is_empty(),
        "ward bootstrap printed no credential"
    );
    secrets::write_secret(out, credential)?;
    Ok(true)
}

/// Ward serving from a copy of the operator's configuration on a free loopback port, with no
/// credential of its own; stopped (SIGTERM, then killed) when dropped.
pub struct TemporaryWard {
    child: Option<Child>,
    dir: PathBuf,
    pub config: PathBuf,
    pub endpoint: String,
}

impl TemporaryWard {
    /// Write the derived configuration (without `auth.credential_file`, listening on
    /// `127.0.0.1:<free port>`) into a private temporary directory.
    pub fn prepare(config: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(config)
            .with_context(|| format!("read {}", config.display()))?;
        let port = lychd_pg::free_port()?;
        let derived = without_credential(&text, port)
            .with_context(|| format!("{} is not valid TOML", config.display()))?;
        let dir = std::env::temp_dir().join(format!("lychd-provision-{}", std::process::id()));
        secrets::private_dir(&dir)?;
        let path = dir.join("ward.toml");
        std::fs::write(&path, derived)?;
        Ok(TemporaryWard {
            child: None,
            dir,
            config: path,
            endpoint: format!("http://127.0.0.1:{port}"),
        })
    }

    /// Serve and wait (at most `timeout`) until health answers SERVING.
    pub async fn serve(&mut self, ward_bin: &Path, timeout: Duration) -> anyhow::Result<()> {
        let child = Command::new(ward_bin)
            .arg("--config")
            .arg(&self.config)
            .arg("serve")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("start {}", ward_bin.display()))?;
        self.child = Some(child);
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!("the temporary ward exited before serving ({status})");
            }
            if serving(&self.endpoint).await {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the temporary ward did not serve within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM, wait for the drain, remove the derived configuration.
    pub async fn stop(mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            if tokio::time::timeout(Duration::from_secs(15), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for TemporaryWard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether the office at `endpoint` answers health SERVING.
pub async fn serving(endpoint: &str) -> bool {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let Ok(endpoint) = tonic::transport::Endpoint::from_shared(endpoint.to_owned()) else {
        return false;
    };
    let Ok(channel) = endpoint
        .connect_timeout(Duration::from_millis(500))
        .connect()
        .await
    else {
        return false;
    };
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .is_ok_and(|r| r.get_ref().status == 1)
}

/// Ward's configuration `text` without `auth.credential_file`, listening on loopback `port`.
///
/// It serves plaintext (no `tls.cert_file`/`tls.key_file`): it listens on loopback only, for as
/// long as the provisioner beside it enrolls; the CA stays, for its peers and PostgreSQL.
fn without_credential(text: &str, port: u16) -> Result<String, toml::de::Error> {
    let mut table: toml::Table = toml::from_str(text)?;
    if let Some(toml::Value::Table(auth)) = table.get_mut("auth") {
        auth.remove("credential_file");
    }
    if let Some(toml::Value::Table(tls)) = table.get_mut("tls") {
        tls.remove("cert_file");
        tls.remove("key_file");
    }
    let server = table
        .entry("server")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(server) = server {
        server.insert(
            "listen".into(),
            toml::Value::String(format!("127.0.0.1:{port}")),
        );
    }
    Ok(toml::to_string(&table).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use lychd_runtime::Office;
    use lychd_runtime::config::OfficeConfig;

    use super::*;

    fn original_ca() -> Option<PathBuf> {
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/ward.toml");
        OfficeConfig::load(Office::Ward, Some(&shipped), Vec::new())
            .expect("loads")
            .tls
            .ca_file
    }

    #[test]
    fn the_temporary_ward_has_no_credential_and_listens_on_loopback_only() {
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/ward.toml");
        let text = std::fs::read_to_string(&shipped).expect("ward.toml");
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("ward.toml");
        std::fs::write(&path, without_credential(&text, 41234).expect("toml")).expect("write");
        let cfg = OfficeConfig::load(Office::Ward, Some(&path), Vec::new()).expect("loads");
        assert_eq!(cfg.auth.credential_file, None);
        assert_eq!(cfg.server.listen.to_string(), "127.0.0.1:41234");
        assert!(
            !cfg.tls.serves_tls(),
            "plaintext on loopback, reached at http://"
        );
        assert_eq!(cfg.tls.ca_file, original_ca());
        let original = OfficeConfig::load(Office::Ward, Some(&shipped), Vec::new()).expect("loads");
        assert_eq!(cfg.database.url, original.database.url);
        assert_eq!(cfg.database.password_file, original.database.password_file);
        assert_eq!(cfg.peers.len(), original.peers.len());
    }
}
