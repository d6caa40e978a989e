//! The {{Office}} office: {{purpose}}.
//!
//! Layers: `grpc` (thin handlers: decode → authorize → call the service → encode), `service`
//! (the use cases), `store` (SQL on the `{{office}}` schema only), `domain` (pure rules: no
//! sqlx, tonic or tokio, no clock), `actions` (its Ward actions), `error` (its refusals).

pub mod actions;
pub mod domain;
pub mod error;
pub mod grpc;
pub mod service;
pub mod store;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_names_the_office_its_describe_action_and_its_refusal_domain() {
        let spec = spec();
        assert_eq!(spec.office, OFFICE);
        assert!(
            spec.actions
                .iter()
                .any(|a| a.name == "{{office}}:describe")
        );
        assert_eq!(spec.refusals.domain, OFFICE.domain());
        assert!(MIGRATOR.iter().count() >= 1);
    }
}
