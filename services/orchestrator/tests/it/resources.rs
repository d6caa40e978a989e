//! Transitions as resources (issue 25, point 1): a warm-up several times longer than the
//! request timeout loses nothing — the caller has the id at once, `GetTransition` and
//! `WatchTransitions` show every phase, a reconnect from a cursor gets every later event, the
//! outcome arrives; request-id replay and conflict; another principal's transition is
//! `NOT_FOUND`; bad input is refused with field violations and changes nothing.

use std::time::{Duration, Instant};

use lychd_proto::common::v1 as cpb;
use lychd_proto::orchestrator::v1 as pb;
use lychd_runtime::Office;
use lychd_testkit::simllama::UnitFaults;
use tonic::Code;
use tonic_types::StatusExt;

use crate::common::{Client, Stack, reason, stack, stack_with, three};

fn fields(s: &tonic::Status) -> Vec<String> {
    s.get_error_details()
        .bad_request()
        .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
        .unwrap_or_default()
}

fn request(
    key: &str,
    priority: u32,
    request_id: &str,
    wait_ms: Option<u32>,
) -> pb::RequestTransitionRequest {
    pb::RequestTransitionRequest {
        capability_key: key.into(),
        priority,
        admission_timeout_s: None,
        request_id: request_id.into(),
        wait_ms,
    }
}

async fn get(c: &Client, id: &str) -> Result<pb::Transition, tonic::Status> {
    c.clone()
        .get_transition(pb::GetTransitionRequest {
            transition_id: id.into(),
        })
        .await
        .map(|r| r.into_inner().transition.expect("a transition"))
}

async fn list(c: &Client) -> Vec<pb::Transition> {
    c.clone()
        .list_transitions(pb::ListTransitionsRequest { page: None })
        .await
        .expect("list")
        .into_inner()
        .transitions
}

/// The next event within 20 s.
async fn next(events: &mut tonic::Streaming<pb::TransitionEvent>) -> pb::TransitionEvent {
    tokio::time::timeout(Duration::from_secs(20), events.message())
        .await
        .expect("an event within 20 s")
        .expect("stream ok")
        .expect("stream open")
}

/// A second principal that may request and read transitions (not every principal's).
async fn stranger(s: &Stack) -> Client {
    let mut admin = s.sandbox.admin();
    let id = admin
        .ensure_principal(lychd_proto::ward::v1::PrincipalKind::Human, "stranger")
        .await
        .expect("enroll");
    for (action, object, purpose) in [
        ("orchestrator:transition", "capability:*", "transition"),
        ("orchestrator:read", "transition:*", "read"),
    ] {
        admin
            .ensure_assignment(&id, action, object, "orchestrator", purpose)
            .await
            .expect("assign");
    }
    let credential = admin.issue_standing(&id).await.expect("credential");
    let session = lychd_auth::admin::exchange(
        lychd_runtime::client::channel(&s.sandbox.office(Office::Ward).endpoint())
            .expect("channel"),
        &credential,
        0,
        &["orchestrator"],
    )
    .await
    .expect("session");
    pb::orchestrator_client::OrchestratorClient::new(lychd_testkit::channel_with(
        &s.sandbox.office(Office::Orchestrator).endpoint(),
        &session.token,
    ))
}

/// The server's request timeout of this test's Orchestrator.
const REQUEST_TIMEOUT_MS: u64 = 3000;

/// Give the Orchestrator of `s` a request timeout of `ms` and restart it.
async fn request_timeout(s: &mut Stack, ms: u64) {
    let path = s.sandbox.office(Office::Orchestrator).config_path.clone();
    let text = std::fs::read_to_string(&path).expect("config");
    let text = text.replacen(
        "[server]\n",
        &format!("[server]\nrequest_timeout_ms = {ms}\n"),
        1,
    );
    std::fs::write(&path, text).expect("config");
    s.sandbox
        .restart(Office::Orchestrator, nix::sys::signal::Signal::SIGTERM)
        .await;
    s.reconnect();
}

