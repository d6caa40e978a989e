//! Step 9: evidence and assurance (spec §4.4, §4.5; resolutions §E).

use std::collections::{BTreeSet, HashMap, HashSet};

use super::axes::Evidence as Ev;
use super::codes::ReasonCode as C;
use super::frame::level_of;
use super::result::RecordStatus;
use super::scope::criteria;
use super::time::Millis;
use super::{EvidenceFacts, Resolved, Work};
use crate::schema::RecordType as T;
use crate::value::Value;

/// Effective expiry: the earlier of `validUntil` and `observedAt` plus the
/// policy age cap (spec §4.4). Evidence is stale at and after it.
pub(crate) fn expiry(w: &Work<'_>, e: usize) -> Millis {
    let r = &w.recs[e];
    r.f.valid_until
        .min(r.f.observed.saturating_add(w.frame.c().evidence_max_age_ms))
}

/// Fresh at `at`: observed and issued no later than `at`, and `at` before expiry.
pub(crate) fn fresh_at(w: &Work<'_>, e: usize, at: Millis) -> bool {
    let r = &w.recs[e];
    r.f.observed <= at && r.issued() <= at && at < expiry(w, e)
}

fn claim_of<'a>(w: &Work<'a>, e: usize) -> &'a str {
    w.recs[e].f.criterion_id
}

pub(crate) fn evaluate(w: &mut Work<'_>, receipt: Option<usize>) -> EvidenceFacts {
    // Criterion binding and status/conclusion agreement of every eligible record.
    let contract_criteria: HashSet<(&str, &str)> = w
        .contract
        .map(|c| criteria(w.recs[c].raw).into_iter().collect())
        .unwrap_or_default();
    for e in w.eligible_of(T::EvidenceRecord) {
        let r = &w.recs[e];
        let crit = (r.f.criterion_id, r.f.criterion_digest);
        let criterion_ok = contract_criteria.contains(&crit);
        let agree = matches!(
            (r.f.status, r.f.criterion_conclusion),
            ("supports", "MET") | ("contradicts", "NOT_MET") | ("unknown", "UNKNOWN")
        );
        if !criterion_ok {
            w.flag(e, C::EvidenceCriterionMismatch);
        }
        if !agree {
            w.flag(e, C::EvidenceStatusConclusionMismatch);
        }
    }
    // Per required claim, then the worst claim: INVALID > CONFLICTING > STALE > MISSING > FRESH.
    let now = w.frame.c().evaluated_at;
    let mut required: Vec<&str> = w.frame.c().required_evidence_ids.clone();
    required.dedup();
    // Evidence heads grouped by claim once: each record is looked at for its
    // own claim only, not once per required claim (resolutions §H.7).
    let mut by_claim: HashMap<&str, Vec<usize>> = HashMap::new();
    for e in 0..w.recs.len() {
        let r = &w.recs[e];
        if r.is(T::EvidenceRecord) && !r.superseded {
            by_claim.entry(claim_of(w, e)).or_default().push(e);
        }
    }
    let mut state = Ev::Fresh;
    let mut codes = BTreeSet::new();
    for claim in required {
        let mut supports = false;
        let mut contradicts = false;
        let mut stale = false;
        let mut blocked = false;
        for &e in by_claim.get(claim).map_or(&[][..], Vec::as_slice) {
            let r = &w.recs[e];
            match r.status {
                RecordStatus::Eligible if fresh_at(w, e, now) => match r.f.status {
                    "supports" => supports = true,
                    "contradicts" => contradicts = true,
                    _ => {}
                },
                RecordStatus::Eligible => stale = true,
                // Future-dated evidence is not fresh (spec §4.4, §7).
                RecordStatus::LaterFact => stale = true,
                // A stale binding or an unresolved supersession keeps the claim
                // non-pass even beside other support (spec §3, §4.4, §7).
                RecordStatus::Ineligible
                    if r.reasons.contains(&C::BindingStale)
                        || r.reasons.contains(&C::SupersessionUnresolved) =>
                {
                    blocked = true
                }
                _ => {}
            }
        }
        let (claim_state, code) = if contradicts {
            (Ev::Conflicting, Some(C::EvidenceConflicting))
        } else if supports && !blocked {
            (Ev::Fresh, None)
        } else if stale || blocked {
            (Ev::Stale, Some(C::EvidenceStale))
        } else {
            (Ev::Missing, Some(C::EvidenceMissing))
        };
        codes.extend(code);
        if rank(claim_state) > rank(state) {
            state = claim_state;
        }
    }
    let sufficient = assurance(w, receipt);
    if super::authority::any_invalid(w, T::EvidenceRecord)
        || super::authority::any_invalid(w, T::AssuranceDecision)
    {
        state = Ev::Invalid;
        codes.clear();
    }
    w.codes.extend(codes);
    EvidenceFacts {
        evidence: state,
        sufficient,
    }
}

