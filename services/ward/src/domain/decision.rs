//! Decisions from facts. The store reads every fact of one question in one statement (one
//! READ COMMITTED snapshot, the database clock); these functions turn the facts into a reason.
//!
//! Precedence, most lasting cause first: an unknown token; a revoked principal, credential or
//! session; an expired session (or credential); a session not bound to the audience it is
//! presented to; then, for authorization, a stale expected policy generation, a missing
//! assignment; otherwise allowed.

use super::kinds::CredentialKind;

/// Stable reason of a decision (`lychd.ward.v1.AuthorizeResponse.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    Allowed,
    SessionUnknown,
    SessionExpired,
    SessionRevoked,
    CredentialRevoked,
    PrincipalRevoked,
    /// The session is valid but not for the office it was presented to.
    AudienceMismatch,
    NoAssignment,
    PolicyGenerationStale,
}

impl Reason {
    pub const ALL: [Reason; 9] = [
        Reason::Allowed,
        Reason::SessionUnknown,
        Reason::SessionExpired,
        Reason::SessionRevoked,
        Reason::CredentialRevoked,
        Reason::PrincipalRevoked,
        Reason::AudienceMismatch,
        Reason::NoAssignment,
        Reason::PolicyGenerationStale,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Allowed => "ALLOWED",
            Reason::SessionUnknown => "SESSION_UNKNOWN",
            Reason::SessionExpired => "SESSION_EXPIRED",
            Reason::SessionRevoked => "SESSION_REVOKED",
            Reason::CredentialRevoked => "CREDENTIAL_REVOKED",
            Reason::PrincipalRevoked => "PRINCIPAL_REVOKED",
            Reason::AudienceMismatch => "SESSION_AUDIENCE_MISMATCH",
            Reason::NoAssignment => "NO_ASSIGNMENT",
            Reason::PolicyGenerationStale => "POLICY_GENERATION_STALE",
        }
    }

    pub const fn allowed(self) -> bool {
        match self {
            Reason::Allowed => true,
            Reason::SessionUnknown
            | Reason::SessionExpired
            | Reason::SessionRevoked
            | Reason::CredentialRevoked
            | Reason::PrincipalRevoked
            | Reason::AudienceMismatch
            | Reason::NoAssignment
            | Reason::PolicyGenerationStale => false,
        }
    }

    /// The token authenticates nobody now (as opposed to: someone, without the authority).
    pub const fn is_authentication_failure(self) -> bool {
        match self {
            Reason::SessionUnknown
            | Reason::SessionExpired
            | Reason::SessionRevoked
            | Reason::CredentialRevoked
            | Reason::PrincipalRevoked
            | Reason::AudienceMismatch => true,
            Reason::Allowed | Reason::NoAssignment | Reason::PolicyGenerationStale => false,
        }
    }
}

/// What one statement found about a session token that matched a stored digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionFacts {
    pub session_revoked: bool,
    /// `expires_at <= statement_timestamp()`.
    pub session_expired: bool,
    pub credential_revoked: bool,
    pub credential_expired: bool,
    pub principal_revoked: bool,
    /// The session names the audience it is presented to.
    pub audience_bound: bool,
    pub policy_generation: i64,
}

/// Does the token authenticate its principal? `None`: no session has the token's digest.
pub fn authenticate(facts: Option<&SessionFacts>) -> Reason {
    let Some(f) = facts else {
        return Reason::SessionUnknown;
    };
    if f.principal_revoked {
        Reason::PrincipalRevoked
    } else if f.credential_revoked {
        Reason::CredentialRevoked
    } else if f.session_revoked {
        Reason::SessionRevoked
    } else if f.session_expired || f.credential_expired {
        // A session never outlives its credential; both are "this session is over".
        Reason::SessionExpired
    } else if !f.audience_bound {
        Reason::AudienceMismatch
    } else {
        Reason::Allowed
    }
}

/// May the token's principal do what was asked? `assigned`: one live, unexpired assignment
/// matched action, object (exactly or as `<type>:*`), audience and purpose.
pub fn authorize(
    facts: Option<&SessionFacts>,
    assigned: bool,
    expected_policy_generation: Option<i64>,
) -> Reason {
    match authenticate(facts) {
        Reason::Allowed => {}
        refused => return refused,
    }
    let Some(f) = facts else {
        return Reason::SessionUnknown;
    };
    if expected_policy_generation.is_some_and(|g| g != f.policy_generation) {
        Reason::PolicyGenerationStale
    } else if !assigned {
        Reason::NoAssignment
    } else {
        Reason::Allowed
    }
}

