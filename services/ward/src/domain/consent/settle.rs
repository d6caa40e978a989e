//! Settling a consent: classes of effect (and which are live-only), states, verdicts, and the
//! facts that decide whether a verdict or a consumption is allowed.
//!
//! Invariant: pure; the store's guarded statements apply these rules, nothing here reads a
//! clock or a database.

/// Classes of effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EffectClass {
    Standard,
    Bounded,
    CoreMutation,
    Migration,
    DestructiveDeletion,
    SecretOrAuthorityChange,
    HostLifecycle,
}

impl EffectClass {
    pub const ALL: [EffectClass; 7] = [
        EffectClass::Standard,
        EffectClass::Bounded,
        EffectClass::CoreMutation,
        EffectClass::Migration,
        EffectClass::DestructiveDeletion,
        EffectClass::SecretOrAuthorityChange,
        EffectClass::HostLifecycle,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EffectClass::Standard => "standard",
            EffectClass::Bounded => "bounded",
            EffectClass::CoreMutation => "core_mutation",
            EffectClass::Migration => "migration",
            EffectClass::DestructiveDeletion => "destructive_deletion",
            EffectClass::SecretOrAuthorityChange => "secret_or_authority_change",
            EffectClass::HostLifecycle => "host_lifecycle",
        }
    }

    pub fn parse(s: &str) -> Option<EffectClass> {
        EffectClass::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Classes only a live human verdict may settle, whatever standing policy says.
    pub fn live_only(self) -> bool {
        !matches!(self, EffectClass::Standard | EffectClass::Bounded)
    }
}

/// Where a consent stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsentState {
    Pending,
    Granted,
    Denied,
    Cancelled,
    Expired,
}

impl ConsentState {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsentState::Pending => "pending",
            ConsentState::Granted => "granted",
            ConsentState::Denied => "denied",
            ConsentState::Cancelled => "cancelled",
            ConsentState::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<ConsentState> {
        [
            ConsentState::Pending,
            ConsentState::Granted,
            ConsentState::Denied,
            ConsentState::Cancelled,
            ConsentState::Expired,
        ]
        .into_iter()
        .find(|c| c.as_str() == s)
    }
}

/// A verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    Deny,
}

impl Verdict {
    /// The state it settles a pending consent in.
    pub fn state(self) -> ConsentState {
        match self {
            Verdict::Approve => ConsentState::Granted,
            Verdict::Deny => ConsentState::Denied,
        }
    }
}

/// Why a consent cannot be settled, consumed or revoked as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsentRefusal {
    /// The decider is the consent's requesting principal (LychD design rules §25: an agent may
    /// propose an effect, never become its authority).
    SelfApproval,
    /// A live-only class is settled by a human principal only (loop contract: an exact-hash
    /// human approver for high-risk effects).
    LiveVerdictRequired,
    ReviewDigestMismatch,
    NotGranted,
    Consumed,
    Revoked,
    BindingExpired,
    PrincipalRevoked,
    BindingMismatch,
    RuleInvalid,
}

impl ConsentRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsentRefusal::SelfApproval => "self approval",
            ConsentRefusal::LiveVerdictRequired => "live verdict required",
            ConsentRefusal::ReviewDigestMismatch => "review digest mismatch",
            ConsentRefusal::NotGranted => "not granted",
            ConsentRefusal::Consumed => "consumed",
            ConsentRefusal::Revoked => "revoked",
            ConsentRefusal::BindingExpired => "binding expired",
            ConsentRefusal::PrincipalRevoked => "principal revoked",
            ConsentRefusal::BindingMismatch => "binding mismatch",
            ConsentRefusal::RuleInvalid => "rule invalid",
        }
    }
}

/// Who gives a verdict on which consent (the facts [`verdict_allowed`] judges; the settling
/// statement holds the same conditions in its guard, so no race can slip past them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerdictFacts {
    /// The deciding principal is the consent's requesting principal.
    pub decider_is_requester: bool,
    /// The deciding principal is a human.
    pub decider_is_human: bool,
    /// The consent's class.
    pub class: EffectClass,
}

/// May this principal give a verdict (approve or deny) on this consent? The decider is never
/// the requester, whatever the class; a live-only class is settled by a human only; a standard
/// or bounded class may be settled by any other principal holding `ward:approve` (a service
/// acting as a policy evaluator included).
pub fn verdict_allowed(f: VerdictFacts) -> Result<(), ConsentRefusal> {
    if f.decider_is_requester {
        return Err(ConsentRefusal::SelfApproval);
    }
    if f.class.live_only() && !f.decider_is_human {
        return Err(ConsentRefusal::LiveVerdictRequired);
    }
    Ok(())
}

