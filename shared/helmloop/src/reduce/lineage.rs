//! Step 7 (continued): authority-grant lineages (spec §4.2) and promotion
//! decision lineages (spec §4.6).

use std::collections::{BTreeMap, BTreeSet};

use super::codes::ReasonCode as C;
use super::frame::string_set;
use super::result::RecordStatus;
use super::{Resolved, Work};
use crate::digest::binding_digest;
use crate::schema::RecordType as T;
use crate::value::{Map, Value};

/// One grant lineage: the steps sharing `lineage.grantId`.
#[derive(Debug)]
pub(crate) struct GrantLineage<'a> {
    pub grant_id: &'a str,
    pub action: &'a str,
    /// Eligible as-of steps, by sequence.
    pub steps: Vec<usize>,
    /// Steps that exist only after `evaluatedAt`.
    pub later: Vec<usize>,
    /// A step breaks sequence, transition, reason, binding or time rules.
    pub invalid: bool,
    /// A step after the first whose predecessor is absent or unavailable.
    pub orphan: bool,
    /// Two steps at one sequence number or with one predecessor.
    pub competing: bool,
    /// Two consumed steps: two consumers for one single-use grant.
    pub double_consumed: bool,
}

impl GrantLineage<'_> {
    /// The step following `step` (sequence + 1), when the lineage is linear.
    pub fn next_after(&self, w: &Work<'_>, step: usize) -> Option<usize> {
        let seq = seq(w, step);
        self.steps
            .iter()
            .copied()
            .find(|&s| self::seq(w, s) == seq + 1)
    }

    pub fn head(&self) -> Option<usize> {
        self.steps.last().copied()
    }
}

/// The lineage of `grant_id` (lineages are sorted by grant ID): a binary
/// search, not a scan per use (resolutions §H.7).
pub(crate) fn find<'l, 'a>(
    lineages: &'l [GrantLineage<'a>],
    grant_id: &str,
) -> Option<&'l GrantLineage<'a>> {
    lineages
        .binary_search_by(|l| l.grant_id.cmp(grant_id))
        .ok()
        .map(|i| &lineages[i])
}

pub(crate) fn seq(w: &Work<'_>, i: usize) -> i64 {
    w.recs[i]
        .at(&["lineage", "sequence"])
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

pub(crate) fn state<'a>(w: &Work<'a>, i: usize) -> &'a str {
    w.recs[i].s(&["lineage", "state"])
}

/// `(from, to, reason)` transitions a grant lineage may take. A revocation
/// after consumption is recorded but does not undo the consumption.
const TRANSITIONS: [(&str, &str, &str); 5] = [
    ("available", "reserved", "reserve"),
    ("reserved", "consumed", "consume"),
    ("available", "revoked", "revoke"),
    ("reserved", "revoked", "revoke"),
    ("consumed", "revoked", "revoke"),
];

/// Members every step of one lineage must share (its action binding).
const BINDING: [&str; 9] = [
    "action",
    "actionParameters",
    "granteeId",
    "idempotencyKey",
    "validity",
    "issuerId",
    "consequential",
    "actionDigest",
    "contractRef",
];

fn same_binding(a: &Value, b: &Value) -> bool {
    BINDING.iter().all(|k| a.get(k) == b.get(k))
        && string_set(a.get("scope")) == string_set(b.get("scope"))
}

/// Intrinsic defects that make a grant unusable, used or not (resolutions
/// §H.4; every eligible grant step is checked in step 7 and flagged
/// `AUTHORITY_WRONG_BINDING`): an `actionDigest` that does not bind its
/// fields, an issuer other than the accountable owner, a wildcard scope, or
/// promote parameters other than its bound revision.
pub(crate) fn grant_defect(w: &Work<'_>, g: usize) -> bool {
    let r = &w.recs[g];
    let mut body = Map::new();
    for k in [
        "action",
        "actionParameters",
        "granteeId",
        "idempotencyKey",
        "revision",
        "subject",
    ] {
        body.insert(k, r.at(&[k]).cloned().unwrap_or_default());
    }
    let scope = string_set(r.at(&["scope"]));
    body.insert(
        "scope",
        Value::Array(scope.iter().map(|s| Value::from(*s)).collect()),
    );
    let digest_ok =
        binding_digest(&Value::Object(body)).is_ok_and(|d| d.render() == r.s(&["actionDigest"]));
    let promote_ok = r.s(&["action"]) != "promote"
        || (r.s(&["actionParameters", "targetRevision"]) == r.s(&["revision", "id"])
            && r.s(&["actionParameters", "targetDigest"]) == r.s(&["revision", "digest"]));
    !digest_ok
        || r.s(&["issuerId"]) != w.owner
        || scope.iter().any(|s| s.contains('*'))
        || !promote_ok
}

