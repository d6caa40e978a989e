//! Equivocation is visible to every reduction that reads the identity, and nobody makes a
//! second body of a record they have no authority over (issue 22, point 4): a second body
//! naming another subject or revision makes the first subject's stored reduction reject; an
//! append under an existing identity needs authority over the first body's subject and type
//! too; an owner record's identity is claimed only with its action on every subject.

use lychd_helmloop::{Map, Value};
use lychd_proto::helmloop::v1 as pb;

use crate::common::*;

fn record(input: &Value, id: &str) -> Value {
    input
        .get("records")
        .and_then(Value::as_array)
        .expect("records")
        .iter()
        .find(|r| r.get("id").and_then(Value::as_str) == Some(id))
        .expect("record")
        .clone()
}

fn set(m: &mut Map, member: &str, key: &str, value: &str) {
    let Some(Value::Object(inner)) = m.get_mut(member) else {
        panic!("a record has {member}")
    };
    inner.insert(key, value.into());
}

/// A context bound to another subject or revision than the baseline's.
fn context_for(context: &Value, member: &str, id: &str) -> Vec<u8> {
    let Value::Object(mut m) = context.clone() else {
        panic!("a context is an object")
    };
    set(&mut m, member, "id", id);
    bytes(&Value::Object(m))
}

async fn reduce_stored(client: &mut Client, context: Vec<u8>) -> pb::ReduceResponse {
    client
        .reduce_stored(pb::ReduceStoredRequest {
            context,
            return_input: false,
        })
        .await
        .expect("reduce stored")
        .into_inner()
}

fn rejects_with_equivocation(r: &pb::ReduceResponse, what: &str) {
    let summary = r.summary.as_ref().expect("summary");
    assert_eq!(
        summary.disposition,
        pb::Disposition::Reject as i32,
        "{what}: {summary:?}"
    );
    assert!(
        summary
            .reject_codes
            .contains(&"RECORD_EQUIVOCATION".to_owned()),
        "{what}: {:?}",
        summary.reject_codes
    );
}