fn rank(s: Ev) -> u8 {
    match s {
        Ev::Fresh => 0,
        Ev::Missing => 1,
        Ev::Stale => 2,
        Ev::Conflicting => 3,
        Ev::Invalid => 4,
    }
}

/// Checks every eligible assurance decision and returns the recomputed
/// sufficient set.
fn assurance(w: &mut Work<'_>, receipt: Option<usize>) -> BTreeSet<usize> {
    let c = w.frame.c();
    let (required, now) = (c.required_level, c.evaluated_at);
    let claims: HashSet<&str> = c.required_evidence_ids.iter().copied().collect();
    let executor = receipt.map(|r| w.recs[r].s(&["executor", "id"]));
    let mut sufficient = BTreeSet::new();
    for a in w.eligible_of(T::AssuranceDecision) {
        let r = &w.recs[a];
        let decided = r.t(&["decidedAt"]);
        let required_level = level_of(r.s(&["requiredLevel"]));
        let provided = level_of(r.s(&["providedLevel"])).unwrap_or(0);
        let sufficient_decl = r.s(&["decision"]) == "sufficient";
        let reviewer = r.s(&["reviewerId"]);
        let refs: Vec<Resolved> = r
            .at(&["evidenceRefs"])
            .and_then(Value::as_array)
            .unwrap_or(&[])
            .iter()
            .map(|x| w.resolve(x, T::EvidenceRecord))
            .collect();
        let found: Vec<usize> = refs
            .iter()
            .filter_map(|x| match x {
                Resolved::Found(e) => Some(*e),
                _ => None,
            })
            .collect();
        // Every referenced record present and valid, or the level cannot be recomputed.
        let complete = found.len() == refs.len()
            && found
                .iter()
                .all(|&e| w.recs[e].status != RecordStatus::Invalid);
        // A reference naming several equivocating bodies is not read
        // (resolutions §H.6); the decision is incomplete anyway.
        let after = found.iter().any(|&e| {
            w.readable(e) && (w.recs[e].f.observed > decided || w.recs[e].issued() > decided)
        });
        let mut codes = Vec::new();
        if required_level != Some(required) {
            codes.push(C::AssuranceLevelMismatch);
        }
        if after {
            codes.push(C::AssuranceEvidenceAfterDecision);
        }
        if complete && !after {
            // Structural level: what the cited evidence supported when decided.
            let structural = recompute(w, &claims, &found, reviewer, executor, decided, false);
            if provided > structural.level {
                codes.push(C::AssuranceLevelMismatch);
            }
        }
        if sufficient_decl && provided < required {
            codes.push(C::AssuranceLevelMismatch);
        }
        for code in codes {
            w.flag(a, code);
        }
        if w.eligible(a) && sufficient_decl && complete {
            let current = recompute(w, &claims, &found, reviewer, executor, now, true);
            // Coverage at every level (resolutions §H.1): L0 too needs every
            // required claim cited with fresh, criterion-bound evidence.
            if current.level >= required && current.covered {
                sufficient.insert(a);
            }
        }
    }
    sufficient
}

/// A recomputed assurance level and whether the evidence covers every
/// required claim.
struct Recomputed {
    level: u8,
    /// Every required claim has cited, fresh, criterion-bound evidence whose
    /// conclusion is known (`supports` or `contradicts`): the coverage of
    /// resolutions §H.1, which L0 needs too.
    covered: bool,
}