/// Builds and checks every grant lineage. Invalid steps are flagged
/// `AUTHORITY_LINEAGE_INVALID` (REJECT); double consumption is reported as
/// `AUTHORITY_DOUBLE_CONSUMED` (REJECT). Orphans and competing heads are
/// reported by the stage that uses (or finds no use of) the lineage.
pub(crate) fn grant_lineages<'a>(w: &mut Work<'a>) -> Vec<GrantLineage<'a>> {
    // Defective authority is defective whether or not it is used
    // (resolutions §H.4): every eligible step of every lineage (unused,
    // promote and `learning.writeback` grants included) is checked, and a
    // defective step is INVALID before any lineage is built.
    // The defective steps stay in their lineage, which is then invalid: a
    // defective reservation still counts as a reservation (no retry may be
    // inferred from it, spec §4.2).
    let mut defective = BTreeSet::new();
    for g in w.eligible_of(T::AuthorityGrant) {
        if grant_defect(w, g) {
            w.flag(g, C::AuthorityWrongBinding);
            defective.insert(g);
        }
    }
    let mut groups: BTreeMap<&'a str, GrantLineage<'a>> = BTreeMap::new();
    for i in 0..w.recs.len() {
        let r = &w.recs[i];
        if !r.is(T::AuthorityGrant)
            || !(matches!(r.status, RecordStatus::Eligible | RecordStatus::LaterFact)
                || defective.contains(&i))
        {
            continue;
        }
        let gid = r.s(&["lineage", "grantId"]);
        let l = groups.entry(gid).or_insert_with(|| GrantLineage {
            grant_id: gid,
            action: r.s(&["action"]),
            steps: Vec::new(),
            later: Vec::new(),
            invalid: false,
            orphan: false,
            competing: false,
            double_consumed: false,
        });
        if r.status != RecordStatus::LaterFact {
            l.steps.push(i);
        } else {
            l.later.push(i);
        }
    }
    let mut lineages: Vec<GrantLineage<'a>> = groups.into_values().collect();
    let mut invalid_steps = BTreeSet::new();
    let mut double_steps = Vec::new();
    // `(step, predecessor)` of every step whose predecessor resolved.
    let mut links: Vec<(usize, usize, usize)> = Vec::new();
    for (li, l) in lineages.iter_mut().enumerate() {
        l.steps.sort_by_key(|&s| seq(w, s));
        let mut seqs = BTreeSet::new();
        let mut preds = BTreeSet::new();
        let mut consumed = Vec::new();
        for &s in &l.steps {
            let n = seq(w, s);
            if !seqs.insert(n) {
                l.competing = true;
            }
            if state(w, s) == "consumed" {
                consumed.push(s);
            }
            let sup = w.recs[s].f.supersedes;
            if n == 1 {
                if sup.is_some() || state(w, s) != "available" {
                    invalid_steps.insert(s);
                }
                continue;
            }
            let Some(sup) = sup else {
                l.orphan = true;
                continue;
            };
            match w.resolve(sup, T::AuthorityGrant) {
                Resolved::Found(p) => {
                    if !preds.insert(p) {
                        l.competing = true;
                    }
                    links.push((li, s, p));
                    match w.recs[p].status {
                        RecordStatus::LaterFact => {
                            invalid_steps.insert(s);
                        }
                        // A defective predecessor is still judged as a step.
                        st if st == RecordStatus::Eligible || defective.contains(&p) => {
                            let reason = sup.get("reason").and_then(Value::as_str).unwrap_or("");
                            let ok = w.recs[p].s(&["lineage", "grantId"]) == l.grant_id
                                && seq(w, p) == n - 1
                                && TRANSITIONS.contains(&(state(w, p), state(w, s), reason))
                                && w.recs[s].issued() >= w.recs[p].issued()
                                && same_binding(w.recs[p].raw, w.recs[s].raw);
                            if !ok {
                                invalid_steps.insert(s);
                            }
                        }
                        _ => l.orphan = true,
                    }
                }
                Resolved::Missing => l.orphan = true,
                Resolved::TypeMismatch | Resolved::DigestMismatch => {
                    invalid_steps.insert(s);
                }
            }
        }
        if consumed.len() >= 2 {
            l.double_consumed = true;
            double_steps.extend(consumed);
        }
        l.invalid = l
            .steps
            .iter()
            .any(|s| invalid_steps.contains(s) || defective.contains(s));
    }
    // Fixed point (resolutions §H.6): a step whose predecessor is itself an
    // invalid step has no usable predecessor either, whatever order the
    // steps were visited in. Invalidity does not spread further: a step is
    // invalid only for its own transition.
    for &(li, s, p) in &links {
        if invalid_steps.contains(&p) && !invalid_steps.contains(&s) {
            lineages[li].orphan = true;
        }
    }
    for s in invalid_steps {
        w.flag(s, C::AuthorityLineageInvalid);
    }
    for s in double_steps {
        w.note(s, C::AuthorityDoubleConsumed);
    }
    lineages
}

