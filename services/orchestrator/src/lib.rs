//! The Orchestrator office: converges hardware; never grants a lease or picks a semantic provider.
//!
//! Layers: `grpc` (thin handlers: authenticate → decode → authorize → service → encode),
//! `service` (use cases), `observe` (fresh observations asked of the Dispatcher over gRPC),
//! `actuator` (the host mutation port: simulated, systemd), `reactor` (the host-reactor spool:
//! producer, one-shot consumer),
//! `domain/` (pure planning: no sqlx, no tonic, no clock), `config` (the `[office]` registry,
//! parsed and validated by the shared `lychd-registry`, compiled into the conflict graph).

pub mod actions;
pub mod actuator;
pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod observe;
pub mod reactor;
pub mod service;
pub mod store;
pub mod transition;

use lychd_runtime::Office;
use lychd_runtime::cli::OfficeSpec;
use sqlx::migrate::Migrator;

/// The office's migrations, applied by `lychd-orchestrator migrate` as role `lychd_orchestrator_owner`.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

pub const OFFICE: Office = Office::Orchestrator;

pub fn spec() -> OfficeSpec {
    OfficeSpec {
        office: OFFICE,
        refusals: error::REFUSALS,
        actions: actions::ALL,
        migrator: &MIGRATOR,
        start: grpc::start,
        local_verifier: None,
        self_authenticating: &[],
        commands: &[],
    }
}
