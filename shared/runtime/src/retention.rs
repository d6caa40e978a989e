//! Retention: the bounded background job that deletes what an office no longer needs
//! (issue 30, item 3). The office names its rules — each one SQL statement on its own schema that
//! deletes at most `$2` rows older than `$1` seconds by the database clock and nothing still in
//! use — and this module runs them: every `interval_seconds`, each rule in batches of
//! `batch_size`, pausing `pause_ms` between batches, at most `max_batches` per rule and round,
//! never one unbounded statement. Each batch is its own transaction; a failed batch is logged
//! (rule name and error, never a row) and retried at the next round.
//!
//! Settings are the office's `[retention]` section:
//!
//! ```toml
//! [retention]
//! enabled = true           # default true
//! interval_seconds = 300   # between rounds
//! batch_size = 1000        # rows per DELETE
//! pause_ms = 100           # between batches
//! max_batches = 100        # per rule and round
//! [retention.keep_seconds]
//! leases = 604800          # one entry per rule of the office, by name; unset: its default
//! ```
//!
//! This module knows no table: the statements are the office's (its `store/retention.rs`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Deserialize;
use sqlx::PgPool;

use crate::config::{ConfigError, OfficeConfig};

/// One retention rule of an office.
#[derive(Debug)]
pub struct Rule {
    /// Its name in `[retention.keep_seconds]`, the logs and `docs/operations.md`.
    pub name: &'static str,
    /// Age in seconds past which its rows go, unless configured.
    pub keep_seconds: u64,
    /// One statement deleting at most `$2` (bigint) rows older than `$1` (bigint seconds, by the
    /// database clock) and nothing still in use.
    pub sql: &'static str,
    /// How the statement tells what it deleted.
    pub count: Count,
}

/// How a rule's statement tells what it deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// A `DELETE`: its affected rows.
    Affected,
    /// A `SELECT` of one `bigint` (a function of the office's that deletes).
    Returned,
}

/// An office's retention: its rules, and statements run once before each round (e.g. Ward's
/// creation of the audit's next partitions).
#[derive(Debug)]
pub struct Rules {
    pub rules: &'static [Rule],
    pub upkeep: &'static [&'static str],
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Section {
    enabled: bool,
    interval_seconds: u64,
    batch_size: i64,
    pause_ms: u64,
    max_batches: u32,
    keep_seconds: BTreeMap<String, u64>,
}

impl Default for Section {
    fn default() -> Self {
        Section {
            enabled: true,
            interval_seconds: 300,
            batch_size: 1000,
            pause_ms: 100,
            max_batches: 100,
            keep_seconds: BTreeMap::new(),
        }
    }
}

/// The deploy example of `office` (`deploy/config/<office>.toml` under `workspace`) spells out
/// `rules`' defaults: it validates, is enabled, names every rule and changes no age. Each
/// office's unit test calls this (a panic names what differs).
pub fn assert_the_deploy_example_states_the_defaults(
    workspace: &std::path::Path,
    office: crate::Office,
    rules: &'static Rules,
) {
    let file = workspace.join(format!("deploy/config/{office}.toml"));
    let config =
        OfficeConfig::load(office, Some(&file), Vec::new()).unwrap_or_else(|e| panic!("{e}"));
    let s = Settings::load(&config, rules).unwrap_or_else(|e| panic!("{e}"));
    assert!(s.enabled, "{office}: retention enabled");
    assert_eq!(
        s.keep.len(),
        rules.rules.len(),
        "{office}: every rule named"
    );
    for (rule, keep) in &s.keep {
        assert_eq!(*keep, rule.keep_seconds, "{office}: {}", rule.name);
    }
}

/// Validated retention settings of one office.
#[derive(Debug, Clone)]
pub struct Settings {
    pub enabled: bool,
    pub interval: Duration,
    pub batch_size: i64,
    pub pause: Duration,
    pub max_batches: u32,
    /// Every rule of the office with its age limit in seconds.
    pub keep: Vec<(&'static Rule, u64)>,
    pub upkeep: &'static [&'static str],
}

impl Settings {
    /// Read `[retention]` against the office's `rules`; a bad field or an unknown rule name is
    /// refused, naming the file and field.
    pub fn load(config: &OfficeConfig, rules: &'static Rules) -> Result<Settings, ConfigError> {
        let section: Section =
            serde_path_to_error::deserialize(toml::Value::Table(config.retention.clone()))
                .map_err(|e| {
                    let path = e.path().to_string();
                    config.invalid(
                        if path == "." {
                            "retention".into()
                        } else {
                            format!("retention.{path}")
                        },
                        e.into_inner().to_string(),
                    )
                })?;
        if !(1..=86_400).contains(&section.interval_seconds) {
            return Err(config.invalid("retention.interval_seconds", "must be 1..=86400"));
        }
        if !(1..=100_000).contains(&section.batch_size) {
            return Err(config.invalid("retention.batch_size", "must be 1..=100000"));
        }
        if section.pause_ms > 60_000 {
            return Err(config.invalid("retention.pause_ms", "must be 0..=60000"));
        }
        if !(1..=100_000).contains(&section.max_batches) {
            return Err(config.invalid("retention.max_batches", "must be 1..=100000"));
        }
        for (name, keep) in &section.keep_seconds {
            let field = format!("retention.keep_seconds.{name}");
            if !rules.rules.iter().any(|r| r.name == name) {
                return Err(config.invalid(field, "is not a retention rule of this office"));
            }
            // At least a second (0 would delete what was just settled) and at most ten years.
            if !(1..=315_360_000).contains(keep) {
                return Err(config.invalid(field, "must be 1..=315360000 seconds"));
            }
        }
        let keep = rules
            .rules
            .iter()
            .map(|r| {
                let k = section.keep_seconds.get(r.name).copied();
                (r, k.unwrap_or(r.keep_seconds))
            })
            .collect();
        Ok(Settings {
            enabled: section.enabled,
            interval: Duration::from_secs(section.interval_seconds),
            batch_size: section.batch_size,
            pause: Duration::from_millis(section.pause_ms),
            max_batches: section.max_batches,
            keep,
            upkeep: rules.upkeep,
        })
    }
}

