//! Retention (issue 30 item 3): the office's rules (`store/retention.rs`) run by the shared
//! bounded job of `lychd_runtime::retention`, configured by `[retention]`.

use lychd_runtime::config::{ConfigError, OfficeConfig};
use lychd_runtime::retention::{self, Job, Rules, Settings, Swept};
use sqlx::PgPool;

/// The office's retention rules.
pub static RULES: &Rules = &crate::store::retention::RULES;

/// The validated `[retention]` settings of `config`.
pub fn settings(config: &OfficeConfig) -> Result<Settings, ConfigError> {
    Settings::load(config, RULES)
}

/// Start the job (none when disabled).
pub fn start(config: &OfficeConfig, pool: PgPool) -> Result<Option<Job>, ConfigError> {
    Ok(retention::start(pool, settings(config)?))
}

/// One round now (tests, benches and operators' tools).
pub async fn round(pool: &PgPool, settings: &Settings) -> Swept {
    retention::round(pool, settings).await
}

#[cfg(test)]
mod tests {
    /// The deploy example spells out the defaults: it validates and changes nothing.
    #[test]
    fn the_deploy_example_states_the_defaults() {
        lychd_runtime::retention::assert_the_deploy_example_states_the_defaults(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
            lychd_runtime::Office::Runner,
            super::RULES,
        );
    }
}
