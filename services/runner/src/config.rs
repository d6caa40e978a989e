//! The `[office]` section of the Runner's configuration: its step loop (whether this process
//! drives runs, its lease and polling, how long a `task` step's no-op takes). Validated once at
//! start; every error names the file and the field, and refuses start-up (exit 2).

use std::collections::BTreeMap;

use lychd_runtime::config::{ConfigError, OfficeConfig};
use serde::Deserialize;

/// The capability families a price may be set for (the Dispatcher's v1 families).
const FAMILIES: [&str; 7] = [
    "chat",
    "vision",
    "embedding",
    "stt",
    "tts",
    "tool_execution",
    "rerank",
];
/// The most a price per 1 000 tokens may be, in thousandths of the contract's cost unit.
pub const MAX_PRICE_MILLI_PER_1K: u64 = 20_000;

/// `[office]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerSection {
    /// Whether this process runs the step loop (a replica that only serves reads: `false`).
    #[serde(default = "d_drive")]
    pub drive: bool,
    /// How long a run's lease lasts without a heartbeat, in ms (500..=600000); a crashed
    /// runner's runs are taken over after it. Heartbeats renew it every third of it.
    #[serde(default = "d_ttl")]
    pub lease_ttl_ms: u64,
    /// How often an idle runner looks for a claimable run, in ms (10..=60000).
    #[serde(default = "d_poll")]
    pub poll_ms: u64,
    /// Runs one runner process drives at once (1..=64).
    #[serde(default = "d_concurrency")]
    pub concurrency: usize,
    /// How long a `task` step's deterministic no-op takes, in ms (0..=60000): Runner I's task
    /// steps do nothing but record their result digest; this stands for their work.
    #[serde(default)]
    pub task_step_ms: u64,
    /// The cost of a model step: thousandths of the contract's cost unit per 1 000 tokens, per
    /// capability family (`[office.price_milli_per_1k_tokens] chat = 5`); a family not named
    /// costs 0 (free). Integers only (0..=20000); a step's cost is rounded up.
    #[serde(default)]
    pub price_milli_per_1k_tokens: BTreeMap<String, u64>,
    /// How long a run held for review (`WAIT_VERIFICATION`, or a verifier that did not answer)
    /// waits before the verifier is asked again, in ms (50..=3600000).
    #[serde(default = "d_recheck")]
    pub verify_recheck_ms: u64,
    /// The file holding the effect adapter's credential (sent as `Authorization: Bearer` to
    /// effect destinations); a reference only — the secret is never in the configuration or
    /// the environment. Unset: effects are delivered without one.
    #[serde(default)]
    pub effect_credential_file: Option<std::path::PathBuf>,
    /// How long one exchange with an effect destination may take, in ms (100..=60000).
    #[serde(default = "d_effect_timeout")]
    pub effect_timeout_ms: u64,
    /// How often a run waiting in `WAIT_APPROVAL` asks Ward for its verdict, in ms (10..=60000).
    #[serde(default = "d_approval_poll")]
    pub approval_poll_ms: u64,
    /// Delivery attempts of one effect (the first included) while the destination says "not
    /// applied" (1..=10); then the outcome goes to reconciliation.
    #[serde(default = "d_effect_attempts")]
    pub effect_attempts: u32,
    /// **Test only** (fault injection, documented in `docs/runner.md`): the process exits at
    /// once (as kill -9 would) at the named points of the effect path. Empty in any deployment.
    #[serde(default)]
    pub fault_points: Vec<String>,
}

fn d_effect_timeout() -> u64 {
    5_000
}
fn d_approval_poll() -> u64 {
    500
}
fn d_effect_attempts() -> u32 {
    3
}

fn d_drive() -> bool {
    true
}
fn d_ttl() -> u64 {
    10_000
}
fn d_poll() -> u64 {
    200
}
fn d_concurrency() -> usize {
    4
}
fn d_recheck() -> u64 {
    2_000
}

/// The validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub drive: bool,
    pub lease_ttl_ms: u64,
    pub poll_ms: u64,
    pub concurrency: usize,
    pub task_step_ms: u64,
    /// Price per 1 000 tokens per family (thousandths of the contract's cost unit).
    pub price_milli_per_1k_tokens: BTreeMap<String, u64>,
    /// Effects: the adapter's credential, timeouts, approval polling, fault points.
    pub effects: EffectSettings,
}

/// The validated effect settings (`[office] effect_*`, `approval_poll_ms`, `fault_points`).
#[derive(Debug, Clone)]
pub struct EffectSettings {
    /// The effect adapter's credential (read once from its file).
    pub credential: Option<secrecy::SecretString>,
    pub timeout_ms: u64,
    pub approval_poll_ms: u64,
    pub attempts: u32,
    /// Test only: where the process aborts (see [`FAULT_POINTS`]).
    pub fault_points: Vec<String>,
}