/// Why an exchange of a credential for a session was refused (`UNAUTHENTICATED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExchangeRefusal {
    /// No credential has this digest, or it was issued for another issuer, protocol or audience.
    CredentialUnknown,
    CredentialExpired,
    CredentialRevoked,
    /// An enrollment credential that was already exchanged.
    CredentialExchanged,
    PrincipalRevoked,
}

impl ExchangeRefusal {
    pub const fn as_str(self) -> &'static str {
        match self {
            ExchangeRefusal::CredentialUnknown => "CREDENTIAL_UNKNOWN",
            ExchangeRefusal::CredentialExpired => "CREDENTIAL_EXPIRED",
            ExchangeRefusal::CredentialRevoked => "CREDENTIAL_REVOKED",
            ExchangeRefusal::CredentialExchanged => "CREDENTIAL_EXCHANGED",
            ExchangeRefusal::PrincipalRevoked => "PRINCIPAL_REVOKED",
        }
    }

    pub const fn message(self) -> &'static str {
        match self {
            ExchangeRefusal::CredentialUnknown => "credential not recognised",
            ExchangeRefusal::CredentialExpired => "credential expired",
            ExchangeRefusal::CredentialRevoked => "credential revoked",
            ExchangeRefusal::CredentialExchanged => "enrollment credential already exchanged",
            ExchangeRefusal::PrincipalRevoked => "principal revoked",
        }
    }
}

/// What the exchange transaction read about a credential, after locking its principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CredentialFacts {
    pub kind: CredentialKind,
    /// Issuer, protocol and audience are this Ward's.
    pub ours: bool,
    pub revoked: bool,
    /// `expires_at <= statement_timestamp()`.
    pub expired: bool,
    pub exchanged: bool,
    pub principal_revoked: bool,
}