/// Facts about a consent at consumption (read in the consuming statement's snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumeFacts {
    pub state: ConsentState,
    pub consumed: bool,
    pub revoked: bool,
    /// The bound expiry has passed (database time).
    pub binding_expired: bool,
    /// The requesting or the deciding principal is revoked.
    pub principal_revoked: bool,
    /// The presented binding digest equals the consent's.
    pub digest_equal: bool,
    /// Granted by a standing rule that is no longer enabled, unexpired and digest-equal.
    pub rule_invalid: bool,
}

/// May an approval with these facts be consumed? The first failing rule, in a fixed order.
pub fn consumable(f: ConsumeFacts) -> Result<(), ConsentRefusal> {
    if f.state != ConsentState::Granted {
        return Err(ConsentRefusal::NotGranted);
    }
    if !f.digest_equal {
        return Err(ConsentRefusal::BindingMismatch);
    }
    if f.consumed {
        return Err(ConsentRefusal::Consumed);
    }
    if f.revoked {
        return Err(ConsentRefusal::Revoked);
    }
    if f.binding_expired {
        return Err(ConsentRefusal::BindingExpired);
    }
    if f.principal_revoked {
        return Err(ConsentRefusal::PrincipalRevoked);
    }
    if f.rule_invalid {
        return Err(ConsentRefusal::RuleInvalid);
    }
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::super::proposal::{IDENT_MAX, is_ident};
    use super::*;

    #[test]
    fn a_verdict_is_never_the_requesters_and_live_only_classes_need_a_human() {
        for class in EffectClass::ALL {
            for human in [false, true] {
                assert_eq!(
                    verdict_allowed(VerdictFacts {
                        decider_is_requester: true,
                        decider_is_human: human,
                        class,
                    }),
                    Err(ConsentRefusal::SelfApproval),
                    "{class:?}"
                );
            }
            assert_eq!(
                verdict_allowed(VerdictFacts {
                    decider_is_requester: false,
                    decider_is_human: false,
                    class,
                }),
                if class.live_only() {
                    Err(ConsentRefusal::LiveVerdictRequired)
                } else {
                    Ok(())
                },
                "{class:?}"
            );
            assert_eq!(
                verdict_allowed(VerdictFacts {
                    decider_is_requester: false,
                    decider_is_human: true,
                    class,
                }),
                Ok(())
            );
        }
    }

    #[test]
    fn consumption_needs_every_fact_and_names_the_first_missing() {
        let ok = ConsumeFacts {
            state: ConsentState::Granted,
            consumed: false,
            revoked: false,
            binding_expired: false,
            principal_revoked: false,
            digest_equal: true,
            rule_invalid: false,
        };
        assert_eq!(consumable(ok), Ok(()));
        for state in [
            ConsentState::Pending,
            ConsentState::Denied,
            ConsentState::Cancelled,
            ConsentState::Expired,
        ] {
            assert_eq!(
                consumable(ConsumeFacts { state, ..ok }),
                Err(ConsentRefusal::NotGranted)
            );
        }
        let cases = [
            (
                ConsumeFacts {
                    digest_equal: false,
                    consumed: true,
                    ..ok
                },
                ConsentRefusal::BindingMismatch,
            ),
            (
                ConsumeFacts {
                    consumed: true,
                    revoked: true,
                    ..ok
                },
                ConsentRefusal::Consumed,
            ),
            (
                ConsumeFacts {
                    revoked: true,
                    ..ok
                },
                ConsentRefusal::Revoked,
            ),
            (
                ConsumeFacts {
                    binding_expired: true,
                    ..ok
                },
                ConsentRefusal::BindingExpired,
            ),
            (
                ConsumeFacts {
                    principal_revoked: true,
                    ..ok
                },
                ConsentRefusal::PrincipalRevoked,
            ),
        ];
        for (facts, refusal) in cases {
            assert_eq!(consumable(facts), Err(refusal), "{facts:?}");
        }
    }

    #[test]
    fn identifiers_and_live_only_classes() {
        assert!(is_ident("run:2026-12-03.a_b"));
        assert!(!is_ident(""));
        assert!(!is_ident("has space"));
        assert!(!is_ident(&"x".repeat(IDENT_MAX + 1)));
        let live: Vec<_> = EffectClass::ALL
            .into_iter()
            .filter(|c| c.live_only())
            .collect();
        assert_eq!(live.len(), 5);
        for c in EffectClass::ALL {
            assert_eq!(EffectClass::parse(c.as_str()), Some(c));
        }
    }
}
