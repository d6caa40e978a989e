//! Properties of the reducer (issue: order and replay invariance, tamper
//! rejection, later facts, PASS coherence, channel discipline) and the five
//! non-substitution rules of spec §1.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use lychd_helmloop::conformance::Case;
use lychd_helmloop::reduce::axes::{
    Authority, Execution, ObservedOutcome, Promotion, Reconciliation,
};
use lychd_helmloop::reduce::{Disposition, EvaluationInput, ReasonCode, ReductionResult, reduce};
use lychd_helmloop::validate::Channel;
use lychd_helmloop::{Map, Value, parse, record_digest, to_canonical_vec};
use proptest::prelude::*;

use crate::core_suite::{case, load_cases};

fn cases() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| load_cases().1.into_iter().map(|(c, _)| c).collect())
}

fn records(input: &Value) -> Vec<Value> {
    input
        .get("records")
        .and_then(Value::as_array)
        .map(<[Value]>::to_vec)
        .unwrap_or_default()
}

fn with_records(input: &Value, records: Vec<Value>) -> EvaluationInput {
    let mut m = input.as_object().cloned().unwrap_or_default();
    m.insert("records", Value::Array(records));
    EvaluationInput::from_value(Value::Object(m))
}

fn set(v: &mut Value, key: &str, value: Value) {
    if let Value::Object(m) = v {
        m.insert(key, value);
    }
}

fn reseal(r: &mut Value) {
    let d = record_digest(r).expect("record digest").render();
    set(r, "digest", Value::from(d));
}

