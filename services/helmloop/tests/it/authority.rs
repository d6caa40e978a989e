//! Authority per record type: an observation-only principal appends receipts, evidence and
//! reconciliation but no contract or grant; owner records need their own action each; a
//! per-subject assignment covers that subject only; reading and reducing are distinct actions;
//! every RPC is refused to a principal holding nothing.

use lychd_helmloop::Value;
use lychd_proto::helmloop::v1 as pb;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn an_observation_only_principal_cannot_append_a_contract_or_a_grant() {
    let mut s = stack().await;
    let input = baseline().input.value().clone();
    let mut adapter = principal_with(
        &s,
        "observation-adapter",
        &[("helmloop:append_observation", "subject:*")],
    )
    .await;
    for t in [
        "OutcomeContractV1",
        "AuthorityGrantV1",
        "PromotionDecisionV1",
        "AssuranceDecisionV1",
    ] {
        let refused = append(&mut adapter, of_type(&input, t)).await.expect_err(t);
        denied(&refused);
    }
    // A batch mixing an observation with a contract is refused whole.
    let mut mixed = of_type(&input, "EvidenceRecordV1");
    mixed.extend(of_type(&input, "OutcomeContractV1"));
    denied(&append(&mut adapter, mixed).await.expect_err("mixed"));
    let listed = s
        .client
        .list_records(pb::ListRecordsRequest::default())
        .await
        .expect("list")
        .into_inner()
        .records;
    assert!(listed.is_empty(), "nothing stored from a refused batch");
    // Observations it may append.
    let mut observations = of_type(&input, "ExecutionReceiptV1");
    observations.extend(of_type(&input, "EvidenceRecordV1"));
    observations.extend(of_type(&input, "ReconciliationRecordV1"));
    let n = observations.len();
    let ok = append(&mut adapter, observations)
        .await
        .expect("observations");
    assert_eq!(ok.len(), n);
    // A principal holding the grant action appends grants, and nothing else owner-authored.
    let mut granter =
        principal_with(&s, "granter", &[("helmloop:append_grant", "subject:*")]).await;
    append(&mut granter, of_type(&input, "AuthorityGrantV1"))
        .await
        .expect("grants");
    denied(
        &append(&mut granter, of_type(&input, "OutcomeContractV1"))
            .await
            .expect_err("contract"),
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_per_subject_assignment_covers_that_subject_only() {
    let s = stack().await;
    let input = baseline().input.value().clone();
    let mut adapter_of_other = principal_with(
        &s,
        "ledger-adapter",
        &[("helmloop:append_observation", "subject:svc-ledger")],
    )
    .await;
    denied(
        &append(&mut adapter_of_other, of_type(&input, "EvidenceRecordV1"))
            .await
            .expect_err("another subject"),
    );
    let mut adapter = principal_with(
        &s,
        "payments-adapter",
        &[("helmloop:append_observation", "subject:svc-payments")],
    )
    .await;
    append(&mut adapter, of_type(&input, "EvidenceRecordV1"))
        .await
        .expect("own subject");
    // An owner record's action is honoured on every subject only: held for one subject, it
    // appends nothing, not even that subject's contract (the issuer alone claims owner
    // identities).
    let mut owner = principal_with(
        &s,
        "payments-owner",
        &[("helmloop:append_contract", "subject:svc-payments")],
    )
    .await;
    denied(
        &append(&mut owner, of_type(&input, "OutcomeContractV1"))
            .await
            .expect_err("an owner record on one subject"),
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reading_and_reducing_are_distinct_actions() {
    let s = stack().await;
    let input = bytes(baseline().input.value());
    let context = bytes(baseline().input.value().get("context").expect("context"));
    let mut reader = principal_with(&s, "reader", &[("helmloop:read", "subject:*")]).await;
    reader
        .list_records(pb::ListRecordsRequest::default())
        .await
        .expect("reader lists");
    denied(
        &reader
            .reduce(pb::ReduceRequest {
                input: input.clone().into(),
                ..Default::default()
            })
            .await
            .expect_err("reader reduces"),
    );
    let mut reducer = principal_with(
        &s,
        "reducer",
        &[
            ("helmloop:reduce", "office:helmloop"),
            ("helmloop:reduce", "subject:svc-payments"),
        ],
    )
    .await;
    reducer
        .reduce(pb::ReduceRequest {
            input: input.into(),
            ..Default::default()
        })
        .await
        .expect("reducer reduces");
    reducer
        .reduce_stored(pb::ReduceStoredRequest {
            context,
            return_input: false,
        })
        .await
        .expect("reducer reduces stored");
    denied(
        &reducer
            .list_records(pb::ListRecordsRequest::default())
            .await
            .expect_err("reducer reads"),
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_rpc_is_refused_without_authority() {
    let s = stack().await;
    let mut nobody = principal_with(&s, "nobody", &[]).await;
    let input = bytes(baseline().input.value());
    let context = bytes(baseline().input.value().get("context").expect("context"));
    let record = records_of(baseline().input.value()).remove(0);
    denied(
        &nobody
            .describe(pb::DescribeRequest::default())
            .await
            .expect_err("describe"),
    );
    denied(&append(&mut nobody, vec![record]).await.expect_err("append"));
    denied(
        &nobody
            .get_record(pb::GetRecordRequest {
                record_type: "EvidenceRecordV1".into(),
                id: "x".into(),
            })
            .await
            .expect_err("get"),
    );
    denied(
        &nobody
            .list_records(pb::ListRecordsRequest::default())
            .await
            .expect_err("list"),
    );
    denied(
        &nobody
            .reduce(pb::ReduceRequest {
                input: input.into(),
                ..Default::default()
            })
            .await
            .expect_err("reduce"),
    );
    denied(
        &nobody
            .reduce_stored(pb::ReduceStoredRequest {
                context,
                return_input: false,
            })
            .await
            .expect_err("reduce stored"),
    );
    denied(
        &nobody
            .get_evaluation(pb::GetEvaluationRequest {
                input_digest: format!("sha256:{}", "0".repeat(64)),
            })
            .await
            .expect_err("evaluation"),
    );
    denied(
        &nobody
            .validate(pb::ValidateRequest {
                document: b"{}".to_vec(),
            })
            .await
            .expect_err("validate"),
    );
    denied(
        &nobody
            .digest(pb::DigestRequest {
                document: b"{}".to_vec(),
                domain: 0,
            })
            .await
            .expect_err("digest"),
    );
    denied(
        &nobody
            .run_conformance(pb::RunConformanceRequest {
                adapter: "core".into(),
            })
            .await
            .expect_err("conformance"),
    );
    // A junk session is unauthenticated whatever the input: on the self-authenticating
    // `Reduce` with input over the cap, and on `ReduceStored` with a context that does not parse.
    let mut junk =
        s.client_with("lws_0000000000000000000000000000000000000000000000000000000000000000");
    let refused = junk
        .reduce(pb::ReduceRequest {
            input: vec![b' '; lychd_helmloop::DEFAULT_MAX_BYTES + 1].into(),
            ..Default::default()
        })
        .await
        .expect_err("junk");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let refused = junk
        .reduce_stored(pb::ReduceStoredRequest {
            context: b"{".to_vec(),
            return_input: false,
        })
        .await
        .expect_err("junk");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_per_subject_reader_gets_its_subjects_records_and_learns_nothing_of_others() {
    let mut s = stack().await;
    let input = baseline().input.value().clone();
    let contract = lychd_helmloop::parse(&of_type(&input, "OutcomeContractV1")[0]).expect("json");
    let elsewhere = reseal(&contract, |m| {
        let Some(Value::Object(subject)) = m.get_mut("subject") else {
            panic!("a contract has a subject")
        };
        subject.insert("id", "svc-ledger".into());
        m.insert("id", "contract-ledger-1".into());
    });
    append(&mut s.client, vec![bytes(&contract), bytes(&elsewhere)])
        .await
        .expect("append");
    let mut reader = principal_with(
        &s,
        "payments-reader",
        &[("helmloop:read", "subject:svc-payments")],
    )
    .await;
    let get = |id: &str| pb::GetRecordRequest {
        record_type: "OutcomeContractV1".into(),
        id: id.into(),
    };
    let own = contract.get("id").and_then(Value::as_str).expect("id");
    let got = reader
        .get_record(get(own))
        .await
        .expect("own subject")
        .into_inner();
    assert_eq!(got.records.len(), 1);
    let other = reader
        .get_record(get("contract-ledger-1"))
        .await
        .expect_err("other");
    let missing = reader
        .get_record(get("no-such-contract"))
        .await
        .expect_err("missing");
    denied(&other);
    denied(&missing);
    assert_eq!(
        other.message(),
        missing.message(),
        "the same answer either way"
    );
    assert!(!other.message().contains("svc-ledger"));
}
