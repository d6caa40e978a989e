//! Consent over real gRPC (in-process Ward on port 0, real PostgreSQL): a proposer, an
//! approver and the effect's owner, each its own principal with only its own assignment.

use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::Spawned;
use lychd_testkit::channel_with;
pub(crate) use lychd_testkit::refusal::reason;
use tonic::Code;
use tonic_types::StatusExt;

pub(crate) const OWNER: &str = "runner";

pub(crate) struct Cast {
    pub s: Spawned,
    pub proposer: WardClient<PeerChannel>,
    pub approver: WardClient<PeerChannel>,
    pub owner: WardClient<PeerChannel>,
    pub approver_id: String,
    pub approver_token: String,
    pub proposer_id: String,
    pub proposer_token: String,
}

pub(crate) async fn client_for(
    s: &Spawned,
    name: &str,
    grants: &[(&str, &str)],
) -> (String, String, WardClient<PeerChannel>) {
    let (id, token) = s.principal(pb::PrincipalKind::Service, name).await;
    for (action, object) in grants {
        let purpose = action.split_once(':').map(|(_, v)| v).unwrap_or(action);
        s.admin
            .clone()
            .ensure_assignment(&id, action, object, "ward", purpose)
            .await
            .expect("assign");
    }
    let client = WardClient::new(channel_with(&s.endpoint(), &token));
    (id, token, client)
}

pub(crate) async fn cast_with(
    adjust: impl FnOnce(&mut lychd_runtime::config::OfficeConfig),
) -> Cast {
    let s = lychd_testkit::spawn_office_with(lychd_ward::spec(), adjust).await;
    let effect = format!("effect:{OWNER}");
    let (proposer_id, proposer_token, proposer) = client_for(
        &s,
        "proposer",
        &[("ward:propose", &effect), ("ward:cancel", "run:*")],
    )
    .await;
    let (approver_id, approver_token, approver) = client_for(
        &s,
        "approver",
        &[("ward:approve", &effect), ("ward:review", "consent:*")],
    )
    .await;
    let (_, _, owner) = client_for(&s, "owner", &[("ward:consume", &effect)]).await;
    Cast {
        s,
        proposer,
        approver,
        owner,
        approver_id,
        approver_token,
        proposer_id,
        proposer_token,
    }
}

async fn cast() -> Cast {
    cast_with(|_| {}).await
}

pub(crate) fn proposal(call: &str, arguments: &str) -> pb::ProposeEffectRequest {
    pb::ProposeEffectRequest {
        run_id: "run-1".into(),
        effect_owner: OWNER.into(),
        effect_id: "write-file".into(),
        effect_revision: 1,
        tool_name: "fs.write".into(),
        deferred_call_id: call.into(),
        arguments_json: arguments.as_bytes().to_vec(),
        effect_class: pb::EffectClass::Standard as i32,
        binding: None,
    }
}

pub(crate) async fn propose(
    c: &mut WardClient<PeerChannel>,
    call: &str,
    arguments: &str,
) -> pb::Consent {
    c.propose_effect(proposal(call, arguments))
        .await
        .expect("propose")
        .into_inner()
        .consent
        .expect("consent")
}

pub(crate) async fn decide(
    c: &mut WardClient<PeerChannel>,
    consent: &pb::Consent,
    verdict: pb::Verdict,
) -> Result<pb::DecideResponse, tonic::Status> {
    c.decide(pb::DecideRequest {
        consent_id: consent.consent_id.clone(),
        verdict: verdict as i32,
        review_digest: consent.binding_digest.clone(),
    })
    .await
    .map(|r| r.into_inner())
}

pub(crate) async fn consume(
    c: &mut WardClient<PeerChannel>,
    consent: &pb::Consent,
    digest: &str,
) -> Result<pb::Consent, tonic::Status> {
    c.consume_consent(pb::ConsumeConsentRequest {
        consent_id: consent.consent_id.clone(),
        binding_digest: digest.to_owned(),
    })
    .await
    .map(|r| r.into_inner().consent.expect("consent"))
}

