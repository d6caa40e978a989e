//! A run's checkpoint: every field loop-contract v1 persists (`checkpoint.persisted_fields`)
//! as canonical JSON (HL-C14N-1, `lychd-canon`), and a checksum over it — the state, the
//! pending-effect ledger and the complete version envelope (`checkpoint.integrity`). A body
//! whose checksum does not verify is corrupt: the run is quarantined for recovery review.
//!
//! The step loop fills `results` (each step's result digest), `retries` (the attempt in
//! flight and the generation that entered it), `r_frontier` (the cursor of the next step) and
//! `budgets_used`; a resume rebuilds the run's progress from them ([`progress_of`]). The effect
//! effect in flight fills `pending_effects` and `approvals` (Runner II); F/L state stays empty.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::budgets::{Budgets, CONTRACT};
use super::progress::{Progress, StepResult, Used};

/// The domain of the checksum (a checksum of one kind of body is never another's).
const DOMAIN: &[u8] = b"lychd.runner.checkpoint/v1\n";

/// What a run's checkpoint says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot<'a> {
    pub run_id: &'a str,
    /// The aggregate version (the accepted-event cursor): one checkpoint per version.
    pub version: i64,
    pub generation: i64,
    pub state: &'a str,
    pub budgets: Budgets,
    pub interrupt_pending: bool,
    pub progress: &'a Progress,
    pub envelope: Envelope<'a>,
}

/// The version envelope: what a resume must be compatible with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope<'a> {
    pub workflow_name: &'a str,
    pub workflow_version: &'a str,
    pub workflow_sha256: &'a str,
    pub state_schema_version: &'a str,
    pub fsm_sha256: &'a str,
}

/// A checkpoint's canonical body and its checksum (sha256 hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub body: Vec<u8>,
    pub checksum: String,
}

/// The checksum of `body`.
pub fn checksum(body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(DOMAIN);
    h.update(body);
    hex::encode(h.finalize())
}

/// Whether `body` is what `checksum` was computed over.
pub fn verifies(body: &[u8], sum: &str) -> bool {
    checksum(body) == sum
}

impl Snapshot<'_> {
    /// The canonical body and checksum.
    pub fn checkpoint(&self) -> Checkpoint {
        let budgets: Map<String, Value> = CONTRACT
            .iter()
            .zip(self.budgets.0)
            .map(|(l, v)| (l.field.to_owned(), json!(v)))
            .collect();
        let interrupts: Vec<&str> = if self.interrupt_pending {
            vec!["cancel"]
        } else {
            Vec::new()
        };
        let e = &self.envelope;
        let p = self.progress;
        let v = json!({
            "schema": "lychd.runner.checkpoint/v1",
            "run_id": self.run_id,
            "generation": self.generation,
            "accepted_event_cursor": self.version,
            "state": self.state,
            // The effect in flight (its approval, intent key and outcome) and the run's effect
            // sequence: the pending-effect ledger the checksum covers.
            "pending_effects": p.effect.iter().collect::<Vec<_>>(),
            "effect_sequence": p.effects,
            "pending_interrupts": interrupts,
            "budgets": budgets,
            "retries": {
                "attempt": p.attempt,
                "attempt_generation": p.attempt_generation,
                "jitter_seed": p.jitter_seed,
            },
            "budgets_used": {
                "steps": p.used.steps,
                "tokens": p.used.tokens,
                "tool_calls": p.used.tool_calls,
                "cost_milli": p.used.cost_milli,
                "suspended_ms": p.used.suspended_ms,
            },
            "handoff": p.handoff,
            "approvals": p.effect.iter().filter(|e| !e.consent_id.is_empty()).map(|e| json!({
                "consent_id": e.consent_id, "binding_digest": e.binding_digest,
                "proposal": e.proposal,
            })).collect::<Vec<_>>(),
            "f_state": {},
            "l_supports": [],
            "r_frontier": {"cursor": p.cursor, "plan": p.plan},
            "results": p.results.iter().map(|r| json!({
                "step": r.step, "digest": r.digest, "tokens": r.tokens, "evidence": r.evidence,
            })).collect::<Vec<_>>(),
            // The no-progress evaluator: every verification round that ended with an
            // obligation open (fingerprint, gain, obligations closed).
            "evaluator_state": {"rounds": p.rounds},
            "versions": {
                "workflow_name": e.workflow_name,
                "workflow_version": e.workflow_version,
                "workflow_sha256": e.workflow_sha256,
                "state_schema_version": e.state_schema_version,
                "fsm_sha256": e.fsm_sha256,
            },
        });
        // The independent verification (Runner II), once it began: its instant, the last
        // verdict and the success predicate's conjuncts. Absent before (bodies unchanged).
        let mut v = v;
        if let (Some(ver), Some(es)) = (&p.verification, v.get_mut("evaluator_state")) {
            es["verification"] = serde_json::to_value(ver).unwrap_or_default();
        }
        // Serializing a `Value` of strings, integers, arrays and objects cannot fail, and its
        // bytes are JSON that canonicalizes.
        let raw = serde_json::to_vec(&v).unwrap_or_default();
        let body = lychd_canon::canonicalize(&raw).unwrap_or(raw);
        let checksum = checksum(&body);
        Checkpoint { body, checksum }
    }
}

/// A count that may be absent (0), else must be one.
fn count(v: Option<&Value>) -> Option<u64> {
    v.map_or(Some(0), Value::as_u64)
}

