//! Steps 4–7: as-of filtering, trust classification, exact reference
//! resolution, and subject/revision/policy/contract/supersession checks.
//! (Grant and promotion lineages, also step 7, are in [`super::lineage`].)

use super::codes::ReasonCode as C;
use super::result::RecordStatus;
use super::{Resolved, Work, at};
use crate::digest::binding_digest;
use crate::schema::RecordType as T;
use crate::value::{Map, Value};

/// Event times of a record that must be no later than `evaluatedAt` (spec §6).
fn event_paths(t: Option<T>) -> &'static [&'static [&'static str]] {
    match t {
        Some(T::ExecutionReceipt) => &[&["issuedAt"], &["startedAt"], &["finishedAt"]],
        Some(T::EvidenceRecord) | Some(T::LearningSignal) => &[&["issuedAt"], &["observedAt"]],
        Some(T::AssuranceDecision) | Some(T::PromotionDecision) => &[&["issuedAt"], &["decidedAt"]],
        Some(T::ReconciliationRecord) => &[&["issuedAt"], &["query", "observedAt"]],
        _ => &[&["issuedAt"]],
    }
}

/// Step 4: a record with any event after `evaluatedAt` is a `LATER_FACT`. It
/// stays in the input commitment but takes no part in evaluation; it is
/// neutral unless a stage finds that something it needs exists only as a
/// later fact (then that stage reports `RECORD_AFTER_EVALUATED_AT` or
/// `AUTHORITY_CONSUMED_AFTER_EVALUATED_AT`, or counts future evidence as stale).
pub(crate) fn as_of(w: &mut Work<'_>) {
    let now = w.frame.c().evaluated_at;
    for r in &mut w.recs {
        if r.status != RecordStatus::Eligible {
            continue;
        }
        let later = event_paths(r.rtype)
            .iter()
            .any(|p| r.at(p).is_some() && r.t(p) > now);
        if later {
            r.status = RecordStatus::LaterFact;
            r.reasons.insert(C::RecordAfterEvaluatedAt);
        }
    }
}

/// Step 5: observation records (receipts, evidence, reconciliation) must come
/// from a trusted producer (resolutions §E); owner records are checked by
/// issuer against the accountable owner in later steps.
pub(crate) fn trust(w: &mut Work<'_>) {
    for i in 0..w.recs.len() {
        let r = &w.recs[i];
        let observation = matches!(
            r.rtype,
            Some(T::ExecutionReceipt | T::EvidenceRecord | T::ReconciliationRecord)
        );
        if !observation || !w.eligible(i) {
            continue;
        }
        let producer = r.f.producer;
        // `trustedProducers` is sorted by UTF-16 code units: a binary search.
        let trusted = w
            .frame
            .c()
            .trusted_producers
            .binary_search_by(|p| crate::utf16::cmp_utf16(p, producer))
            .is_ok();
        if !trusted {
            w.untrusted.insert(producer);
            w.flag(i, C::TrustUntrustedProducer);
        }
    }
}

/// The typed reference slots of a record: `(reference, expected type)`.
pub(crate) fn typed_refs<'a>(raw: &'a Value, t: T) -> Vec<(&'a Value, Option<T>)> {
    let one = |path: &[&str], ty: T| at(raw, path).map(|v| (v, Some(ty)));
    let many = |k: &str, ty: T| -> Vec<(&'a Value, Option<T>)> {
        raw.get(k)
            .and_then(Value::as_array)
            .unwrap_or(&[])
            .iter()
            .map(|v| (v, Some(ty)))
            .collect()
    };
    let mut out = Vec::new();
    match t {
        T::ExecutionReceipt => out.extend(one(&["authority", "grantRef"], T::AuthorityGrant)),
        T::AssuranceDecision => out.extend(many("evidenceRefs", T::EvidenceRecord)),
        T::PromotionDecision => {
            out.extend(one(&["grantRef"], T::AuthorityGrant));
            out.extend(one(&["assuranceRef"], T::AssuranceDecision));
            out.extend(many("evidenceRefs", T::EvidenceRecord));
        }
        T::ReconciliationRecord => out.extend(one(&["receiptRef"], T::ExecutionReceipt)),
        T::LearningSignal => {
            out.extend(many("evidenceRefs", T::EvidenceRecord));
            out.extend(one(&["grantRef"], T::AuthorityGrant));
        }
        T::AuthorityGrant => {
            if let Some(c) = raw.get("consumedBy") {
                let ty = c
                    .get("recordType")
                    .and_then(Value::as_str)
                    .and_then(T::from_name);
                let ty = ty.filter(|t| matches!(t, T::ExecutionReceipt | T::PromotionDecision));
                out.push((c, ty));
            }
        }
        _ => {}
    }
    out
}