impl Default for EffectSettings {
    fn default() -> Self {
        EffectSettings {
            credential: None,
            timeout_ms: d_effect_timeout(),
            approval_poll_ms: d_approval_poll(),
            attempts: d_effect_attempts(),
            fault_points: Vec::new(),
        }
    }
}

/// The fault-injection points of the effect path (`[office] fault_points`, test only).
/// `after_consume`: Ward's approval consumed, `approval_consumed` not committed;
/// `before_intent`: in `COMMIT_INTENT`, the intent not committed; `after_intent`: the intent
/// and outbox row committed, nothing sent; `after_response`: the destination answered, the
/// answer not committed.
pub const FAULT_POINTS: [&str; 4] = [
    "after_consume",
    "before_intent",
    "after_intent",
    "after_response",
];

impl Settings {
    /// The price per 1 000 tokens of a model step of `family` (0: free).
    pub fn price(&self, family: &str) -> u64 {
        self.price_milli_per_1k_tokens
            .get(family)
            .copied()
            .unwrap_or(0)
    }
}

pub fn load(cfg: &OfficeConfig) -> Result<Settings, ConfigError> {
    let s: RunnerSection = cfg.office_section()?;
    let bad = |field: &str, message: &str| cfg.invalid_office(field, message);
    if !(500..=600_000).contains(&s.lease_ttl_ms) {
        return Err(bad("lease_ttl_ms", "must be between 500 and 600000"));
    }
    if !(10..=60_000).contains(&s.poll_ms) {
        return Err(bad("poll_ms", "must be between 10 and 60000"));
    }
    if !(1..=64).contains(&s.concurrency) {
        return Err(bad("concurrency", "must be between 1 and 64"));
    }
    if s.task_step_ms > 60_000 {
        return Err(bad("task_step_ms", "must be at most 60000"));
    }
    for (family, price) in &s.price_milli_per_1k_tokens {
        if !FAMILIES.contains(&family.as_str()) {
            return Err(bad(
                "price_milli_per_1k_tokens",
                "names a family that is not a capability family",
            ));
        }
        if *price > MAX_PRICE_MILLI_PER_1K {
            return Err(bad(
                "price_milli_per_1k_tokens",
                "a price must be at most 20000 per 1000 tokens",
            ));
        }
    }
    recheck(cfg, &s)?;
    if !(100..=60_000).contains(&s.effect_timeout_ms) {
        return Err(bad("effect_timeout_ms", "must be between 100 and 60000"));
    }
    if !(10..=60_000).contains(&s.approval_poll_ms) {
        return Err(bad("approval_poll_ms", "must be between 10 and 60000"));
    }
    if !(1..=10).contains(&s.effect_attempts) {
        return Err(bad("effect_attempts", "must be between 1 and 10"));
    }
    if s.fault_points
        .iter()
        .any(|f| !FAULT_POINTS.contains(&f.as_str()))
    {
        return Err(bad(
            "fault_points",
            "names a point that is not a fault point",
        ));
    }
    let effect_credential = match &s.effect_credential_file {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|_| bad("effect_credential_file", "cannot be read"))?;
            let text = text.trim().to_owned();
            if text.is_empty() || text.chars().any(|c| c.is_control()) {
                return Err(bad(
                    "effect_credential_file",
                    "must hold one line of printable characters",
                ));
            }
            Some(secrecy::SecretString::from(text))
        }
    };
    Ok(Settings {
        effects: EffectSettings {
            credential: effect_credential,
            timeout_ms: s.effect_timeout_ms,
            approval_poll_ms: s.approval_poll_ms,
            attempts: s.effect_attempts,
            fault_points: s.fault_points,
        },
        drive: s.drive,
        lease_ttl_ms: s.lease_ttl_ms,
        poll_ms: s.poll_ms,
        concurrency: s.concurrency,
        task_step_ms: s.task_step_ms,
        price_milli_per_1k_tokens: s.price_milli_per_1k_tokens,
    })
}

fn recheck(cfg: &OfficeConfig, s: &RunnerSection) -> Result<u64, ConfigError> {
    if !(50..=3_600_000).contains(&s.verify_recheck_ms) {
        return Err(cfg.invalid_office("verify_recheck_ms", "must be between 50 and 3600000"));
    }
    Ok(s.verify_recheck_ms)
}

/// `[office] verify_recheck_ms`: how long a held verification waits before the verifier is
/// asked again (validated by [`load`] too).
pub fn verify_recheck_ms(cfg: &OfficeConfig) -> Result<u64, ConfigError> {
    recheck(cfg, &cfg.office_section()?)
}
