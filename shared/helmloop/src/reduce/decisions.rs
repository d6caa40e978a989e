//! Step 10: promotion, reconciliation, observed outcome and learning
//! (spec §4.6–§4.8; resolutions §E).

use super::authority::{Use, any_invalid, check_use};
use super::axes::{Authority, Axes, ObservedOutcome as O, Promotion as P, Reconciliation as R};
use super::codes::ReasonCode as C;
use super::evidence::fresh_at;
use super::lineage::{GrantLineage, PromotionLineages, state};
use super::result::RecordStatus;
use super::{EvidenceFacts, ExecutionFacts, Outcome, Resolved, Work};
use crate::digest::binding_digest;
use crate::schema::RecordType as T;
use crate::value::{Map, Value};

pub(crate) fn evaluate(
    w: &mut Work<'_>,
    grants: &[GrantLineage<'_>],
    promotions: &PromotionLineages,
    exec: &ExecutionFacts,
    ev: &EvidenceFacts,
) -> Outcome {
    let (promotion, promotion_code) = promotion(w, grants, promotions, ev);
    let (reconciliation, reconciliation_code, not_required) = reconciliation(w, exec);
    let (observed, observed_code) = outcome(w);
    learning(w, grants);
    let promotion = if any_invalid(w, T::PromotionDecision) {
        P::Invalid
    } else {
        w.codes.extend(promotion_code);
        promotion
    };
    let reconciliation = if exec.multiple || any_invalid(w, T::ReconciliationRecord) {
        R::Invalid
    } else {
        w.codes.extend(reconciliation_code);
        reconciliation
    };
    w.codes.extend(observed_code);
    Outcome {
        axes: Axes {
            execution: exec.execution,
            evidence: ev.evidence,
            authority: exec.authority,
            promotion,
            reconciliation,
            observed_outcome: observed,
        },
        authority_not_required: exec.authority_not_required,
        reconciliation_not_required: not_required && reconciliation == R::NotRequired,
    }
}

/// The promotion axis (spec §4.6). Record-level causes are flagged on the
/// decision (REJECT, axis `INVALID`); the returned code explains a
/// non-`INVALID` non-pass state.
fn promotion(
    w: &mut Work<'_>,
    grants: &[GrantLineage<'_>],
    lineages: &PromotionLineages,
    ev: &EvidenceFacts,
) -> (P, Option<C>) {
    if lineages.ambiguous {
        return (P::Ambiguous, Some(C::PromotionAmbiguous));
    }
    let [p] = lineages.heads.as_slice() else {
        let requested = grants
            .iter()
            .any(|l| l.action == "promote" && !l.steps.is_empty());
        return if requested {
            (P::Pending, Some(C::PromotionPending))
        } else {
            (P::NotRequested, Some(C::PromotionNotRequested))
        };
    };
    let p = *p;
    let r = &w.recs[p];
    let decided = r.t(&["decidedAt"]);
    if r.s(&["ownerId"]) != w.owner {
        w.flag(p, C::OwnerMismatch);
        return (P::Invalid, None);
    }
    let target_ok = r.at(&["targetRevision"]) == r.at(&["revision"])
        && r.s(&["actionParameters", "targetRevision"]) == r.s(&["targetRevision", "id"])
        && r.s(&["actionParameters", "targetDigest"]) == r.s(&["targetRevision", "digest"]);
    if !target_ok {
        w.flag(p, C::PromotionParametersMismatch);
        return (P::Invalid, None);
    }
    // Inputs cited by the decision must precede it.
    let assurance = r
        .at(&["assuranceRef"])
        .map(|a| w.resolve(a, T::AssuranceDecision));
    let evidence: Vec<Resolved> = r
        .at(&["evidenceRefs"])
        .and_then(Value::as_array)
        .unwrap_or(&[])
        .iter()
        .map(|e| w.resolve(e, T::EvidenceRecord))
        .collect();
    // A reference naming several equivocating bodies is not read
    // (resolutions §H.6).
    let late = |i: usize, event: &str| {
        w.readable(i) && (w.recs[i].issued() > decided || w.recs[i].t(&[event]) > decided)
    };
    let assurance_late = matches!(assurance, Some(Resolved::Found(a)) if late(a, "decidedAt"));
    let evidence_late = evidence
        .iter()
        .any(|e| matches!(e, Resolved::Found(e) if late(*e, "observedAt")));
    if assurance_late || evidence_late {
        w.flag(p, C::PromotionInputAfterDecision);
        return (P::Invalid, None);
    }
    match r.s(&["decision"]) {
        "rejected" => {
            w.note(p, C::PromotionRejected);
            return (P::Rejected, None);
        }
        "hold" => return (P::Hold, Some(C::PromotionHold)),
        _ => {}
    }
    // Approval: the exact promote grant, reserved before and consumed by this decision.
    let r = &w.recs[p];
    let u = Use {
        grant_ref: r.at(&["grantRef"]),
        consumer: p,
        action: "promote",
        parameters: r.at(&["actionParameters"]),
        scope: None,
        grantee: None,
        idempotency_key: Some(r.s(&["idempotencyKey"])),
        dispatch_at: decided,
        terminal_at: Some(decided),
    };
    match check_use(w, grants, &u) {
        (Authority::Consumed, _) => {}
        (_, Some(code)) if code.is_reject() => {
            w.flag(p, code);
            return (P::Invalid, None);
        }
        (Authority::Invalid | Authority::Ambiguous, None) => {
            // The lineage's own code (invalid, double consumption) is reported.
            w.drop_dependent(p);
            return (P::Invalid, None);
        }
        (_, code) => return (P::Hold, code.or(Some(C::AuthorityMissing))),
    }
    // The cited assurance decision itself must be in the recomputed sufficient set.
    match assurance {
        Some(Resolved::Found(a)) if ev.sufficient.contains(&a) => {}
        _ => return (P::Hold, Some(C::AssuranceInsufficient)),
    }
    if evidence.iter().any(|e| !matches!(e, Resolved::Found(_))) {
        return (P::Hold, Some(C::EvidenceMissing));
    }
    (P::Approved, None)
}

/// The reconciliation axis (spec §4.7) and whether it is `NOT_REQUIRED`
/// because the receipt is non-consequential without a provider report.
fn reconciliation(w: &mut Work<'_>, exec: &ExecutionFacts) -> (R, Option<C>, bool) {
    let Some(rc) = exec.receipt else {
        return if exec.reserved_without_receipt {
            (R::Unknown, Some(C::ReconciliationUnknown), false)
        } else {
            (R::Pending, Some(C::ReconciliationMissing), false)
        };
    };
    let receipt = &w.recs[rc];
    let report = receipt.at(&["providerReport"]);
    let not_required = receipt
        .at(&["authority", "required"])
        .and_then(Value::as_bool)
        == Some(false)
        && report.is_none();
    let candidates: Vec<usize> = w
        .heads_of(T::ReconciliationRecord)
        .into_iter()
        .filter(|&q| {
            w.recs[q]
                .at(&["receiptRef"])
                .is_some_and(|x| w.resolve(x, T::ExecutionReceipt) == Resolved::Found(rc))
        })
        .collect();
    let q = match candidates.as_slice() {
        [] if not_required => return (R::NotRequired, None, true),
        [] => return (R::Pending, Some(C::ReconciliationMissing), false),
        [q] => *q,
        _ => return (R::Unknown, Some(C::ReconciliationUnknown), false),
    };
    let rec = &w.recs[q];
    let rs = |p: &[&str]| receipt.s(p);
    let qs = |p: &[&str]| rec.s(p);
    let correlated = report.is_some()
        && qs(&["correlation", "executionId"]) == rs(&["executionId"])
        && qs(&["correlation", "attemptId"]) == rs(&["attemptId"])
        && qs(&["correlation", "providerName"]) == rs(&["providerReport", "name"])
        && qs(&["correlation", "requestId"]) == rs(&["providerReport", "requestId"])
        && qs(&["correlation", "queryLocator"]) == rs(&["providerReport", "queryLocator"])
        && qs(&["query", "system"]) == rs(&["providerReport", "name"])
        && qs(&["query", "locator"]) == rs(&["providerReport", "queryLocator"])
        && qs(&["requestedState"]) == rs(&["providerReport", "requestedState"]);
    let queried = rec.t(&["query", "observedAt"]);
    let boundary = if receipt.s(&["status"]) == "unknown" {
        receipt.t(&["startedAt"])
    } else {
        receipt.t(&["finishedAt"])
    };
    let states_agree = qs(&["providerState"]) == qs(&["requestedState"])
        && qs(&["observedState"]) == qs(&["requestedState"]);
    let reconciled = qs(&["reconciledState"]);
    if !correlated {
        w.flag(q, C::ReconciliationCorrelationMismatch);
        return (R::Invalid, None, false);
    }
    if queried < boundary {
        w.flag(q, C::ReconciliationPremature);
        return (R::Invalid, None, false);
    }
    if reconciled == "success" && !states_agree {
        w.flag(q, C::ReconciliationInconsistent);
        return (R::Invalid, None, false);
    }
    let c = w.frame.c();
    if c.evaluated_at >= queried.saturating_add(c.reconciliation_max_age_ms) {
        return (R::Unknown, Some(C::ReconciliationStale), false);
    }
    match reconciled {
        "success" => (R::Matched, None, false),
        "diverged" => {
            w.note(q, C::ReconciliationDiverged);
            (R::Diverged, None, false)
        }
        _ => (R::Unknown, Some(C::ReconciliationUnknown), false),
    }
}

/// The observed-outcome axis (resolutions §E): eligible, fresh evidence on
/// `outcomeClaimId` observed inside the contract horizon `[start, end)`.
fn outcome(w: &mut Work<'_>) -> (O, Option<C>) {
    let c = w.frame.c();
    let (claim, now) = (c.outcome_claim_id, c.evaluated_at);
    let invalid = w.recs.iter().any(|r| {
        r.is(T::EvidenceRecord)
            && r.status == RecordStatus::Invalid
            && r.s(&["criterionResult", "id"]) == claim
    });
    if invalid {
        return (O::Invalid, None);
    }
    let Some(contract) = w.contract else {
        return (O::NotObserved, Some(C::OutcomeNotObserved));
    };
    let start = w.recs[contract].t(&["horizon", "start"]);
    let end = w.recs[contract].t(&["horizon", "end"]);
    if now < start {
        return (O::NotDue, Some(C::OutcomeNotDue));
    }
    let (mut early, mut supports, mut contradicts, mut unknown) = (false, false, false, false);
    for e in w.heads_of(T::EvidenceRecord) {
        let r = &w.recs[e];
        if r.s(&["criterionResult", "id"]) != claim || !fresh_at(w, e, now) {
            continue;
        }
        let observed = r.t(&["observedAt"]);
        if observed < start {
            early = true;
            continue;
        }
        if observed >= end {
            continue;
        }
        match r.s(&["status"]) {
            "supports" => supports = true,
            "contradicts" => contradicts = true,
            _ => unknown = true,
        }
    }
    match (supports, contradicts, unknown, early) {
        (true, true, _, _) => (O::Mixed, Some(C::OutcomeMixed)),
        (true, false, _, _) => (O::Met, None),
        (false, true, _, _) => (O::NotMet, Some(C::OutcomeNotMet)),
        (false, false, true, _) => (O::Unknown, Some(C::OutcomeUnknown)),
        (false, false, false, true) => (O::NotDue, Some(C::OutcomeNotDue)),
        (false, false, false, false) => (O::NotObserved, Some(C::OutcomeNotObserved)),
    }
}

/// Learning signals (spec §4.8). They never feed an axis; a writeback
/// request without approval holds, an acceptance without the exact owner
/// approval and an active `learning.writeback` grant bound to the requested
/// signal rejects.
fn learning(w: &mut Work<'_>, grants: &[GrantLineage<'_>]) {
    for s in w.heads_of(T::LearningSignal) {
        match w.recs[s].s(&["disposition"]) {
            "writeback_requested" => w.note(s, C::LearningWritebackUnapproved),
            "accepted" if !acceptance_authorized(w, grants, s) => {
                w.flag(s, C::LearningUnauthorized)
            }
            _ => {}
        }
    }
}

fn acceptance_authorized(w: &Work<'_>, grants: &[GrantLineage<'_>], s: usize) -> bool {
    let r = &w.recs[s];
    if r.s(&["approverId"]) != w.owner {
        return false;
    }
    let Some(Resolved::Found(req)) = r.f.supersedes.map(|p| w.resolve(p, T::LearningSignal)) else {
        return false;
    };
    let q = &w.recs[req];
    // A request naming several equivocating bodies cannot be accepted; its
    // fields are not read (resolutions §H.6).
    if !w.readable(req) {
        return false;
    }
    let same_proposal = ["outcomeStatus", "proposal", "evidenceRefs"]
        .iter()
        .all(|k| q.at(&[k]) == r.at(&[k]));
    if q.s(&["disposition"]) != "writeback_requested" || !same_proposal {
        return false;
    }
    let Some(Resolved::Found(g)) = r.at(&["grantRef"]).map(|x| w.resolve(x, T::AuthorityGrant))
    else {
        return false;
    };
    let gr = &w.recs[g];
    let mut body = Map::new();
    body.insert(
        "learningSignalId",
        q.at(&["id"]).cloned().unwrap_or_default(),
    );
    for k in ["outcomeStatus", "proposal", "evidenceRefs"] {
        body.insert(k, q.at(&[k]).cloned().unwrap_or_default());
    }
    let proposal_ok = binding_digest(&Value::Object(body))
        .is_ok_and(|d| d.render() == gr.s(&["actionParameters", "proposalDigest"]));
    let gid = gr.s(&["lineage", "grantId"]);
    let active = super::lineage::find(grants, gid).is_some_and(|l| {
        !l.invalid
            && !l.orphan
            && !l.competing
            && l.head() == Some(g)
            && matches!(state(w, g), "available" | "reserved")
    });
    let observed = r.t(&["observedAt"]);
    w.eligible(g)
        && active
        && gr.s(&["action"]) == "learning.writeback"
        && gr.s(&["issuerId"]) == w.owner
        && gr.s(&["actionParameters", "learningSignalId"]) == q.s(&["id"])
        && proposal_ok
        && gr.t(&["validity", "notBefore"]) <= observed
        && observed < gr.t(&["validity", "notAfter"])
}