#[tokio::test]
async fn a_proposal_binds_the_exact_call_keeps_only_censored_arguments_and_replays() {
    let mut c = cast().await;
    let args = r#"{"path":"/srv/a","api_key":"sk-very-secret","mode":420}"#;
    let first = propose(&mut c.proposer, "call-1", args).await;
    assert_eq!(first.state, pb::ConsentState::Pending as i32);
    assert_eq!(first.requested_by, c.proposer_id);
    assert_eq!(
        first.censored_arguments_json,
        r#"{"api_key":"[censored]","mode":420,"path":"/srv/a"}"#
    );
    let stored: String = sqlx::query_scalar("SELECT censored_arguments FROM ward.consents")
        .fetch_one(&mut c.s.db.superuser().await)
        .await
        .expect("row");
    assert!(
        !stored.contains("sk-very-secret"),
        "the secret is never stored"
    );
    // The same call again (members in another order): the same consent, not a second one.
    let again = c
        .proposer
        .propose_effect(proposal(
            "call-1",
            r#"{"mode":420,"api_key":"sk-very-secret","path":"/srv/a"}"#,
        ))
        .await
        .expect("replay")
        .into_inner();
    assert!(!again.created);
    assert_eq!(again.consent.expect("consent").consent_id, first.consent_id);
    // A changed argument is a new consent with another binding.
    let changed = propose(
        &mut c.proposer,
        "call-1",
        r#"{"path":"/srv/b","api_key":"x","mode":420}"#,
    )
    .await;
    assert_ne!(changed.consent_id, first.consent_id);
    assert_ne!(changed.binding_digest, first.binding_digest);
    // The expiry is the configured default TTL after creation (database clock).
    let ttl = changed.expires_at.unwrap().seconds - changed.created_at.unwrap().seconds;
    assert!((899..=900).contains(&ttl), "{ttl}");
}

#[tokio::test]
async fn bad_proposals_are_refused_with_every_field_and_change_nothing() {
    let mut c = cast().await;
    let mut bad = proposal("has space", r#"{"a":1,"a":2}"#);
    bad.run_id = String::new();
    bad.effect_revision = 0;
    bad.effect_class = 99;
    bad.binding = Some(pb::ConsentBinding {
        rationale: "x".repeat(5000),
        // Not NFC: it could not be bound into the canonical binding digest.
        scope: "cafe\u{301}".into(),
        ..Default::default()
    });
    let status = c.proposer.propose_effect(bad).await.expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let fields: Vec<String> = status
        .get_error_details()
        .bad_request()
        .expect("violations")
        .field_violations
        .iter()
        .map(|v| v.field.clone())
        .collect();
    assert_eq!(
        fields,
        [
            "run_id",
            "effect_revision",
            "deferred_call_id",
            "arguments_json",
            "effect_class",
            "binding.scope",
            "binding.rationale"
        ]
    );
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM ward.consents")
        .fetch_one(&mut c.s.db.superuser().await)
        .await
        .expect("count");
    assert_eq!(n, 0);
    // A stranger learns nothing about its input: its session is refused first.
    let mut stranger = WardClient::new(channel_with(
        &c.s.endpoint(),
        &format!("lws_{}", "0".repeat(64)),
    ));
    let status = stranger
        .propose_effect(proposal("has space", "[]"))
        .await
        .expect_err("stranger");
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let status = stranger
        .propose_effect(proposal("call-1", "{}"))
        .await
        .expect_err("stranger");
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    // Another owner's effect is not the proposer's to propose.
    let mut other = proposal("call-2", "{}");
    other.effect_owner = "orchestrator".into();
    let denied = c.proposer.propose_effect(other).await.expect_err("denied");
    assert_eq!(denied.code(), Code::PermissionDenied);
}

#[tokio::test]
async fn sixty_four_contradictory_verdicts_settle_once_and_everyone_sees_the_first() {
    let mut c = cast().await;
    let consent = propose(&mut c.proposer, "call-1", r#"{"a":1}"#).await;
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let mut approver = c.approver.clone();
            let consent = consent.clone();
            let verdict = if i % 2 == 0 {
                pb::Verdict::Approve
            } else {
                pb::Verdict::Deny
            };
            tokio::spawn(async move { decide(&mut approver, &consent, verdict).await })
        })
        .collect();
    let mut changed = 0;
    let mut states = std::collections::BTreeSet::new();
    for t in tasks {
        let answer = t.await.expect("task").expect("decide");
        changed += usize::from(answer.changed);
        let settled = answer.consent.expect("consent");
        assert_eq!(settled.decided_by, c.approver_id);
        assert!(settled.decided_at.is_some());
        states.insert(settled.state);
    }
    assert_eq!(changed, 1, "exactly one call settles it");
    assert_eq!(
        states.len(),
        1,
        "every caller sees the same verdict: {states:?}"
    );
}