/// Step 6: every reference of every eligible record is resolved by type and
/// ID and checked by digest. A wrong type or digest makes the referencing
/// record invalid; a missing contract or predecessor is unresolved (HOLD);
/// a contract that exists only as a later fact cannot be used yet. Other
/// missing targets are judged by the stage that consumes them.
pub(crate) fn references(w: &mut Work<'_>) {
    for i in 0..w.recs.len() {
        let Some(t) = w.recs[i].rtype else { continue };
        if !w.eligible(i) {
            continue;
        }
        let raw = w.recs[i].raw;
        if t != T::OutcomeContract
            && let Some(r) = w.recs[i].f.contract_ref
        {
            match w.resolve(r, T::OutcomeContract) {
                Resolved::TypeMismatch => w.flag(i, C::RefTypeMismatch),
                Resolved::DigestMismatch => w.flag(i, C::RefDigestMismatch),
                Resolved::Missing => w.flag(i, C::ContractMissing),
                Resolved::Found(c) if w.recs[c].status == RecordStatus::LaterFact => {
                    w.flag(i, C::RecordAfterEvaluatedAt)
                }
                Resolved::Found(_) => {}
            }
        }
        if let Some(p) = w.recs[i].f.supersedes {
            let broken = if t == T::AuthorityGrant {
                C::AuthorityLineageInvalid
            } else {
                C::SupersessionInvalid
            };
            match w.resolve(p, t) {
                Resolved::TypeMismatch | Resolved::DigestMismatch => w.flag(i, broken),
                Resolved::Missing => match t {
                    // An orphaned grant step is judged by the lineage stage.
                    T::AuthorityGrant => {}
                    T::PromotionDecision => w.flag(i, C::PromotionAmbiguous),
                    _ => w.flag(i, C::SupersessionUnresolved),
                },
                Resolved::Found(_) => {}
            }
        }
        for (r, expected) in typed_refs(raw, t) {
            let verdict = match expected {
                Some(e) => w.resolve(r, e),
                None => Resolved::TypeMismatch,
            };
            match verdict {
                Resolved::TypeMismatch => w.flag(i, C::RefTypeMismatch),
                Resolved::DigestMismatch => w.flag(i, C::RefDigestMismatch),
                Resolved::Missing | Resolved::Found(_) => {}
            }
        }
    }
}