#[tokio::test]
async fn a_warm_up_three_times_the_request_timeout_loses_nothing() {
    let mut s = stack_with(&three(true), "warmup_timeout_ms = 30000\n").await;
    request_timeout(&mut s, REQUEST_TIMEOUT_MS).await;
    let warm_up = Duration::from_millis(3 * REQUEST_TIMEOUT_MS);
    s.host
        .set_faults(
            "a",
            UnitFaults {
                start_latency: warm_up,
                ..UnitFaults::default()
            },
        )
        .await;
    let mut watch = s.watch().await;
    let mut c = s.client.clone();
    let t0 = Instant::now();
    let first = c
        .request_transition(request("a:chat:m", 50, "long-1", None))
        .await
        .expect("recorded")
        .into_inner();
    assert!(
        t0.elapsed() < Duration::from_millis(REQUEST_TIMEOUT_MS),
        "answered at once"
    );
    assert!(first.outcome.is_none() && !first.replayed);
    let t = first.transition.expect("the transition");
    assert_eq!(t.transition_id.len(), 32);
    assert!(!t.settled);
    assert_eq!(t.events[0].phase(), pb::TransitionPhase::Requested);
    // The longest wait is two thirds of the request timeout (the configured default).
    let e = c
        .request_transition(request("a:chat:m", 50, "long-1", Some(2001)))
        .await
        .expect_err("beyond max_wait_ms");
    assert_eq!(reason(&e), "WAIT_OUT_OF_BOUNDS");
    // A bounded wait below the request timeout answers without the outcome.
    let t1 = Instant::now();
    let again = c
        .request_transition(request("a:chat:m", 50, "long-1", Some(1500)))
        .await
        .expect("replayed")
        .into_inner();
    assert!(t1.elapsed() < Duration::from_millis(REQUEST_TIMEOUT_MS));
    assert!(again.replayed && again.outcome.is_none());
    assert_eq!(again.transition.expect("t").transition_id, t.transition_id);
    // The same request id for another target refuses; nothing changes.
    let e = c
        .request_transition(request("a:chat:m", 60, "long-1", None))
        .await
        .expect_err("conflict");
    assert_eq!(e.code(), Code::AlreadyExists);
    assert_eq!(reason(&e), "REQUEST_ID_CONFLICT");
    let e = c
        .request_transition(request("c:chat:m", 50, "long-1", None))
        .await
        .expect_err("conflict");
    assert_eq!(reason(&e), "REQUEST_ID_CONFLICT");
    // The watcher sees the phases as they are recorded, then goes away mid-actuation.
    let mut seen: Vec<(u64, pb::TransitionPhase)> = Vec::new();
    let actuating = loop {
        let e = next(&mut watch).await;
        assert_eq!(e.transition_id, t.transition_id);
        assert!(seen.last().is_none_or(|(s, _)| *s < e.sequence), "in order");
        seen.push((e.sequence, e.phase()));
        if e.phase() == pb::TransitionPhase::Actuating {
            break e;
        }
    };
    assert_eq!(
        seen.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
        [
            pb::TransitionPhase::Requested,
            pb::TransitionPhase::Arbitrating,
            pb::TransitionPhase::Draining,
            pb::TransitionPhase::Actuating
        ]
    );
    drop(watch);
    let got = get(&s.client, &t.transition_id).await.expect("get");
    assert!(!got.settled, "still warming: {got:?}");
    assert!(got.events.len() >= 4);
    // A reconnect from the cursor gets every later event, and the outcome.
    let mut resumed = s
        .client
        .clone()
        .watch_transitions(pb::WatchTransitionsRequest {
            after_sequence: Some(actuating.sequence),
        })
        .await
        .expect("watch")
        .into_inner();
    let mut later = Vec::new();
    loop {
        let e = next(&mut resumed).await;
        assert!(e.sequence > actuating.sequence);
        later.push(e.phase());
        if e.phase() == pb::TransitionPhase::Completed {
            break;
        }
    }
    assert_eq!(
        later,
        [
            pb::TransitionPhase::Verifying,
            pb::TransitionPhase::Completed
        ]
    );
    assert!(t0.elapsed() >= warm_up, "the warm-up took its time");
    let done = get(&s.client, &t.transition_id).await.expect("get");
    assert!(done.settled);
    assert_eq!(done.phase(), pb::TransitionPhase::Completed);
    assert_eq!(done.events.len(), 6, "{done:?}");
    assert!(s.host.ready("a").await && !s.host.running("b").await);
    // A replay after the outcome answers it.
    let replay = c
        .request_transition(request("a:chat:m", 50, "long-1", None))
        .await
        .expect("replayed")
        .into_inner();
    assert_eq!(
        replay.outcome.expect("the outcome").phase(),
        pb::TransitionPhase::Completed
    );
    // A watch from the start of the feed replays the whole transition.
    let mut from_start = s
        .client
        .clone()
        .watch_transitions(pb::WatchTransitionsRequest {
            after_sequence: Some(0),
        })
        .await
        .expect("watch")
        .into_inner();
    for _ in 0..6 {
        assert_eq!(next(&mut from_start).await.transition_id, t.transition_id);
    }
}