#[tokio::test]
async fn a_verdict_needs_the_reviewed_digest_and_authority_over_the_effect() {
    let mut c = cast().await;
    let consent = propose(&mut c.proposer, "call-1", r#"{"a":1}"#).await;
    let mut wrong = consent.clone();
    wrong.binding_digest = format!("sha256:{}", "0".repeat(64));
    let status = decide(&mut c.approver, &wrong, pb::Verdict::Approve)
        .await
        .expect_err("mismatch");
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert_eq!(reason(&status), "REVIEW_DIGEST_MISMATCH");
    // The proposer cannot approve its own call (no ward:approve).
    let status = decide(&mut c.proposer, &consent, pb::Verdict::Approve)
        .await
        .expect_err("denied");
    assert_eq!(status.code(), Code::PermissionDenied);
    let still = c
        .approver
        .get_consent(pb::GetConsentRequest {
            consent_id: consent.consent_id.clone(),
        })
        .await
        .expect("get")
        .into_inner()
        .consent
        .expect("consent");
    assert_eq!(still.state, pb::ConsentState::Pending as i32);
    // An unknown consent is not found; a malformed id is bad input.
    let status = c
        .approver
        .get_consent(pb::GetConsentRequest {
            consent_id: uuid::Uuid::new_v4().to_string(),
        })
        .await
        .expect_err("unknown");
    assert_eq!(reason(&status), "CONSENT_NOT_FOUND");
    let status = c
        .approver
        .get_consent(pb::GetConsentRequest {
            consent_id: "nope".into(),
        })
        .await
        .expect_err("malformed");
    assert_eq!(status.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn an_approval_is_consumed_once_even_concurrently() {
    let mut c = cast().await;
    // Two consumers race; an approval is good for one effect. Retries by the consumer that won
    // get the same consumption again (ConsumeConsent is idempotent for its consumer), so the
    // answers name one consumer and one instant, and the other consumer is refused every time.
    let effect = format!("effect:{OWNER}");
    let (_, _, second) = client_for(&c.s, "second-owner", &[("ward:consume", &effect)]).await;
    let consent = propose(&mut c.proposer, "call-1", r#"{"a":1}"#).await;
    decide(&mut c.approver, &consent, pb::Verdict::Approve)
        .await
        .expect("approve");
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let mut owner = if i % 2 == 0 {
                c.owner.clone()
            } else {
                second.clone()
            };
            let consent = consent.clone();
            tokio::spawn(async move {
                let digest = consent.binding_digest.clone();
                (i % 2, consume(&mut owner, &consent, &digest).await)
            })
        })
        .collect();
    let mut winners = std::collections::BTreeSet::new();
    let mut consumptions = std::collections::BTreeSet::new();
    let mut refused = std::collections::BTreeSet::new();
    for t in tasks {
        match t.await.expect("task") {
            (who, Ok(consumed)) => {
                winners.insert(who);
                consumptions.insert((
                    consumed.consumed_by.clone(),
                    consumed.consumed_at.map(|t| (t.seconds, t.nanos)),
                ));
            }
            (who, Err(status)) => {
                assert_eq!(reason(&status), "CONSENT_CONSUMED", "{status:?}");
                refused.insert(who);
            }
        }
    }
    assert_eq!(winners.len(), 1, "one consumer won");
    assert_eq!(consumptions.len(), 1, "one consumption: {consumptions:?}");
    assert!(winners.is_disjoint(&refused), "the winner is never refused");
    let mut db = c.s.db.superuser().await;
    let consumed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM ward.consents WHERE consumed_at IS NOT NULL")
            .fetch_one(&mut db)
            .await
            .expect("count");
    assert_eq!(consumed, 1);
}

#[tokio::test]
async fn consumption_refuses_a_changed_call_a_revoked_approval_and_an_unsettled_one() {
    let mut c = cast().await;
    let pending = propose(&mut c.proposer, "call-1", r#"{"a":1}"#).await;
    let status = consume(&mut c.owner, &pending, &pending.binding_digest)
        .await
        .expect_err("pending");
    assert_eq!(reason(&status), "CONSENT_NOT_GRANTED");
    decide(&mut c.approver, &pending, pb::Verdict::Approve)
        .await
        .expect("approve");
    // The call about to be made has another argument: another binding digest.
    let changed = propose(&mut c.proposer, "call-1", r#"{"a":2}"#).await;
    let status = consume(&mut c.owner, &pending, &changed.binding_digest)
        .await
        .expect_err("changed call");
    assert_eq!(reason(&status), "CONSENT_BINDING_MISMATCH");
    // Revoked before consumption: never consumable.
    c.approver
        .revoke_consent(pb::RevokeConsentRequest {
            consent_id: pending.consent_id.clone(),
        })
        .await
        .expect("revoke");
    let status = consume(&mut c.owner, &pending, &pending.binding_digest)
        .await
        .expect_err("revoked");
    assert_eq!(reason(&status), "CONSENT_REVOKED");
    // A denied consent is not consumable either; the approver's principal revoked voids an
    // approval too.
    let denied = propose(&mut c.proposer, "call-2", r#"{"a":1}"#).await;
    decide(&mut c.approver, &denied, pb::Verdict::Deny)
        .await
        .expect("deny");
    let status = consume(&mut c.owner, &denied, &denied.binding_digest)
        .await
        .expect_err("denied");
    assert_eq!(reason(&status), "CONSENT_NOT_GRANTED");
    let granted = propose(&mut c.proposer, "call-3", r#"{"a":1}"#).await;
    decide(&mut c.approver, &granted, pb::Verdict::Approve)
        .await
        .expect("approve");
    let mut admin = WardClient::new(c.s.channel());
    c.s.allow("ward:administer", "principal:*").await;
    admin
        .revoke(pb::RevokeRequest {
            target: Some(pb::revoke_request::Target::PrincipalId(
                c.approver_id.clone(),
            )),
        })
        .await
        .expect("revoke approver");
    let status = consume(&mut c.owner, &granted, &granted.binding_digest)
        .await
        .expect_err("approver revoked");
    assert_eq!(reason(&status), "CONSENT_PRINCIPAL_REVOKED");
}

#[tokio::test]
async fn a_pending_consent_expires_by_the_database_clock_and_counts_as_denial() {
    let mut c = cast_with(|cfg| {
        cfg.office = toml::from_str("consent_ttl_seconds = 1").expect("toml");
    })
    .await;
    let consent = propose(&mut c.proposer, "call-1", r#"{"a":1}"#).await;
    tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
    let answer = decide(&mut c.approver, &consent, pb::Verdict::Approve)
        .await
        .expect("decide answers the settled consent");
    assert!(!answer.changed);
    let expired = answer.consent.expect("consent");
    assert_eq!(expired.state, pb::ConsentState::Expired as i32);
    assert_eq!(expired.decided_by, "", "the clock settled it");
    assert_eq!(expired.decided_at, expired.expires_at);
    let status = consume(&mut c.owner, &consent, &consent.binding_digest)
        .await
        .expect_err("expired");
    assert_eq!(reason(&status), "CONSENT_NOT_GRANTED");
}

#[tokio::test]
async fn cancelling_a_run_settles_its_pending_consents_and_no_verdict_revives_them() {
    let mut c = cast().await;
    let a = propose(&mut c.proposer, "call-1", r#"{"a":1}"#).await;
    let b = propose(&mut c.proposer, "call-2", r#"{"a":1}"#).await;
    decide(&mut c.approver, &b, pb::Verdict::Approve)
        .await
        .expect("approve");
    let cancelled = c
        .proposer
        .cancel_for_run(pb::CancelForRunRequest {
            run_id: "run-1".into(),
        })
        .await
        .expect("cancel")
        .into_inner()
        .cancelled;
    assert_eq!(cancelled, 1, "only the pending one");
    let answer = decide(&mut c.approver, &a, pb::Verdict::Approve)
        .await
        .expect("decide");
    assert!(!answer.changed);
    assert_eq!(
        answer.consent.expect("consent").state,
        pb::ConsentState::Cancelled as i32
    );
    // Listing: newest first, filtered by state, paged.
    let page = c
        .approver
        .list_consents(pb::ListConsentsRequest {
            run_id: "run-1".into(),
            state: 0,
            page: Some(lychd_proto::common::v1::PageRequest {
                page_size: 1,
                page_token: String::new(),
            }),
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(page.consents.len(), 1);
    assert_eq!(page.consents[0].consent_id, b.consent_id, "newest first");
    let next = c
        .approver
        .list_consents(pb::ListConsentsRequest {
            run_id: "run-1".into(),
            state: 0,
            page: Some(lychd_proto::common::v1::PageRequest {
                page_size: 1,
                page_token: page.page.expect("page").next_page_token,
            }),
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(next.consents[0].consent_id, a.consent_id);
}

#[tokio::test]
async fn pending_consents_survive_a_restart_of_ward_and_are_decided_after_it() {
    let mut c = cast().await;
    let consent = propose(&mut c.proposer, "call-1", r#"{"a":1}"#).await;
    let ctx = c.s.ctx.clone();
    c.s.server.stop().await.expect("ward stops");
    let restarted = lychd_runtime::server::InProcess::start(ctx, lychd_ward::spec().start)
        .await
        .expect("ward starts again");
    let mut approver = WardClient::new(channel_with(&restarted.endpoint(), &c.approver_token));
    let answer = decide(&mut approver, &consent, pb::Verdict::Approve)
        .await
        .expect("decide after restart");
    assert!(answer.changed, "it was still pending");
    assert_eq!(
        answer.consent.expect("consent").state,
        pb::ConsentState::Granted as i32
    );
    restarted.stop().await.expect("stops");
}

async fn next_change(
    stream: &mut tonic::Streaming<pb::WatchConsentsResponse>,
) -> Result<pb::WatchConsentsResponse, tonic::Status> {
    tokio::time::timeout(std::time::Duration::from_secs(10), stream.message())
        .await
        .expect("a change within 10 s")
        .map(|m| m.expect("the stream is open"))
}

#[tokio::test]
async fn a_watcher_follows_a_consent_from_proposal_to_verdict_in_order() {
    let mut c = cast().await;
    let earlier = propose(&mut c.proposer, "call-0", r#"{"a":0}"#).await;
    let mut stream = c
        .approver
        .watch_consents(pb::WatchConsentsRequest {
            after_change: 0,
            run_id: "run-1".into(),
        })
        .await
        .expect("watch")
        .into_inner();
    // The history first.
    let first = next_change(&mut stream).await.expect("history");
    assert_eq!(
        first.consent.expect("consent").consent_id,
        earlier.consent_id
    );
    assert_eq!(first.changed_to, pb::ConsentState::Pending as i32);
    // Then what happens while it is open, in order.
    let consent = propose(&mut c.proposer, "call-1", r#"{"a":1}"#).await;
    let proposed = next_change(&mut stream).await.expect("proposed");
    assert_eq!(proposed.changed_to, pb::ConsentState::Pending as i32);
    assert!(proposed.change > first.change);
    let seen = proposed.consent.expect("consent");
    assert_eq!(seen.consent_id, consent.consent_id);
    // What a watching operator needs to decide is in the change itself.
    decide(&mut c.approver, &seen, pb::Verdict::Approve)
        .await
        .expect("approve");
    let settled = next_change(&mut stream).await.expect("settled");
    assert_eq!(settled.changed_to, pb::ConsentState::Granted as i32);
    assert_eq!(settled.consent.expect("consent").decided_by, c.approver_id);
    // Another run's consent is not on this stream.
    let mut other = proposal("call-9", "{}");
    other.run_id = "run-2".into();
    c.proposer.propose_effect(other).await.expect("other run");
    let consent3 = propose(&mut c.proposer, "call-3", r#"{"a":3}"#).await;
    let next = next_change(&mut stream).await.expect("next of this run");
    assert_eq!(
        next.consent.expect("consent").consent_id,
        consent3.consent_id
    );
}

#[tokio::test]
async fn a_watch_ends_when_its_authority_goes_and_open_watches_are_limited() {
    let mut c = cast_with(|cfg| {
        cfg.office =
            toml::from_str("stream_recheck_interval_ms = 200\nstream_limit = 1").expect("toml");
    })
    .await;
    let mut stream = c
        .approver
        .watch_consents(pb::WatchConsentsRequest::default())
        .await
        .expect("watch")
        .into_inner();
    // One place only.
    let status = c
        .approver
        .watch_consents(pb::WatchConsentsRequest::default())
        .await
        .expect_err("limit");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(reason(&status), "STREAM_LIMIT_REACHED");
    // The approver's review right is withdrawn: the open stream ends with the refusal.
    let mut admin = WardClient::new(c.s.channel());
    c.s.allow("ward:administer", "principal:*").await;
    lychd_testkit::unassign(&mut admin, &c.approver_id, "ward:review", "consent:*").await;
    let ended = loop {
        match next_change(&mut stream).await {
            Ok(_) => continue,
            Err(status) => break status,
        }
    };
    assert_eq!(ended.code(), Code::PermissionDenied, "{ended:?}");
    // Its place is free again (for a principal that still may watch).
    c.s.allow("ward:review", "consent:*").await;
    let mut tester = WardClient::new(c.s.channel());
    let mut reopened = None;
    for _ in 0..50 {
        match tester
            .watch_consents(pb::WatchConsentsRequest::default())
            .await
        {
            Ok(s) => {
                reopened = Some(s);
                break;
            }
            Err(s) if s.code() == Code::ResourceExhausted => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(s) => panic!("{s:?}"),
        }
    }
    assert!(
        reopened.is_some(),
        "the ended stream's place was given back"
    );
}

/// Issue 22.6: a bound expiry beyond 9999-12-31T23:59:59Z (once accepted, every consumption
/// answered `INTERNAL`, "timestamp out of range") is refused at intake naming `binding.expiry`;
/// the latest accepted one is approved, consumed once and refused as consumed afterwards.
#[tokio::test]
async fn a_binding_expiry_is_bounded_at_intake_and_an_accepted_one_never_fails_later() {
    use lychd_runtime::refusal::bounds::LATEST_UNIX_SECONDS;
    let mut c = cast().await;
    let with_expiry = |call: &str, seconds: i64| {
        let mut p = proposal(call, r#"{"a":1}"#);
        p.binding = Some(pb::ConsentBinding {
            expiry: Some(prost_types::Timestamp { seconds, nanos: 0 }),
            ..Default::default()
        });
        p
    };
    for (i, seconds) in [
        10_000_000_000_000,
        LATEST_UNIX_SECONDS + 1,
        i64::MAX,
        0,
        -1,
        i64::MIN,
    ]
    .into_iter()
    .enumerate()
    {
        let status = c
            .proposer
            .propose_effect(with_expiry(&format!("call-far-{i}"), seconds))
            .await
            .expect_err("an expiry out of range is refused");
        assert_eq!(
            status.code(),
            Code::InvalidArgument,
            "{seconds}: {status:?}"
        );
        let fields: Vec<String> = status
            .get_error_details()
            .bad_request()
            .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
            .unwrap_or_default();
        assert_eq!(fields, ["binding.expiry"], "{seconds}");
    }
    let consent = c
        .proposer
        .propose_effect(with_expiry("call-latest", LATEST_UNIX_SECONDS))
        .await
        .expect("the latest instant is accepted")
        .into_inner()
        .consent
        .expect("consent");
    decide(&mut c.approver, &consent, pb::Verdict::Approve)
        .await
        .expect("approve");
    let consumed = consume(&mut c.owner, &consent, &consent.binding_digest)
        .await
        .expect("consumed");
    assert!(consumed.consumed_at.is_some());
    // Read back after consumption (the consumer's retry answers the same consumption, issue
    // 23.1): the far expiry never turns into a later failure.
    let again = consume(&mut c.owner, &consent, &consent.binding_digest)
        .await
        .expect("the consumer's retry answers the same consumption");
    assert_eq!(
        (again.consumed_at, again.consumed_by),
        (consumed.consumed_at, consumed.consumed_by),
        "consumed once"
    );
}
