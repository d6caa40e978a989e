//! The {{Office}} office: {{purpose}}.
//!
//! Layers: `grpc` (thin handlers: decode → call domain/store → encode). `domain/` (pure rules,
//! no sqlx, no tonic) and `store/` (SQL on the `{{office}}` schema only) arrive with the office's
//! features.

pub mod actions;
pub mod error;
pub mod grpc;

use lychd_runtime::Office;
use lychd_runtime::cli::OfficeSpec;
use sqlx::migrate::Migrator;

/// The office's migrations, applied by `lychd-{{office}} migrate` as role `lychd_{{office}}_owner`.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

pub const OFFICE: Office = Office::{{Office}};

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