/// Recomputes an assurance level (resolutions §E, §H.1) from `evidence` at
/// `at`. L1: every required claim has qualifying supporting evidence; L2: two
/// per claim with distinct producers and distinct provenance digests; L3:
/// also a reviewer who is neither a producer of the cited evidence nor the
/// executor. With `current`, evidence must also be eligible now (trusted,
/// bound, not a later fact); otherwise only its own content and timing
/// count. One pass over the cited evidence, grouped by claim: O(n log n)
/// however many claims and references there are (resolutions §H.7).
fn recompute(
    w: &Work<'_>,
    claims: &HashSet<&str>,
    evidence: &[usize],
    reviewer: &str,
    executor: Option<&str>,
    at: Millis,
    current: bool,
) -> Recomputed {
    let mut supporting: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut known: HashSet<&str> = HashSet::new();
    for &e in evidence {
        let r = &w.recs[e];
        let claim = claim_of(w, e);
        if !claims.contains(claim)
            || r.status == RecordStatus::Invalid
            || (current && r.status != RecordStatus::Eligible)
            || !fresh_at(w, e, at)
        {
            continue;
        }
        match r.f.status {
            "supports" => {
                known.insert(claim);
                supporting.entry(claim).or_default().push(e);
            }
            "contradicts" => {
                known.insert(claim);
            }
            _ => {}
        }
    }
    let l1 = supporting.len() == claims.len();
    let l2 = l1 && supporting.values().all(|q| independent_pair(w, q));
    let producers: BTreeSet<&str> = evidence.iter().map(|&e| w.recs[e].f.producer).collect();
    let independent = !producers.contains(reviewer) && executor != Some(reviewer);
    let level = match (l1, l2, independent) {
        (false, _, _) => 0,
        (true, false, _) => 1,
        (true, true, false) => 2,
        (true, true, true) => 3,
    };
    Recomputed {
        level,
        covered: known.len() == claims.len(),
    }
}

/// Whether two records of `q` have distinct producers *and* distinct
/// provenance digests, in one pass. Take the first record `a`: a record
/// differing from `a` in both forms a pair with it. Otherwise every other
/// record shares `a`'s producer or `a`'s provenance, and a pair without `a`
/// must be one record with `a`'s producer but another provenance and one
/// with `a`'s provenance but another producer, which then differ in both.
fn independent_pair(w: &Work<'_>, q: &[usize]) -> bool {
    let keys: Vec<(&str, &str)> = q
        .iter()
        .map(|&e| {
            (
                w.recs[e].f.producer,
                w.recs[e].s(&["provenance", "artifactDigest"]),
            )
        })
        .collect();
    distinct_pair(&keys)
}

/// Whether two `(producer, provenance)` entries differ in both members.
fn distinct_pair(keys: &[(&str, &str)]) -> bool {
    let Some((&(pa, va), rest)) = keys.split_first() else {
        return false;
    };
    let (mut same_producer, mut same_provenance) = (false, false);
    for &(pb, vb) in rest {
        match (pb == pa, vb == va) {
            (false, false) => return true,
            (true, false) => same_producer = true,
            (false, true) => same_provenance = true,
            (true, true) => {}
        }
    }
    same_producer && same_provenance
}

#[cfg(test)]
mod tests {
    use super::distinct_pair;

    #[test]
    fn distinct_pair_agrees_with_every_pair() {
        let names = ["a", "b", "c"];
        // Every list of up to 5 entries over a 3 x 3 alphabet.
        let entries: Vec<(&str, &str)> = names
            .iter()
            .flat_map(|&p| names.iter().map(move |&v| (p, v)))
            .collect();
        let mut lists: Vec<Vec<(&str, &str)>> = vec![Vec::new()];
        for _ in 0..5 {
            let mut next = Vec::new();
            for l in &lists {
                for &e in &entries {
                    let mut m = l.clone();
                    m.push(e);
                    next.push(m);
                }
            }
            for l in &next {
                let brute = l
                    .iter()
                    .enumerate()
                    .any(|(i, a)| l[i + 1..].iter().any(|b| a.0 != b.0 && a.1 != b.1));
                assert_eq!(distinct_pair(l), brute, "{l:?}");
            }
            lists = next;
        }
    }
}
