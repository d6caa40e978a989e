//! The issue decision table (LychD design rules §22 Dispatcher, "Refresh the selected route"),
//! on a fresh observation of the chosen record.
//!
//! | chosen record | fresh observation | admission | result |
//! | --- | --- | --- | --- |
//! | Portal | any (not probed for issue) | any | unavailable `PORTAL_QUARANTINED` |
//! | metadata-only family or empty surface | (not probed) | any | unavailable `SURFACE_NOT_EXECUTABLE` |
//! | soulstone | ERROR | any | unavailable `OBSERVED_ERROR` with the observed reason |
//! | soulstone | UNKNOWN, first time | any | re-probe once |
//! | soulstone | UNKNOWN again | any | unavailable `PROBE_FAILED` (probe failed) or `READINESS_UNKNOWN` |
//! | soulstone | WARM | open | grant (then the straddle check at registration) |
//! | soulstone | WARM | closed | hardware transition (drain in progress) |
//! | dedicated soulstone | COLD / ACTIVATABLE / WARMING | any | hardware transition |
//! | shared soulstone | COLD / ACTIVATABLE / WARMING | open | unavailable `NOT_WARM` |
//! | shared soulstone | COLD / ACTIVATABLE / WARMING | closed | hardware transition (drain in progress) |
//!
//! The last row of the design rule's table — a drain closing during issue — is decided at
//! registration: the lease is written only if the animator's admission generation is the one
//! captured before the probe and admission is open; otherwise the answer is the transition
//! signal and nothing is written.

use super::observation::Phase;
use super::registry::SourceKind;

/// Stable reasons of the `unavailable` outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    NoCandidate,
    CapabilityUnknown,
    CapabilityIncompatible,
    SurfaceNotExecutable,
    PortalQuarantined,
    NotWarm,
    ObservedError,
    ReadinessUnknown,
    ProbeFailed,
}

impl Unavailable {
    pub const ALL: [Unavailable; 9] = [
        Unavailable::NoCandidate,
        Unavailable::CapabilityUnknown,
        Unavailable::CapabilityIncompatible,
        Unavailable::SurfaceNotExecutable,
        Unavailable::PortalQuarantined,
        Unavailable::NotWarm,
        Unavailable::ObservedError,
        Unavailable::ReadinessUnknown,
        Unavailable::ProbeFailed,
    ];

    /// The reason of a stable code (an answer kept under a request id).
    pub fn parse(code: &str) -> Option<Unavailable> {
        Unavailable::ALL.into_iter().find(|u| u.code() == code)
    }

    pub fn code(self) -> &'static str {
        match self {
            Unavailable::NoCandidate => "NO_CANDIDATE",
            Unavailable::CapabilityUnknown => "CAPABILITY_UNKNOWN",
            Unavailable::CapabilityIncompatible => "CAPABILITY_INCOMPATIBLE",
            Unavailable::SurfaceNotExecutable => "SURFACE_NOT_EXECUTABLE",
            Unavailable::PortalQuarantined => "PORTAL_QUARANTINED",
            Unavailable::NotWarm => "NOT_WARM",
            Unavailable::ObservedError => "OBSERVED_ERROR",
            Unavailable::ReadinessUnknown => "READINESS_UNKNOWN",
            Unavailable::ProbeFailed => "PROBE_FAILED",
        }
    }
}

/// Facts decided before any probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub source: SourceKind,
    pub dedicated: bool,
    pub surface_executable: bool,
}

/// Refusals that need no observation: a Portal (no egress admission exists) and a surface v1
/// cannot execute. Hardware convergence cannot create either, so they never become a
/// transition and are decided before readiness probing.
pub fn precheck(r: Record) -> Option<Unavailable> {
    match r.source {
        SourceKind::Portal => return Some(Unavailable::PortalQuarantined),
        SourceKind::Soulstone => {}
    }
    if !r.surface_executable {
        return Some(Unavailable::SurfaceNotExecutable);
    }
    None
}

/// What to do after a fresh observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Grant,
    TransitionRequired,
    Unavailable(Unavailable),
    /// Observe once more (only after the first UNKNOWN).
    Reprobe,
}

/// A fresh observation of the chosen record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fresh {
    pub phase: Phase,
    /// The probe itself failed (timeout, malformed answer, totality violation).
    pub probe_failed: bool,
    /// Whether this is already the re-probe.
    pub reprobed: bool,
}

