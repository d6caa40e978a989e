//! What a run's independent verification is and says (pure, no I/O): the workflow's
//! `verification` section ([`Spec`]), the state a run carries in its progress
//! ([`Verification`], with the success predicate's conjuncts, [`Predicate`]) and what a verdict
//! does ([`Verdict`]). The records themselves are drafted in `domain::verification`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The producer (and executor) name of the runner's observation records; the evaluation's
/// trusted producers include it.
pub const PRODUCER: &str = "lychd-runner";

/// A workflow's `verification` section: who is accountable for the run's outcome, and
/// optionally the independent observer whose evidence decides the outcome claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The accountable owner: a human Ward principal's name (Ward's grammar
    /// `[a-z0-9][a-z0-9._-]{0,63}`), the contract's `accountableOwnerId`.
    pub owner: String,
    /// The producer name of the observer whose `EvidenceRecordV1` on [`OBSERVED_OUTCOME`]
    /// decides the outcome axis; absent: the workflow's last obligation is the outcome claim.
    pub observer: Option<String>,
}

fn owner_name(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

/// A HelmLoop identifier (`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`).
fn identifier(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}

impl Spec {
    /// Parse `/verification` of a workflow document: the JSON pointer and problem of the first
    /// bad place.
    pub fn parse(v: &serde_json::Value) -> Result<Spec, (&'static str, &'static str)> {
        let Some(o) = v.as_object() else {
            return Err(("/verification", "must be an object"));
        };
        if o.keys().any(|k| k != "owner" && k != "observer") {
            return Err(("/verification", "has a field the schema does not define"));
        }
        let owner = match o.get("owner").and_then(|x| x.as_str()) {
            Some(s) if owner_name(s) => s.to_owned(),
            Some(_) => return Err(("/verification/owner", "must be a Ward principal name")),
            None => return Err(("/verification/owner", "is required")),
        };
        let observer = match o.get("observer") {
            None => None,
            Some(serde_json::Value::String(s)) if identifier(s) && s != PRODUCER => Some(s.clone()),
            Some(_) => {
                return Err((
                    "/verification/observer",
                    "must be a HelmLoop identifier other than lychd-runner",
                ));
            }
        };
        Ok(Spec { owner, observer })
    }
}

/// A run's verification, carried in its progress (and so in every checkpoint) once it began.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verification {
    /// The instant (ms since the epoch) every drafted record is issued at: the commit that
    /// first entered `VERIFY` with every obligation closed.
    pub at_ms: i64,
    /// The last reduction's disposition (`PASS`, `HOLD`, `REJECT`), or `OWNER_DENIED` when the
    /// accountable owner refused a proposal; empty before the first.
    #[serde(default)]
    pub disposition: String,
    /// Its reason codes (hold and reject channels), or the owner's refusal.
    #[serde(default)]
    pub reasons: Vec<String>,
    /// Its six axes.
    #[serde(default)]
    pub axes: BTreeMap<String, String>,
    /// Its input digest (the stored evaluation at the HelmLoop office).
    #[serde(default)]
    pub input_digest: String,
    /// How many times the verifier was asked.
    #[serde(default)]
    pub asked: u32,
    /// The contract's success predicate, conjunct by conjunct, as last checked.
    #[serde(default)]
    pub predicate: Predicate,
}

/// Loop-contract v1 `verification.success_predicate`: "all required obligations close with
/// independent receipts, no unknown effect remains, and the sole FSM terminal transition is
/// legal" — each conjunct as checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Predicate {
    /// Every obligation closed by the runner's recorded results.
    pub obligations_closed: bool,
    /// …and independently: the verifier's reduction is PASS (every axis in its pass state).
    pub independent_pass: bool,
    /// No effect of the run has an unknown outcome.
    pub no_unknown_effect: bool,
    /// The FSM has the terminal edge the verdict takes from the run's state.
    pub terminal_edge_legal: bool,
}

impl Predicate {
    pub fn holds(&self) -> bool {
        self.obligations_closed
            && self.independent_pass
            && self.no_unknown_effect
            && self.terminal_edge_legal
    }
}

/// What a reduction (or the owner) says for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Hold,
    Reject,
}

impl Verdict {
    /// A HelmLoop disposition; anything else is no PASS (held: unknown is never success).
    pub fn of(disposition: &str) -> Verdict {
        match disposition {
            "PASS" => Verdict::Pass,
            "REJECT" | OWNER_DENIED => Verdict::Reject,
            _ => Verdict::Hold,
        }
    }

    /// The FSM event the verdict issues from `VERIFY`.
    pub fn event(self) -> &'static str {
        match self {
            Verdict::Pass => "verified_pass",
            Verdict::Hold => "verification_hold",
            Verdict::Reject => "verification_reject",
        }
    }
}

/// The disposition recorded when the accountable owner denied (or let expire) a proposal the
/// run's verification needs: Ward issues nothing, so no reduction can ever pass.
pub const OWNER_DENIED: &str = "OWNER_DENIED";
