//! `AuthorizeBatch` over real gRPC (an in-process Ward on port 0): every question is decided
//! exactly as `Authorize` decides it, with one audit record each; a malformed question is
//! refused in its own answer while the others are decided; a bad batch, a stranger and an asker
//! without `ward:decide` are refused whole, answering nothing. And the office side: an office's
//! `WardVerifier` sends the questions its callers ask at the same time as one call.

use std::sync::Arc;

use lychd_auth::{Query, Verifier};
use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::authorize_answer::Result as Answer;
use lychd_proto::ward::v1::ward_client::WardClient;
use secrecy::SecretString;
use tonic::Code;
use tonic_types::StatusExt;

use crate::grpc::{admin_client, audit_events};

fn question(
    token: &str,
    action: &str,
    object: &str,
    expected: Option<i64>,
) -> pb::AuthorizeQuestion {
    pb::AuthorizeQuestion {
        token: token.to_owned(),
        action: action.to_owned(),
        object: object.to_owned(),
        purpose: action.split_once(':').map_or("", |(_, v)| v).to_owned(),
        expected_policy_generation: expected,
    }
}

fn unary(q: &pb::AuthorizeQuestion) -> pb::AuthorizeRequest {
    pb::AuthorizeRequest {
        token: q.token.clone(),
        action: q.action.clone(),
        object: q.object.clone(),
        audience: "ward".into(),
        purpose: q.purpose.clone(),
        expected_policy_generation: q.expected_policy_generation,
    }
}

