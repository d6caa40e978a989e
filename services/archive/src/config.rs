//! The `[office]` section of the Archive's configuration: the policy revision namespaces are
//! bound to and the bounds of every input. Validated once at start; every error names the file
//! and the field, and refuses start-up (exit 2).

use lychd_runtime::config::{ConfigError, OfficeConfig};
use serde::Deserialize;

/// `[office]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchiveSection {
    /// The policy revision a namespace is bound to at its first intake (>= 1). A namespace
    /// bound to another revision is refused (`NAMESPACE_POLICY_MISMATCH`).
    #[serde(default = "d_policy")]
    pub policy_revision: u64,
    /// Longest note text, in characters (1..=1000000).
    #[serde(default = "d_note")]
    pub max_note_chars: usize,
    /// Longest query, in characters (1..=4096).
    #[serde(default = "d_query")]
    pub max_query_chars: usize,
    /// Largest `max_results` of a recall (1..=1000).
    #[serde(default = "d_results")]
    pub max_results: u32,
    /// Largest `max_chars` of a recall (1..=4000000).
    #[serde(default = "d_chars")]
    pub max_chars: u32,
}

fn d_policy() -> u64 {
    1
}
fn d_note() -> usize {
    16_384
}
fn d_query() -> usize {
    512
}
fn d_results() -> u32 {
    50
}
fn d_chars() -> u32 {
    65_536
}

/// The validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub policy_revision: i64,
    pub max_note_chars: usize,
    pub max_query_chars: usize,
    pub max_results: u32,
    pub max_chars: u32,
}

pub fn load(cfg: &OfficeConfig) -> Result<Settings, ConfigError> {
    let section: ArchiveSection = cfg.office_section()?;
    let bad = |field: &str, message: &str| cfg.invalid_office(field, message);
    let policy_revision = i64::try_from(section.policy_revision)
        .ok()
        .filter(|p| *p >= 1)
        .ok_or_else(|| bad("policy_revision", "must be at least 1"))?;
    if !(1..=1_000_000).contains(&section.max_note_chars) {
        return Err(bad("max_note_chars", "must be between 1 and 1000000"));
    }
    if !(1..=4096).contains(&section.max_query_chars) {
        return Err(bad("max_query_chars", "must be between 1 and 4096"));
    }
    if !(1..=1000).contains(&section.max_results) {
        return Err(bad("max_results", "must be between 1 and 1000"));
    }
    if !(1..=4_000_000).contains(&section.max_chars) {
        return Err(bad("max_chars", "must be between 1 and 4000000"));
    }
    Ok(Settings {
        policy_revision,
        max_note_chars: section.max_note_chars,
        max_query_chars: section.max_query_chars,
        max_results: section.max_results,
        max_chars: section.max_chars,
    })
}

#[cfg(test)]
mod tests {
    use lychd_runtime::Office;

    use super::*;

    #[test]
    fn the_deploy_example_validates_with_the_defaults() {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy/config/archive.toml");
        let cfg = OfficeConfig::load(Office::Archive, Some(&file), Vec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let s = load(&cfg).unwrap_or_else(|e| panic!("{e}"));
        let d = load(&OfficeConfig::defaults(Office::Archive)).expect("defaults");
        assert_eq!(
            (
                s.policy_revision,
                s.max_note_chars,
                s.max_query_chars,
                s.max_results,
                s.max_chars
            ),
            (
                d.policy_revision,
                d.max_note_chars,
                d.max_query_chars,
                d.max_results,
                d.max_chars
            )
        );
    }

    #[test]
    fn defaults_and_a_bad_bound_named_by_field() {
        let mut cfg = OfficeConfig::defaults(Office::Archive);
        let s = load(&cfg).expect("defaults load");
        assert_eq!((s.policy_revision, s.max_results), (1, 50));
        cfg.office = toml::from_str("max_results = 0").expect("toml");
        let e = load(&cfg).expect_err("zero results").to_string();
        assert!(e.contains("office.max_results"), "{e}");
        cfg.office = toml::from_str("budget = 1").expect("toml");
        assert!(load(&cfg).is_err(), "unknown fields are refused");
    }
}
