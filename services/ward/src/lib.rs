//! The Ward office: authenticates, authorizes, records consent; never executes an effect.
//!
//! Layers: `grpc` (thin handlers: decode → call domain/store → encode). `domain/` (pure rules,
//! no sqlx, no tonic) and `store/` (SQL on the `ward` schema only) arrive with the office's
//! features.

pub mod grpc;

use lychd_runtime::Office;
use lychd_runtime::cli::OfficeSpec;
use sqlx::migrate::Migrator;

/// The office's migrations, applied by `lychd-ward migrate` as role `lychd_ward_owner`.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

pub const OFFICE: Office = Office::Ward;

pub fn spec() -> OfficeSpec {
    OfficeSpec {
        office: OFFICE,
        migrator: &MIGRATOR,
        start: grpc::start,
    }
}
