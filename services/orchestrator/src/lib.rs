//! The Orchestrator office: converges hardware; never grants a lease or picks a semantic provider.
//! One process per host records and actuates: the holder of the host lease (`service::lease`);
//! any other process for the host is a standby that serves reads.
//!
//! Layers: `grpc` (thin handlers: authenticate → decode → authorize → service → encode;
//! `grpc::convert` the proto conversions), `service` (use cases: preview, containment and
//! recovery, the host lease and taking a host over, start-up, and the transition engine —
//! cohorts, arbiter, rite, soft activation, cancellation), `store` (SQL of schema
//! `orchestrator`, every write fenced by the host lease's generation), `observe` (fresh observations
//! asked of the Dispatcher over gRPC),
//! `actuator` (the host mutation port: simulated, systemd), `gauge` (the footprint port: how
//! much device memory a WARM animator holds), `reactor` (the host-reactor spool: producer,
//! one-shot consumer),
//! `domain/` (pure planning — conflicts and placement by memory: no sqlx, no tonic, no clock),
//! `config` (the `[office]` registry and devices, parsed and validated by the shared
//! `lychd-registry`, compiled into the conflict graph).

pub mod actions;
pub mod actuator;
pub mod config;
pub mod domain;
pub mod error;
pub mod gauge;
pub mod grpc;
pub mod observe;
pub mod reactor;
pub mod service;
pub mod store;

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