/// Invariants every result must hold, whatever the input.
fn check_invariants(result: &ReductionResult) {
    assert!(result.reject.iter().all(|c| c.channel() == Channel::Reject));
    assert!(
        result.hold.iter().all(|c| c.channel() == Channel::Hold),
        "terminal-reject code in the hold channel: {:?}",
        result.hold
    );
    match result.disposition {
        Disposition::Pass => {
            assert!(result.reject.is_empty() && result.hold.is_empty());
            let a = result.axes;
            assert_eq!(a.execution, Execution::Completed);
            assert_eq!(a.evidence, lychd_helmloop::reduce::axes::Evidence::Fresh);
            assert!(matches!(
                a.authority,
                Authority::Consumed | Authority::Missing
            ));
            assert_eq!(a.promotion, Promotion::Approved);
            assert!(matches!(
                a.reconciliation,
                Reconciliation::Matched | Reconciliation::NotRequired
            ));
            assert_eq!(a.observed_outcome, ObservedOutcome::Met);
        }
        Disposition::Hold => assert!(result.reject.is_empty() && !result.hold.is_empty()),
        Disposition::Reject => assert!(!result.reject.is_empty()),
    }
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for k in path {
        match cur.get(k) {
            Some(x) => cur = x,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

fn of_type<'a>(input: &'a Value, t: &str) -> Vec<&'a Value> {
    input
        .get("records")
        .and_then(Value::as_array)
        .unwrap_or(&[])
        .iter()
        .filter(|r| s(r, &["recordType"]) == t)
        .collect()
}

/// The five non-substitution rules as checks on any (input, result) pair:
/// a pass state on a guarded axis needs the one record kind that may
/// establish it, never a substitute.
fn check_non_substitution(input: &Value, result: &ReductionResult) {
    let owner = s(input, &["context", "subject", "ownerId"]);
    let consumed_by = |consumer: &Value, action: &str| {
        of_type(input, "AuthorityGrantV1").into_iter().any(|g| {
            s(g, &["action"]) == action
                && s(g, &["lineage", "state"]) == "consumed"
                && s(g, &["issuerId"]) == owner
                && g.get("consumedBy").map(|c| s(c, &["id"])) == Some(s(consumer, &["id"]))
        })
    };
    // completed ≠ PROMOTE, preference ≠ authority
    if result.axes.promotion == Promotion::Approved {
        let ok = of_type(input, "PromotionDecisionV1").into_iter().any(|p| {
            s(p, &["decision"]) == "approved"
                && s(p, &["ownerId"]) == owner
                && consumed_by(p, "promote")
        });
        assert!(
            ok,
            "APPROVED without an approving owner decision consuming a promote grant"
        );
    }
    // intent ≠ action authority, preference ≠ authority
    if result.axes.authority == Authority::Consumed {
        let ok = of_type(input, "ExecutionReceiptV1").into_iter().any(|r| {
            s(r, &["authority", "grantRef", "recordType"]) == "AuthorityGrantV1"
                && consumed_by(r, s(r, &["action"]))
        });
        assert!(
            ok,
            "CONSUMED without a receipt that consumed an owner-issued grant"
        );
    }
    // receipt ≠ business outcome
    if result.axes.observed_outcome == ObservedOutcome::Met {
        let claim = s(input, &["context", "outcomeClaimId"]);
        let ok = of_type(input, "EvidenceRecordV1")
            .into_iter()
            .any(|e| s(e, &["criterionResult", "id"]) == claim && s(e, &["status"]) == "supports");
        assert!(ok, "MET without supporting outcome evidence");
    }
    // instance nesting ≠ ownership: ownership is recorded, not judged
    // (resolutions §H.2), so COMPLETED needs a succeeded receipt and nothing
    // derived from nesting; `instance_nesting_is_not_ownership` checks that
    // the parent instance never changes a result.
    if result.axes.execution == Execution::Completed {
        let ok = of_type(input, "ExecutionReceiptV1")
            .into_iter()
            .any(|r| s(r, &["status"]) == "succeeded");
        assert!(ok, "COMPLETED without a succeeded receipt");
    }
}

#[test]
fn invariants_and_non_substitution_hold_on_every_case() {
    for c in cases() {
        let r = reduce(&c.input);
        check_invariants(&r);
        check_non_substitution(c.input.value(), &r);
    }
}

#[test]
fn completed_is_not_promote() {
    for slug in [
        "promotion-not-requested",
        "promotion-pending",
        "promotion-hold",
        "promotion-not-synthesized-by-preferences",
        "assurance-insufficient-decision",
        "promotion-grant-not-consumed",
    ] {
        let r = reduce(&case(slug).input);
        assert_eq!(r.axes.execution, Execution::Completed, "{slug}");
        assert_eq!(r.axes.reconciliation, Reconciliation::Matched, "{slug}");
        assert_ne!(r.axes.promotion, Promotion::Approved, "{slug}");
        assert_ne!(r.disposition, Disposition::Pass, "{slug}");
    }
    // Everything else, an accepted learning signal included, still cannot
    // stand in for the owner's promotion decision.
    let c = case("learning-accepted-authorized");
    assert_eq!(reduce(&c.input).disposition, Disposition::Pass);
    let kept: Vec<Value> = records(c.input.value())
        .into_iter()
        .filter(|r| {
            s(r, &["recordType"]) != "PromotionDecisionV1"
                && !(s(r, &["action"]) == "promote" && s(r, &["lineage", "state"]) == "consumed")
        })
        .collect();
    let r = reduce(&with_records(c.input.value(), kept));
    assert_eq!(r.axes.promotion, Promotion::Pending);
    assert_eq!(r.disposition, Disposition::Hold);
}

#[test]
fn intent_is_not_action_authority() {
    for slug in [
        "authority-unreserved-use",
        "authority-required-without-grant",
        "authority-not-consumed",
        "authority-promote-grant-for-deploy",
        "authority-wrong-issuer",
        "execution-not-started",
        "authority-orphan-without-use",
    ] {
        let r = reduce(&case(slug).input);
        assert_ne!(r.axes.authority, Authority::Consumed, "{slug}");
        assert_ne!(r.disposition, Disposition::Pass, "{slug}");
    }
    // An available grant (owner intent) alone, with the receipt's use of the
    // reserved head removed, never authorizes the attempt.
    let c = case("pass-baseline");
    let kept: Vec<Value> = records(c.input.value())
        .into_iter()
        .filter(|r| {
            !(s(r, &["action"]) == "deploy.apply" && s(r, &["lineage", "state"]) != "available")
        })
        .collect();
    let r = reduce(&with_records(c.input.value(), kept));
    assert_ne!(r.axes.authority, Authority::Consumed);
    assert_ne!(r.disposition, Disposition::Pass);
}

#[test]
fn receipt_is_not_business_outcome() {
    let c = case("receipt-is-not-outcome");
    let r = reduce(&c.input);
    assert_eq!(r.axes.execution, Execution::Completed);
    assert_eq!(r.axes.reconciliation, Reconciliation::Matched);
    assert_eq!(r.axes.promotion, Promotion::Approved);
    assert_eq!(r.axes.observed_outcome, ObservedOutcome::NotObserved);
    // A learning signal claiming the outcome MET is not outcome evidence.
    let learning = records(case("pass-baseline").input.value())
        .into_iter()
        .find(|r| s(r, &["recordType"]) == "LearningSignalV1")
        .expect("baseline learning signal");
    assert_eq!(s(&learning, &["outcomeStatus"]), "MET");
    let mut rs = records(c.input.value());
    rs.push(learning);
    let r = reduce(&with_records(c.input.value(), rs));
    assert_eq!(r.axes.observed_outcome, ObservedOutcome::NotObserved);
    assert_ne!(r.disposition, Disposition::Pass);
}

#[test]
fn instance_nesting_is_not_ownership() {
    // Ownership is recorded, not judged (resolutions §H.2): a resource of
    // another team passes, nested or not.
    let r = reduce(&case("execution-resource-owner-via-nesting").input);
    assert_eq!(r.axes.execution, Execution::Completed);
    assert_eq!(r.disposition, Disposition::Pass);
    assert_eq!(
        reduce(&case("execution-parent-instance-irrelevant").input).disposition,
        Disposition::Pass
    );
    // Neither the owner nor the parent instance changes any verdict: the
    // same disposition, axes and codes for every combination.
    let base = case("pass-baseline");
    let mut verdicts = Vec::new();
    for (owner, parent, pass) in [
        ("owner-alice", Some("inst-team-platform"), true),
        ("owner-alice", None, true),
        ("team-platform", Some("inst-owner-alice-root"), true),
        ("team-platform", None, true),
    ] {
        let mut rs = records(base.input.value());
        let i = rs
            .iter()
            .position(|r| s(r, &["recordType"]) == "ExecutionReceiptV1")
            .expect("receipt");
        let mut ro = Map::new();
        ro.insert("ownerId", owner.into());
        ro.insert("instanceId", "inst-payments-9".into());
        if let Some(p) = parent {
            ro.insert("parentInstanceId", p.into());
        }
        set(&mut rs[i], "resourceOwnership", Value::Object(ro));
        reseal(&mut rs[i]);
        // The consumed grant and the reconciliation bind the receipt's digest:
        // rebind them to the resealed receipt.
        let receipt = rs[i].clone();
        let exact = |r: &Value| {
            let mut m = Map::new();
            for k in ["recordType", "id", "digest"] {
                m.insert(k, r.get(k).cloned().unwrap_or_default());
            }
            Value::Object(m)
        };
        for r in rs.iter_mut() {
            let key = match s(r, &["recordType"]) {
                "AuthorityGrantV1"
                    if r.get("consumedBy").map(|c| s(c, &["id"])) == Some("receipt-exec-1") =>
                {
                    "consumedBy"
                }
                "ReconciliationRecordV1" => "receiptRef",
                _ => continue,
            };
            set(r, key, exact(&receipt));
            reseal(r);
        }
        let result = reduce(&with_records(base.input.value(), rs));
        assert_eq!(
            result.disposition == Disposition::Pass,
            pass,
            "{owner} {parent:?}: {result:?}"
        );
        check_non_substitution(base.input.value(), &result);
        verdicts.push((result.disposition, result.axes, result.reject, result.hold));
    }
    assert!(verdicts.windows(2).all(|w| w[0] == w[1]), "{verdicts:?}");
}

#[test]
fn preference_is_not_authority() {
    let r = reduce(&case("promotion-not-synthesized-by-preferences").input);
    assert_eq!(r.axes.promotion, Promotion::Pending);
    // A grant issued by anyone but the owner is a defective record, used or
    // not (resolutions §H.4).
    let r = reduce(&case("authority-wrong-issuer").input);
    assert_eq!(r.axes.authority, Authority::Invalid);
    assert!(r.reject.contains(&ReasonCode::AuthorityWrongBinding));
    let r = reduce(&case("authority-unrelated-defective-grant").input);
    assert_eq!(r.axes.authority, Authority::Invalid);
    let r = reduce(&case("promotion-owner-mismatch").input);
    assert_eq!(r.axes.promotion, Promotion::Invalid);
    let r = reduce(&case("learning-accepted-wrong-approver").input);
    assert_eq!(r.disposition, Disposition::Reject);
}

fn usable(c: &Case) -> bool {
    c.input.value().get("protocolVersion") == Some(&Value::from("0.1"))
        && !records(c.input.value()).is_empty()
}

fn case_index() -> impl Strategy<Value = usize> {
    0..cases().len()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn permutation_and_replay_never_change_the_result(
        idx in case_index(),
        seed in proptest::collection::vec(any::<u16>(), 0..40),
        dups in proptest::collection::vec(any::<u16>(), 0..6),
    ) {
        let c = &cases()[idx];
        let original = reduce(&c.input);
        let mut rs = records(c.input.value());
        prop_assume!(!rs.is_empty());
        for (i, k) in seed.iter().enumerate() {
            let n = rs.len();
            rs.swap(i % n, usize::from(*k) % n);
        }
        for d in &dups {
            let pick = rs[usize::from(*d) % rs.len()].clone();
            rs.push(pick);
        }
        let shuffled = reduce(&with_records(c.input.value(), rs));
        prop_assert_eq!(&shuffled, &original, "{}", c.case_id);
        check_invariants(&shuffled);
    }

    #[test]
    fn changing_a_byte_of_a_sealed_record_rejects(
        idx in case_index(),
        which in any::<u16>(),
        pos in any::<u32>(),
        byte in any::<u8>(),
    ) {
        let c = &cases()[idx];
        prop_assume!(usable(c));
        let mut rs = records(c.input.value());
        let i = usize::from(which) % rs.len();
        prop_assume!(s(&rs[i], &["schemaVersion"]) == "0.1");
        let mut bytes = to_canonical_vec(&rs[i]).expect("canonical");
        let at = pos as usize % bytes.len();
        // Another version string is HOLD PROTOCOL_VERSION_UNSUPPORTED by design
        // (resolutions §B): the value of `schemaVersion` is excluded.
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let version = text.find("\"schemaVersion\":\"0.1\"").map(|p| p + 16..p + 21);
        prop_assume!(version.is_none_or(|v| !v.contains(&at)));
        prop_assume!(bytes[at] != byte);
        bytes[at] = byte;
        match parse(&bytes) {
            // Refused at the strict-parse boundary: never evaluated.
            Err(_) => {}
            Ok(mutated) => {
                rs[i] = mutated;
                let r = reduce(&with_records(c.input.value(), rs));
                prop_assert_eq!(r.disposition, Disposition::Reject, "{} record {} byte {}", c.case_id, i, at);
                check_invariants(&r);
            }
        }
    }

    #[test]
    fn later_records_never_turn_a_non_pass_into_pass(
        idx in case_index(),
        which in any::<u16>(),
        extra_ms in 1_i64..400_000_000_000,
    ) {
        let c = &cases()[idx];
        let before = reduce(&c.input);
        let mut rs = records(c.input.value());
        prop_assume!(!rs.is_empty());
        let mut later = rs[usize::from(which) % rs.len()].clone();
        let at = lychd_helmloop::reduce::time::parse_timestamp(s(c.input.value(), &["context", "evaluatedAt"]))
            .unwrap_or(0)
            + extra_ms;
        let stamp = Value::from(format_ms(at));
        for k in ["issuedAt", "startedAt", "finishedAt", "observedAt", "decidedAt"] {
            if later.get(k).is_some() {
                set(&mut later, k, stamp.clone());
            }
        }
        if let Some(Value::Object(q)) = later.get("query").cloned() {
            let mut q = q;
            q.insert("observedAt", stamp.clone());
            set(&mut later, "query", Value::Object(q));
        }
        let id = format!("later-{}", s(&later, &["id"]));
        set(&mut later, "id", Value::from(id.chars().take(120).collect::<String>()));
        reseal(&mut later);
        rs.push(later);
        let after = reduce(&with_records(c.input.value(), rs));
        check_invariants(&after);
        if before.disposition != Disposition::Pass {
            prop_assert_ne!(after.disposition, Disposition::Pass, "{}", c.case_id);
        }
    }

    #[test]
    fn no_mixture_of_records_crosses_a_non_substitution_boundary(
        base in case_index(),
        donor in case_index(),
        drop in proptest::collection::vec(any::<bool>(), 24),
        take in proptest::collection::vec(any::<u16>(), 0..4),
    ) {
        let b = &cases()[base];
        let d = &cases()[donor];
        let mut rs: Vec<Value> = records(b.input.value())
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !drop[i % drop.len()])
            .map(|(_, r)| r)
            .collect();
        let donor_records = records(d.input.value());
        if !donor_records.is_empty() {
            for t in take {
                rs.push(donor_records[usize::from(t) % donor_records.len()].clone());
            }
        }
        let input = with_records(b.input.value(), rs);
        let r = reduce(&input);
        check_invariants(&r);
        check_non_substitution(input.value(), &r);
    }
}

