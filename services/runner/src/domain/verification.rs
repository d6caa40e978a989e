//! Independent completion verification (loop-contract v1 `verification`; issue 28 item 3):
//! the HelmLoop records a run's verification stands on, and what a reduction means for the run.
//! Pure: no I/O, no clock (every instant is given).
//!
//! At `VERIFY`, with every obligation closed, the runner is a **producer of candidate
//! observations only** (HelmLoop Protocol v0.1 §8): one `ExecutionReceiptV1` for the run and one
//! `EvidenceRecordV1` per obligation, carrying digests of the recorded results, never content.
//! The owner records the reduction needs — the `OutcomeContractV1` and the
//! `AssuranceDecisionV1` — are *proposed* as exact bodies to Ward (`ProposeOwnerRecords`) and
//! exist only once the run's accountable owner approved them; the promotion (`promote` grant
//! lineage and `PromotionDecisionV1`) is composed by Ward on the owner's approval of
//! `ProposePromotion`. The runner never writes a verdict or decision record it is judged by.
//!
//! Every body is a function of the run's committed state and one instant (`at_ms`, the commit
//! that first entered `VERIFY` with the obligations closed, recorded in the progress), so a
//! resumed or replayed `VERIFY` produces byte-identical records: HelmLoop folds them as exact
//! replays (`REPLAYED`), never as a second body under one identity.

use std::collections::BTreeMap;

use lychd_canon::{Value, binding_digest, record_digest};
use serde::{Deserialize, Serialize};

use super::progress::Progress;
use super::workflow::Workflow;

/// The producer (and executor) name of the runner's observation records; the evaluation's
/// trusted producers include it.
pub const PRODUCER: &str = "lychd-runner";
/// `source.system` of every record the runner drafts.
pub const SYSTEM: &str = "lychd-runner";
/// The action a run's receipt records (the policy's expected action).
pub const ACTION: &str = "lychd.runner.run";
/// The criterion of an independent observer's outcome evidence (not a slug, so no obligation
/// can take its id).
pub const OBSERVED_OUTCOME: &str = "outcome:observed";
/// How long the runner's evidence is valid, and the evaluation's freshness caps: the
/// contract's `max_suspended_seconds` (a run waits for review at most that long).
pub const VALID_MS: i64 = 86_400_000;
/// The contract's horizon: a year from the run's creation.
const HORIZON_MS: i64 = 366 * 86_400_000;
/// The assurance level the policy requires: every required claim supported by fresh trusted
/// evidence the decision cites (HelmLoop resolutions §E).
pub const ASSURANCE_LEVEL: &str = "L1";
const AXES: [&str; 6] = [
    "execution",
    "evidence",
    "authority",
    "promotion",
    "reconciliation",
    "observedOutcome",
];

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

/// What the drafted records are a function of.
#[derive(Debug, Clone)]
pub struct Run<'a> {
    /// The run id (hyphenated UUID).
    pub id: &'a str,
    pub workflow: &'a Workflow,
    /// sha256 hex of the workflow document and of the input.
    pub workflow_sha256: &'a str,
    pub input_sha256: &'a str,
    /// The run's creation (ms since the epoch, the database's clock).
    pub created_ms: i64,
    pub progress: &'a Progress,
    pub spec: &'a Spec,
    /// The instant the records are issued at.
    pub at_ms: i64,
}

/// An exact reference `{recordType, id, digest}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    pub record_type: String,
    pub id: String,
    pub digest: String,
}

/// A drafted record: its canonical body and its exact reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drafted {
    pub body: Vec<u8>,
    pub reference: Ref,
}

/// Everything a run's verification needs.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub subject: Value,
    pub revision: Value,
    /// The contract and the assurance decision: proposed to Ward, issued by the owner.
    pub owner_records: Vec<Drafted>,
    /// The receipt and the evidence: appended by the runner (candidate observations).
    pub observations: Vec<Drafted>,
    /// The evidence the assurance and the promotion cite.
    pub evidence: Vec<Ref>,
    /// The `promote` grant's grantee and scope, and the end of its validity (ms).
    pub grantee: String,
    pub scope: Vec<String>,
    pub not_after_ms: i64,
    /// The evaluation context without `evaluatedAt` (set at each ask).
    context: Value,
}

fn s(x: impl Into<String>) -> Value {
    Value::String(x.into())
}

fn obj(members: Vec<(&str, Value)>) -> Value {
    let mut m = lychd_canon::Map::new();
    for (k, v) in members {
        m.insert(k, v);
    }
    Value::Object(m)
}