#[tokio::test]
async fn another_principals_transition_is_not_found_and_bad_input_changes_nothing() {
    let s = stack(&three(true)).await;
    let other = stranger(&s).await;
    let mut c = s.client.clone();
    let mine = c
        .request_transition(request("b:chat:m", 50, "mine", Some(5000)))
        .await
        .expect("answered")
        .into_inner();
    let o = mine.outcome.expect("a NO_OP settles at once");
    assert_eq!(o.phase(), pb::TransitionPhase::Completed);
    let e = get(&other, &o.transition_id).await.expect_err("not theirs");
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(reason(&e), "TRANSITION_NOT_FOUND");
    assert!(list(&other).await.is_empty());
    // The stranger's own request (the same request id: ids are per principal) is its own.
    let theirs = other
        .clone()
        .request_transition(request("b:chat:m", 50, "mine", Some(5000)))
        .await
        .expect("answered")
        .into_inner()
        .transition
        .expect("t");
    assert_ne!(theirs.transition_id, o.transition_id);
    assert_eq!(
        get(&other, &theirs.transition_id)
            .await
            .expect("own")
            .transition_id,
        theirs.transition_id
    );
    assert_eq!(list(&other).await.len(), 1);
    // The operator (orchestrator:read_all) sees both, newest first, paged.
    let all = list(&s.client).await;
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].transition_id, theirs.transition_id);
    let page = c
        .list_transitions(pb::ListTransitionsRequest {
            page: Some(cpb::PageRequest {
                page_size: 1,
                page_token: String::new(),
            }),
        })
        .await
        .expect("page")
        .into_inner();
    assert_eq!(page.transitions.len(), 1);
    let token = page.page.expect("page").next_page_token;
    let rest = c
        .list_transitions(pb::ListTransitionsRequest {
            page: Some(cpb::PageRequest {
                page_size: 1,
                page_token: token,
            }),
        })
        .await
        .expect("page")
        .into_inner();
    assert_eq!(rest.transitions[0].transition_id, o.transition_id);
    assert!(rest.page.expect("page").next_page_token.is_empty());
    // Bad input: refused with the field, nothing recorded.
    let long = "x".repeat(129);
    let cases: Vec<(pb::RequestTransitionRequest, &str, &str)> = vec![
        (
            request("b:chat:m", 50, "", None),
            "request_id",
            "REQUEST_ID_INVALID",
        ),
        (
            request("b:chat:m", 50, "a b", None),
            "request_id",
            "REQUEST_ID_INVALID",
        ),
        (
            request("b:chat:m", 50, &long, None),
            "request_id",
            "REQUEST_ID_INVALID",
        ),
        (
            request("b:chat:m", 50, "w", Some(u32::MAX)),
            "wait_ms",
            "WAIT_OUT_OF_BOUNDS",
        ),
        (
            request("b:chat:m", 500, "p", None),
            "priority",
            "PRIORITY_OUT_OF_RANGE",
        ),
        (
            request("nope", 50, "k", None),
            "capability_key",
            "CAPABILITY_KEY_MALFORMED",
        ),
    ];
    for (req, field, why) in cases {
        let e = c.request_transition(req).await.expect_err("refused");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(fields(&e).contains(&field.to_owned()), "{field}: {e:?}");
        assert_eq!(reason(&e), why);
    }
    let e = get(&s.client, "XYZ").await.expect_err("malformed");
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(fields(&e), ["transition_id"]);
    let e = c
        .cancel_transition(pb::CancelTransitionRequest {
            transition_id: "0".repeat(32),
            wait_ms: Some(u32::MAX),
        })
        .await
        .expect_err("bad wait");
    assert_eq!(reason(&e), "WAIT_OUT_OF_BOUNDS");
    let e = c
        .list_transitions(pb::ListTransitionsRequest {
            page: Some(cpb::PageRequest {
                page_size: 0,
                page_token: "abc".into(),
            }),
        })
        .await
        .expect_err("bad token");
    assert_eq!(fields(&e), ["page.page_token"]);
    let e = c
        .watch_transitions(pb::WatchTransitionsRequest {
            after_sequence: Some(u64::MAX),
        })
        .await
        .expect_err("bad cursor");
    assert_eq!(reason(&e), "SEQUENCE_OUT_OF_RANGE");
    assert_eq!(list(&s.client).await.len(), 2, "nothing recorded");
}
