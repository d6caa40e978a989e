//! Ward decides every call: unauthenticated callers are refused (before anything is said
//! about their input), a principal without the action is denied, and another principal's run
//! is not found (unless the reader holds `runner:read_all`).

use lychd_proto::runner::v1 as pb;
use lychd_proto::runner::v1::runner_client::RunnerClient;
use tonic::Code;

use crate::common::*;

#[tokio::test]
async fn without_a_credential_every_rpc_is_unauthenticated() {
    let mut s = stack().await;
    let run = start(&mut s.client, "mine", "").await;
    let bare = lychd_runtime::client::peer_channel(
        &s.spawned.endpoint(),
        lychd_runtime::client::Outgoing::default(),
    )
    .expect("channel");
    for mut c in [
        RunnerClient::new(bare),
        RunnerClient::new(s.spawned.channel_with("forged")),
        RunnerClient::new(s.spawned.channel_with(&format!("lws_{}", "0".repeat(64)))),
    ] {
        let bad_start = pb::StartRunRequest {
            request_id: "has space".into(),
            ..Default::default()
        };
        let codes = [
            c.start_run(start_req("x", "")).await.map(drop),
            c.start_run(bad_start).await.map(drop),
            get(&mut c, &run.run_id).await.map(drop),
            get(&mut c, "bad").await.map(drop),
            list(&mut c, 0, "").await.map(drop),
            cancel(&mut c, &run.run_id).await.map(drop),
            transitions(&mut c, &run.run_id).await.map(drop),
            c.review_quarantine(pb::ReviewQuarantineRequest {
                run_id: "bad".into(),
                rationale: String::new(),
                ..Default::default()
            })
            .await
            .map(drop),
            c.list_provenance(pb::ListProvenanceRequest {
                run_id: run.run_id.clone(),
            })
            .await
            .map(drop),
        ];
        for r in codes {
            let e = r.expect_err("unauthenticated");
            assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
            assert!(fields(&e).is_empty(), "nothing said about the input");
        }
    }
    assert_eq!(
        get(&mut s.client, &run.run_id).await.expect("get").state,
        "CREATED"
    );
    assert_eq!(s.counts().await, (1, 1));
}

#[tokio::test]
async fn a_principal_without_the_action_is_denied() {
    let s = stack().await;
    let (_, mut nobody) = s.principal("nobody", &[]).await;
    let e = nobody
        .start_run(start_req("x", ""))
        .await
        .expect_err("denied");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let e = list(&mut nobody, 0, "").await.expect_err("denied");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let (_, mut reader) = s.principal("reader", &["runner:read"]).await;
    let e = reader
        .start_run(start_req("x", ""))
        .await
        .expect_err("denied");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert_eq!(s.counts().await, (0, 0));
}

#[tokio::test]
async fn another_principals_run_is_not_found_unless_the_reader_reads_all() {
    let mut s = stack().await;
    let mine = start(&mut s.client, "mine", "").await;
    let (_, mut other) = s
        .principal("other", &["runner:start", "runner:read", "runner:cancel"])
        .await;
    refused(
        get(&mut other, &mine.run_id).await,
        Code::NotFound,
        "RUN_NOT_FOUND",
    );
    refused(
        transitions(&mut other, &mine.run_id).await,
        Code::NotFound,
        "RUN_NOT_FOUND",
    );
    refused(
        cancel(&mut other, &mine.run_id).await,
        Code::NotFound,
        "RUN_NOT_FOUND",
    );
    assert!(list(&mut other, 0, "").await.expect("list").runs.is_empty());
    // An unknown run reads the same as another's.
    let unknown = uuid::Uuid::new_v4().hyphenated().to_string();
    refused(
        get(&mut other, &unknown).await,
        Code::NotFound,
        "RUN_NOT_FOUND",
    );
    assert_eq!(
        get(&mut s.client, &mine.run_id).await.expect("mine").state,
        "CREATED"
    );
    // Its own run it sees; the tester does not see it.
    let theirs = start(&mut other, "theirs", "").await;
    refused(
        get(&mut s.client, &theirs.run_id).await,
        Code::NotFound,
        "RUN_NOT_FOUND",
    );
    let listed = list(&mut s.client, 0, "").await.expect("list").runs;
    assert_eq!(
        listed.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
        [mine.run_id.as_str()]
    );
    // A reader of all sees both, and may still not cancel another's run.
    let (_, mut auditor) = s
        .principal(
            "auditor",
            &["runner:read", "runner:read_all", "runner:cancel"],
        )
        .await;
    assert_eq!(
        get(&mut auditor, &mine.run_id)
            .await
            .expect("read all")
            .run_id,
        mine.run_id
    );
    assert_eq!(
        transitions(&mut auditor, &theirs.run_id)
            .await
            .expect("read all")
            .len(),
        1
    );
    assert_eq!(list(&mut auditor, 0, "").await.expect("list").runs.len(), 2);
    refused(
        cancel(&mut auditor, &mine.run_id).await,
        Code::NotFound,
        "RUN_NOT_FOUND",
    );
    assert_eq!(
        get(&mut s.client, &mine.run_id).await.expect("mine").state,
        "CREATED"
    );
}