/// What one round deleted, per rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    pub by_rule: Vec<(&'static str, u64)>,
}

impl Swept {
    pub fn total(&self) -> u64 {
        self.by_rule.iter().map(|(_, n)| n).sum()
    }

    pub fn of(&self, rule: &str) -> u64 {
        self.by_rule
            .iter()
            .find(|(r, _)| *r == rule)
            .map_or(0, |(_, n)| *n)
    }
}

/// Run one bounded batch of `rule`: at most `batch` rows older than `keep_seconds`.
pub async fn batch(
    pool: &PgPool,
    rule: &Rule,
    keep_seconds: u64,
    batch: i64,
) -> Result<u64, sqlx::Error> {
    let keep = i64::try_from(keep_seconds).unwrap_or(i64::MAX);
    match rule.count {
        Count::Affected => Ok(sqlx::query(rule.sql)
            .bind(keep)
            .bind(batch)
            .execute(pool)
            .await?
            .rows_affected()),
        Count::Returned => {
            let n: i64 = sqlx::query_scalar(rule.sql)
                .bind(keep)
                .bind(batch)
                .fetch_one(pool)
                .await?;
            Ok(n.unsigned_abs())
        }
    }
}

/// One round: the upkeep statements, then every rule in bounded batches. A rule whose batch
/// fails stops there for this round (the next round retries it); the others still run.
pub async fn round(pool: &PgPool, settings: &Settings) -> Swept {
    for statement in settings.upkeep {
        if let Err(e) = sqlx::query(statement).execute(pool).await {
            tracing::warn!(error = %e, "retention upkeep failed");
        }
    }
    let mut swept = Swept::default();
    for (rule, keep) in &settings.keep {
        let started = Instant::now();
        let mut deleted = 0;
        for n in 0..settings.max_batches {
            if n > 0 {
                tokio::time::sleep(settings.pause).await;
            }
            match batch(pool, rule, *keep, settings.batch_size).await {
                Ok(k) => {
                    deleted += k;
                    if k < settings.batch_size.unsigned_abs() {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(rule = rule.name, error = %e, "retention batch failed");
                    break;
                }
            }
        }
        if deleted > 0 {
            tracing::info!(
                rule = rule.name,
                deleted,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "retention deleted rows"
            );
        }
        swept.by_rule.push((rule.name, deleted));
    }
    swept
}

/// The running job; it stops when dropped (a batch in flight is rolled back with its
/// connection: each batch is one statement, so nothing is half done).
pub struct Job(tokio::task::JoinHandle<()>);

impl Drop for Job {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Start the job (a first round one interval after start). Disabled: `None`.
pub fn start(pool: PgPool, settings: Settings) -> Option<Job> {
    if !settings.enabled {
        tracing::info!("retention disabled");
        return None;
    }
    Some(Job(tokio::spawn(async move {
        loop {
            tokio::time::sleep(settings.interval).await;
            round(&pool, &settings).await;
        }
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Office;

    static RULES: Rules = Rules {
        rules: &[Rule {
            name: "things",
            keep_seconds: 60,
            sql: "SELECT 1",
            count: Count::Affected,
        }],
        upkeep: &[],
    };

    fn load(text: &str) -> Result<Settings, ConfigError> {
        let mut config = OfficeConfig::defaults(Office::Dispatcher);
        config.retention = toml::from_str(text).expect("toml");
        Settings::load(&config, &RULES)
    }

    #[test]
    fn defaults_and_overrides() {
        let s = load("").expect("defaults");
        assert!(s.enabled);
        assert_eq!(s.keep[0].1, 60);
        assert_eq!((s.batch_size, s.max_batches), (1000, 100));
        let s = load("batch_size = 10\n[keep_seconds]\nthings = 5\n").expect("overrides");
        assert_eq!((s.keep[0].1, s.batch_size), (5, 10));
    }

    #[test]
    fn bad_settings_name_their_field() {
        for (text, field) in [
            ("batch_size = 0", "retention.batch_size"),
            ("interval_seconds = 0", "retention.interval_seconds"),
            ("max_batches = 0", "retention.max_batches"),
            ("pause_ms = 600000", "retention.pause_ms"),
            ("[keep_seconds]\nother = 5", "retention.keep_seconds.other"),
            (
                "[keep_seconds]\nthings = 0",
                "retention.keep_seconds.things",
            ),
            ("batch = 5", "retention.batch"),
        ] {
            match load(text) {
                Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
