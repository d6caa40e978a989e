//! The core conformance suite over gRPC: `Reduce` answers the exact bytes of the in-process
//! reducer (what `helmloop reduce` prints, without its newline) on every case; appending a
//! case's records and reducing them as stored gives the same bytes as reducing them inline on
//! every case the store can hold; `RunConformance` runs the embedded suite.

use std::collections::BTreeMap;

use lychd_helmloop::Value;
use lychd_helmloop::reduce;
use lychd_proto::helmloop::v1 as pb;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn every_core_case_through_reduce_is_byte_identical_to_the_in_process_reducer() {
    let mut s = stack().await;
    let cases = core_cases();
    assert!(cases.len() >= 170, "{} cases", cases.len());
    for case in &cases {
        let expected = reduce(&case.input);
        let got = crate::common::reduce(&mut s.client, input_bytes(case)).await;
        assert_eq!(
            String::from_utf8(got.result).expect("utf8"),
            expected.to_json(),
            "{}",
            case.case_id
        );
        let summary = got.summary.expect("summary");
        let axes = summary.axes.expect("axes");
        let e = &case.expected;
        assert_eq!(
            summary.disposition,
            match e.disposition.as_str() {
                "PASS" => pb::Disposition::Pass,
                "HOLD" => pb::Disposition::Hold,
                _ => pb::Disposition::Reject,
            } as i32,
            "{}",
            case.case_id
        );
        let got_axes = [
            axes.execution,
            axes.evidence,
            axes.authority,
            axes.promotion,
            axes.reconciliation,
            axes.observed_outcome,
        ];
        for ((axis, want), got) in e.axes.iter().zip(&got_axes) {
            assert_eq!(want, got, "{} {axis}", case.case_id);
        }
        let set = |v: &[String]| v.iter().cloned().collect::<std::collections::BTreeSet<_>>();
        assert_eq!(set(&summary.reject_codes), e.reject, "{}", case.case_id);
        assert_eq!(set(&summary.hold_codes), e.hold, "{}", case.case_id);
        assert_eq!(summary.input_digest, expected.input_digest.render());
    }
}

/// Why a case cannot be replayed through the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Skipped {
    /// A record the store refuses (tampered, malformed, other version): refused as input.
    Refused,
    /// The context names no subject id and revision id to select by.
    Unbound,
    /// A record bound to another subject or revision: not part of this subject's stored set.
    OtherBinding,
    /// The input is not in protocol version 0.1; a stored reduction always is.
    OtherVersion,
}

fn binding(v: Option<&Value>) -> Option<(String, String)> {
    let id = |k: &str| {
        v?.get(k)?
            .get("id")?
            .as_str()
            .filter(|s| lychd_helmloop_service::domain::record::is_identifier(s))
            .map(str::to_owned)
    };
    Some((id("subject")?, id("revision")?))
}

