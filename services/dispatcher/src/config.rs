//! The `[office]` section of the Dispatcher's configuration: limits and the registry
//! (`[[office.animators]]`, `[[office.capabilities]]`). Validated once at start; every error
//! names the file and the field, and refuses start-up (exit 2).

use std::time::Duration;

use lychd_runtime::config::{ConfigError, OfficeConfig};
use serde::Deserialize;

use crate::domain::lease::TtlPolicy;
use crate::domain::registry::{AnimatorDecl, CapabilityDecl, Registry};
use crate::probe::client::HttpGet;

/// `[office]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DispatcherSection {
    /// Whole-probe timeout per HTTP request, in milliseconds (1..=30000).
    #[serde(default = "d_probe_timeout")]
    pub probe_timeout_ms: u64,
    /// Largest probe response body, in bytes (1 KiB..=16 MiB).
    #[serde(default = "d_probe_max")]
    pub probe_max_response_bytes: usize,
    /// Lease lifetime when a request asks for 0, in seconds.
    #[serde(default = "d_ttl_default")]
    pub lease_ttl_default_seconds: u32,
    /// Shortest lease lifetime a request may ask for, in seconds.
    #[serde(default = "d_ttl_min")]
    pub lease_ttl_min_seconds: u32,
    /// Longest lease lifetime a request may ask for, in seconds.
    #[serde(default = "d_ttl_max")]
    pub lease_ttl_max_seconds: u32,
    /// Longest `AwaitDrain` wait, in milliseconds (below `server.request_timeout_ms`).
    #[serde(default = "d_drain_max")]
    pub drain_wait_max_ms: u32,
    /// How often a following event watch and a drain wait look at the database, in milliseconds.
    #[serde(default = "d_poll")]
    pub poll_interval_ms: u64,
    /// How often an open event stream asks Ward again whether its caller may still read, in
    /// milliseconds (100..=60000): a revoked caller's stream ends within about this long.
    #[serde(default = "d_stream_recheck")]
    pub stream_recheck_interval_ms: u64,
    /// Most event streams (`WatchDispatchEvents`) this office serves at once (1..=10000);
    /// beyond it a new one is refused `RESOURCE_EXHAUSTED` (`STREAM_LIMIT_REACHED`).
    #[serde(default = "d_stream_limit")]
    pub stream_limit: usize,
    /// Most of those one principal holds (1..=`stream_limit`; unset: a quarter, rounded up);
    /// beyond it its next one is refused `RESOURCE_EXHAUSTED` (`STREAM_SHARE_REACHED`).
    #[serde(default)]
    pub stream_share: Option<usize>,
    #[serde(default)]
    pub animators: Vec<AnimatorDecl>,
    #[serde(default)]
    pub capabilities: Vec<CapabilityDecl>,
}

fn d_probe_timeout() -> u64 {
    2_000
}
fn d_probe_max() -> usize {
    1024 * 1024
}
fn d_ttl_default() -> u32 {
    300
}
fn d_ttl_min() -> u32 {
    1
}
fn d_ttl_max() -> u32 {
    3_600
}
fn d_drain_max() -> u32 {
    20_000
}
fn d_poll() -> u64 {
    50
}
fn d_stream_recheck() -> u64 {
    2_000
}
fn d_stream_limit() -> usize {
    64
}

/// What the office runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub registry: Registry,
    pub ttl: TtlPolicy,
    pub probe: HttpGet,
    pub drain_wait_max_ms: u32,
    pub poll_interval: Duration,
    pub stream_recheck_interval: Duration,
    pub stream_limit: usize,
    pub stream_share: usize,
}

