//! The append-only store: replay is idempotent, a second body under one identity is kept and
//! makes stored reductions reject, malformed JSON is refused with its C14N code and nothing is
//! stored, records are read back by identity and listed by subject, revision and type.

use lychd_helmloop::Value;
use lychd_proto::helmloop::v1 as pb;

use crate::common::*;

fn context_of(case: &lychd_helmloop::conformance::Case) -> Vec<u8> {
    bytes(case.input.value().get("context").expect("context"))
}

async fn reduce_stored(s: &mut Stack, context: Vec<u8>) -> pb::ReduceResponse {
    s.client
        .reduce_stored(pb::ReduceStoredRequest {
            context,
            return_input: false,
        })
        .await
        .expect("reduce stored")
        .into_inner()
}

async fn count(s: &mut Stack) -> usize {
    s.client
        .list_records(pb::ListRecordsRequest {
            page: Some(lychd_proto::common::v1::PageRequest {
                page_size: 1000,
                page_token: String::new(),
            }),
            omit_bodies: true,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .records
        .len()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replayed_append_is_idempotent() {
    let mut s = stack().await;
    let base = baseline();
    let records = records_of(base.input.value());
    let first = append(&mut s.client, records.clone())
        .await
        .expect("append");
    assert_eq!(first.len(), 14);
    assert!(
        first
            .iter()
            .all(|r| r.outcome == pb::AppendOutcome::Stored as i32)
    );
    let again = append(&mut s.client, records.clone())
        .await
        .expect("replay");
    assert!(
        again
            .iter()
            .all(|r| r.outcome == pb::AppendOutcome::Replayed as i32)
    );
    for (a, b) in first.iter().zip(&again) {
        assert_eq!((&a.body_digest, &a.digest), (&b.body_digest, &b.digest));
    }
    assert_eq!(count(&mut s).await, 14, "a replay stores nothing");
    // A record that is not canonical on the wire is stored canonically: same body, replayed.
    let before = s
        .client
        .get_record(pb::GetRecordRequest {
            record_type: "EvidenceRecordV1".into(),
            id: "evidence-latency-1".into(),
        })
        .await
        .expect("get")
        .into_inner()
        .records;
    assert_eq!(before.len(), 1);
    assert!(!before[0].equivocation);
    assert_eq!(before[0].submitted_by, s.spawned.tester_id);
    let mut pretty = b"{ \n  ".to_vec();
    pretty.extend_from_slice(&before[0].body[1..]);
    assert_ne!(pretty, before[0].body);
    let replay = append(&mut s.client, vec![pretty]).await.expect("append");
    assert_eq!(replay[0].outcome, pb::AppendOutcome::Replayed as i32);
    // ReduceStored over the replayed store still passes.
    let stored = reduce_stored(&mut s, context_of(&base)).await;
    assert_eq!(
        stored.summary.expect("summary").disposition,
        pb::Disposition::Pass as i32
    );
    assert_eq!(stored.records, 14);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_equivocating_append_is_stored_and_then_rejects() {
    let mut s = stack().await;
    let base = baseline();
    let input = base.input.value();
    append(&mut s.client, records_of(input))
        .await
        .expect("append");
    let evidence = input
        .get("records")
        .and_then(Value::as_array)
        .expect("records")
        .iter()
        .find(|r| r.get("recordType").and_then(Value::as_str) == Some("EvidenceRecordV1"))
        .expect("evidence")
        .clone();
    let id = evidence
        .get("id")
        .and_then(Value::as_str)
        .expect("id")
        .to_owned();
    let second = reseal(&evidence, |m| {
        m.insert("claim", "a different claim under the same identity".into());
    });
    let results = append(&mut s.client, vec![bytes(&second)])
        .await
        .expect("append");
    assert_eq!(results[0].outcome, pb::AppendOutcome::Equivocation as i32);
    assert_eq!(results[0].id, id);
    // Both bodies are kept; neither was overwritten.
    let kept = s
        .client
        .get_record(pb::GetRecordRequest {
            record_type: "EvidenceRecordV1".into(),
            id: id.clone(),
        })
        .await
        .expect("get")
        .into_inner()
        .records;
    assert_eq!(kept.len(), 2);
    assert!(kept.iter().all(|r| r.equivocation));
    assert_eq!(kept[0].body, bytes(&evidence));
    assert_eq!(kept[1].body, bytes(&second));
    assert_eq!(count(&mut s).await, 15);
    // A reduction over the stored records now rejects with RECORD_EQUIVOCATION.
    let stored = reduce_stored(&mut s, context_of(&base)).await;
    let summary = stored.summary.expect("summary");
    assert_eq!(summary.disposition, pb::Disposition::Reject as i32);
    assert!(
        summary
            .reject_codes
            .contains(&"RECORD_EQUIVOCATION".to_owned()),
        "{:?}",
        summary.reject_codes
    );
    assert_eq!(stored.records, 15);
    // Appending the second body again is a replay, still equivocation on read.
    let again = append(&mut s.client, vec![bytes(&second)])
        .await
        .expect("append");
    assert_eq!(again[0].outcome, pb::AppendOutcome::Replayed as i32);
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_json_is_refused_with_its_c14n_code_and_nothing_is_stored() {
    let mut s = stack().await;
    let good = records_of(baseline().input.value());
    for (bad, code) in [
        (&b"{\"a\":1,\"a\":2}"[..], "C14N_DUPLICATE_KEY"),
        (b"{\"a\":1} x", "C14N_TRAILING_INPUT"),
        (b"{\"a\":1.5}", "C14N_NON_INTEGER_NUMBER"),
        (b"\xef\xbb\xbf{}", "C14N_BOM"),
        (b"{\"a\":-0}", "C14N_NEGATIVE_ZERO"),
    ] {
        let mut records = good.clone();
        records.insert(3, bad.to_vec());
        let refused = append(&mut s.client, records).await.expect_err("refused");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument);
        assert_eq!(reason(&refused), code);
        assert_eq!(violations(&refused), vec!["records[3]".to_owned()]);
        assert!(!refused.message().contains("\"a\""), "no payload echoed");

        let digest = s
            .client
            .digest(pb::DigestRequest {
                document: bad.to_vec(),
                domain: pb::DigestDomain::Binding as i32,
            })
            .await
            .expect_err("refused");
        assert_eq!(reason(&digest), code);
        assert_eq!(violations(&digest), vec!["document".to_owned()]);

        let reduce = s
            .client
            .reduce(pb::ReduceRequest {
                input: bad.to_vec().into(),
                ..Default::default()
            })
            .await
            .expect_err("refused");
        assert_eq!(reason(&reduce), code);
        assert_eq!(violations(&reduce), vec!["input".to_owned()]);
    }
    // Tampered and schema-invalid records are refused with their codes, each named.
    let record = lychd_helmloop::parse(&good[0]).expect("json");
    let Value::Object(mut m) = record.clone() else {
        panic!()
    };
    m.insert("id", "tampered-after-sealing".into());
    let tampered = bytes(&Value::Object(m));
    let unknown_member = bytes(&reseal(&record, |m| {
        m.insert("extra", true.into());
    }));
    let refused = append(
        &mut s.client,
        vec![good[1].clone(), tampered, unknown_member],
    )
    .await
    .expect_err("refused");
    assert_eq!(reason(&refused), "RECORD_DIGEST_MISMATCH");
    assert_eq!(
        violations(&refused),
        vec!["records[1]".to_owned(), "records[2]".to_owned()]
    );
    assert_eq!(count(&mut s).await, 0, "a refused request stores nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn digest_and_validate_answer_what_the_library_computes() {
    let mut s = stack().await;
    let record = std::fs::read(root().join("fixtures/helmloop/records/outcome-contract-v1.json"))
        .expect("fixture");
    let d = s
        .client
        .digest(pb::DigestRequest {
            document: record.clone(),
            domain: pb::DigestDomain::Unspecified as i32,
        })
        .await
        .expect("digest")
        .into_inner();
    let value = lychd_helmloop::parse(&record).expect("json");
    assert_eq!(
        d.digest,
        lychd_helmloop::record_digest(&value)
            .expect("digest")
            .render()
    );
    assert_eq!(
        Some(d.digest.as_str()),
        value.get("digest").and_then(Value::as_str)
    );
    let v = s
        .client
        .validate(pb::ValidateRequest { document: record })
        .await
        .expect("validate")
        .into_inner();
    assert!(v.valid);
    let bad = s
        .client
        .validate(pb::ValidateRequest {
            document: b"{\"a\":1,\"a\":2}".to_vec(),
        })
        .await
        .expect("validate answers in band")
        .into_inner();
    assert!(!bad.valid);
    assert_eq!(bad.first_code, "C14N_DUPLICATE_KEY");
}

#[tokio::test(flavor = "multi_thread")]
async fn records_are_listed_by_subject_revision_and_type_in_keyset_pages() {
    let mut s = stack().await;
    append(&mut s.client, records_of(baseline().input.value()))
        .await
        .expect("append");
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = s
            .client
            .list_records(pb::ListRecordsRequest {
                subject_id: "svc-payments".into(),
                revision_id: "rev-42".into(),
                page: Some(lychd_proto::common::v1::PageRequest {
                    page_size: 4,
                    page_token: token.clone(),
                }),
                ..Default::default()
            })
            .await
            .expect("list")
            .into_inner();
        assert!(page.records.len() <= 4);
        seen.extend(page.records);
        token = page.page.expect("page").next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen.len(), 14);
    assert!(
        seen.iter()
            .all(|r| !r.body.is_empty() && r.issued_at.is_some())
    );
    let grants = s
        .client
        .list_records(pb::ListRecordsRequest {
            record_type: "AuthorityGrantV1".into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .records;
    assert!(!grants.is_empty());
    assert!(grants.iter().all(|r| r.record_type == "AuthorityGrantV1"));
    let none = s
        .client
        .list_records(pb::ListRecordsRequest {
            subject_id: "svc-other".into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .records;
    assert!(none.is_empty());
    let bad = s
        .client
        .list_records(pb::ListRecordsRequest {
            record_type: "NoSuchV1".into(),
            page: Some(lychd_proto::common::v1::PageRequest {
                page_size: 1,
                page_token: "garbage".into(),
            }),
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(
        violations(&bad),
        vec!["record_type".to_owned(), "page.page_token".to_owned()]
    );
    let missing = s
        .client
        .get_record(pb::GetRecordRequest {
            record_type: "EvidenceRecordV1".into(),
            id: "no-such-record".into(),
        })
        .await
        .expect_err("missing");
    assert_eq!(reason(&missing), "RECORD_NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_inline_reduction_is_stored_only_when_asked_and_read_back_by_input_digest() {
    let mut s = stack().await;
    let input = bytes(baseline().input.value());
    let plain = reduce(&mut s.client, input.clone()).await;
    assert!(!plain.stored);
    let digest = plain.summary.clone().expect("summary").input_digest;
    let missing = s
        .client
        .get_evaluation(pb::GetEvaluationRequest {
            input_digest: digest.clone(),
        })
        .await
        .expect_err("not stored");
    assert_eq!(reason(&missing), "EVALUATION_NOT_FOUND");
    let stored = s
        .client
        .reduce(pb::ReduceRequest {
            input: input.clone().into(),
            store: true,
            return_input: true,
        })
        .await
        .expect("reduce")
        .into_inner();
    assert!(stored.stored);
    assert_eq!(stored.result, plain.result);
    assert_eq!(stored.input, input, "the canonical input that was reduced");
    let kept = s
        .client
        .get_evaluation(pb::GetEvaluationRequest {
            input_digest: digest,
        })
        .await
        .expect("stored")
        .into_inner();
    assert_eq!(kept.result, plain.result);
    assert_eq!(kept.summary, plain.summary);
    assert_eq!(
        kept.context,
        bytes(baseline().input.value().get("context").expect("context"))
    );
    assert_eq!(kept.evaluated_by, s.spawned.tester_id);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_bodies_under_one_identity_are_all_kept_and_the_later_ones_marked() {
    let s = stack().await;
    let base = baseline();
    let evidence = base
        .input
        .value()
        .get("records")
        .and_then(Value::as_array)
        .expect("records")
        .iter()
        .find(|r| r.get("recordType").and_then(Value::as_str) == Some("EvidenceRecordV1"))
        .expect("evidence")
        .clone();
    let bodies: Vec<Vec<u8>> = (0..8)
        .map(|i| {
            bytes(&reseal(&evidence, |m| {
                m.insert("claim", format!("concurrent claim {i}").into());
            }))
        })
        .collect();
    let calls = bodies.into_iter().map(|b| {
        let mut c = s.client.clone();
        async move { append(&mut c, vec![b]).await.expect("append")[0].outcome }
    });
    let outcomes = futures::future::join_all(calls).await;
    let stored = outcomes
        .iter()
        .filter(|o| **o == pb::AppendOutcome::Stored as i32)
        .count();
    let marked = outcomes
        .iter()
        .filter(|o| **o == pb::AppendOutcome::Equivocation as i32)
        .count();
    assert_eq!((stored, marked), (1, 7), "{outcomes:?}");
    let kept = s
        .client
        .clone()
        .get_record(pb::GetRecordRequest {
            record_type: "EvidenceRecordV1".into(),
            id: evidence
                .get("id")
                .and_then(Value::as_str)
                .expect("id")
                .into(),
        })
        .await
        .expect("get")
        .into_inner()
        .records;
    assert_eq!(kept.len(), 8);
    assert!(kept.iter().all(|r| r.equivocation));
}
