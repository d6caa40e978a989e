//! The Runner office: continues bounded loop runs under loop-contract v1; holds no grant,
//! hardware, consent or promotion authority of its own (it asks the offices that do).
//!
//! Built (issue 27, first slice): the control FSM as data (`domain::fsm`, the file
//! `schemas/runner/run-fsm.v1.json`, checked at start-up), the workflow document, budgets never
//! above the contract's, and runs as durable resources whose every state change is a fenced
//! transition row with a checksummed checkpoint (`service::runs`, `service::checkpoints`,
//! `store::runs`); the step loop (`service::driver`: runs claimed under a runner lease, a new
//! generation per claim, the FSM's edges through the workflow's steps, model steps through a
//! Dispatcher lease in `model`); Runner II's effects (`effect` steps approved through Ward's
//! consent in `consent`, delivered through an outbox by the HTTP adapter in `adapter`,
//! reconciled when their outcome is unknown) and its independent verification
//! (`domain::verification`, `verifier`: a workflow with `verification` succeeds only on a
//! HelmLoop PASS). See `docs/runner.md`.
//!
//! Layers: `grpc` (thin handlers: decode → authorize → call the service → encode), `service`
//! (the use cases), `store` (SQL on the `runner` schema only), `domain` (pure rules: no
//! sqlx, tonic or tokio, no clock), `actions` (its Ward actions), `error` (its refusals).

pub mod actions;
pub mod adapter;
pub mod config;
pub mod consent;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod model;
pub mod service;
pub mod store;
pub mod verifier;

use lychd_runtime::Office;
use lychd_runtime::cli::OfficeSpec;
use sqlx::migrate::Migrator;

/// The office's migrations, applied by `lychd-runner migrate` as role `lychd_runner_owner`.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

pub const OFFICE: Office = Office::Runner;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_names_the_office_its_describe_action_and_its_refusal_domain() {
        let spec = spec();
        assert_eq!(spec.office, OFFICE);
        assert!(spec.actions.iter().any(|a| a.name == "runner:describe"));
        assert_eq!(spec.refusals.domain, OFFICE.domain());
        assert!(MIGRATOR.iter().count() >= 1);
    }
}