/// Read and validate `[office]`.
pub fn load(cfg: &OfficeConfig) -> Result<Settings, ConfigError> {
    let section: DispatcherSection = cfg.office_section()?;
    let bad = |field: &str, message: &str| cfg.invalid_office(field, message);
    if !(1..=30_000).contains(&section.probe_timeout_ms) {
        return Err(bad("probe_timeout_ms", "must be between 1 and 30000"));
    }
    if !(1024..=16 * 1024 * 1024).contains(&section.probe_max_response_bytes) {
        return Err(bad(
            "probe_max_response_bytes",
            "must be between 1024 and 16777216",
        ));
    }
    if section.lease_ttl_min_seconds == 0 {
        return Err(bad("lease_ttl_min_seconds", "must be at least 1"));
    }
    if section.lease_ttl_max_seconds < section.lease_ttl_min_seconds
        || section.lease_ttl_max_seconds > 86_400
    {
        return Err(bad(
            "lease_ttl_max_seconds",
            "must be at least lease_ttl_min_seconds and at most 86400",
        ));
    }
    if !(section.lease_ttl_min_seconds..=section.lease_ttl_max_seconds)
        .contains(&section.lease_ttl_default_seconds)
    {
        return Err(bad(
            "lease_ttl_default_seconds",
            "must be between lease_ttl_min_seconds and lease_ttl_max_seconds",
        ));
    }
    if u64::from(section.drain_wait_max_ms) >= cfg.server.request_timeout_ms {
        return Err(bad(
            "drain_wait_max_ms",
            "must be below server.request_timeout_ms",
        ));
    }
    if !(1..=10_000).contains(&section.poll_interval_ms) {
        return Err(bad("poll_interval_ms", "must be between 1 and 10000"));
    }
    if !(100..=60_000).contains(&section.stream_recheck_interval_ms) {
        return Err(bad(
            "stream_recheck_interval_ms",
            "must be between 100 and 60000",
        ));
    }
    let (stream_limit, stream_share) =
        lychd_runtime::streams::check(section.stream_limit, section.stream_share)
            .map_err(|(field, message)| bad(field, &message))?;
    let registry = Registry::build(&section.animators, &section.capabilities)
        .map_err(|e| bad(&e.field, &e.message))?;
    Ok(Settings {
        registry,
        ttl: TtlPolicy {
            default: section.lease_ttl_default_seconds,
            min: section.lease_ttl_min_seconds,
            max: section.lease_ttl_max_seconds,
        },
        probe: HttpGet {
            timeout: Duration::from_millis(section.probe_timeout_ms),
            max_bytes: section.probe_max_response_bytes,
        },
        drain_wait_max_ms: section.drain_wait_max_ms,
        poll_interval: Duration::from_millis(section.poll_interval_ms),
        stream_recheck_interval: Duration::from_millis(section.stream_recheck_interval_ms),
        stream_limit,
        stream_share,
    })
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use lychd_runtime::Office;

    use super::*;

    fn load_file(path: &Path) -> Result<Settings, ConfigError> {
        let cfg = OfficeConfig::load(Office::Dispatcher, Some(path), Vec::new())?;
        load(&cfg)
    }

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("dispatcher.toml");
        std::fs::write(&p, text).expect("write");
        p
    }

    #[test]
    fn the_deploy_example_registry_validates() {
        let file =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/dispatcher.toml");
        let s = load_file(&file).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            s.registry.animators().count() >= 2,
            "example declares animators"
        );
        assert!(!s.registry.is_empty());
        assert!(
            s.registry
                .animators()
                .any(|a| a.source == crate::domain::registry::SourceKind::Portal && !a.probe),
            "example shows a quarantined portal"
        );
    }

    #[test]
    fn the_fixture_registries_validate_or_refuse_as_named() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/dispatcher");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).expect("fixtures/dispatcher exists") {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            if !name.ends_with(".toml") {
                continue;
            }
            seen += 1;
            let result = load_file(&path);
            if let Some(rest) = name.strip_prefix("invalid-") {
                // invalid-<what>.toml: the error names the file and mentions <what>'s field.
                let text = result.expect_err(&name).to_string();
                assert!(text.contains(&path.display().to_string()), "{text}");
                let expect = rest.trim_end_matches(".toml").replace('-', "_");
                assert!(text.contains(&expect), "{name}: {text}");
            } else {
                let s = result.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(!s.registry.is_empty(), "{name} declares capabilities");
            }
        }
        assert!(seen >= 4, "fixtures present");
    }

    #[test]
    fn empty_office_section_is_an_empty_registry_with_defaults() {
        let dir = tempfile::tempdir().expect("tmp");
        let s = load_file(&write(dir.path(), "")).expect("defaults");
        assert!(s.registry.is_empty());
        assert_eq!(
            s.ttl,
            TtlPolicy {
                default: 300,
                min: 1,
                max: 3600
            }
        );
    }

    #[test]
    fn errors_name_file_and_field() {
        let dir = tempfile::tempdir().expect("tmp");
        let cases: &[(&str, &str)] = &[
            (
                "[office]\nprobe_timeout_ms = 0\n",
                "office.probe_timeout_ms",
            ),
            (
                "[office]\nlease_ttl_default_seconds = 99999\n",
                "office.lease_ttl_default_seconds",
            ),
            (
                "[office]\ndrain_wait_max_ms = 60000\n",
                "office.drain_wait_max_ms",
            ),
            (
                "[office]\nstream_recheck_interval_ms = 0\n",
                "office.stream_recheck_interval_ms",
            ),
            ("[office]\nstream_limit = 0\n", "office.stream_limit"),
            (
                "[office]\nstream_limit = 4\nstream_share = 5\n",
                "office.stream_share",
            ),
            ("[office]\nsurprise = 1\n", "office"),
            (
                "[[office.animators]]\nname = \"a\"\nsource = \"soulstone\"\ndialect = \"openai\"\nendpoint = \"http://h:1\"\n",
                "office.animators[0].dialect",
            ),
            (
                "[[office.animators]]\nname = \"a\"\nsource = \"portal\"\ndialect = \"openai_models_v1\"\nendpoint = \"https://h\"\ndedicated = true\n",
                "office.animators[0].dedicated",
            ),
            (
                "[[office.animators]]\nname = \"a\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"http://h:1\"\n\
                 [[office.capabilities]]\nanimator = \"a\"\nfamily = \"chat\"\nmodel_id = \"m\"\n\
                 [[office.capabilities]]\nanimator = \"a\"\nfamily = \"chat\"\nmodel_id = \"m\"\n",
                "office.capabilities[1].model_id",
            ),
        ];
        for (text, field) in cases {
            let path = write(dir.path(), text);
            let err = load_file(&path).expect_err(text).to_string();
            assert!(err.contains(field), "{field}: {err}");
            assert!(err.contains(&path.display().to_string()), "{err}");
        }
    }
}