/// Renders milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.sssZ`.
fn format_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    // civil_from_days (H. Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

#[test]
fn format_ms_round_trips_through_the_reducer_timestamp_parser() {
    for ms in [
        0,
        1,
        1_737_540_000_000,
        1_709_164_800_123,
        4_102_444_799_999,
    ] {
        let s = format_ms(ms);
        assert_eq!(
            lychd_helmloop::reduce::time::parse_timestamp(&s),
            Some(ms),
            "{s}"
        );
    }
}

#[test]
fn input_digest_commits_every_distinct_body_and_folds_replays() {
    for c in cases() {
        let r = reduce(&c.input);
        assert_eq!(
            r.input_digest,
            lychd_helmloop::reduce::result::input_digest(c.input.value()),
            "{}",
            c.case_id
        );
    }
    let base = case("pass-baseline");
    let original = reduce(&base.input).input_digest;
    let mut rs = records(base.input.value());
    rs.push(rs[0].clone());
    assert_eq!(
        reduce(&with_records(base.input.value(), rs.clone())).input_digest,
        original
    );
    // A hidden conflicting body (same identity and digest) changes the commitment.
    let mut hidden = rs[0].clone();
    set(&mut hidden, "desiredOutcome", Value::from("something else"));
    rs.push(hidden);
    let r = reduce(&with_records(base.input.value(), rs));
    assert_ne!(r.input_digest, original);
    assert_eq!(r.disposition, Disposition::Reject);
    // A later fact stays in the commitment even though it is not evaluated.
    let later = reduce(&case("later-fact-contradiction-ignored").input);
    assert_eq!(later.disposition, Disposition::Pass);
    assert_ne!(later.input_digest, original);
    assert!(
        later
            .record_results
            .iter()
            .any(|r| r.status == lychd_helmloop::reduce::RecordStatus::LaterFact)
    );
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5_i64..5).prop_map(Value::Int),
        Just(Value::from("")),
        Just(Value::from("2025-02-30T00:00:00.000Z")),
        Just(Value::from("sha256:00")),
        Just(Value::Array(vec![])),
        Just(Value::Object(Map::new())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Library code never panics on input: any member of any record, or of
    /// the context, replaced by a hostile value still yields a coherent result.
    #[test]
    fn hostile_members_never_panic(
        idx in case_index(),
        which in any::<u16>(),
        member in any::<u16>(),
        value in scalar(),
        in_context in any::<bool>(),
    ) {
        let c = &cases()[idx];
        let mut doc = c.input.value().clone();
        let Value::Object(top) = &mut doc else { return Ok(()) };
        if in_context {
            if let Some(Value::Object(ctx)) = top.get_mut("context") {
                let keys: Vec<String> = ctx.keys().map(str::to_owned).collect();
                if !keys.is_empty() {
                    ctx.insert(keys[usize::from(member) % keys.len()].clone(), value);
                }
            }
        } else if let Some(Value::Array(rs)) = top.get_mut("records")
            && !rs.is_empty()
        {
            let n = rs.len();
            let r = &mut rs[usize::from(which) % n];
            if let Value::Object(m) = r {
                let keys: Vec<String> = m.keys().map(str::to_owned).collect();
                m.insert(keys[usize::from(member) % keys.len()].clone(), value);
            } else {
                *r = value;
            }
        }
        let r = reduce(&EvaluationInput::from_value(doc));
        check_invariants(&r);
    }
}