/// Promotion decision lineages after their checks.
#[derive(Debug)]
pub(crate) struct PromotionLineages {
    /// Eligible decisions that no eligible successor replaced.
    pub heads: Vec<usize>,
    /// Competing heads, an initial decision naming a predecessor, or a
    /// broken/unbound lineage (`PROMOTION_AMBIGUOUS`, HOLD).
    pub ambiguous: bool,
}

pub(crate) fn promotion_lineages(w: &mut Work<'_>) -> PromotionLineages {
    let dseq = |w: &Work<'_>, i: usize| {
        w.recs[i]
            .at(&["lineage", "sequence"])
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    // Each decision's own binding: an initial decision names no
    // predecessor; a successor names exactly `sequence - 1` of the same
    // decision ID. Judged for every decision before any is flagged, so the
    // verdicts do not depend on the order decisions are visited in.
    let mut unbound = Vec::new();
    for i in w.eligible_of(T::PromotionDecision) {
        let sup = w.recs[i].f.supersedes;
        let n = dseq(w, i);
        let bound = match (n, sup) {
            (1, None) => true,
            (1, Some(_)) | (_, None) => false,
            (_, Some(sup)) => match w.resolve(sup, T::PromotionDecision) {
                Resolved::Found(p) => {
                    w.recs[p].s(&["lineage", "decisionId"])
                        == w.recs[i].s(&["lineage", "decisionId"])
                        && dseq(w, p) == n - 1
                }
                _ => false,
            },
        };
        if !bound {
            unbound.push(i);
        }
    }
    for i in unbound {
        w.flag(i, C::PromotionAmbiguous);
    }
    // A successor of an unavailable decision is unbound too, down the
    // chain: computed to its fixed point (resolutions §H.6).
    let succ = super::scope::successors(w, |t| t == T::PromotionDecision);
    super::scope::propagate_unavailable(w, &succ, |w, i| w.flag(i, C::PromotionAmbiguous));
    for i in w.eligible_of(T::PromotionDecision) {
        if let Some(sup) = w.recs[i].f.supersedes
            && let Resolved::Found(p) = w.resolve(sup, T::PromotionDecision)
        {
            w.recs[p].superseded = true;
        }
    }
    let heads = w.heads_of(T::PromotionDecision);
    let mut ambiguous = w
        .recs
        .iter()
        .any(|r| r.is(T::PromotionDecision) && r.reasons.contains(&C::PromotionAmbiguous));
    if heads.len() > 1 {
        w.emit(C::PromotionAmbiguous);
        ambiguous = true;
    }
    PromotionLineages { heads, ambiguous }
}
