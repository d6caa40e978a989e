//! Ward's own settings (`[office]` in its configuration file).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use lychd_runtime::config::{ConfigError, OfficeConfig};
use serde::Deserialize;

use crate::domain::consent::EffectClass;
use crate::domain::preauth::{Rule, RuleError};

/// Longest TTL a pending consent may be given: a week.
pub const CONSENT_TTL_MAX_SECONDS: u32 = 7 * 24 * 3600;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Section {
    /// Seconds a consent stays pending before it expires (counts as denial).
    consent_ttl_seconds: u32,
    /// Per effect class (`standard`, `bounded`, `core_mutation`, …), overriding the default.
    consent_ttl_by_class: BTreeMap<String, u32>,
    /// Open `WatchConsents` streams at most.
    stream_limit: usize,
    /// Of those, held by one principal at most (unset: a quarter of `stream_limit`, rounded up).
    stream_share: Option<usize>,
    /// How often an open stream asks for its caller's authority again, in milliseconds.
    stream_recheck_interval_ms: u64,
    /// Directory of standing preauthorization rule files (`*.toml`), loaded at start as one
    /// set; unset: no standing rule (every consent needs a live verdict).
    preauth_dir: Option<PathBuf>,
    /// How often undelivered promotion records are sent to the HelmLoop office again, in
    /// milliseconds (an approval also sends at once).
    promotion_retry_interval_ms: u64,
    /// How old the oldest queued decision record may grow (the database reads but cannot
    /// write) before new decisions are refused `DECISION_LOG_UNAVAILABLE`, in milliseconds.
    decision_log_max_age_ms: u64,
}

impl Default for Section {
    fn default() -> Self {
        Section {
            consent_ttl_seconds: 15 * 60,
            consent_ttl_by_class: BTreeMap::new(),
            stream_limit: 64,
            stream_share: None,
            stream_recheck_interval_ms: 2000,
            preauth_dir: None,
            promotion_retry_interval_ms: 1000,
            decision_log_max_age_ms: 10_000,
        }
    }
}

/// Ward's settings, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    ttl_default: u32,
    ttl_by_class: Vec<(EffectClass, u32)>,
    pub stream_limit: usize,
    pub stream_share: usize,
    pub stream_recheck_interval: Duration,
    pub preauth_dir: Option<PathBuf>,
    pub promotion_retry_interval: Duration,
    pub decision_log_max_age: Duration,
}

impl Settings {
    pub fn load(config: &OfficeConfig) -> Result<Settings, ConfigError> {
        let section: Section = config.office_section()?;
        let invalid = |field: String, message: &str| config.invalid(field, message);
        let in_range = |n: u32| (1..=CONSENT_TTL_MAX_SECONDS).contains(&n);
        if !in_range(section.consent_ttl_seconds) {
            return Err(invalid(
                "office.consent_ttl_seconds".into(),
                "must be 1..=604800 seconds",
            ));
        }
        let mut ttl_by_class = Vec::new();
        for (name, ttl) in &section.consent_ttl_by_class {
            let field = format!("office.consent_ttl_by_class.{name}");
            let class = EffectClass::parse(name)
                .ok_or_else(|| invalid(field.clone(), "is not an effect class"))?;
            if !in_range(*ttl) {
                return Err(invalid(field, "must be 1..=604800 seconds"));
            }
            ttl_by_class.push((class, *ttl));
        }
        let (stream_limit, stream_share) =
            lychd_runtime::streams::check(section.stream_limit, section.stream_share)
                .map_err(|(field, message)| invalid(format!("office.{field}"), &message))?;
        if !(100..=60_000).contains(&section.stream_recheck_interval_ms) {
            return Err(invalid(
                "office.stream_recheck_interval_ms".into(),
                "must be 100..=60000 milliseconds",
            ));
        }
        if !(50..=600_000).contains(&section.promotion_retry_interval_ms) {
            return Err(invalid(
                "office.promotion_retry_interval_ms".into(),
                "must be 50..=600000 milliseconds",
            ));
        }
        if !(100..=600_000).contains(&section.decision_log_max_age_ms) {
            return Err(invalid(
                "office.decision_log_max_age_ms".into(),
                "must be 100..=600000 milliseconds",
            ));
        }
        Ok(Settings {
            ttl_default: section.consent_ttl_seconds,
            ttl_by_class,
            stream_limit,
            stream_share,
            stream_recheck_interval: Duration::from_millis(section.stream_recheck_interval_ms),
            preauth_dir: section.preauth_dir,
            promotion_retry_interval: Duration::from_millis(section.promotion_retry_interval_ms),
            decision_log_max_age: Duration::from_millis(section.decision_log_max_age_ms),
        })
    }

