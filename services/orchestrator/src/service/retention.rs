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