/// Step 7: subject, revision and policy bindings; the contract; generic
/// supersession (types other than grants and promotions, whose lineages have
/// their own rules); each record's binding to the contract head.
pub(crate) fn bindings(w: &mut Work<'_>) {
    for i in 0..w.recs.len() {
        if w.recs[i].rtype.is_none() || !w.eligible(i) {
            continue;
        }
        let r = &w.recs[i];
        let c = w.frame.c();
        let subject_ok = r.f.subject == Some(c.subject);
        let rev_id_ok = r.f.revision_id == c.revision_id;
        let rev_digest_ok = r.f.revision_digest == c.revision_digest;
        let pol_ok = r.f.policy_id == c.policy_id && r.f.policy_revision == c.policy_revision;
        let pol_digest_ok = r.f.policy_digest == c.policy_digest;
        if !subject_ok {
            w.flag(i, C::RefSubjectMismatch);
        }
        if !rev_id_ok || !pol_ok {
            w.flag(i, C::BindingStale);
        }
        if (rev_id_ok && !rev_digest_ok) || (pol_ok && !pol_digest_ok) {
            w.flag(i, C::BindingDigestMismatch);
        }
    }
    for i in w.eligible_of(T::OutcomeContract) {
        if let Some(code) = contract_defect(w.recs[i].raw) {
            w.flag(i, code);
        }
    }
    // Time order inside a receipt (resolutions §H.5): a terminal time before
    // the start is invalid, whatever the receipt's other facts.
    for i in w.eligible_of(T::ExecutionReceipt) {
        let r = &w.recs[i];
        if r.at(&["finishedAt"]).is_some() && r.t(&["finishedAt"]) < r.t(&["startedAt"]) {
            w.flag(i, C::ExecutionFinishedBeforeStarted);
        }
    }
    // Generic supersession: subject and issuance order.
    for i in 0..w.recs.len() {
        let Some(t) = w.recs[i].rtype else { continue };
        if t == T::AuthorityGrant || !w.eligible(i) {
            continue;
        }
        let Some(p) = w.recs[i].f.supersedes else {
            continue;
        };
        // A predecessor whose exact reference names several equivocating
        // bodies is not read (resolutions §H.6); being INVALID, it makes the
        // successor a dropped dependent below.
        if let super::Resolved::Found(p) = w.resolve(p, t)
            && w.readable(p)
        {
            if w.recs[p].f.subject != w.recs[i].f.subject {
                w.flag(i, C::SupersessionInvalid);
            } else if w.recs[i].issued() < w.recs[p].issued() {
                let code = if t == T::PromotionDecision {
                    C::PromotionLineageTimeRegression
                } else {
                    C::SupersessionTimeRegression
                };
                w.flag(i, code);
            }
        }
    }
    // The contract head: eligible contracts that no eligible successor replaced.
    propagate_supersession(w, &[T::OutcomeContract]);
    mark_superseded(w, &[T::OutcomeContract]);
    let heads = w.heads_of(T::OutcomeContract);
    let any_contract = w.recs.iter().any(|r| r.is(T::OutcomeContract));
    match heads.as_slice() {
        [c] => {
            w.contract = Some(*c);
            w.owner = w.recs[*c].s(&["accountableOwnerId"]);
        }
        [] if !any_contract => w.emit(C::ContractMissing),
        [] => {}
        _ => w.emit(C::ContractAmbiguous),
    }
    // Every other record must be bound to that exact head.
    for i in 0..w.recs.len() {
        let Some(t) = w.recs[i].rtype else { continue };
        if t == T::OutcomeContract || !w.eligible(i) {
            continue;
        }
        let Some(r) = w.recs[i].f.contract_ref else {
            continue;
        };
        if let Resolved::Found(c) = w.resolve(r, T::OutcomeContract) {
            if Some(c) == w.contract {
                continue;
            }
            if w.eligible(c) && w.recs[c].superseded {
                w.flag(i, C::BindingStale);
            } else {
                w.drop_dependent(i);
            }
        }
    }
    let generic = [
        T::ExecutionReceipt,
        T::EvidenceRecord,
        T::AssuranceDecision,
        T::ReconciliationRecord,
        T::LearningSignal,
    ];
    propagate_supersession(w, &generic);
    mark_superseded(w, &generic);
}

/// A successor whose predecessor is unavailable (invalid, ineligible or a
/// later fact) is itself unavailable, and so on down the chain. Computed to
/// its fixed point with a worklist over a successor index: every record is
/// visited once, so a long chain costs O(n), and the result does not depend
/// on the order records are visited in (resolutions §H.6, §H.7).
fn propagate_supersession(w: &mut Work<'_>, types: &[T]) {
    let succ = successors(w, |t| types.contains(&t));
    propagate_unavailable(w, &succ, |w, i| w.drop_dependent(i));
}