/// Resolutions §H.6 and §H.7: a long supersession chain whose head names an
/// absent predecessor is unavailable link by link down to its end, and the
/// result (record results included) is the same in any input order.
#[test]
fn a_long_chain_with_an_unresolved_head_is_unavailable_in_any_order() {
    let base = case("pass-baseline");
    let mut rs = records(base.input.value());
    let template = rs
        .iter()
        .find(|r| s(r, &["id"]) == "evidence-latency-1")
        .cloned()
        .expect("latency evidence");
    let exact = |r: &Value| {
        let mut m = Map::new();
        for k in ["recordType", "id", "digest"] {
            m.insert(k, r.get(k).cloned().unwrap_or_default());
        }
        m
    };
    let mut prev = exact(&template);
    prev.insert("id", "evidence-latency-absent".into());
    let mut chain = Vec::new();
    for k in 0..1_500 {
        let mut r = template.clone();
        set(&mut r, "id", Value::from(format!("evidence-chain-{k:05}")));
        let mut sup = prev.clone();
        sup.insert("reason", "supersede".into());
        set(&mut r, "supersedes", Value::Array(vec![Value::Object(sup)]));
        reseal(&mut r);
        prev = exact(&r);
        chain.push(r);
    }
    rs.extend(chain.iter().cloned());
    let forward = reduce(&with_records(base.input.value(), rs.clone()));
    rs.reverse();
    let backward = reduce(&with_records(base.input.value(), rs));
    assert_eq!(forward, backward);
    let statuses: Vec<&str> = forward
        .record_results
        .iter()
        .filter(|r| {
            r.id.as_deref()
                .is_some_and(|i| i.starts_with("evidence-chain-"))
        })
        .map(|r| r.status.as_str())
        .collect();
    assert_eq!(statuses.len(), chain.len());
    assert!(
        statuses.iter().all(|&st| st == "INELIGIBLE"),
        "{statuses:?}"
    );
    assert!(forward.hold.contains(&ReasonCode::SupersessionUnresolved));
}

