//! The Dispatcher office: grants temporary leases on WARM capabilities; never starts, stops, loads or evicts a runtime.
//!
//! Layers: `grpc` (thin handlers: decode → call domain/store → encode). `domain/` (pure rules,
//! no sqlx, no tonic) and `store/` (SQL on the `dispatcher` schema only) arrive with the office's
//! features.

pub mod grpc;

use lychd_runtime::Office;
use lychd_runtime::cli::OfficeSpec;
use sqlx::migrate::Migrator;

/// The office's migrations, applied by `lychd-dispatcher migrate` as role `lychd_dispatcher_owner`.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

pub const OFFICE: Office = Office::Dispatcher;

pub fn spec() -> OfficeSpec {
    OfficeSpec {
        office: OFFICE,
        migrator: &MIGRATOR,
        start: grpc::start,
    }
}