/// `successors[p]`: the records of the selected types whose `supersedes`
/// resolves to `p` (exactly, by type, id and digest).
pub(crate) fn successors(w: &Work<'_>, select: impl Fn(T) -> bool) -> Vec<Vec<usize>> {
    let mut succ = vec![Vec::new(); w.recs.len()];
    for i in 0..w.recs.len() {
        let Some(t) = w.recs[i].rtype.filter(|&t| select(t)) else {
            continue;
        };
        if let Some(p) = w.recs[i].f.supersedes
            && let Resolved::Found(p) = w.resolve(p, t)
            && p != i
        {
            succ[p].push(i);
        }
    }
    succ
}

/// Starting from every record that is not eligible, applies `drop` to each
/// still-eligible successor (which must leave it not eligible), then to its
/// successors, until nothing changes.
pub(crate) fn propagate_unavailable<'a>(
    w: &mut Work<'a>,
    succ: &[Vec<usize>],
    drop: impl Fn(&mut Work<'a>, usize),
) {
    let mut work: Vec<usize> = (0..w.recs.len())
        .filter(|&p| !w.eligible(p) && !succ[p].is_empty())
        .collect();
    while let Some(p) = work.pop() {
        for &i in &succ[p] {
            if w.eligible(i) {
                drop(w, i);
                work.push(i);
            }
        }
    }
}

fn mark_superseded(w: &mut Work<'_>, types: &[T]) {
    for i in 0..w.recs.len() {
        let Some(t) = w.recs[i].rtype.filter(|t| types.contains(t)) else {
            continue;
        };
        if !w.eligible(i) {
            continue;
        }
        if let Some(p) = w.recs[i].f.supersedes
            && let Resolved::Found(p) = w.resolve(p, t)
        {
            w.recs[p].superseded = true;
        }
    }
}

/// Contract semantics beyond the schema (spec §4.1): `CONTRACT_INVALID` for
/// an owner/criterion/horizon contradiction, `CONTRACT_NOT_ACTIVE` otherwise.
fn contract_defect(raw: &Value) -> Option<C> {
    let s = |p: &[&str]| at(raw, p).and_then(Value::as_str).unwrap_or("");
    if s(&["accountableOwnerId"]) != s(&["subject", "ownerId"]) {
        return Some(C::ContractInvalid);
    }
    let criteria = raw.get("criteria").and_then(Value::as_array).unwrap_or(&[]);
    let mut ids = std::collections::BTreeSet::new();
    for c in criteria {
        let mut body = Map::new();
        body.insert("id", c.get("id").cloned().unwrap_or_default());
        body.insert(
            "description",
            c.get("description").cloned().unwrap_or_default(),
        );
        let ok = binding_digest(&Value::Object(body))
            .is_ok_and(|d| Some(d.render().as_str()) == c.get("digest").and_then(Value::as_str));
        if !ok || !ids.insert(c.get("id").and_then(Value::as_str).unwrap_or("")) {
            return Some(C::ContractInvalid);
        }
    }
    let (start, end) = (
        super::time::parse_timestamp(s(&["horizon", "start"])),
        super::time::parse_timestamp(s(&["horizon", "end"])),
    );
    if !matches!((start, end), (Some(a), Some(b)) if a < b) {
        return Some(C::ContractInvalid);
    }
    if s(&["status"]) != "active" {
        return Some(C::ContractNotActive);
    }
    None
}

/// The criteria `(id, digest)` of a contract.
pub(crate) fn criteria(raw: &Value) -> Vec<(&str, &str)> {
    raw.get("criteria")
        .and_then(Value::as_array)
        .unwrap_or(&[])
        .iter()
        .map(|c| {
            (
                c.get("id").and_then(Value::as_str).unwrap_or(""),
                c.get("digest").and_then(Value::as_str).unwrap_or(""),
            )
        })
        .collect()
}
