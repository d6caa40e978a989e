//! End-to-end tests: the offices as real processes on a real PostgreSQL, driven over real gRPC
//! and with the `grpcurl` operators use.

mod authority;
mod devstack;
mod documented;
mod helmloop;
mod inprocess;
mod offices;
mod roles;
mod shutdown;
mod strangers;
mod telemetry;
mod testkit;
mod tidy;

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
