//! The Archive office: keeps and recalls notes with receipts; never decides what is true or recalls across namespaces.
//!
//! Layers: `grpc` (thin handlers: decode → call domain/store → encode). `domain/` (pure rules,
//! no sqlx, no tonic) and `store/` (SQL on the `archive` schema only) arrive with the office's
//! features.

pub mod actions;
pub mod error;
pub mod grpc;

use lychd_runtime::Office;
use lychd_runtime::cli::OfficeSpec;
use sqlx::migrate::Migrator;

/// The office's migrations, applied by `lychd-archive migrate` as role `lychd_archive_owner`.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

pub const OFFICE: Office = Office::Archive;

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
