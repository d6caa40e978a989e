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

use lychd_canon::Value;

use super::progress::Progress;
pub use super::verdict::{OWNER_DENIED, PRODUCER, Predicate, Spec, Verdict, Verification};
use super::workflow::Workflow;

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

mod json;
pub use json::{Drafted, Ref, timestamp};
use json::{arr, digest_of, obj, policy_digest, reference, s, seal};

#[cfg(test)]
mod tests;
