//! No-progress (loop-contract v1 `no_progress`), pure. **A round is one verification round**:
//! a pass through the round's planned steps that ends in `VERIFY`. A run whose obligations
//! are all closed there succeeds; otherwise the round is recorded (its fingerprint, its
//! weighted gain, the obligations closed at its end) and either the window is spent
//! (`WINDOW_ROUNDS` consecutive rounds each with gain below `EPSILON`: `no_progress` →
//! `NO_PROGRESS`) or the run makes a repair round (`verified_reject` → `PLAN`, planning only
//! the steps that can close an open obligation).

use serde::{Deserialize, Serialize};

use super::Progress;
use crate::domain::workflow::Workflow;

/// The contract's `no_progress`: weights of the gain components (`gain_components`; Runner I
/// has only closed obligations: no conflicts, no receipts), `epsilon` and `window_rounds`.
pub const GAIN_CLOSED_OBLIGATION: u64 = 1;
pub const EPSILON: u64 = 1;
pub const WINDOW_ROUNDS: usize = 3;

/// One verification round (a pass that ended in `VERIFY` with an obligation open): its
/// fingerprint, its weighted gain and the obligations closed at its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Round {
    /// The canonical hash (`sha256:…`, HelmLoop binding digest) of [`fingerprint`]'s document.
    pub fingerprint: String,
    pub gain: u64,
    pub closed: Vec<String>,
}

/// The steps a repair round re-plans: those that name an open obligation in `closes` and can
/// provide every evidence it requires, in the workflow's order.
pub fn repair_plan(w: &Workflow, p: &Progress) -> Vec<usize> {
    let open: Vec<_> = w
        .obligations
        .iter()
        .filter(|o| !p.closed(w, &o.id))
        .collect();
    w.steps
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            open.iter().any(|o| {
                s.closes.contains(&o.id) && o.evidence.iter().all(|e| s.kind.can_provide(e))
            })
        })
        .map(|(i, _)| i)
        .collect()
}

/// The no-progress fingerprint of a run at the end of a round (the contract's `no_progress
/// .fingerprint`): the canonical hash of the accepted cursor (which steps have an accepted
/// result — not the aggregate version, which rises with every transition and would make every
/// round unique), F (each step's latest result digest), L (each closed obligation's supporting
/// result digests), R (the open obligations and the steps that could close them), the pending
/// effects (none in Runner I) and the required evidence of every open obligation.
pub fn fingerprint(w: &Workflow, p: &Progress) -> String {
    use serde_json::{Map, Value, json};
    let mut f = Map::new();
    for r in &p.results {
        f.insert(r.step.clone(), json!(r.digest));
    }
    let accepted: Vec<&str> = w
        .steps
        .iter()
        .filter(|s| f.contains_key(&s.id))
        .map(|s| s.id.as_str())
        .collect();
    let mut l = Map::new();
    let mut required = Map::new();
    let mut open = Vec::new();
    for o in &w.obligations {
        let mut digests: Vec<&str> = p.supports(w, &o.id).map(|r| r.digest.as_str()).collect();
        digests.sort_unstable();
        digests.dedup();
        if digests.is_empty() {
            open.push(o.id.as_str());
            required.insert(o.id.clone(), json!(o.evidence));
        } else {
            l.insert(o.id.clone(), json!(digests));
        }
    }
    let repair: Vec<&str> = repair_plan(w, p)
        .into_iter()
        .map(|i| w.steps[i].id.as_str())
        .collect();
    let doc = json!({
        "accepted_cursor": accepted,
        "f_state": Value::Object(f),
        "l_supports": Value::Object(l),
        "r_frontier": {"open": open, "steps": repair},
        "pending_effects": [],
        "required_evidence": Value::Object(required),
    });
    // A value of strings, arrays and objects always canonicalizes.
    let bytes = serde_json::to_vec(&doc).unwrap_or_default();
    lychd_canon::digest_json(lychd_canon::Domain::Binding, &bytes)
        .map(|d| d.to_string())
        .unwrap_or_default()
}

/// The verdict on a run at `VERIFY` whose obligations are not all closed: the round it ends,
/// with its gain (obligations newly closed since the previous round, weighted; 0 when its
/// fingerprint is an earlier round's — a cycle), and whether the window is spent
/// (`WINDOW_ROUNDS` consecutive rounds each below `EPSILON`: `no_progress`) or the run makes
/// a repair round (`verified_reject`, back to `PLAN` with the repair plan).
pub fn verify_open(w: &Workflow, p: &Progress) -> (&'static str, Progress) {
    let fp = fingerprint(w, p);
    let closed = p.closed_obligations(w);
    let before = p
        .rounds
        .last()
        .map(|r| r.closed.as_slice())
        .unwrap_or_default();
    let newly = closed.iter().filter(|o| !before.contains(o)).count() as u64;
    let cycle = p.rounds.iter().any(|r| r.fingerprint == fp);
    let gain = if cycle {
        0
    } else {
        newly.saturating_mul(GAIN_CLOSED_OBLIGATION)
    };
    let mut q = p.clone();
    q.rounds.push(Round {
        fingerprint: fp,
        gain,
        closed,
    });
    let n = q.rounds.len();
    if n >= WINDOW_ROUNDS
        && q.rounds[n - WINDOW_ROUNDS..]
            .iter()
            .all(|r| r.gain < EPSILON)
    {
        return ("no_progress", q);
    }
    q.plan = repair_plan(w, &q);
    q.cursor = 0;
    q.attempt = 0;
    q.attempt_generation = 0;
    ("verified_reject", q)
}

#[cfg(test)]
mod tests;