/// A list that may be absent (empty), else must parse.
fn listed<T: serde::de::DeserializeOwned>(v: Option<&Value>) -> Option<Vec<T>> {
    v.map_or(Some(Vec::new()), |v| serde_json::from_value(v.clone()).ok())
}

/// The progress a checkpoint body records (`None` when the body is not one of ours). Fields
/// added by issue 27's budgets and rounds read as their zero when absent, so a run
/// checkpointed before them resumes.
pub fn progress_of(body: &[u8]) -> Option<Progress> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let n = |v: &Value| v.as_u64();
    let results = v
        .get("results")?
        .as_array()?
        .iter()
        .map(|r| {
            Some(StepResult {
                step: r.get("step")?.as_str()?.to_owned(),
                digest: r.get("digest")?.as_str()?.to_owned(),
                tokens: n(r.get("tokens")?)?,
                // Absent in a checkpoint written before evidence was recorded: none.
                evidence: match r.get("evidence") {
                    None => Vec::new(),
                    Some(e) => serde_json::from_value(e.clone()).ok()?,
                },
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let retries = v.get("retries")?;
    let used = v.get("budgets_used")?;
    Some(Progress {
        cursor: usize::try_from(n(v.get("r_frontier")?.get("cursor")?)?).ok()?,
        attempt: u32::try_from(n(retries.get("attempt")?)?).ok()?,
        attempt_generation: retries.get("attempt_generation")?.as_i64()?,
        results,
        used: Used {
            steps: n(used.get("steps")?)?,
            tokens: n(used.get("tokens")?)?,
            // Absent in a checkpoint written before these budgets were consumed: 0.
            tool_calls: count(used.get("tool_calls"))?,
            cost_milli: count(used.get("cost_milli"))?,
            suspended_ms: count(used.get("suspended_ms"))?,
        },
        plan: listed(v.get("r_frontier")?.get("plan"))?,
        rounds: listed(v.get("evaluator_state")?.get("rounds"))?,
        jitter_seed: match retries.get("jitter_seed") {
            None | Some(Value::Null) => None,
            Some(s) => Some(s.as_u64()?),
        },
        handoff: match v.get("handoff") {
            None | Some(Value::Null) => None,
            Some(h) => Some(serde_json::from_value(h.clone()).ok()?),
        },
        verification: match v.get("evaluator_state")?.get("verification") {
            None | Some(Value::Null) => None,
            Some(x) => Some(serde_json::from_value(x.clone()).ok()?),
        },
        // Absent in a checkpoint written before Runner II's effects: none.
        effects: u32::try_from(count(v.get("effect_sequence"))?).ok()?,
        effect: listed(v.get("pending_effects"))?.into_iter().next(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    static FRESH: Progress = Progress {
        cursor: 0,
        attempt: 0,
        attempt_generation: 0,
        results: Vec::new(),
        used: Used {
            steps: 0,
            tokens: 0,
            tool_calls: 0,
            cost_milli: 0,
            suspended_ms: 0,
        },
        handoff: None,
        jitter_seed: None,
        plan: Vec::new(),
        rounds: Vec::new(),
        verification: None,
        effects: 0,
        effect: None,
    };

    fn snapshot(state: &str) -> Snapshot<'_> {
        Snapshot {
            progress: &FRESH,
            run_id: "r",
            version: 2,
            generation: 1,
            state,
            budgets: Budgets::contract(),
            interrupt_pending: false,
            envelope: Envelope {
                workflow_name: "w",
                workflow_version: "0.1.0",
                workflow_sha256: "a",
                state_schema_version: "0.1.0",
                fsm_sha256: "f",
            },
        }
    }

    #[test]
    fn the_body_is_canonical_holds_every_persisted_field_and_its_checksum_verifies() {
        let c = snapshot("PLAN").checkpoint();
        assert!(verifies(&c.body, &c.checksum));
        assert_eq!(
            lychd_canon::canonicalize(&c.body).expect("canonical"),
            c.body
        );
        let v: Value = serde_json::from_slice(&c.body).expect("json");
        for field in [
            "state",
            "pending_effects",
            "pending_interrupts",
            "budgets",
            "retries",
            "approvals",
            "accepted_event_cursor",
            "f_state",
            "l_supports",
            "r_frontier",
            "results",
            "evaluator_state",
            "versions",
        ] {
            assert!(v.get(field).is_some(), "{field}");
        }
        assert_eq!(snapshot("PLAN").checkpoint(), c, "deterministic");
        assert_ne!(snapshot("ACT").checkpoint().checksum, c.checksum);
        assert_eq!(progress_of(&c.body), Some(Progress::default()));
        // A body written before the budgets and rounds of issue 27 reads as their zeros.
        let mut old = v.clone();
        for (at, key) in [
            ("budgets_used", "tool_calls"),
            ("budgets_used", "cost_milli"),
            ("budgets_used", "suspended_ms"),
            ("r_frontier", "plan"),
            ("evaluator_state", "rounds"),
        ] {
            old[at].as_object_mut().expect("object").remove(key);
        }
        let old = serde_json::to_vec(&old).expect("json");
        assert_eq!(progress_of(&old), Some(Progress::default()));
        let mut corrupt = c.body.clone();
        corrupt[10] ^= 1;
        assert!(!verifies(&corrupt, &c.checksum));
    }
}
