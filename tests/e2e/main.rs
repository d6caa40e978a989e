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