/// The decision table.
pub fn decide(r: Record, fresh: Fresh, admission_open: bool) -> Decision {
    if let Some(u) = precheck(r) {
        return Decision::Unavailable(u);
    }
    match fresh.phase {
        Phase::Error => Decision::Unavailable(Unavailable::ObservedError),
        Phase::Unknown if !fresh.reprobed => Decision::Reprobe,
        Phase::Unknown if fresh.probe_failed => Decision::Unavailable(Unavailable::ProbeFailed),
        Phase::Unknown => Decision::Unavailable(Unavailable::ReadinessUnknown),
        _ if !admission_open => Decision::TransitionRequired,
        Phase::Warm => Decision::Grant,
        Phase::Cold | Phase::Activatable | Phase::Warming if r.dedicated => {
            Decision::TransitionRequired
        }
        Phase::Cold | Phase::Activatable | Phase::Warming => {
            Decision::Unavailable(Unavailable::NotWarm)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_codes_round_trip() {
        for u in Unavailable::ALL {
            assert_eq!(Unavailable::parse(u.code()), Some(u));
        }
        assert_eq!(Unavailable::parse("NOT_A_CODE"), None);
    }

    const DEDICATED: Record = Record {
        source: SourceKind::Soulstone,
        dedicated: true,
        surface_executable: true,
    };
    const SHARED: Record = Record {
        dedicated: false,
        ..DEDICATED
    };

    fn fresh(phase: Phase) -> Fresh {
        Fresh {
            phase,
            probe_failed: false,
            reprobed: false,
        }
    }

    #[test]
    fn warm_and_open_grants() {
        assert_eq!(decide(DEDICATED, fresh(Phase::Warm), true), Decision::Grant);
        assert_eq!(decide(SHARED, fresh(Phase::Warm), true), Decision::Grant);
    }

    #[test]
    fn warm_with_metadata_only_or_empty_surface_is_unavailable() {
        let r = Record {
            surface_executable: false,
            ..DEDICATED
        };
        for p in Phase::ALL {
            for open in [true, false] {
                assert_eq!(
                    decide(r, fresh(p), open),
                    Decision::Unavailable(Unavailable::SurfaceNotExecutable)
                );
            }
        }
        assert_eq!(precheck(r), Some(Unavailable::SurfaceNotExecutable));
    }

    #[test]
    fn not_warm_dedicated_needs_a_transition() {
        for p in [Phase::Cold, Phase::Activatable, Phase::Warming] {
            for open in [true, false] {
                assert_eq!(
                    decide(DEDICATED, fresh(p), open),
                    Decision::TransitionRequired,
                    "{p:?}"
                );
            }
        }
    }

    #[test]
    fn not_warm_shared_is_unavailable() {
        for p in [Phase::Cold, Phase::Activatable, Phase::Warming] {
            assert_eq!(
                decide(SHARED, fresh(p), true),
                Decision::Unavailable(Unavailable::NotWarm),
                "{p:?}"
            );
        }
    }

    #[test]
    fn error_is_unavailable_whatever_else() {
        for r in [DEDICATED, SHARED] {
            for open in [true, false] {
                assert_eq!(
                    decide(r, fresh(Phase::Error), open),
                    Decision::Unavailable(Unavailable::ObservedError)
                );
            }
        }
    }

    #[test]
    fn unknown_reprobes_once_then_is_unavailable() {
        assert_eq!(
            decide(DEDICATED, fresh(Phase::Unknown), true),
            Decision::Reprobe
        );
        let again = Fresh {
            reprobed: true,
            ..fresh(Phase::Unknown)
        };
        assert_eq!(
            decide(DEDICATED, again, true),
            Decision::Unavailable(Unavailable::ReadinessUnknown)
        );
        let failed = Fresh {
            probe_failed: true,
            ..again
        };
        assert_eq!(
            decide(SHARED, failed, false),
            Decision::Unavailable(Unavailable::ProbeFailed)
        );
    }

    #[test]
    fn closed_admission_is_a_transition_for_any_placement() {
        assert_eq!(
            decide(DEDICATED, fresh(Phase::Warm), false),
            Decision::TransitionRequired
        );
        assert_eq!(
            decide(SHARED, fresh(Phase::Warm), false),
            Decision::TransitionRequired
        );
        assert_eq!(
            decide(SHARED, fresh(Phase::Cold), false),
            Decision::TransitionRequired
        );
    }

    #[test]
    fn portals_fail_closed_even_when_warm() {
        let p = Record {
            source: SourceKind::Portal,
            dedicated: false,
            surface_executable: true,
        };
        for phase in Phase::ALL {
            assert_eq!(
                decide(p, fresh(phase), true),
                Decision::Unavailable(Unavailable::PortalQuarantined)
            );
        }
    }

    #[test]
    fn every_input_has_exactly_one_answer() {
        // Totality over the whole input space (no panic, and a grant only for WARM + open).
        for source in [SourceKind::Soulstone, SourceKind::Portal] {
            for dedicated in [true, false] {
                for surface_executable in [true, false] {
                    for phase in Phase::ALL {
                        for probe_failed in [true, false] {
                            for reprobed in [true, false] {
                                for open in [true, false] {
                                    let r = Record {
                                        source,
                                        dedicated,
                                        surface_executable,
                                    };
                                    let d = decide(
                                        r,
                                        Fresh {
                                            phase,
                                            probe_failed,
                                            reprobed,
                                        },
                                        open,
                                    );
                                    if d == Decision::Grant {
                                        assert!(
                                            phase == Phase::Warm
                                                && open
                                                && source == SourceKind::Soulstone
                                                && surface_executable
                                        );
                                    }
                                    if d == Decision::TransitionRequired {
                                        assert!(
                                            source == SourceKind::Soulstone && surface_executable
                                        );
                                        assert!(dedicated || !open);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
