//! The Archive office: keeps and recalls notes with receipts; never decides what is true or
//! recalls across namespaces. Design rule 27 ("Memory"), the bounded `local-public-notes@1`
//! profile: explicit intake into one namespace, staged lifecycle, lexical recall with
//! text-free receipts, receipt resolution under current authority.
//!
//! Layers: `domain` (pure rules: names and bounds, lifecycle, digests, budget fitting and
//! receipt judgement; no sqlx, no tonic, no clock), `store` (SQL on the `archive` schema only,
//! every transaction with its own 5 s statement and 2 s lock timeouts), `service` (use cases,
//! each ordered on its namespace row), `grpc` (thin handlers), `config` (the `[office]`
//! bounds), `error` (one error type, one status mapping).

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
        // Intake and Recall are authenticated by their own first decision (and, on input that
        // does not decode, by an explicit authentication before the refusal), so the layer
        // does not ask Ward one question more on the two hot paths.
        self_authenticating: &[
            "/lychd.archive.v1.Archive/Intake",
            "/lychd.archive.v1.Archive/Recall",
        ],
        commands: &[],
    }
}

/// A test seam: a pause between a finished transaction and the last authority check before an
/// answer, so a test can revoke authority exactly there. Unset (a no-op) unless a test in this
/// process sets it.
#[doc(hidden)]
pub mod testing {
    use std::sync::{Arc, Mutex};

    use futures::future::BoxFuture;

    /// Called with the operation's name (`intake`, `lifecycle`, `recall`, `resolve`, `inspect`,
    /// `list`, `get`) and its namespace.
    pub type Hook = Arc<dyn Fn(&'static str, &str) -> BoxFuture<'static, ()> + Send + Sync>;

    static HOOK: Mutex<Option<Hook>> = Mutex::new(None);

    pub fn set_before_answer(hook: Option<Hook>) {
        *HOOK.lock().unwrap_or_else(|p| p.into_inner()) = hook;
    }

    pub(crate) async fn before_answer(operation: &'static str, namespace: &str) {
        let hook = HOOK.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(hook) = hook {
            hook(operation, namespace).await;
        }
    }
}
