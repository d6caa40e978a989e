//! Bounded work per request: lists of animators are bounded and validated before Ward is asked
//! about any of them (then one decision over `animator:*`, per animator only when that is
//! denied), and open event streams are bounded per office.

use std::time::{Duration, Instant};

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::simllama::SimLlama;
use sqlx::Row;
use tonic::Code;

use crate::common::*;

/// Ward's recorded decisions about `action` so far (its decision log, written behind the
/// answers: waited for).
async fn decisions(s: &Stack, action: &str) -> i64 {
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut db = s.spawned.db.superuser().await;
    sqlx::query(
        "SELECT count(*) AS n FROM ward.audit
          WHERE event LIKE 'authorize.%' AND detail->>'action' = $1",
    )
    .bind(action)
    .fetch_one(&mut db)
    .await
    .expect("count decisions")
    .get("n")
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_thousand_animators_are_refused_fast_and_small_without_asking_ward_of_each() {
    let sim = SimLlama::serving("m").await;
    let mut s = stack(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
    )
    .await;
    let names: Vec<String> = (0..10_000).map(|i| format!("gpu{i}")).collect();
    let before = decisions(&s, "dispatcher:observe").await;
    let err = s
        .client
        .observe_animators(pb::ObserveAnimatorsRequest {
            animators: names.clone(),
        })
        .await
        .expect_err("too many");
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(reason(&err), "ANIMATORS_TOO_MANY");
    assert_eq!(fields(&err), ["animators"]);
    let size = err.message().len() + err.details().len();
    assert!(size < 1024, "a small answer: {size} bytes");
    assert_eq!(
        decisions(&s, "dispatcher:observe").await,
        before,
        "Ward was asked nothing"
    );
    // The same for the other lists, and for a caller without any authority (nothing is
    // asked of Ward before the list is bounded).
    let mut o = s.orchestrator.clone();
    let err = o
        .close_admission(pb::CloseAdmissionRequest {
            request_id: "r".into(),
            animators: names.clone(),
            reason: "r".into(),
        })
        .await
        .expect_err("too many");
    assert_eq!(reason(&err), "ANIMATORS_TOO_MANY");
    let err = o
        .await_drain(pb::AwaitDrainRequest {
            animators: names.clone(),
            wait_ms: 0,
        })
        .await
        .expect_err("too many");
    assert_eq!(reason(&err), "ANIMATORS_TOO_MANY");
    let err = s
        .client
        .list_leases(pb::ListLeasesRequest {
            animators: names.clone(),
            ..Default::default()
        })
        .await
        .expect_err("too many");
    assert_eq!(reason(&err), "ANIMATORS_TOO_MANY");
    let (_, _, mut nobody) = principal(&s, "nobody", &[]).await;
    let err = nobody
        .observe_animators(pb::ObserveAnimatorsRequest { animators: names })
        .await
        .expect_err("too many");
    assert_eq!(reason(&err), "ANIMATORS_TOO_MANY");
    assert_eq!(sim.requests(), 0);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn animators_are_authorized_once_over_all_or_once_each() {
    let sim = SimLlama::serving("m").await;
    let mut registry = String::new();
    for a in ["gpu0", "gpu1", "gpu2"] {
        registry += &animator(a, &sim.endpoint(), "dedicated = true");
        registry += &capability(a, "chat", "m", "");
    }
    let s = stack(&registry).await;
    // The tester holds `animator:*`: one decision for any number of animators.
    let before = decisions(&s, "dispatcher:observe").await;
    observe(&mut s.client.clone(), &["gpu0", "gpu1", "gpu2"]).await;
    assert_eq!(decisions(&s, "dispatcher:observe").await - before, 1);
    // A principal holding two of them: allowed on those two, asked once each after the
    // denied `animator:*`; refused on the third.
    let (_, _, mut two) = principal(
        &s,
        "two",
        &[
            ("dispatcher:observe", "animator:gpu0"),
            ("dispatcher:observe", "animator:gpu1"),
        ],
    )
    .await;
    let before = decisions(&s, "dispatcher:observe").await;
    let seen = observe(&mut two, &["gpu1", "gpu0"]).await;
    assert_eq!(seen.len(), 2);
    assert_eq!(decisions(&s, "dispatcher:observe").await - before, 3);
    let err = two
        .observe_animators(pb::ObserveAnimatorsRequest {
            animators: vec!["gpu0".into(), "gpu2".into()],
        })
        .await
        .expect_err("not gpu2");
    assert_eq!(err.code(), Code::PermissionDenied);
    s.spawned.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn open_streams_are_limited_and_a_closed_one_frees_its_place() {
    let sim = SimLlama::serving("m").await;
    let mut s = stack_with(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
        // One principal may hold every place: this test is about the office's limit.
        "stream_limit = 2\nstream_share = 2",
    )
    .await;
    let follow = pb::WatchDispatchEventsRequest {
        after_sequence: 0,
        follow: true,
    };
    let first = s.client.watch_dispatch_events(follow).await.expect("first");
    let mut second = s
        .client
        .watch_dispatch_events(follow)
        .await
        .expect("second")
        .into_inner();
    let err = s
        .client
        .watch_dispatch_events(follow)
        .await
        .expect_err("a third is beyond the limit");
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert_eq!(reason(&err), "STREAM_LIMIT_REACHED");
    // A caller that hangs up frees its stream's place.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut third = loop {
        match s.client.watch_dispatch_events(follow).await {
            Ok(stream) => break stream.into_inner(),
            Err(e) => {
                assert_eq!(reason(&e), "STREAM_LIMIT_REACHED");
                assert!(Instant::now() < deadline, "the place was never freed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    // Both open streams deliver.
    let g = granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    for stream in [&mut second, &mut third] {
        let e = next_event(stream).await;
        assert_eq!(e.lease_id, g.lease_id);
    }
    drop(second);
    drop(third);
    let deadline = Instant::now() + Duration::from_secs(5);
    let again = loop {
        let both = async {
            let a = s.client.watch_dispatch_events(follow).await?;
            let b = s.client.watch_dispatch_events(follow).await?;
            Ok::<_, tonic::Status>((a, b))
        };
        match both.await {
            Ok(both) => break both,
            Err(e) => {
                assert_eq!(reason(&e), "STREAM_LIMIT_REACHED");
                assert!(Instant::now() < deadline, "places were never freed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    // Open follow streams would hold the office's graceful stop for its whole grace period.
    drop(again);
    s.spawned.stop().await;
}

/// One principal opening event streams as fast as it can fills its share of the office's
/// places (`stream_share`, by default a quarter of `stream_limit`: 16 of 64) and is refused
/// beyond it, `RESOURCE_EXHAUSTED` `STREAM_SHARE_REACHED`, while another principal (the
/// operator) still opens one; a place it gives back is its own to take again.
#[tokio::test(flavor = "multi_thread")]
async fn one_principal_fills_only_its_share_of_streams_and_the_operator_still_opens_one() {
    let sim = SimLlama::serving("m").await;
    let mut s = stack(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
    )
    .await;
    let (_, _, hog) = principal(&s, "hog", &[("dispatcher:read", "event:*")]).await;
    let follow = pb::WatchDispatchEventsRequest {
        after_sequence: 0,
        follow: true,
    };
    let mut held = Vec::new();
    for i in 0..16 {
        let stream = hog
            .clone()
            .watch_dispatch_events(follow)
            .await
            .unwrap_or_else(|e| panic!("stream {i} is within the share: {e:?}"));
        held.push(stream);
    }
    let err = hog
        .clone()
        .watch_dispatch_events(follow)
        .await
        .expect_err("a 17th is beyond its share");
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (Code::ResourceExhausted, "STREAM_SHARE_REACHED")
    );
    // The operator is not locked out, and its stream delivers.
    let mut mine = s
        .client
        .watch_dispatch_events(follow)
        .await
        .expect("the operator opens one")
        .into_inner();
    let g = granted(lease(&mut s.client, exact("gpu0:chat:m")).await);
    assert_eq!(next_event(&mut mine).await.lease_id, g.lease_id);
    // A place the hog gives back is its own again.
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    let again = loop {
        match hog.clone().watch_dispatch_events(follow).await {
            Ok(stream) => break stream,
            Err(e) => {
                assert_eq!(reason(&e), "STREAM_SHARE_REACHED");
                assert!(Instant::now() < deadline, "the place was never freed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    drop((again, held, mine));
    s.spawned.stop().await;
}