    /// The standing rules of the preauthorization directory, as one validated set, in matching
    /// order (priority descending, then slug). Every `*.toml` file of the directory, by name;
    /// an unreadable file, a file that is not UTF-8 or any invalid rule refuses the whole set.
    pub fn preauth_rules(&self) -> Result<Vec<Rule>, RuleError> {
        let Some(dir) = &self.preauth_dir else {
            return Ok(Vec::new());
        };
        let unreadable = |file: String, message: String| RuleError {
            file,
            field: String::new(),
            message,
        };
        let shown = dir.display().to_string();
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| unreadable(shown.clone(), e.to_string()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        names.sort();
        let mut files = Vec::new();
        for path in names {
            let file = path.display().to_string();
            let text = std::fs::read_to_string(&path)
                .map_err(|e| unreadable(file.clone(), e.to_string()))?;
            files.push((file, text));
        }
        let mut rules = crate::domain::preauth::parse_set(&files)?;
        rules.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| a.slug.cmp(&b.slug))
        });
        Ok(rules)
    }

    /// Seconds a pending consent of `class` lives.
    pub fn consent_ttl(&self, class: EffectClass) -> u32 {
        self.ttl_by_class
            .iter()
            .find(|(c, _)| *c == class)
            .map(|(_, t)| *t)
            .unwrap_or(self.ttl_default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lychd_runtime::Office;

    fn load(office: &str) -> Result<Settings, ConfigError> {
        let mut config = OfficeConfig::defaults(Office::Ward);
        config.office = toml::from_str(office).expect("toml");
        Settings::load(&config)
    }

    #[test]
    fn the_deploy_example_validates() {
        let file =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/ward.toml");
        let cfg = OfficeConfig::load(Office::Ward, Some(&file), Vec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let s = Settings::load(&cfg).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.consent_ttl(EffectClass::Standard), 900);
        assert_eq!(s.consent_ttl(EffectClass::HostLifecycle), 300);
        assert_eq!((s.stream_limit, s.stream_share), (64, 16));
        assert_eq!(
            s.preauth_dir, None,
            "no rule directory unless one is mounted"
        );
    }

    #[test]
    fn defaults_and_overrides_by_class() {
        let s = load("").expect("defaults");
        assert_eq!(s.consent_ttl(EffectClass::Standard), 900);
        let s = load("consent_ttl_seconds = 60\n[consent_ttl_by_class]\nhost_lifecycle = 5\n")
            .expect("overrides");
        assert_eq!(s.consent_ttl(EffectClass::Standard), 60);
        assert_eq!(s.consent_ttl(EffectClass::HostLifecycle), 5);
    }

    #[test]
    fn bad_settings_name_their_field() {
        for (text, field) in [
            ("consent_ttl_seconds = 0", "office.consent_ttl_seconds"),
            (
                "[consent_ttl_by_class]\nteleport = 5",
                "office.consent_ttl_by_class.teleport",
            ),
            (
                "[consent_ttl_by_class]\nmigration = 999999",
                "office.consent_ttl_by_class.migration",
            ),
            ("consent_tll_seconds = 5", "office.consent_tll_seconds"),
            ("stream_limit = 0", "office.stream_limit"),
            ("stream_limit = 4\nstream_share = 5", "office.stream_share"),
            (
                "stream_recheck_interval_ms = 5",
                "office.stream_recheck_interval_ms",
            ),
            (
                "promotion_retry_interval_ms = 0",
                "office.promotion_retry_interval_ms",
            ),
        ] {
            match load(text) {
                Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
