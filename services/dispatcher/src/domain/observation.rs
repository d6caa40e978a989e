//! Readiness observations and the probe contract: a probe is a total observation of exactly
//! the requested key set. Duplicate, missing or foreign keys are contract failures, and a failed
//! probe invalidates (UNKNOWN) rather than preserving stale warmth.

use std::collections::BTreeMap;

/// Observed readiness of one capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    Cold,
    Activatable,
    Warming,
    Warm,
    Error,
    Unknown,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::Cold,
        Phase::Activatable,
        Phase::Warming,
        Phase::Warm,
        Phase::Error,
        Phase::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Cold => "COLD",
            Phase::Activatable => "ACTIVATABLE",
            Phase::Warming => "WARMING",
            Phase::Warm => "WARM",
            Phase::Error => "ERROR",
            Phase::Unknown => "UNKNOWN",
        }
    }

    pub fn parse(s: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// Rank for candidate order: warm first, then warming, activatable, cold, unknown, error.
    pub fn rank(self) -> u8 {
        match self {
            Phase::Warm => 0,
            Phase::Warming => 1,
            Phase::Activatable => 2,
            Phase::Cold => 3,
            Phase::Unknown => 4,
            Phase::Error => 5,
        }
    }

    /// The runtime was seen up (answering) in this phase.
    pub fn runtime_up(self) -> bool {
        match self {
            Phase::Warm | Phase::Warming | Phase::Activatable => true,
            Phase::Cold | Phase::Error | Phase::Unknown => false,
        }
    }
}

/// One observation: a phase and, for ERROR/UNKNOWN, a safe reason code (never a body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub phase: Phase,
    pub reason: String,
}

impl Observed {
    pub fn new(phase: Phase) -> Self {
        Observed {
            phase,
            reason: String::new(),
        }
    }

    pub fn with_reason(phase: Phase, reason: impl Into<String>) -> Self {
        Observed {
            phase,
            reason: reason.into(),
        }
    }
}

/// Why a probe result is not a valid total observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TotalityError {
    DuplicateKey(String),
    MissingKey(String),
    ForeignKey(String),
}

impl TotalityError {
    /// Safe reason code recorded with the invalidated observations.
    pub fn code(&self) -> &'static str {
        match self {
            TotalityError::DuplicateKey(_) => "PROBE_DUPLICATE_KEY",
            TotalityError::MissingKey(_) => "PROBE_MISSING_KEY",
            TotalityError::ForeignKey(_) => "PROBE_FOREIGN_KEY",
        }
    }
}

/// Check that `observed` covers exactly `requested`, each key once. On success the map holds
/// one observation per requested key; on failure nothing of the result may be used.
pub fn validate_total(
    requested: &[String],
    observed: Vec<(String, Observed)>,
) -> Result<BTreeMap<String, Observed>, TotalityError> {
    let mut wanted: BTreeMap<&str, bool> = requested.iter().map(|k| (k.as_str(), false)).collect();
    let mut out = BTreeMap::new();
    for (key, obs) in observed {
        match wanted.get_mut(key.as_str()) {
            None => return Err(TotalityError::ForeignKey(key)),
            Some(seen) if *seen => return Err(TotalityError::DuplicateKey(key)),
            Some(seen) => *seen = true,
        }
        out.insert(key, obs);
    }
    if let Some((missing, _)) = wanted.iter().find(|(_, seen)| !**seen) {
        return Err(TotalityError::MissingKey((*missing).to_owned()));
    }
    // A requested key listed twice in the request itself is a caller defect; the map has one.
    Ok(out)
}

/// The observations that replace an animator's cached ones after a probe: the validated result,
/// or, when the probe failed in any way, every requested key invalidated to UNKNOWN with the
/// failure code.
pub fn settle(
    requested: &[String],
    result: Result<Vec<(String, Observed)>, String>,
) -> (BTreeMap<String, Observed>, Option<String>) {
    let failure = match result {
        Ok(observed) => match validate_total(requested, observed) {
            Ok(map) => return (map, None),
            Err(e) => e.code().to_owned(),
        },
        Err(code) => code,
    };
    let invalid = requested
        .iter()
        .map(|k| {
            (
                k.clone(),
                Observed::with_reason(Phase::Unknown, failure.clone()),
            )
        })
        .collect();
    (invalid, Some(failure))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| (*s).to_owned()).collect()
    }

    fn obs(k: &[(&str, Phase)]) -> Vec<(String, Observed)> {
        k.iter()
            .map(|(k, p)| ((*k).to_owned(), Observed::new(*p)))
            .collect()
    }

    #[test]
    fn total_observation_is_accepted() {
        let got = validate_total(
            &keys(&["a", "b"]),
            obs(&[("b", Phase::Cold), ("a", Phase::Warm)]),
        )
        .expect("total");
        assert_eq!(got["a"].phase, Phase::Warm);
        assert_eq!(got["b"].phase, Phase::Cold);
    }

    #[test]
    fn duplicate_missing_and_foreign_keys_are_violations() {
        let req = keys(&["a", "b"]);
        assert_eq!(
            validate_total(
                &req,
                obs(&[("a", Phase::Warm), ("a", Phase::Warm), ("b", Phase::Warm)])
            ),
            Err(TotalityError::DuplicateKey("a".into()))
        );
        assert_eq!(
            validate_total(&req, obs(&[("a", Phase::Warm)])),
            Err(TotalityError::MissingKey("b".into()))
        );
        assert_eq!(
            validate_total(
                &req,
                obs(&[("a", Phase::Warm), ("b", Phase::Warm), ("c", Phase::Warm)])
            ),
            Err(TotalityError::ForeignKey("c".into()))
        );
        assert_eq!(validate_total(&[], vec![]), Ok(BTreeMap::new()));
        assert_eq!(
            validate_total(&[], obs(&[("x", Phase::Cold)])),
            Err(TotalityError::ForeignKey("x".into()))
        );
    }

    #[test]
    fn a_failed_or_partial_probe_invalidates_every_requested_key() {
        let req = keys(&["a", "b"]);
        let (map, failure) = settle(&req, Ok(obs(&[("a", Phase::Warm)])));
        assert_eq!(failure.as_deref(), Some("PROBE_MISSING_KEY"));
        assert!(
            map.values()
                .all(|o| o.phase == Phase::Unknown && o.reason == "PROBE_MISSING_KEY")
        );
        assert_eq!(map.len(), 2);
        let (map, failure) = settle(&req, Err("PROBE_TIMEOUT".into()));
        assert_eq!(failure.as_deref(), Some("PROBE_TIMEOUT"));
        assert_eq!(
            map["a"],
            Observed::with_reason(Phase::Unknown, "PROBE_TIMEOUT")
        );
        let (map, failure) = settle(&req, Ok(obs(&[("a", Phase::Warm), ("b", Phase::Error)])));
        assert_eq!(failure, None);
        assert_eq!(map["a"].phase, Phase::Warm);
    }

    #[test]
    fn phases_round_trip_and_rank() {
        for p in Phase::ALL {
            assert_eq!(Phase::parse(p.as_str()), Some(p));
        }
        let mut v = Phase::ALL.to_vec();
        v.sort_by_key(|p| p.rank());
        assert_eq!(
            v,
            [
                Phase::Warm,
                Phase::Warming,
                Phase::Activatable,
                Phase::Cold,
                Phase::Unknown,
                Phase::Error
            ]
        );
    }
}
