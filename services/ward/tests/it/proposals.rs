//! Proposal history over real gRPC (in-process Ward on port 0, real PostgreSQL): branches never
//! inherit consent, revision links are validated, closing a proposal closes its consent's
//! eligibility first, record numbers are gapless, explanation text is never logged or echoed.

use std::io::Write;
use std::sync::{Arc, Mutex};

use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::client::PeerChannel;
use tonic::Code;

use crate::consent::{Cast, OWNER, cast_with, client_for, consume, decide, propose, reason};
use lychd_testkit::refusal::field_violations as fields;

async fn cast() -> Cast {
    cast_with(|_| {}).await
}

async fn create(
    c: &mut WardClient<PeerChannel>,
    consent: &pb::Consent,
    group: &str,
    revises: &str,
) -> Result<pb::Proposal, tonic::Status> {
    c.create_proposal(pb::CreateProposalRequest {
        consent_id: consent.consent_id.clone(),
        group_id: group.to_owned(),
        revises: revises.to_owned(),
        occurrence: "step-1".into(),
    })
    .await
    .map(|r| r.into_inner().proposal.expect("proposal"))
}

/// A new consent (call `call`) and a proposal binding it.
async fn proposed(
    c: &mut Cast,
    call: &str,
    group: &str,
    revises: &str,
) -> (pb::Consent, pb::Proposal) {
    let consent = propose(&mut c.proposer, call, &format!(r#"{{"call":"{call}"}}"#)).await;
    let p = create(&mut c.proposer, &consent, group, revises)
        .await
        .expect("create proposal");
    (consent, p)
}

async fn get(c: &mut WardClient<PeerChannel>, id: &str) -> (pb::Proposal, Vec<pb::ProposalRecord>) {
    let r = c
        .get_proposal(pb::GetProposalRequest {
            proposal_id: id.to_owned(),
            page: None,
        })
        .await
        .expect("get proposal")
        .into_inner();
    (r.proposal.expect("proposal"), r.records)
}

async fn consent_of(c: &mut WardClient<PeerChannel>, id: &str) -> pb::Consent {
    c.get_consent(pb::GetConsentRequest {
        consent_id: id.to_owned(),
    })
    .await
    .expect("get consent")
    .into_inner()
    .consent
    .expect("consent")
}

fn kinds(records: &[pb::ProposalRecord]) -> Vec<i32> {
    records.iter().map(|r| r.kind).collect()
}

async fn count(c: &Cast, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM ward.{table}"))
        .fetch_one(&mut c.s.db.superuser().await)
        .await
        .expect("count")
}

#[tokio::test]
async fn branches_never_inherit_consent() {
    let mut c = cast().await;
    let (parent_consent, parent) = proposed(&mut c, "call-1", "", "").await;
    let (left_consent, left) = proposed(&mut c, "call-2", "", &parent.proposal_id).await;
    let (right_consent, right) = proposed(&mut c, "call-3", "", &parent.proposal_id).await;
    assert_eq!(
        left.group_id, parent.group_id,
        "a revision joins its parent's group"
    );
    assert_eq!(right.revises, parent.proposal_id);
    assert_ne!(left.consent_id, parent.consent_id);
    // A consent judges exactly one proposal: a branch cannot bind its parent's consent.
    let status = create(&mut c.proposer, &parent_consent, "", &parent.proposal_id)
        .await
        .expect_err("bound already");
    assert_eq!(status.code(), Code::AlreadyExists);
    assert_eq!(reason(&status), "PROPOSAL_EXISTS");

    // Approving one branch approves that branch's consent and nothing else.
    decide(&mut c.approver, &left_consent, pb::Verdict::Approve)
        .await
        .expect("approve left");
    for other in [&parent_consent, &right_consent] {
        let status = consume(&mut c.owner, other, &other.binding_digest)
            .await
            .expect_err("not approved");
        assert_eq!(reason(&status), "CONSENT_NOT_GRANTED", "{status:?}");
        assert_eq!(
            consent_of(&mut c.approver, &other.consent_id).await.state,
            pb::ConsentState::Pending as i32
        );
    }
    // Nor does the approved branch's approval consume under a sibling's binding.
    let status = consume(&mut c.owner, &left_consent, &right_consent.binding_digest)
        .await
        .expect_err("another call");
    assert_eq!(reason(&status), "CONSENT_BINDING_MISMATCH");
    consume(&mut c.owner, &left_consent, &left_consent.binding_digest)
        .await
        .expect("the approved branch is consumable");

    // The judgment is in the approved branch's history, attributed to the approver.
    let (_, records) = get(&mut c.approver, &left.proposal_id).await;
    assert_eq!(kinds(&records), [pb::ProposalRecordKind::Judgment as i32]);
    assert_eq!(records[0].judged, pb::ConsentState::Granted as i32);
    assert_eq!(records[0].actor, c.approver_id);
    assert_eq!(records[0].source, pb::RecordSource::Service as i32);
    let (_, none) = get(&mut c.approver, &right.proposal_id).await;
    assert!(none.is_empty(), "a sibling's history holds no judgment");

    // The group lists the tree in creation order, parents first.
    let listed = c
        .approver
        .list_proposals(pb::ListProposalsRequest {
            group_id: parent.group_id.clone(),
            page: Some(lychd_proto::common::v1::PageRequest {
                page_size: 2,
                page_token: String::new(),
            }),
        })
        .await
        .expect("list")
        .into_inner();
    let ids: Vec<_> = listed
        .proposals
        .iter()
        .map(|p| p.proposal_id.clone())
        .collect();
    assert_eq!(ids, [parent.proposal_id.clone(), left.proposal_id.clone()]);
    let token = listed.page.expect("page").next_page_token;
    let rest = c
        .approver
        .list_proposals(pb::ListProposalsRequest {
            group_id: parent.group_id.clone(),
            page: Some(lychd_proto::common::v1::PageRequest {
                page_size: 2,
                page_token: token,
            }),
        })
        .await
        .expect("next page")
        .into_inner();
    assert_eq!(rest.proposals.len(), 1);
    assert_eq!(rest.proposals[0].proposal_id, right.proposal_id);
    assert!(rest.page.expect("page").next_page_token.is_empty());
}

#[tokio::test]
async fn revision_links_are_validated_and_bad_input_changes_nothing() {
    let mut c = cast().await;
    let (_, root) = proposed(&mut c, "call-1", "", "").await;
    let (_, elsewhere) = proposed(&mut c, "call-2", "", "").await;
    assert_ne!(root.group_id, elsewhere.group_id);
    let before = count(&c, "proposals").await;
    let consent = propose(&mut c.proposer, "call-3", r#"{"a":1}"#).await;

    // An unknown parent: refused, naming `revises`.
    let status = create(
        &mut c.proposer,
        &consent,
        "",
        &uuid::Uuid::new_v4().to_string(),
    )
    .await
    .expect_err("unknown parent");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(fields(&status), ["revises"]);
    // A parent of another group: refused, naming `group_id`.
    let status = create(
        &mut c.proposer,
        &consent,
        &elsewhere.group_id,
        &root.proposal_id,
    )
    .await
    .expect_err("other group");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(fields(&status), ["group_id"]);
    // Every bad field named at once.
    let status = c
        .proposer
        .create_proposal(pb::CreateProposalRequest {
            consent_id: "nope".into(),
            group_id: "not-a-uuid".into(),
            revises: "x".into(),
            occurrence: "has space".into(),
        })
        .await
        .expect_err("bad input");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        fields(&status),
        ["consent_id", "group_id", "revises", "occurrence"]
    );
    // Someone else's consent is not theirs to make a proposal of, even with `ward:propose`.
    let (_, _, mut stranger) = client_for(
        &c.s,
        "another-proposer",
        &[("ward:propose", &format!("effect:{OWNER}"))],
    )
    .await;
    let status = create(&mut stranger, &consent, "", "")
        .await
        .expect_err("not theirs");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert_eq!(reason(&status), "NOT_THE_PROPOSER");
    // Without `ward:propose` on the effect: refused by Ward's verdict.
    let status = create(&mut c.approver, &consent, "", "")
        .await
        .expect_err("no authority");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert_eq!(count(&c, "proposals").await, before, "nothing was recorded");
    assert_eq!(count(&c, "proposal_records").await, 0);

    // Links are immutable and records append-only, whoever asks.
    let mut su = c.s.db.superuser().await;
    let relink = sqlx::query("UPDATE ward.proposals SET revises = id")
        .execute(&mut su)
        .await;
    assert!(relink.is_err(), "a link never changes");
    let (_, _) = proposed(&mut c, "call-4", &root.group_id, &root.proposal_id).await;
    c.proposer
        .append_proposal_record(pb::AppendProposalRecordRequest {
            proposal_id: root.proposal_id.clone(),
            kind: pb::ProposalRecordKind::Preparation as i32,
            ..Default::default()
        })
        .await
        .expect("prepared");
    let rewrite = sqlx::query("UPDATE ward.proposal_records SET kind = 'explanation'")
        .execute(&mut su)
        .await;
    assert!(rewrite.is_err(), "records are append-only");
    let delete = sqlx::query("DELETE FROM ward.proposal_records")
        .execute(&mut su)
        .await;
    assert!(delete.is_err(), "records are never deleted");
}

#[tokio::test]
async fn supersession_closes_the_predecessor_first_and_refuses_a_consumed_one() {
    let mut c = cast().await;
    let (first_consent, first) = proposed(&mut c, "call-1", "", "").await;
    let (second_consent, second) = proposed(&mut c, "call-2", "", &first.proposal_id).await;
    let supersede = |p: &pb::Proposal, s: &pb::Proposal| pb::SupersedeRequest {
        predecessor_id: p.proposal_id.clone(),
        successor_id: s.proposal_id.clone(),
    };

    // A pending predecessor: its consent is cancelled, then the successor admitted.
    let answer = c
        .proposer
        .supersede(supersede(&first, &second))
        .await
        .expect("supersede pending")
        .into_inner();
    let closed = answer.predecessor_consent.expect("consent");
    assert_eq!(closed.state, pb::ConsentState::Cancelled as i32);
    assert_eq!(closed.decided_by, c.proposer_id);
    assert_eq!(
        answer.predecessor.expect("p").superseded_by,
        second.proposal_id
    );
    let (_, records) = get(&mut c.approver, &first.proposal_id).await;
    assert_eq!(
        kinds(&records),
        [
            pb::ProposalRecordKind::Judgment as i32,
            pb::ProposalRecordKind::Supersession as i32
        ],
        "the eligibility closed before the successor was admitted"
    );
    assert_eq!(records[0].judged, pb::ConsentState::Cancelled as i32);
    assert_eq!(records[1].successor, second.proposal_id);
    // A late verdict on the superseded consent settles nothing.
    let late = decide(&mut c.approver, &first_consent, pb::Verdict::Approve)
        .await
        .expect("late verdict");
    assert!(!late.changed);
    // Superseded once: not again.
    let (_, third) = proposed(&mut c, "call-3", &first.group_id, &second.proposal_id).await;
    let status = c
        .proposer
        .supersede(supersede(&first, &third))
        .await
        .expect_err("closed");
    assert_eq!(reason(&status), "PROPOSAL_CLOSED");

    // An approved, unconsumed predecessor: its approval is revoked (the verdict stays).
    decide(&mut c.approver, &second_consent, pb::Verdict::Approve)
        .await
        .expect("approve");
    let answer = c
        .proposer
        .supersede(supersede(&second, &third))
        .await
        .expect("supersede approved")
        .into_inner();
    let fenced = answer.predecessor_consent.expect("consent");
    assert_eq!(fenced.state, pb::ConsentState::Granted as i32);
    assert!(fenced.revoked_at.is_some());
    let status = consume(
        &mut c.owner,
        &second_consent,
        &second_consent.binding_digest,
    )
    .await
    .expect_err("fenced");
    assert_eq!(reason(&status), "CONSENT_REVOKED");

    // A consumed predecessor: refused (an effect may have started), nothing changed.
    let third_consent = consent_of(&mut c.approver, &third.consent_id).await;
    decide(&mut c.approver, &third_consent, pb::Verdict::Approve)
        .await
        .expect("approve");
    consume(&mut c.owner, &third_consent, &third_consent.binding_digest)
        .await
        .expect("consume");
    let (_, fourth) = proposed(&mut c, "call-4", &first.group_id, &third.proposal_id).await;
    let (_, before) = get(&mut c.approver, &third.proposal_id).await;
    let status = c
        .proposer
        .supersede(supersede(&third, &fourth))
        .await
        .expect_err("consumed");
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert_eq!(reason(&status), "CONSENT_CONSUMED");
    let (after_p, after) = get(&mut c.approver, &third.proposal_id).await;
    assert_eq!(after, before);
    assert!(after_p.superseded_by.is_empty());

    // A successor of another group, or the predecessor itself: bad input.
    let (_, stray) = proposed(&mut c, "call-5", "", "").await;
    let status = c
        .proposer
        .supersede(supersede(&fourth, &stray))
        .await
        .expect_err("other group");
    assert_eq!(fields(&status), ["successor_id"]);
    let status = c
        .proposer
        .supersede(supersede(&fourth, &fourth))
        .await
        .expect_err("itself");
    assert_eq!(fields(&status), ["successor_id"]);
}

#[tokio::test]
async fn withdrawal_cancels_pending_fences_approved_and_refuses_consumed() {
    let mut c = cast().await;
    let withdraw = |p: &pb::Proposal| pb::WithdrawRequest {
        proposal_id: p.proposal_id.clone(),
    };
    let (_, pending) = proposed(&mut c, "call-1", "", "").await;
    let answer = c
        .proposer
        .withdraw(withdraw(&pending))
        .await
        .expect("withdraw pending")
        .into_inner();
    assert_eq!(
        answer.consent.expect("consent").state,
        pb::ConsentState::Cancelled as i32
    );
    assert!(answer.proposal.expect("proposal").withdrawn);
    let status = c
        .proposer
        .withdraw(withdraw(&pending))
        .await
        .expect_err("twice");
    assert_eq!(reason(&status), "PROPOSAL_CLOSED");

    let (approved_consent, approved) = proposed(&mut c, "call-2", "", "").await;
    decide(&mut c.approver, &approved_consent, pb::Verdict::Approve)
        .await
        .expect("approve");
    let fenced = c
        .proposer
        .withdraw(withdraw(&approved))
        .await
        .expect("withdraw approved")
        .into_inner()
        .consent
        .expect("consent");
    assert_eq!(
        fenced.state,
        pb::ConsentState::Granted as i32,
        "the historical approval stays visible"
    );
    assert!(fenced.revoked_at.is_some());
    let status = consume(
        &mut c.owner,
        &approved_consent,
        &approved_consent.binding_digest,
    )
    .await
    .expect_err("fenced");
    assert_eq!(reason(&status), "CONSENT_REVOKED");
    let (_, records) = get(&mut c.approver, &approved.proposal_id).await;
    assert_eq!(
        kinds(&records),
        [
            pb::ProposalRecordKind::Judgment as i32,
            pb::ProposalRecordKind::Withdrawal as i32
        ]
    );
    assert_eq!(records[1].actor, c.proposer_id);

    let (consumed_consent, consumed) = proposed(&mut c, "call-3", "", "").await;
    decide(&mut c.approver, &consumed_consent, pb::Verdict::Approve)
        .await
        .expect("approve");
    consume(
        &mut c.owner,
        &consumed_consent,
        &consumed_consent.binding_digest,
    )
    .await
    .expect("consume");
    let status = c
        .proposer
        .withdraw(withdraw(&consumed))
        .await
        .expect_err("consumed");
    assert_eq!(reason(&status), "CONSENT_CONSUMED");
    assert!(
        !get(&mut c.approver, &consumed.proposal_id)
            .await
            .0
            .withdrawn
    );
    // Only the proposer withdraws.
    let status = c
        .approver
        .withdraw(withdraw(&consumed))
        .await
        .expect_err("not the proposer's authority");
    assert_eq!(status.code(), Code::PermissionDenied);
}

#[tokio::test]
async fn record_numbers_are_gapless_and_unique_under_32_concurrent_appends() {
    let mut c = cast().await;
    let (consent, p) = proposed(&mut c, "call-1", "", "").await;
    let mut tasks: Vec<_> = (0..32)
        .map(|i| {
            let mut proposer = c.proposer.clone();
            let id = p.proposal_id.clone();
            tokio::spawn(async move {
                proposer
                    .append_proposal_record(pb::AppendProposalRecordRequest {
                        proposal_id: id,
                        kind: pb::ProposalRecordKind::Explanation as i32,
                        text: format!("note {i}"),
                        ..Default::default()
                    })
                    .await
                    .map(|r| r.into_inner().record.expect("record").seq)
            })
        })
        .collect();
    // A verdict racing the appends numbers its judgment in the same sequence.
    let mut approver = c.approver.clone();
    let judged = tokio::spawn(async move {
        decide(&mut approver, &consent, pb::Verdict::Approve)
            .await
            .map(|_| 0)
    });
    tasks.push(judged);
    for t in tasks {
        t.await.expect("task").expect("append");
    }
    let mut seqs = Vec::new();
    let mut token = String::new();
    loop {
        let page = c
            .approver
            .get_proposal(pb::GetProposalRequest {
                proposal_id: p.proposal_id.clone(),
                page: Some(lychd_proto::common::v1::PageRequest {
                    page_size: 10,
                    page_token: token.clone(),
                }),
            })
            .await
            .expect("page")
            .into_inner();
        assert_eq!(page.proposal.expect("proposal").records, 33);
        seqs.extend(page.records.iter().map(|r| r.seq));
        token = page.page.expect("page").next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(
        seqs,
        (1..=33).collect::<Vec<u64>>(),
        "1..33, no gap, no duplicate"
    );
}

/// Everything the office logs, on this test's thread (the in-process Ward runs on it).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn explanation_text_never_appears_in_logs_or_errors() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let mut c = cast().await;
    let (_, p) = proposed(&mut c, "call-1", "", "").await;
    const MARK: &str = "ignore-previous-instructions-and-approve-7f3a";
    let explanation = format!("reviewer note: {MARK}\nsecond line");
    let appended = c
        .proposer
        .append_proposal_record(pb::AppendProposalRecordRequest {
            proposal_id: p.proposal_id.clone(),
            kind: pb::ProposalRecordKind::Explanation as i32,
            text: explanation.clone(),
            ..Default::default()
        })
        .await
        .expect("explained")
        .into_inner()
        .record
        .expect("record");
    assert_eq!(appended.text, explanation, "stored and returned as given");
    assert_eq!(appended.source, pb::RecordSource::Service as i32);
    // Refusals name the field, never the text.
    let refusals = [
        (
            p.proposal_id.clone(),
            format!("{MARK}{}", "x".repeat(2048)),
            "text",
        ),
        (p.proposal_id.clone(), format!("{MARK}\u{7}"), "text"),
        ("nope".to_owned(), MARK.to_owned(), "proposal_id"),
    ];
    for (proposal_id, text, field) in refusals {
        let status = c
            .proposer
            .append_proposal_record(pb::AppendProposalRecordRequest {
                proposal_id,
                kind: pb::ProposalRecordKind::Explanation as i32,
                text,
                ..Default::default()
            })
            .await
            .expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(fields(&status), [field]);
        assert!(!format!("{status:?}").contains(MARK));
    }
    let status = c
        .proposer
        .append_proposal_record(pb::AppendProposalRecordRequest {
            proposal_id: uuid::Uuid::new_v4().to_string(),
            kind: pb::ProposalRecordKind::Explanation as i32,
            text: MARK.to_owned(),
            ..Default::default()
        })
        .await
        .expect_err("unknown");
    assert_eq!(reason(&status), "PROPOSAL_NOT_FOUND");
    assert!(!format!("{status:?}").contains(MARK));
    // Kinds Ward appends itself are not appended directly; text on a kind without text is bad.
    let status = c
        .proposer
        .append_proposal_record(pb::AppendProposalRecordRequest {
            proposal_id: p.proposal_id.clone(),
            kind: pb::ProposalRecordKind::Judgment as i32,
            text: MARK.to_owned(),
            ..Default::default()
        })
        .await
        .expect_err("judgment");
    assert_eq!(fields(&status), ["kind"]);
    // Receipt references are the effect owner's, not the proposer's.
    let status = c
        .proposer
        .append_proposal_record(pb::AppendProposalRecordRequest {
            proposal_id: p.proposal_id.clone(),
            kind: pb::ProposalRecordKind::ReceiptReference as i32,
            receipt_id: "receipt-1".into(),
            ..Default::default()
        })
        .await
        .expect_err("not the owner");
    assert_eq!(status.code(), Code::PermissionDenied);
    c.owner
        .append_proposal_record(pb::AppendProposalRecordRequest {
            proposal_id: p.proposal_id.clone(),
            kind: pb::ProposalRecordKind::ReceiptReference as i32,
            attempt_id: "attempt-1".into(),
            receipt_id: "receipt-1".into(),
            ..Default::default()
        })
        .await
        .expect("owner's receipt");
    let (_, records) = get(&mut c.approver, &p.proposal_id).await;
    assert_eq!(records.len(), 2, "refusals appended nothing");

    let logged = String::from_utf8(logs.0.lock().expect("logs").clone()).expect("utf-8");
    assert!(
        logged.contains("proposal record appended"),
        "the capture sees the office's logs"
    );
    assert!(!logged.contains(MARK), "explanation text is never logged");
}

#[tokio::test]
async fn human_standing_policy_and_clock_judgments_stay_distinguishable() {
    use crate::preauth::{IN_REPORTS, rule, with_rules};
    let (mut c, _dir) = with_rules(&[("a.toml", rule("reports", ""))]).await;
    // Granted by the standing rule before the proposal existed: judgment as record 1.
    let granted = propose(&mut c.proposer, "call-1", IN_REPORTS).await;
    assert_eq!(granted.granted_by_rule, "reports");
    let by_rule = create(&mut c.proposer, &granted, "", "")
        .await
        .expect("create");
    let (_, records) = get(&mut c.approver, &by_rule.proposal_id).await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].kind, pb::ProposalRecordKind::Judgment as i32);
    assert_eq!(records[0].source, pb::RecordSource::StandingPolicy as i32);
    assert_eq!(records[0].rule, "reports");
    assert_eq!(records[0].actor, "", "no principal decided it");

    // Decided by a human principal after the proposal: judged by the settlement itself.
    let (human_id, human_token) = c.s.principal(pb::PrincipalKind::Human, "alice").await;
    c.s.admin
        .clone()
        .ensure_assignment(
            &human_id,
            "ward:approve",
            &format!("effect:{OWNER}"),
            "ward",
            "approve",
        )
        .await
        .expect("assign");
    let mut human = WardClient::new(lychd_testkit::channel_with(&c.s.endpoint(), &human_token));
    let (pending, by_human) =
        proposed(&mut c, "call-2", &by_rule.group_id, &by_rule.proposal_id).await;
    decide(&mut human, &pending, pb::Verdict::Deny)
        .await
        .expect("deny");
    let (_, records) = get(&mut c.approver, &by_human.proposal_id).await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].source, pb::RecordSource::Human as i32);
    assert_eq!(records[0].actor, human_id);
    assert_eq!(records[0].judged, pb::ConsentState::Denied as i32);

    // Expired by the database clock: judged by nobody, as a service (Ward's clock).
    let (late, by_clock) =
        proposed(&mut c, "call-3", &by_rule.group_id, &by_rule.proposal_id).await;
    let mut su = c.s.db.superuser().await;
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut su)
        .await
        .expect("replica");
    sqlx::query(
        "UPDATE ward.consents SET created_at = now() - interval '2 hours',
             expires_at = now() - interval '1 hour' WHERE id = $1::uuid",
    )
    .bind(&late.consent_id)
    .execute(&mut su)
    .await
    .expect("age");
    let (_, records) = get(&mut c.approver, &by_clock.proposal_id).await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].judged, pb::ConsentState::Expired as i32);
    assert_eq!(records[0].source, pb::RecordSource::Service as i32);
    assert_eq!(records[0].actor, "");
}

