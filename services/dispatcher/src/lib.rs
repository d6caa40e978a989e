//! The Dispatcher office: matches a typed demand to a WARM capability and issues a temporary,
//! durable lease; closes and reopens lease admission per animator for the Orchestrator. It
//! never starts, stops, loads or evicts a runtime.
//!
//! Layers: `domain` (pure rules: keys, registry, candidate order, decision table, probe
//! totality; no sqlx, no tonic, no clock), `probe` (readiness adapters over HTTP), `store`
//! (SQL on the `dispatcher` schema only), `service` (use cases composing them), `grpc` (thin
//! handlers), `config` (the `[office]` registry), `error` (one error type, one status mapping).

pub mod actions;
pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod probe;
pub mod service;
pub mod store;

use lychd_runtime::Office;
use lychd_runtime::cli::OfficeSpec;
use sqlx::migrate::Migrator;

/// The office's migrations, applied by `lychd-dispatcher migrate` as role `lychd_dispatcher_owner`.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

pub const OFFICE: Office = Office::Dispatcher;

pub fn spec() -> OfficeSpec {
    OfficeSpec {
        office: OFFICE,
        refusals: error::REFUSALS,
        actions: actions::ALL,
        migrator: &MIGRATOR,
        start: grpc::start,
        local_verifier: None,
        // The lease path's handlers are authenticated by their own decision (and, on input
        // that does not decode, by an explicit authentication before the refusal), so the
        // layer does not ask Ward a second time.
        self_authenticating: &[
            "/lychd.dispatcher.v1.Dispatcher/Lease",
            "/lychd.dispatcher.v1.Dispatcher/RenewLease",
            "/lychd.dispatcher.v1.Dispatcher/ReleaseLease",
        ],
        commands: &[],
    }
}