/// May this credential be exchanged for a session now? `None`: no credential has the digest.
pub fn exchange(facts: Option<&CredentialFacts>) -> Result<(), ExchangeRefusal> {
    let Some(f) = facts else {
        return Err(ExchangeRefusal::CredentialUnknown);
    };
    if !f.ours {
        Err(ExchangeRefusal::CredentialUnknown)
    } else if f.principal_revoked {
        Err(ExchangeRefusal::PrincipalRevoked)
    } else if f.revoked {
        Err(ExchangeRefusal::CredentialRevoked)
    } else if f.expired {
        Err(ExchangeRefusal::CredentialExpired)
    } else if f.kind.single_use() && f.exchanged {
        Err(ExchangeRefusal::CredentialExchanged)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIVE: SessionFacts = SessionFacts {
        session_revoked: false,
        session_expired: false,
        credential_revoked: false,
        credential_expired: false,
        principal_revoked: false,
        audience_bound: true,
        policy_generation: 7,
    };

    /// Every combination of the six flags.
    fn all_facts() -> impl Iterator<Item = SessionFacts> {
        (0u8..64).map(|bits| SessionFacts {
            session_revoked: bits & 1 != 0,
            session_expired: bits & 2 != 0,
            credential_revoked: bits & 4 != 0,
            credential_expired: bits & 8 != 0,
            principal_revoked: bits & 16 != 0,
            audience_bound: bits & 32 == 0,
            policy_generation: 7,
        })
    }

    /// The reference: precedence written out once more, independently.
    fn expected_authentication(f: &SessionFacts) -> Reason {
        let causes = [
            (f.principal_revoked, Reason::PrincipalRevoked),
            (f.credential_revoked, Reason::CredentialRevoked),
            (f.session_revoked, Reason::SessionRevoked),
            (f.session_expired, Reason::SessionExpired),
            (f.credential_expired, Reason::SessionExpired),
            (!f.audience_bound, Reason::AudienceMismatch),
        ];
        causes
            .iter()
            .find(|(hit, _)| *hit)
            .map(|(_, r)| *r)
            .unwrap_or(Reason::Allowed)
    }

    #[test]
    fn unknown_tokens_authenticate_nobody() {
        assert_eq!(authenticate(None), Reason::SessionUnknown);
        for assigned in [false, true] {
            for expected in [None, Some(0), Some(7)] {
                assert_eq!(authorize(None, assigned, expected), Reason::SessionUnknown);
            }
        }
    }

    #[test]
    fn authentication_over_every_combination() {
        for f in all_facts() {
            let want = expected_authentication(&f);
            assert_eq!(authenticate(Some(&f)), want, "{f:?}");
            assert_eq!(want == Reason::Allowed, f == LIVE, "{f:?}");
        }
    }

    #[test]
    fn authorization_over_every_combination() {
        for f in all_facts() {
            for assigned in [false, true] {
                for expected in [None, Some(6), Some(7), Some(8)] {
                    let got = authorize(Some(&f), assigned, expected);
                    let want = match expected_authentication(&f) {
                        Reason::Allowed if expected.is_some_and(|g| g != 7) => {
                            Reason::PolicyGenerationStale
                        }
                        Reason::Allowed if !assigned => Reason::NoAssignment,
                        other => other,
                    };
                    assert_eq!(got, want, "{f:?} assigned={assigned} expected={expected:?}");
                    // Allowed only when everything holds.
                    assert_eq!(
                        got.allowed(),
                        f == LIVE && assigned && expected.is_none_or(|g| g == 7)
                    );
                }
            }
        }
    }

    #[test]
    fn reasons_are_stable_and_classified() {
        let names: Vec<_> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            names,
            [
                "ALLOWED",
                "SESSION_UNKNOWN",
                "SESSION_EXPIRED",
                "SESSION_REVOKED",
                "CREDENTIAL_REVOKED",
                "PRINCIPAL_REVOKED",
                "SESSION_AUDIENCE_MISMATCH",
                "NO_ASSIGNMENT",
                "POLICY_GENERATION_STALE"
            ]
        );
        for r in Reason::ALL {
            assert_eq!(r.allowed(), r == Reason::Allowed);
            let auth = matches!(
                r.as_str(),
                "SESSION_UNKNOWN"
                    | "SESSION_EXPIRED"
                    | "SESSION_REVOKED"
                    | "CREDENTIAL_REVOKED"
                    | "PRINCIPAL_REVOKED"
                    | "SESSION_AUDIENCE_MISMATCH"
            );
            assert_eq!(r.is_authentication_failure(), auth, "{r:?}");
        }
    }

    #[test]
    fn exchange_over_every_combination() {
        assert_eq!(exchange(None), Err(ExchangeRefusal::CredentialUnknown));
        for kind in CredentialKind::ALL {
            for bits in 0u8..32 {
                let f = CredentialFacts {
                    kind,
                    ours: bits & 1 == 0,
                    revoked: bits & 2 != 0,
                    expired: bits & 4 != 0,
                    exchanged: bits & 8 != 0,
                    principal_revoked: bits & 16 != 0,
                };
                let want = if !f.ours {
                    Err(ExchangeRefusal::CredentialUnknown)
                } else if f.principal_revoked {
                    Err(ExchangeRefusal::PrincipalRevoked)
                } else if f.revoked {
                    Err(ExchangeRefusal::CredentialRevoked)
                } else if f.expired {
                    Err(ExchangeRefusal::CredentialExpired)
                } else if f.exchanged && kind == CredentialKind::Enrollment {
                    Err(ExchangeRefusal::CredentialExchanged)
                } else {
                    Ok(())
                };
                assert_eq!(exchange(Some(&f)), want, "{f:?}");
            }
        }
        // A standing credential is exchangeable again; an enrollment credential is not.
        let used = |kind| CredentialFacts {
            kind,
            ours: true,
            revoked: false,
            expired: false,
            exchanged: true,
            principal_revoked: false,
        };
        assert_eq!(exchange(Some(&used(CredentialKind::Standing))), Ok(()));
        assert_eq!(
            exchange(Some(&used(CredentialKind::Enrollment))),
            Err(ExchangeRefusal::CredentialExchanged)
        );
    }

    #[test]
    fn exchange_refusals_are_stable() {
        use ExchangeRefusal::*;
        for (r, s) in [
            (CredentialUnknown, "CREDENTIAL_UNKNOWN"),
            (CredentialExpired, "CREDENTIAL_EXPIRED"),
            (CredentialRevoked, "CREDENTIAL_REVOKED"),
            (CredentialExchanged, "CREDENTIAL_EXCHANGED"),
            (PrincipalRevoked, "PRINCIPAL_REVOKED"),
        ] {
            assert_eq!(r.as_str(), s);
            assert!(!r.message().is_empty());
        }
    }
}