/// Resolutions §H.8: a record nested 128 deep is accepted on its own, inside
/// an evaluation input (parse, reduce, canonical bytes) and through the CLI
/// digest of the record alike.
#[test]
fn a_record_nested_to_the_limit_is_accepted_inside_an_input() {
    let c = case("record-nesting-counted-per-record");
    let input = c.input.clone();
    let bytes = input.canonical_bytes().expect("canonical per record");
    assert!(
        to_canonical_vec(input.value()).is_err(),
        "the whole input is deeper than 128"
    );
    let reparsed = EvaluationInput::parse(&bytes).expect("parses at the boundary");
    assert_eq!(reparsed, input);
    assert_eq!(reduce(&reparsed).disposition, Disposition::Pass);
    let deep = records(input.value())
        .into_iter()
        .find(|r| s(r, &["recordType"]) == "LearningSignalV1")
        .expect("learning signal");
    let alone = to_canonical_vec(&deep).expect("the record alone is within the limit");
    assert!(parse(&alone).is_ok());
}

/// Resolutions §H.6: when one exact reference names several equivocating
/// bodies, which body has the smaller digest (the order the reducer visits
/// them in) changes nothing about the successor that references them.
#[test]
fn an_equivocated_predecessor_is_judged_the_same_whichever_body_sorts_first() {
    let base = case("pass-baseline");
    let rs = records(base.input.value());
    let p = rs
        .iter()
        .find(|r| s(r, &["id"]) == "evidence-latency-1")
        .cloned()
        .expect("latency evidence");
    let mut successor = p.clone();
    set(&mut successor, "id", "evidence-latency-1b".into());
    let mut sup = Map::new();
    for k in ["recordType", "id", "digest"] {
        sup.insert(k, p.get(k).cloned().unwrap_or_default());
    }
    sup.insert("reason", "supersede".into());
    set(
        &mut successor,
        "supersedes",
        Value::Array(vec![Value::Object(sup)]),
    );
    reseal(&mut successor);
    let mut orders = BTreeSet::new();
    let mut verdicts = Vec::new();
    for k in 0..32 {
        // Same recordType, id and declared digest; another subject and locator.
        let mut twin = p.clone();
        let mut subject = twin
            .get("subject")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        subject.insert("id", "svc-ledger".into());
        set(&mut twin, "subject", Value::Object(subject));
        let mut source = twin
            .get("source")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        source.insert(
            "locator",
            Value::from(format!("https://observability.example/twin-{k}")),
        );
        set(&mut twin, "source", Value::Object(source));
        let body = |v: &Value| lychd_helmloop::binding_digest(v).expect("digest");
        orders.insert(body(&twin) < body(&p));
        let mut all = rs.clone();
        all.push(twin);
        all.push(successor.clone());
        let r = reduce(&with_records(base.input.value(), all));
        let succ: Vec<_> = r
            .record_results
            .iter()
            .filter(|x| x.id.as_deref() == Some("evidence-latency-1b"))
            .map(|x| (x.status, x.reasons.clone()))
            .collect();
        verdicts.push((r.disposition, r.axes, r.reject, r.hold, succ));
    }
    assert_eq!(orders.len(), 2, "both orders were tried");
    assert!(verdicts.windows(2).all(|w| w[0] == w[1]), "{verdicts:?}");
}