fn reason(status: &tonic::Status) -> String {
    status
        .get_error_details()
        .error_info()
        .map(|i| i.reason.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_batch_answers_each_question_as_authorize_does() {
    let (s, mut c) = admin_client().await;
    let (_, other) = s.principal(pb::PrincipalKind::Service, "other").await;
    let unknown = format!("lws_{}", "0".repeat(64));
    let generation = c
        .authorize(unary(&question(
            &s.token,
            "ward:decide",
            "decision:archive",
            None,
        )))
        .await
        .unwrap()
        .into_inner()
        .policy_generation;
    let questions = vec![
        question(&s.token, "ward:decide", "decision:archive", None),
        question(&other, "ward:decide", "decision:archive", None),
        question(&unknown, "ward:decide", "decision:archive", None),
        question(&s.token, "ward:decide", "no colon", None),
        question(
            &s.token,
            "ward:decide",
            "decision:archive",
            Some(generation + 1),
        ),
        question(
            &s.token,
            "ward:decide",
            "decision:archive",
            Some(generation),
        ),
    ];
    // What `Authorize` answers to each, one call at a time.
    let mut expected = Vec::new();
    for q in &questions {
        expected.push(c.authorize(unary(q)).await.map(|r| r.into_inner()));
    }

    let before = audit_events(&s).await;
    let answers = c
        .authorize_batch(pb::AuthorizeBatchRequest {
            audience: "ward".into(),
            questions: questions.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .answers;
    let after = audit_events(&s).await;
    assert_eq!(answers.len(), questions.len());
    for (i, (answer, unary)) in answers.iter().zip(&expected).enumerate() {
        match (&answer.result, unary) {
            (Some(Answer::Decided(d)), Ok(u)) => assert_eq!(d, u, "question {i}"),
            (Some(Answer::Refused(r)), Err(status)) => {
                assert_eq!(status.code(), Code::InvalidArgument, "question {i}");
                assert_eq!(r.reason, reason(status), "question {i}");
                assert_eq!(r.reason, "OBJECT_INVALID");
                let fields: Vec<_> = r
                    .field_violations
                    .iter()
                    .map(|v| v.field.as_str())
                    .collect();
                assert_eq!(fields, ["object"]);
            }
            other => panic!("question {i}: batch and Authorize differ: {other:?}"),
        }
    }
    let reasons: Vec<_> = answers
        .iter()
        .map(|a| match &a.result {
            Some(Answer::Decided(d)) => d.reason.clone(),
            Some(Answer::Refused(r)) => r.reason.clone(),
            None => String::new(),
        })
        .collect();
    assert_eq!(
        reasons,
        [
            "ALLOWED",
            "NO_ASSIGNMENT",
            "SESSION_UNKNOWN",
            "OBJECT_INVALID",
            "POLICY_GENERATION_STALE",
            "ALLOWED"
        ]
    );
    // One record per decided question that authenticated someone (a stranger's token is
    // counted, not audited), as `Authorize` records them.
    let added = |key: &str| after.get(key).unwrap_or(&0) - before.get(key).unwrap_or(&0);
    assert_eq!(
        (
            added("authorize.allow ward:decide"),
            added("authorize.deny ward:decide")
        ),
        (2, 2),
        "{before:?} → {after:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_bad_batch_a_stranger_and_an_asker_without_ward_decide_get_nothing_answered() {
    let (s, mut c) = admin_client().await;
    let one = question(&s.token, "ward:decide", "decision:archive", None);
    let batch = |audience: &str, n: usize| pb::AuthorizeBatchRequest {
        audience: audience.to_owned(),
        questions: vec![one.clone(); n],
    };
    for (request, why) in [
        (batch("ward", 0), "QUESTIONS_INVALID"),
        (batch("ward", 257), "QUESTIONS_INVALID"),
        (batch("Not An Office", 1), "AUDIENCE_INVALID"),
    ] {
        let refused = c.authorize_batch(request).await.expect_err("bad batch");
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
        assert_eq!(reason(&refused), why);
    }
    // The cap itself is accepted.
    let full = c.authorize_batch(batch("ward", 256)).await.unwrap();
    assert_eq!(full.into_inner().answers.len(), 256);

    let before = audit_events(&s).await;
    let unknown = format!("lws_{}", "0".repeat(64));
    for bearer in [unknown.as_str(), "not-a-session"] {
        let refused = WardClient::new(s.channel_with(bearer))
            .authorize_batch(batch("ward", 3))
            .await
            .expect_err("stranger");
        assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
        assert_eq!(reason(&refused), "SESSION_UNKNOWN");
    }
    let (_, session) = s.principal(pb::PrincipalKind::Service, "asker").await;
    let refused = WardClient::new(s.channel_with(&session))
        .authorize_batch(batch("ward", 3))
        .await
        .expect_err("no ward:decide");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert_eq!(reason(&refused), "NO_ASSIGNMENT");
    let after = audit_events(&s).await;
    // Only the refused asker's own decision is recorded; no question was answered.
    let added = |key: &str| after.get(key).unwrap_or(&0) - before.get(key).unwrap_or(&0);
    assert_eq!(
        (
            added("authorize.allow ward:decide"),
            added("authorize.deny ward:decide")
        ),
        (0, 1),
        "{before:?} → {after:?}"
    );
    s.stop().await;
}

/// Questions asked at the same time by an office's callers go to Ward together: fewer calls
/// than questions, every answer its own.
#[tokio::test]
async fn an_office_sends_the_questions_asked_together_as_one_call() {
    let (s, _) = admin_client().await;
    let (_, other) = s.principal(pb::PrincipalKind::Service, "other").await;
    let verifier = Arc::new(lychd_auth::ward::WardVerifier::new(
        s.ward_channel(),
        lychd_auth::credentials::SessionSource::fixed(SecretString::from(s.token.clone())),
    ));
    let asks: Vec<_> = (0..64)
        .map(|i| {
            let verifier = verifier.clone();
            let token = if i % 2 == 0 {
                s.token.clone()
            } else {
                other.clone()
            };
            tokio::spawn(async move {
                verifier
                    .authorize(&Query {
                        token: &token,
                        action: "ward:decide",
                        object: "decision:archive",
                        audience: "ward",
                        purpose: "decide",
                        expected_policy_generation: None,
                    })
                    .await
                    .expect("decided")
            })
        })
        .collect();
    for (i, ask) in asks.into_iter().enumerate() {
        let d = ask.await.unwrap();
        assert_eq!(d.allowed, i % 2 == 0, "{i}: {d:?}");
        assert_eq!(
            d.reason,
            if i % 2 == 0 {
                "ALLOWED"
            } else {
                "NO_ASSIGNMENT"
            }
        );
    }
    let (calls, questions) = verifier.sent();
    assert_eq!(questions, 64);
    assert!(calls < 64, "{calls} calls for 64 questions asked at once");
    s.stop().await;
}
