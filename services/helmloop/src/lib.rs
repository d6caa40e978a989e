//! The HelmLoop office: keeps submitted HelmLoop v0.1 records append-only (equivocation kept
//! and marked, never overwritten), reduces inline or stored records into PASS / HOLD / REJECT
//! with six axes, and stores evaluations by input digest. It never creates owner records,
//! reads the clock for a result, supplies evaluation context or trust, or executes anything.
//! Canonical JSON, digests, schemas and the reducer are `lychd-helmloop`'s; nothing here
//! re-implements them.
//!
//! Layers: `domain` (pure: record verification and the authority each record type needs,
//! stored-input assembly, result summaries; no sqlx, no tonic, no clock), `store` (SQL on the
//! `helmloop` schema only), `service` (use cases, the bounded reduction pool), `grpc` (thin
//! handlers), `config` (the `[office]` limits), `error` (one error type, one status mapping).

pub mod actions;
pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod service;
pub mod store;

use lychd_runtime::Office;
use lychd_runtime::cli::OfficeSpec;
use sqlx::migrate::Migrator;

/// The office's migrations, applied by `lychd-helmloop migrate` as role `lychd_helmloop_owner`.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

pub const OFFICE: Office = Office::HelmLoop;

pub fn spec() -> OfficeSpec {
    OfficeSpec {
        office: OFFICE,
        refusals: error::REFUSALS,
        actions: actions::ALL,
        migrator: &MIGRATOR,
        start: grpc::start,
        local_verifier: None,
        // `Reduce` is authorized before its input is parsed, so its decision authenticates
        // the caller (and input over the size cap is refused only after an explicit
        // authentication); the layer does not ask Ward a second time. `ReduceStored` parses
        // its context before it knows the object, so the layer authenticates it first.
        self_authenticating: &["/lychd.helmloop.v1.HelmLoop/Reduce"],
        commands: &[],
    }
}
