//! Checkpoints: one per accepted transition (its version), canonical and checksummed; a
//! corrupt latest checkpoint quarantines the run through the FSM.

use lychd_proto::runner::v1 as pb;
use tonic::Code;

use crate::common::*;

async fn inspect(
    c: &mut Client,
    id: &str,
    version: u64,
) -> Result<pb::InspectCheckpointResponse, tonic::Status> {
    c.inspect_checkpoint(pb::InspectCheckpointRequest {
        run_id: id.into(),
        version,
    })
    .await
    .map(|r| r.into_inner())
}

#[tokio::test]
async fn every_transition_commits_a_checkpoint_that_verifies() {
    let mut s = stack().await;
    let run = start(&mut s.client, "k-1", "secret-looking input").await;
    let first = inspect(&mut s.client, &run.run_id, 0)
        .await
        .expect("inspect");
    assert!(first.verified);
    let c = first.checkpoint.expect("checkpoint");
    assert_eq!(
        (c.version, c.generation, c.state.as_str()),
        (1, 1, "CREATED")
    );
    let body: serde_json::Value = serde_json::from_slice(&c.body).expect("json");
    assert_eq!(body["state"], "CREATED");
    assert_eq!(body["versions"]["fsm_sha256"], run.fsm_sha256.as_str());
    assert_eq!(body["budgets"]["max_steps"], 64);
    assert!(
        !String::from_utf8_lossy(&c.body).contains("secret-looking"),
        "no input"
    );
    cancel(&mut s.client, &run.run_id).await.expect("cancel");
    let latest = inspect(&mut s.client, &run.run_id, 0)
        .await
        .expect("latest");
    let l = latest.checkpoint.expect("checkpoint");
    assert_eq!((l.version, l.state.as_str()), (2, "CANCELED"));
    assert!(latest.verified);
    let again = inspect(&mut s.client, &run.run_id, 1).await.expect("v1");
    assert_eq!(again.checkpoint.expect("checkpoint").checksum, c.checksum);
    refused(
        inspect(&mut s.client, &run.run_id, 3).await,
        Code::NotFound,
        "CHECKPOINT_NOT_FOUND",
    );
    let e = refused(
        inspect(&mut s.client, "nope", u64::MAX).await,
        Code::InvalidArgument,
        "RUN_ID_MALFORMED",
    );
    assert_eq!(fields(&e), ["run_id", "version"]);
    let (_, mut other) = s.principal("other", &["runner:read"]).await;
    refused(
        inspect(&mut other, &run.run_id, 0).await,
        Code::NotFound,
        "RUN_NOT_FOUND",
    );
}

#[tokio::test]
async fn a_corrupt_latest_checkpoint_quarantines_the_run() {
    let mut s = stack().await;
    let run = start(&mut s.client, "k-2", "").await;
    let mut db = s.db().await;
    sqlx::query(
        "UPDATE runner.run_checkpoints SET body = convert_to('{\"state\":\"SUCCEEDED\"}', 'UTF8') \
         WHERE run_id = $1::uuid",
    )
    .bind(&run.run_id)
    .execute(&mut db)
    .await
    .expect("corrupt");
    let seen = inspect(&mut s.client, &run.run_id, 1)
        .await
        .expect("inspect");
    assert!(!seen.verified);
    let after = seen.run.expect("run");
    assert_eq!((after.state.as_str(), after.version), ("QUARANTINED", 2));
    let t = transitions(&mut s.client, &run.run_id)
        .await
        .expect("transitions");
    let last = t.last().expect("transition");
    assert_eq!(
        (
            last.source_state.as_str(),
            last.target_state.as_str(),
            last.trigger.as_str(),
            last.actor.as_str()
        ),
        ("CREATED", "QUARANTINED", "checksum_mismatch", "runner")
    );
    // The quarantine's own checkpoint verifies; the corrupt one stays as evidence.
    let latest = inspect(&mut s.client, &run.run_id, 0)
        .await
        .expect("latest");
    assert!(latest.verified);
    assert_eq!(latest.checkpoint.expect("checkpoint").state, "QUARANTINED");
    assert!(
        !inspect(&mut s.client, &run.run_id, 1)
            .await
            .expect("old")
            .verified
    );
    assert_eq!(
        get(&mut s.client, &run.run_id).await.expect("get").state,
        "QUARANTINED"
    );
    // A caller's cancel of a quarantined run is a recorded interrupt (recovery review decides).
    let c = cancel(&mut s.client, &run.run_id).await.expect("cancel");
    assert_eq!(
        (c.state.as_str(), c.interrupt_pending),
        ("QUARANTINED", true)
    );
}