#[tokio::test(flavor = "multi_thread")]
async fn append_then_reduce_stored_equals_inline_reduce_on_every_storable_core_case() {
    let mut s = stack().await;
    let mut compared = 0;
    let mut skipped: BTreeMap<Skipped, Vec<String>> = BTreeMap::new();
    for case in core_cases() {
        s.wipe().await;
        let input = case.input.value();
        let inline = crate::common::reduce(&mut s.client, input_bytes(&case)).await;
        if input.get("protocolVersion").and_then(Value::as_str) != Some("0.1") {
            skipped
                .entry(Skipped::OtherVersion)
                .or_default()
                .push(case.case_id);
            continue;
        }
        let context = input.get("context");
        let Some((subject, revision)) = binding(context) else {
            skipped
                .entry(Skipped::Unbound)
                .or_default()
                .push(case.case_id);
            continue;
        };
        let records = input
            .get("records")
            .and_then(Value::as_array)
            .unwrap_or(&[]);
        let elsewhere = records
            .iter()
            .any(|r| binding(Some(r)) != Some((subject.clone(), revision.clone())));
        match append(&mut s.client, records_of(input)).await {
            Ok(results) => assert_eq!(results.len(), records.len()),
            Err(status) => {
                assert_eq!(
                    status.code(),
                    tonic::Code::InvalidArgument,
                    "{}",
                    case.case_id
                );
                assert_ne!(
                    inline.summary.expect("summary").disposition,
                    pb::Disposition::Pass as i32,
                    "{}: a refused record cannot be part of a passing input",
                    case.case_id
                );
                skipped
                    .entry(Skipped::Refused)
                    .or_default()
                    .push(case.case_id);
                continue;
            }
        }
        if elsewhere {
            skipped
                .entry(Skipped::OtherBinding)
                .or_default()
                .push(case.case_id);
            continue;
        }
        let stored = s
            .client
            .reduce_stored(pb::ReduceStoredRequest {
                context: bytes(context.expect("bound context")),
                return_input: true,
            })
            .await
            .expect("reduce stored")
            .into_inner();
        assert_eq!(
            String::from_utf8_lossy(&stored.result),
            String::from_utf8_lossy(&inline.result),
            "{}",
            case.case_id
        );
        assert!(stored.stored);
        // The stored evaluation is the same result, kept under its input digest.
        let digest = stored.summary.expect("summary").input_digest;
        let kept = s
            .client
            .get_evaluation(pb::GetEvaluationRequest {
                input_digest: digest,
            })
            .await
            .expect("get evaluation")
            .into_inner();
        assert_eq!(kept.result, stored.result, "{}", case.case_id);
        assert_eq!(kept.evaluated_by, s.spawned.tester_id);
        compared += 1;
    }
    eprintln!("compared {compared} cases; skipped {skipped:?}");
    let count = |k| skipped.get(&k).map_or(0, Vec::len);
    assert_eq!(count(Skipped::Unbound), 1, "{skipped:?}");
    assert_eq!(count(Skipped::OtherBinding), 4, "{skipped:?}");
    assert_eq!(count(Skipped::OtherVersion), 1, "{skipped:?}");
    assert!(compared >= 150, "compared {compared}: {skipped:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn run_conformance_core_and_both_adapters_pass_and_an_unknown_adapter_is_refused() {
    let mut s = stack().await;
    let run = s
        .client
        .run_conformance(pb::RunConformanceRequest {
            adapter: "core".into(),
        })
        .await
        .expect("conformance")
        .into_inner();
    assert!(run.passed, "{} of {} failed", run.failed, run.total);
    assert!(run.total >= 170);
    let report = lychd_helmloop::parse(&run.report).expect("report is JSON");
    assert_eq!(
        report.get("evidenceClass").and_then(Value::as_str),
        Some("fixture")
    );
    assert_eq!(
        report.get("fixtureSetDigest").and_then(Value::as_str),
        Some(run.fixture_set_digest.as_str())
    );
    // Both adapter suites: the shared selection, reduced through the host path.
    for adapter in ["standalone", "better-workflows"] {
        let run = s
            .client
            .run_conformance(pb::RunConformanceRequest {
                adapter: adapter.into(),
            })
            .await
            .expect("adapter conformance")
            .into_inner();
        assert!(
            run.passed,
            "{adapter}: {} of {} failed",
            run.failed, run.total
        );
        let report = lychd_helmloop::parse(&run.report).expect("report is JSON");
        assert_eq!(report.get("adapter").and_then(Value::as_str), Some(adapter));
        assert_eq!(
            report.get("evidenceClass").and_then(Value::as_str),
            Some("fixture")
        );
        assert_eq!(
            report.get("fixtureSetDigest").and_then(Value::as_str),
            Some(run.fixture_set_digest.as_str())
        );
    }
    let refused = s
        .client
        .run_conformance(pb::RunConformanceRequest {
            adapter: "nonsense".into(),
        })
        .await
        .expect_err("unknown adapter");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert_eq!(reason(&refused), "ADAPTER_UNKNOWN");
    assert_eq!(violations(&refused), vec!["adapter".to_owned()]);
}
