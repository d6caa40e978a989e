//! The Ward office: authenticates, authorizes, administers identities; never executes an
//! effect.
//!
//! Layers: `domain/` (pure rules: secrets, lifetimes, decisions, consent, preauthorization,
//! promotion, paging — no sqlx, no tonic, no clock; the name grammar is `lychd_auth::grammar`),
//! `store/` (SQL on the `ward` schema only, one module per aggregate), `service/` (the use
//! cases, one module per capability: identity, decisions, consent, proposals, promotion),
//! `grpc/` (thin handlers per capability: decode → authorize → service → encode), `helmloop`
//! (Ward's one outgoing link), `verifier` (Ward's own [`lychd_auth::Verifier`], deciding from
//! its tables), `error` (the one error type and its status mapping).

pub mod actions;
pub mod config;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod helmloop;
pub mod service;
pub mod store;
pub mod verifier;

use std::process::ExitCode;
use std::sync::Arc;

use futures::future::BoxFuture;
use lychd_runtime::Office;
use lychd_runtime::cli::{OfficeCommand, OfficeSpec};
use lychd_runtime::config::OfficeConfig;
use sqlx::migrate::Migrator;

pub use error::{Result, WardError};
pub use store::bootstrap::Bootstrapped;
pub use verifier::LocalVerifier;

/// The office's migrations, applied by `lychd-ward migrate` as role `lychd_ward_owner`.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

pub const OFFICE: Office = Office::Ward;

/// Name of the first operator created by `lychd-ward bootstrap`.
pub const OPERATOR_NAME: &str = "operator";

/// Ward's verifier: decisions from its own tables (for `OfficeSpec::local_verifier`).
pub fn local_verifier(
    pool: sqlx::PgPool,
    finishing: &lychd_runtime::server::Finishing,
) -> Arc<dyn lychd_auth::Verifier> {
    Arc::new(LocalVerifier::new(pool, finishing))
}

/// Create the first operator `name` with `ward:administer` on `principal:*` and a standing
/// credential (returned once), unless Ward already has a principal.
pub async fn bootstrap(pool: &sqlx::PgPool, name: &str) -> Result<Bootstrapped> {
    store::bootstrap::bootstrap(pool, name).await
}

/// `lychd-ward bootstrap`: prints the operator credential exactly once on stdout.
fn bootstrap_command(
    _config: Arc<OfficeConfig>,
    pool: sqlx::PgPool,
) -> BoxFuture<'static, ExitCode> {
    Box::pin(async move {
        match bootstrap(&pool, OPERATOR_NAME).await {
            Ok(b) => {
                println!("{}", b.credential);
                eprintln!(
                    "lychd-ward: bootstrapped operator `{OPERATOR_NAME}` ({}); its credential, printed above, is shown only this once",
                    b.principal_id
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("lychd-ward: bootstrap refused: {e}");
                ExitCode::from(1)
            }
        }
    })
}

const COMMANDS: &[OfficeCommand] = &[OfficeCommand {
    name: "bootstrap",
    about: "create the first operator and print its credential once (refused if already bootstrapped)",
    run: bootstrap_command,
}];

pub fn spec() -> OfficeSpec {
    OfficeSpec {
        office: OFFICE,
        refusals: error::REFUSALS,
        actions: actions::ALL,
        migrator: &MIGRATOR,
        start: grpc::start,
        local_verifier: Some(local_verifier),
        // ExchangeCredential's bearer is a credential; Authenticate, Authorize and
        // AuthorizeBatch resolve the caller's session in the same statement as the questions
        // it asks.
        self_authenticating: &[
            "/lychd.ward.v1.Ward/ExchangeCredential",
            "/lychd.ward.v1.Ward/Authenticate",
            "/lychd.ward.v1.Ward/Authorize",
            "/lychd.ward.v1.Ward/AuthorizeBatch",
            // Its own decision authenticates a well-formed proposal (one statement less on the
            // hot path); a malformed one is authenticated explicitly before its refusal.
            "/lychd.ward.v1.Ward/ProposeEffect",
        ],
        commands: COMMANDS,
    }
}