async fn bodies(client: &mut Client, record_type: &str, id: &str) -> Vec<pb::StoredRecord> {
    client
        .get_record(pb::GetRecordRequest {
            record_type: record_type.into(),
            id: id.into(),
        })
        .await
        .expect("get record")
        .into_inner()
        .records
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_body_naming_another_subject_or_revision_rejects_every_reduction_of_the_identity()
{
    let mut s = stack().await;
    let base = baseline();
    let input = base.input.value();
    let context = input.get("context").expect("context");
    let evidence = record(input, "evidence-latency-1");
    for (member, other) in [("subject", "svc-ledger"), ("revision", "rev-43")] {
        s.wipe().await;
        append(&mut s.client, records_of(input))
            .await
            .expect("baseline");
        let before = reduce_stored(&mut s.client, bytes(context)).await;
        assert_eq!(
            before.summary.expect("summary").disposition,
            pb::Disposition::Pass as i32,
            "the baseline passes before the second body"
        );
        let second = reseal(&evidence, |m| set(m, member, "id", other));
        let appended = append(&mut s.client, vec![bytes(&second)])
            .await
            .expect("second body");
        assert_eq!(appended[0].outcome, pb::AppendOutcome::Equivocation as i32);
        // The first subject's (and revision's) reduction reads the identity: it sees both.
        let first = reduce_stored(&mut s.client, bytes(context)).await;
        rejects_with_equivocation(&first, member);
        assert_eq!(first.records, 15, "{member}: the other body is reduced too");
        // So does the reduction of what the second body names.
        let named = reduce_stored(&mut s.client, context_for(context, member, other)).await;
        rejects_with_equivocation(&named, member);
        assert_eq!(named.records, 2, "{member}: the second body and the first");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_body_needs_authority_over_the_first_bodys_subject_and_type() {
    let mut s = stack().await;
    let base = baseline();
    let input = base.input.value();
    let context = bytes(input.get("context").expect("context"));
    append(&mut s.client, records_of(input))
        .await
        .expect("baseline");
    let mut ledger = principal_with(
        &s,
        "ledger-adapter",
        &[
            ("helmloop:append_observation", "subject:svc-ledger"),
            ("helmloop:append_learning_proposal", "subject:svc-ledger"),
        ],
    )
    .await;
    // A second body of svc-payments' evidence, naming the principal's own subject.
    let evidence = record(input, "evidence-latency-1");
    let hijack = reseal(&evidence, |m| set(m, "subject", "id", "svc-ledger"));
    denied(
        &append(&mut ledger, vec![bytes(&hijack)])
            .await
            .expect_err("another subject's identity"),
    );
    // The same for a learning signal (the first body's type: a proposal of svc-payments).
    let learning = record(input, "learning-1");
    let hijack_learning = reseal(&learning, |m| set(m, "subject", "id", "svc-ledger"));
    denied(
        &append(&mut ledger, vec![bytes(&hijack_learning)])
            .await
            .expect_err("another subject's learning signal"),
    );
    assert_eq!(
        bodies(&mut s.client, "EvidenceRecordV1", "evidence-latency-1")
            .await
            .len(),
        1
    );
    assert_eq!(
        bodies(&mut s.client, "LearningSignalV1", "learning-1")
            .await
            .len(),
        1
    );
    let after = reduce_stored(&mut s.client, context).await;
    assert_eq!(
        after.summary.expect("summary").disposition,
        pb::Disposition::Pass as i32,
        "nothing was equivocated"
    );
    // Its own subject's records under fresh identities it may append.
    let fresh = reseal(&hijack, |m| {
        m.insert("id", "evidence-ledger-1".into());
    });
    let ok = append(&mut ledger, vec![bytes(&fresh)])
        .await
        .expect("own subject, fresh identity");
    assert_eq!(ok[0].outcome, pb::AppendOutcome::Stored as i32);

    // The first body's type counts as well as its subject: a principal holding every
    // observation and learning-proposal action cannot add a proposing body under the identity
    // of a stored acceptance (the owner's).
    let accepting = core_cases()
        .into_iter()
        .find(|c| c.case_id == "core-168-learning-accepted-grant-missing")
        .expect("case 168");
    let accepted = record(accepting.input.value(), "learning-1-accepted");
    let stored = append(&mut s.client, vec![bytes(&accepted)])
        .await
        .expect("an acceptance, by the tester");
    assert_eq!(stored[0].outcome, pb::AppendOutcome::Stored as i32);
    let proposal_under_it = reseal(&accepted, |m| {
        m.insert("disposition", "writeback_requested".into());
        m.remove("approverId");
        m.remove("supersedes");
        m.remove("grantRef");
    });
    let mut proposer = principal_with(
        &s,
        "learning-proposer",
        &[
            ("helmloop:append_observation", "subject:*"),
            ("helmloop:append_learning_proposal", "subject:*"),
        ],
    )
    .await;
    denied(
        &append(&mut proposer, vec![bytes(&proposal_under_it)])
            .await
            .expect_err("a proposal under an accepted signal's identity"),
    );
    assert_eq!(
        bodies(&mut s.client, "LearningSignalV1", "learning-1-accepted")
            .await
            .len(),
        1
    );
    // The same body under a fresh identity is the proposer's to append.
    let fresh = reseal(&proposal_under_it, |m| {
        m.insert("id", "learning-2".into());
    });
    append(&mut proposer, vec![bytes(&fresh)])
        .await
        .expect("a fresh proposal");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_owner_record_identity_is_claimed_only_with_its_action_on_every_subject() {
    let mut s = stack().await;
    let input = baseline().input.value().clone();
    let grant = record(&input, "grant-promote-1.1");
    // What Ward will issue for a pending promotion, claimed by a principal allowed to append
    // grants and decisions for its own subject only.
    let claim = reseal(&grant, |m| {
        m.insert(
            "id",
            "ward-promote-0123456789abcdef0123456789abcdef.1".into(),
        );
        set(m, "subject", "id", "svc-ledger");
    });
    let mut ledger_owner = principal_with(
        &s,
        "ledger-owner",
        &[
            ("helmloop:append_grant", "subject:svc-ledger"),
            ("helmloop:append_promotion", "subject:svc-ledger"),
        ],
    )
    .await;
    denied(
        &append(&mut ledger_owner, vec![bytes(&claim)])
            .await
            .expect_err("an owner identity on one subject's authority"),
    );
    let refused = s
        .client
        .get_record(pb::GetRecordRequest {
            record_type: "AuthorityGrantV1".into(),
            id: "ward-promote-0123456789abcdef0123456789abcdef.1".into(),
        })
        .await
        .expect_err("nothing claimed");
    assert_eq!(refused.code(), tonic::Code::NotFound);
    // The holder of the action on every subject (the issuer) appends it.
    let mut issuer = principal_with(&s, "issuer", &[("helmloop:append_grant", "subject:*")]).await;
    let ok = append(&mut issuer, vec![bytes(&claim)])
        .await
        .expect("the issuer");
    assert_eq!(ok[0].outcome, pb::AppendOutcome::Stored as i32);
}
