//! `WatchRun`: a run's transitions as they commit, resumable from a cursor, ending after the
//! terminal transition.

use lychd_proto::runner::v1 as pb;
use tonic::Code;

use crate::common::*;

async fn watch(
    c: &mut Client,
    id: &str,
    after: u64,
) -> Result<tonic::Streaming<pb::RunTransition>, tonic::Status> {
    c.watch_run(pb::WatchRunRequest {
        run_id: id.into(),
        after_sequence: after,
    })
    .await
    .map(|r| r.into_inner())
}

async fn rest(mut s: tonic::Streaming<pb::RunTransition>) -> Vec<pb::RunTransition> {
    let mut out = Vec::new();
    while let Some(t) = s.message().await.expect("a transition") {
        out.push(t);
    }
    out
}

#[tokio::test]
async fn a_watch_replays_resumes_from_a_cursor_and_ends_at_the_terminal() {
    let mut s = stack().await;
    let run = start(&mut s.client, "w-1", "").await;
    // Another run's transitions are in the same feed but never delivered.
    let other = start(&mut s.client, "w-2", "").await;
    cancel(&mut s.client, &other.run_id)
        .await
        .expect("cancel other");
    cancel(&mut s.client, &run.run_id).await.expect("cancel");
    let all = rest(watch(&mut s.client, &run.run_id, 0).await.expect("watch")).await;
    let triggers: Vec<_> = all.iter().map(|t| t.trigger.as_str()).collect();
    assert_eq!(triggers, ["created", "cancel"]);
    assert!(all.iter().all(|t| t.run_id == run.run_id));
    assert_eq!(
        all,
        transitions(&mut s.client, &run.run_id).await.expect("list")
    );
    let resumed = rest(
        watch(&mut s.client, &run.run_id, all[0].sequence)
            .await
            .expect("resume"),
    )
    .await;
    assert_eq!(resumed, all[1..]);
}

#[tokio::test]
async fn a_live_watch_delivers_a_transition_as_it_commits() {
    let mut s = stack().await;
    let run = start(&mut s.client, "w-live", "").await;
    let mut stream = watch(&mut s.client, &run.run_id, 0).await.expect("watch");
    let first = stream.message().await.expect("ok").expect("creation");
    assert_eq!(first.target_state, "CREATED");
    cancel(&mut s.client, &run.run_id).await.expect("cancel");
    let next = stream.message().await.expect("ok").expect("cancel");
    assert_eq!(
        (next.source_state.as_str(), next.target_state.as_str()),
        ("CREATED", "CANCELED")
    );
    assert!(
        stream.message().await.expect("ok").is_none(),
        "ends at the terminal"
    );
}

#[tokio::test]
async fn a_watch_of_another_principals_run_or_bad_input_is_refused() {
    let mut s = stack().await;
    let run = start(&mut s.client, "w-3", "").await;
    let (_, mut other) = s.principal("other", &["runner:read"]).await;
    refused(
        watch(&mut other, &run.run_id, 0).await,
        Code::NotFound,
        "RUN_NOT_FOUND",
    );
    let e = refused(
        watch(&mut s.client, "nope", u64::MAX).await,
        Code::InvalidArgument,
        "RUN_ID_MALFORMED",
    );
    assert_eq!(fields(&e), ["run_id", "after_sequence"]);
}