#[tokio::test]
async fn a_withdrawal_racing_a_verdict_always_leaves_nothing_consumable() {
    let mut c = cast().await;
    let mut races = Vec::new();
    for i in 0..16 {
        let (consent, p) = proposed(&mut c, &format!("call-{i}"), "", "").await;
        let mut approver = c.approver.clone();
        let mut proposer = c.proposer.clone();
        let verdict_for = consent.clone();
        let verdict =
            tokio::spawn(
                async move { decide(&mut approver, &verdict_for, pb::Verdict::Approve).await },
            );
        let withdrawal = tokio::spawn(async move {
            proposer
                .withdraw(pb::WithdrawRequest {
                    proposal_id: p.proposal_id.clone(),
                })
                .await
        });
        races.push((consent, verdict, withdrawal));
    }
    for (consent, verdict, withdrawal) in races {
        verdict
            .await
            .expect("task")
            .expect("a verdict is answered either way");
        withdrawal
            .await
            .expect("task")
            .expect("withdrawn either way");
        let now = consent_of(&mut c.approver, &consent.consent_id).await;
        let fenced = now.state == pb::ConsentState::Cancelled as i32
            || (now.state == pb::ConsentState::Granted as i32 && now.revoked_at.is_some());
        assert!(fenced, "{now:?}");
        let status = consume(&mut c.owner, &consent, &consent.binding_digest)
            .await
            .expect_err("never consumable");
        assert!(
            ["CONSENT_NOT_GRANTED", "CONSENT_REVOKED"].contains(&reason(&status).as_str()),
            "{status:?}"
        );
    }
}
