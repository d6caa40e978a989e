//! Compensation (issue 28, Runner II; loop-contract v1 `effects.durable_ledger` names the
//! kind, `icvc.correct` lists it with reconciliation and recovery): an effect step may declare
//! a compensating action, delivered when the run ends in a failure or a cancel after that
//! effect was confirmed. Pure: the compensation job (`service/compensations.rs`) does the I/O.
//!
//! The contract names compensation and nothing more; the project's rulings:
//! - declared per effect step as `"compensation": {"destination": <http URL>, "action": {…}}`
//!   (the step's adapter, `http`; parsed as `domain::effect::Compensation`); a step without one
//!   is never compensated;
//! - due when a run ends in any terminal category but `success` and
//!   `unknown_external_outcome` ([`due`]) and has begun at least one effect; only effects
//!   whose outcome was *confirmed* (a receipt, or an operator's confirmed reconciliation) are
//!   compensated, in reverse order of their sequence — an effect nobody knows happened is not
//!   compensated blind, and a run ended `EFFECT_OUTCOME_UNKNOWN` waits for a person;
//! - it goes the effect's way: a durable intent row before any dispatch, its own idempotency
//!   key ([`key`]), Ward's adapter permission re-asked immediately before each dispatch, every
//!   step a `compensation` ledger entry of the effect it compensates;
//! - [`Outcome`]: only an applied answer is `compensated`; an answer nobody can tell (no
//!   answer, and the status query cannot say) is `unknown` — never reported compensated, left
//!   for a person; a definite refusal is `rejected`; Ward's refusal is `denied` (nothing sent).
//!   "Not applied, try later" stays pending and is asked again.

/// Whether a run ending in `terminal_category` (having begun `effects` effects) is due for
/// compensation of its confirmed effects.
pub fn due(terminal_category: Option<&str>, effects: u32) -> bool {
    effects > 0
        && terminal_category.is_some_and(|c| c != "success" && c != "unknown_external_outcome")
}

/// The idempotency key of the compensation of the effect whose key is `effect_key`:
/// `sha256:<hex>` of `lychd.runner.compensation/v1|<effect_key>` (one compensation per
/// effect, never the effect's own key).
pub fn key(effect_key: &str) -> String {
    format!(
        "sha256:{}",
        crate::domain::run::sha256(format!("lychd.runner.compensation/v1|{effect_key}").as_bytes())
    )
}

/// How a compensation ended (its row's `outcome`; `pending` until then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The destination applied it (an answer, or a status query, said so).
    Compensated,
    /// The destination refused it definitely.
    Rejected,
    /// Ward refused the adapter permission: nothing was sent.
    Denied,
    /// Nobody can tell: never reported compensated.
    Unknown,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Compensated => "compensated",
            Outcome::Rejected => "rejected",
            Outcome::Denied => "denied",
            Outcome::Unknown => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_cancels_after_an_effect_are_due_success_and_unknown_are_not() {
        for c in [
            "permanent_failure",
            "canceled",
            "budget_exhausted",
            "timeout",
            "pathology",
        ] {
            assert!(due(Some(c), 1), "{c}");
            assert!(!due(Some(c), 0), "{c}: no effect begun");
        }
        assert!(!due(Some("success"), 2));
        assert!(!due(Some("unknown_external_outcome"), 2));
        assert!(!due(None, 2), "not an ending");
    }

    #[test]
    fn the_key_is_the_effects_own_never_equal_to_it() {
        let k = key("sha256:00");
        assert_eq!(k, key("sha256:00"));
        assert_ne!(k, key("sha256:01"));
        assert_ne!(k, "sha256:00");
        assert_eq!(k.len(), "sha256:".len() + 64);
    }
}
