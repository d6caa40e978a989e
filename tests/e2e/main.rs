//! End-to-end tests: the offices as real processes on a real PostgreSQL, driven over real gRPC
//! and with the `grpcurl` operators use.

mod architecture;
mod authority;
mod backup;
mod deveffect;
mod devmetrics;
mod devowner;
mod devrace;
mod devstack;
mod devtls;
mod devverify;
mod documented;
mod helmloop;
mod inprocess;
mod new_office;
mod offices;
mod otlpmetrics;
mod provision;
mod quadlet;
mod replicas;
mod roles;
mod runbook;
mod shape;
mod shutdown;
mod strangers;
mod telemetry;
mod testkit;
mod tidy;
mod tls;
mod wire;

use std::process::Output;

/// Run grpcurl with `args`; returns its output.
pub fn grpcurl(args: &[&str]) -> Output {
    std::process::Command::new(lychd_testkit::grpcurl())
        .args(args)
        .output()
        .expect("run grpcurl")
}

/// Call `method` (`package.Service/Method`) at `addr` over plaintext with `bearer` (a whole
/// `authorization: Bearer …` header) and `body` as an operator would; the call must succeed, and
/// its answer is returned as JSON.
pub fn grpcurl_json(addr: &str, bearer: &str, method: &str, body: &str) -> serde_json::Value {
    let out = grpcurl(&["-plaintext", "-H", bearer, "-d", body, addr, method]);
    assert!(
        out.status.success(),
        "{method}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("grpcurl prints JSON")
}

pub use lychd_testkit::channel_with;

/// The office's `spec()` (this crate links every office; the test kit links none but Ward).
pub fn spec_of(office: lychd_runtime::Office) -> lychd_runtime::cli::OfficeSpec {
    use lychd_runtime::Office;
    match office {
        Office::Dispatcher => lychd_dispatcher::spec(),
        Office::Orchestrator => lychd_orchestrator::spec(),
        Office::Ward => lychd_ward::spec(),
        Office::Archive => lychd_archive::spec(),
        Office::HelmLoop => lychd_helmloop_service::spec(),
        Office::Runner => lychd_runner::spec(),
    }
}

/// The latest migration version embedded in an office.
pub fn latest_migration(office: lychd_runtime::Office) -> i64 {
    spec_of(office)
        .migrator
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0)
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `lychd dev` stopped as an operator stops it — Ctrl-C, so it stops its offices and its
/// PostgreSQL — when the test ends early (a failed assertion): a killed `lychd dev` would leave
/// them running.
pub struct Interrupted(pub Option<tokio::process::Child>);

impl Interrupted {
    /// `lychd dev --ephemeral --no-build` with `extra` arguments (`--tls`, `--replicas 2`…) on
    /// `base_port` with its state in `state`, its output piped.
    pub fn dev(state: &std::path::Path, base_port: u16, extra: &[&str]) -> Interrupted {
        let child = tokio::process::Command::new(lychd_testkit::bin_path("lychd"))
            .args(["dev", "--ephemeral", "--no-build"])
            .args(extra)
            .args(["--base-port", &base_port.to_string(), "--state-dir"])
            .arg(state)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start lychd dev");
        Interrupted(Some(child))
    }

    /// Wait until `lychd dev` has written `file` (what it writes once its offices serve), for at
    /// most `within`; if it exits first, panic with what it printed.
    pub async fn until_written(&mut self, file: &std::path::Path, within: std::time::Duration) {
        let deadline = std::time::Instant::now() + within;
        while !file.is_file() {
            if let Ok(Some(status)) = self.0.as_mut().expect("running").try_wait() {
                let out = self.0.take().expect("running").wait_with_output().await;
                let out = out.map(|o| text(&o.stdout) + &text(&o.stderr));
                panic!("lychd dev exited early ({status}): {out:?}");
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} not written within {within:?}",
                file.display()
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Interrupted {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        if let Some(pid) = child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGINT,
            );
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
        while std::time::Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = child.start_kill();
    }
}