fn arr(items: impl IntoIterator<Item = Value>) -> Value {
    Value::Array(items.into_iter().collect())
}

/// `YYYY-MM-DDTHH:MM:SS.sssZ` of `ms` since the epoch (HelmLoop resolutions §B).
pub fn timestamp(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

fn digest_of(v: &Value) -> String {
    // A value built here from strings, integers and arrays always canonicalizes.
    binding_digest(v).map(|d| d.render()).unwrap_or_default()
}

/// Seal `body` (a record without `digest`): its record digest added, its canonical bytes.
fn seal(mut body: Value) -> Drafted {
    let digest = record_digest(&body).map(|d| d.render()).unwrap_or_default();
    let (record_type, id) = (
        body.get("recordType")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        body.get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    );
    if let Value::Object(m) = &mut body {
        m.insert("digest", s(digest.clone()));
    }
    Drafted {
        body: lychd_canon::to_canonical_vec(&body).unwrap_or_default(),
        reference: Ref {
            record_type,
            id,
            digest,
        },
    }
}

fn reference(r: &Ref) -> Value {
    obj(vec![
        ("recordType", s(&r.record_type)),
        ("id", s(&r.id)),
        ("digest", s(&r.digest)),
    ])
}

/// The subject id of run `id`'s records.
pub fn subject_id(run_id: &str) -> String {
    format!("run-{run_id}")
}

/// The revision id of run `id`'s records in verification round `round`.
pub fn revision_id(run_id: &str, round: usize) -> String {
    format!("{}.r{round}", subject_id(run_id))
}

/// The contract id of run `id`.
pub fn contract_id(run_id: &str) -> String {
    format!("contract-{run_id}")
}

/// The outcome claim of a run's evaluation.
pub fn outcome_claim(w: &Workflow, spec: &Spec) -> String {
    match &spec.observer {
        Some(_) => OBSERVED_OUTCOME.to_owned(),
        None => w
            .obligations
            .last()
            .map(|o| o.id.clone())
            .unwrap_or_default(),
    }
}

/// The criterion an evidence record must bind: `{id, description, digest}` of the contract.
pub fn criterion(id: &str, description: &str) -> Value {
    let digest = digest_of(&obj(vec![("id", s(id)), ("description", s(description))]));
    obj(vec![
        ("id", s(id)),
        ("description", s(description)),
        ("digest", s(digest)),
    ])
}

/// The records and context of `run`'s verification. `build` is the one function the records
/// come from: helper A's effect receipts join `observations` (and their evidence `evidence`)
/// here at merge.
pub fn build(run: &Run<'_>) -> Bundle {
    let w = run.workflow;
    let sid = subject_id(run.id);
    let subject = obj(vec![
        ("id", s(&sid)),
        ("kind", s("lychd-run")),
        ("ownerId", s(&run.spec.owner)),
    ]);
    let results: Vec<Value> = run
        .progress
        .results
        .iter()
        .map(|r| obj(vec![("step", s(&r.step)), ("digest", s(&r.digest))]))
        .collect();
    let revision_digest = digest_of(&obj(vec![
        ("run", s(run.id)),
        ("workflowSha256", s(run.workflow_sha256)),
        ("inputSha256", s(run.input_sha256)),
        ("results", arr(results)),
    ]));
    let revision = obj(vec![
        ("id", s(revision_id(run.id, run.progress.round()))),
        ("digest", s(revision_digest)),
    ]);
    let scope = vec![format!("run/{}", run.id)];
    let parameters = obj(vec![
        (
            "workflowDigest",
            s(format!("sha256:{}", run.workflow_sha256)),
        ),
        ("inputDigest", s(format!("sha256:{}", run.input_sha256))),
    ]);
    let required: Vec<String> = {
        let mut r: Vec<String> = w.obligations.iter().map(|o| o.id.clone()).collect();
        r.sort();
        r
    };
    let mut trusted = vec![PRODUCER.to_owned()];
    trusted.extend(run.spec.observer.clone());
    trusted.sort();
    let mut context = obj(vec![
        ("subject", subject.clone()),
        ("revision", revision.clone()),
        ("targetTransition", s("CONFORMANCE")),
        ("expectedAction", s(ACTION)),
        ("expectedParameters", parameters.clone()),
        ("expectedScope", arr(scope.iter().map(s))),
        ("executionAuthorityRequired", Value::Bool(false)),
        ("requiredEvidenceIds", arr(required.iter().map(s))),
        ("requiredAssuranceLevel", s(ASSURANCE_LEVEL)),
        ("outcomeClaimId", s(outcome_claim(w, run.spec))),
        ("evidenceMaxAgeMs", Value::Int(VALID_MS)),
        ("reconciliationMaxAgeMs", Value::Int(VALID_MS)),
        ("trustedProducers", arr(trusted.iter().map(s))),
    ]);
    let mut policy_body = context.clone();
    if let Value::Object(m) = &mut policy_body {
        m.insert("policyId", s("lychd-runner-verification"));
        m.insert("policyRevision", s("1"));
    }
    let policy = obj(vec![
        ("id", s("lychd-runner-verification")),
        ("revision", s("1")),
        ("digest", s(policy_digest(&policy_body))),
    ]);
    if let Value::Object(m) = &mut context {
        m.insert("policy", policy.clone());
    }
    let at = timestamp(run.at_ms);
    let envelope = |record_type: &str, id: &str, producer: &str| {
        vec![
            ("schemaVersion", s("0.1")),
            ("recordType", s(record_type)),
            ("id", s(id)),
            ("subject", subject.clone()),
            (
                "source",
                obj(vec![
                    ("system", s(SYSTEM)),
                    ("producer", s(producer)),
                    ("locator", s(format!("lychd-runner://runs/{}", run.id))),
                ]),
            ),
            ("revision", revision.clone()),
            ("policy", policy.clone()),
            ("issuedAt", s(&at)),
        ]
    };
    // The contract: the owner's outcome boundary, one criterion per obligation (and the
    // observer's outcome), proposed to the owner.
    let describe = |o: &super::workflow::Obligation| {
        format!(
            "obligation {} of workflow {} {} is closed by a recorded result providing {}",
            o.id,
            w.name,
            w.version,
            if o.evidence.is_empty() {
                "any result".to_owned()
            } else {
                o.evidence.join(", ")
            }
        )
    };
    let mut criteria: Vec<Value> = w
        .obligations
        .iter()
        .map(|o| criterion(&o.id, &describe(o)))
        .collect();
    if let Some(observer) = &run.spec.observer {
        criteria.push(criterion(OBSERVED_OUTCOME, &observed_description(observer)));
    }
    let mut c = envelope("OutcomeContractV1", &contract_id(run.id), &run.spec.owner);
    c.extend([
        ("accountableOwnerId", s(&run.spec.owner)),
        ("status", s("active")),
        (
            "desiredOutcome",
            s(format!(
                "run {} of workflow {} {} closes every obligation",
                run.id, w.name, w.version
            )),
        ),
        (
            "risk",
            obj(vec![
                ("level", s("medium")),
                (
                    "description",
                    s("a run reported successful without its obligations met"),
                ),
            ]),
        ),
        ("constraints", arr([s("the runner executes no effect")])),
        ("preferences", arr([])),
        (
            "horizon",
            obj(vec![
                ("start", s(timestamp(run.created_ms))),
                ("end", s(timestamp(run.created_ms + HORIZON_MS))),
            ]),
        ),
        ("criteria", arr(criteria.clone())),
        (
            "stopConditions",
            arr([s("the run ends in a terminal state other than SUCCEEDED")]),
        ),
        ("axes", arr(AXES.iter().map(|a| s(*a)))),
    ]);
    let contract = seal(obj(c));
    let contract_ref = reference(&contract.reference);
    // The receipt of the run's own execution: not consequential (no grant, no provider).
    let mut r = envelope(
        "ExecutionReceiptV1",
        &format!("receipt-{}", run.id),
        PRODUCER,
    );
    r.extend([
        ("contractRef", contract_ref.clone()),
        ("executionId", s(run.id)),
        (
            "attemptId",
            s(format!("{}.r{}", run.id, run.progress.round())),
        ),
        (
            "executor",
            obj(vec![("id", s(PRODUCER)), ("kind", s("runner"))]),
        ),
        ("action", s(ACTION)),
        ("actionParameters", parameters),
        ("scope", arr(scope.iter().map(s))),
        ("authority", obj(vec![("required", Value::Bool(false))])),
        ("status", s("succeeded")),
        ("startedAt", s(timestamp(run.created_ms))),
        ("finishedAt", s(&at)),
        (
            "resourceOwnership",
            obj(vec![
                ("ownerId", s(&run.spec.owner)),
                ("instanceId", s(&sid)),
            ]),
        ),
    ]);
    let mut observations = vec![seal(obj(r))];
    // One evidence record per obligation: supported by the result that closes it (its digest
    // is the provenance), never by content.
    let mut evidence = Vec::new();
    for (o, crit) in w.obligations.iter().zip(&criteria) {
        let support = run.progress.supports(w, &o.id).last();
        let (status, conclusion, artifact, claim) = match support {
            Some(r) => (
                "supports",
                "MET",
                format!("sha256:{}", r.digest),
                format!(
                    "obligation {} closed by the recorded result of step {}",
                    o.id, r.step
                ),
            ),
            None => (
                "unknown",
                "UNKNOWN",
                format!("sha256:{}", run.input_sha256),
                format!("obligation {} has no recorded result that closes it", o.id),
            ),
        };
        let mut e = envelope(
            "EvidenceRecordV1",
            &format!("evidence-{}.{}", run.id, o.id),
            PRODUCER,
        );
        e.extend([
            ("contractRef", contract_ref.clone()),
            ("claim", s(claim)),
            (
                "criterionResult",
                obj(vec![
                    ("id", crit.get("id").cloned().unwrap_or(Value::Null)),
                    ("digest", crit.get("digest").cloned().unwrap_or(Value::Null)),
                    ("conclusion", s(conclusion)),
                ]),
            ),
            ("status", s(status)),
            ("observedAt", s(&at)),
            ("validUntil", s(timestamp(run.at_ms + VALID_MS))),
            ("provenance", obj(vec![("artifactDigest", s(artifact))])),
            ("dependencyRevisions", arr([revision.clone()])),
            (
                "limitations",
                arr([s(
                    "a digest of the runner's recorded result; its content is not judged",
                )]),
            ),
        ]);
        let sealed = seal(obj(e));
        evidence.push(sealed.reference.clone());
        observations.push(sealed);
    }
    let mut a = envelope(
        "AssuranceDecisionV1",
        &format!("assurance-{}", run.id),
        &run.spec.owner,
    );
    a.extend([
        ("contractRef", contract_ref),
        ("requiredLevel", s(ASSURANCE_LEVEL)),
        ("providedLevel", s(ASSURANCE_LEVEL)),
        ("evidenceRefs", arr(evidence.iter().map(reference))),
        ("reviewerId", s(&run.spec.owner)),
        (
            "rationale",
            s("every obligation's evidence is a recorded result of a step that closes it"),
        ),
        ("decision", s("sufficient")),
        ("decidedAt", s(&at)),
    ]);
    let assurance = seal(obj(a));
    Bundle {
        subject,
        revision,
        owner_records: vec![contract, assurance],
        observations,
        evidence,
        grantee: PRODUCER.to_owned(),
        scope,
        not_after_ms: run.at_ms + VALID_MS,
        context,
    }
}

/// The description of the observer's outcome criterion.
pub fn observed_description(observer: &str) -> String {
    format!("the run's outcome, as observed independently by {observer}")
}

/// HelmLoop resolutions §D: the binding digest of the policy controls (the lists sorted).
fn policy_digest(body: &Value) -> String {
    let pick = |k: &str| body.get(k).cloned().unwrap_or(Value::Null);
    digest_of(&obj(vec![
        ("policyId", pick("policyId")),
        ("policyRevision", pick("policyRevision")),
        ("subject", pick("subject")),
        ("revision", pick("revision")),
        ("targetTransition", pick("targetTransition")),
        ("expectedAction", pick("expectedAction")),
        ("expectedParameters", pick("expectedParameters")),
        ("expectedScope", pick("expectedScope")),
        (
            "executionAuthorityRequired",
            pick("executionAuthorityRequired"),
        ),
        ("requiredEvidenceIds", pick("requiredEvidenceIds")),
        ("requiredAssuranceLevel", pick("requiredAssuranceLevel")),
        ("outcomeClaimId", pick("outcomeClaimId")),
        ("evidenceMaxAgeMs", pick("evidenceMaxAgeMs")),
        ("reconciliationMaxAgeMs", pick("reconciliationMaxAgeMs")),
        ("trustedProducers", pick("trustedProducers")),
    ]))
}

impl Bundle {
    /// The evaluation context as of `evaluated_ms` (canonical JSON).
    pub fn context_at(&self, evaluated_ms: i64) -> Vec<u8> {
        let mut c = self.context.clone();
        if let Value::Object(m) = &mut c {
            m.insert("evaluatedAt", s(timestamp(evaluated_ms)));
        }
        lychd_canon::to_canonical_vec(&c).unwrap_or_default()
    }

    /// The contract's exact reference.
    pub fn contract(&self) -> &Ref {
        &self.owner_records[0].reference
    }

    /// The assurance decision's exact reference.
    pub fn assurance(&self) -> &Ref {
        &self.owner_records[1].reference
    }
}

#[cfg(test)]
mod tests;
