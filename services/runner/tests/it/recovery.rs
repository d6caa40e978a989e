//! Recovery review over real gRPC: a corrupt checkpoint quarantines a run mid-way; an
//! operator holding `runner:review` inspects it, names the recovery point's checksum and
//! resumes it — the run continues from the newest checkpoint that verifies under a new
//! fenced lease and finishes. A caller without the action, a stale checksum, a reconcile
//! without a pending effect and bad input are refused and change nothing; the same review
//! again is a replay, another one is refused.

use lychd_proto::runner::v1 as pb;
use lychd_runner::config::Settings;
use lychd_runner::domain::fsm::Fsm;
use lychd_runner::service::Service;
use lychd_runner::service::driver::{Driver, Stopped};
use lychd_runner::store::leases;
use tonic::Code;
use uuid::Uuid;

use crate::common::*;
use crate::steps::TASKS;

fn driver(s: &Stack, task_step_ms: u64) -> Driver {
    let service = Service::new(s.spawned.ctx.pool.clone(), Fsm::bound().expect("fsm"));
    Driver::new(
        service,
        lychd_runner::model::Models::none(),
        Settings {
            drive: true,
            lease_ttl_ms: 60_000,
            poll_ms: 10,
            concurrency: 1,
            task_step_ms,
            price_milli_per_1k_tokens: Default::default(),
            effects: Default::default(),
        },
    )
    .with_verifier(s.verifier())
}

async fn start_tasks(s: &mut Stack, request_id: &str) -> String {
    s.client
        .start_run(pb::StartRunRequest {
            request_id: request_id.into(),
            workflow: TASKS.as_bytes().to_vec(),
            input: b"some input".to_vec(),
            budgets: None,
            timeout_seconds: 0,
            parent_run_id: String::new(),
        })
        .await
        .expect("start")
        .into_inner()
        .run
        .expect("a run")
        .run_id
}

async fn inspect(c: &mut Client, id: &str, version: u64) -> pb::InspectCheckpointResponse {
    c.inspect_checkpoint(pb::InspectCheckpointRequest {
        run_id: id.into(),
        version,
    })
    .await
    .expect("inspect")
    .into_inner()
}

fn review(
    id: &str,
    decision: pb::ReviewDecision,
    checksum: &str,
    rationale: &str,
) -> pb::ReviewQuarantineRequest {
    pb::ReviewQuarantineRequest {
        run_id: id.into(),
        decision: decision as i32,
        recovery_checksum: checksum.into(),
        rationale: rationale.into(),
    }
}

async fn corrupt(s: &Stack, id: &str, version: i64) {
    let id = uuid::Uuid::parse_str(id).expect("uuid");
    crate::common::corrupt_checkpoint(&mut s.db().await, id, version).await;
}

const RATIONALE: &str = "checked v2 by hand: ingest and continue (marker-rationale-5c1e)";

#[tokio::test]
async fn a_quarantined_run_is_reviewed_resumes_from_its_recovery_point_and_finishes() {
    let mut s = crate::verified::stack().await;
    let id = start_tasks(&mut s, "rec-1").await;
    let uuid = Uuid::parse_str(&id).expect("uuid");
    // A runner takes the run into its first step (ACT, version 3) and dies there.
    let slow = driver(&s, 60_000);
    let claimed = leases::claim(&s.spawned.ctx.pool, slow.holder(), 60_000)
        .await
        .expect("claim")
        .expect("a run");
    let dying = tokio::spawn(async move { slow.drive(claimed).await });
    let mut c = s.client.clone();
    eventually("the run enters its first step", || {
        let (mut c, id) = (c.clone(), id.clone());
        async move { get(&mut c, &id).await.expect("get").state == "ACT" }
    })
    .await;
    dying.abort();
    let _ = dying.await;
    assert_eq!(get(&mut c, &id).await.expect("get").version, 3);
    // Its latest checkpoint is corrupted in PostgreSQL; inspecting it quarantines the run.
    corrupt(&s, &id, 3).await;
    let seen = inspect(&mut c, &id, 0).await;
    assert!(!seen.verified);
    let run = seen.run.expect("run");
    assert_eq!((run.state.as_str(), run.version), ("QUARANTINED", 4));
    // The quarantine's own checkpoint is latest; the recovery point is version 2 (PLAN).
    let latest = inspect(&mut c, &id, 0).await;
    assert_eq!(latest.recovery_version, 2);
    let v2 = inspect(&mut c, &id, 2).await;
    assert!(v2.verified);
    let point = v2.checkpoint.expect("checkpoint").checksum;
    assert_eq!(latest.recovery_checksum, point);
    let generation = run.generation;

    // The tester (start, read, cancel) may not review.
    let e = c
        .review_quarantine(review(&id, pb::ReviewDecision::Resume, &point, RATIONALE))
        .await
        .expect_err("denied");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    let (reviewer, mut operator) = s
        .principal("operator", &["runner:review", "runner:read"])
        .await;
    // Bad input: every field named, the rationale never echoed.
    let e = refused(
        operator
            .review_quarantine(review(
                &id,
                pb::ReviewDecision::Unspecified,
                "ABC",
                "bell\u{7} marker-rationale-5c1e",
            ))
            .await,
        Code::InvalidArgument,
        "REVIEW_DECISION_INVALID",
    );
    assert_eq!(fields(&e), ["decision", "recovery_checksum", "rationale"]);
    assert!(!format!("{e:?}").contains("marker-rationale"));
    // A stale checksum (the corrupt checkpoint's, or an older one's) is refused.
    let v1 = inspect(&mut c, &id, 1)
        .await
        .checkpoint
        .expect("v1")
        .checksum;
    let corrupt_sum = inspect(&mut c, &id, 3)
        .await
        .checkpoint
        .expect("v3")
        .checksum;
    for stale in [&v1, &corrupt_sum, &String::new()] {
        refused(
            operator
                .review_quarantine(review(&id, pb::ReviewDecision::Resume, stale, RATIONALE))
                .await,
            Code::FailedPrecondition,
            "RECOVERY_CHECKSUM_STALE",
        );
    }
    // Reconcile needs a pending effect: Runner I has none.
    refused(
        operator
            .review_quarantine(review(
                &id,
                pb::ReviewDecision::Reconcile,
                &point,
                RATIONALE,
            ))
            .await,
        Code::FailedPrecondition,
        "NO_PENDING_EFFECT",
    );
    let still = get(&mut c, &id).await.expect("get");
    assert_eq!((still.state.as_str(), still.version), ("QUARANTINED", 4));

    // The review: resume from version 2, under a new lease generation.
    let answer = operator
        .review_quarantine(review(&id, pb::ReviewDecision::Resume, &point, RATIONALE))
        .await
        .expect("review")
        .into_inner();
    assert!(!answer.replayed);
    let r = answer.review.expect("review");
    assert_eq!(
        (
            r.decision,
            r.recovery_version,
            r.quarantined_version,
            r.reviewer.as_str()
        ),
        (pb::ReviewDecision::Resume as i32, 2, 4, reviewer.as_str())
    );
    let resumed = answer.run.expect("run");
    assert_eq!(
        (resumed.state.as_str(), resumed.version, resumed.generation),
        ("INGEST", 5, generation + 1)
    );
    let restored = inspect(&mut c, &id, 5).await;
    assert!(restored.verified);
    let body: serde_json::Value =
        serde_json::from_slice(&restored.checkpoint.expect("c").body).expect("json");
    let before: serde_json::Value =
        serde_json::from_slice(&inspect(&mut c, &id, 2).await.checkpoint.expect("c").body)
            .expect("json");
    assert_eq!(
        body["r_frontier"], before["r_frontier"],
        "progress restored"
    );
    assert_eq!(body["budgets_used"], before["budgets_used"]);
    assert_eq!(body["generation"], generation + 1);
    // The same review again is a replay; another is refused.
    let again = operator
        .review_quarantine(review(&id, pb::ReviewDecision::Resume, &point, RATIONALE))
        .await
        .expect("replay")
        .into_inner();
    assert!(again.replayed);
    assert_eq!(again.review.expect("review").version, 5);
    refused(
        operator
            .review_quarantine(review(&id, pb::ReviewDecision::Fail, &point, RATIONALE))
            .await,
        Code::FailedPrecondition,
        "RUN_NOT_QUARANTINED",
    );

    // A runner claims it (the review freed the lease) and drives it to the end.
    let d = driver(&s, 0);
    let claimed = leases::claim(&s.spawned.ctx.pool, d.holder(), 60_000)
        .await
        .expect("claim")
        .expect("a run");
    assert_eq!(
        (claimed.id, claimed.generation),
        (uuid, generation as i64 + 2)
    );
    assert!(
        matches!(d.drive(claimed).await.expect("drive"), Stopped::Waiting(_)),
        "held for verification"
    );
    let done = crate::verified::drive_to_end(&s, &d, uuid).await;
    assert_eq!(done.state, "SUCCEEDED");
    let t = transitions(&mut c, &id).await.expect("transitions");
    let review_t = t.iter().find(|t| t.version == 5).expect("v5");
    assert_eq!(
        (
            review_t.source_state.as_str(),
            review_t.target_state.as_str(),
            review_t.trigger.as_str(),
            review_t.actor.as_str()
        ),
        (
            "QUARANTINED",
            "INGEST",
            "recovery_resume",
            reviewer.as_str()
        )
    );
    // Every step ran to a recorded result once after the resume.
    let last: serde_json::Value =
        serde_json::from_slice(&inspect(&mut c, &id, 0).await.checkpoint.expect("c").body)
            .expect("json");
    let steps: Vec<&str> = last["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["step"].as_str().expect("step"))
        .collect();
    assert_eq!(steps, ["one", "two", "three"]);
    // The rationale is kept with the review.
    let mut db = s.db().await;
    let kept: String =
        sqlx::query_scalar("SELECT rationale FROM runner.run_reviews WHERE run_id = $1::uuid")
            .bind(&id)
            .fetch_one(&mut db)
            .await
            .expect("review row");
    assert_eq!(kept, RATIONALE);
}

#[tokio::test]
async fn without_a_verified_checkpoint_only_fail_or_cancel_and_a_pending_cancel_is_honoured() {
    let mut s = stack().await;
    let run = start(&mut s.client, "rec-2", "").await;
    corrupt(&s, &run.run_id, 1).await;
    let seen = inspect(&mut s.client, &run.run_id, 0).await;
    assert_eq!(seen.run.expect("run").state, "QUARANTINED");
    let latest = inspect(&mut s.client, &run.run_id, 0).await;
    assert_eq!(
        (latest.recovery_version, latest.recovery_checksum.as_str()),
        (0, "")
    );
    let (_, mut operator) = s.principal("operator", &["runner:review"]).await;
    refused(
        operator
            .review_quarantine(review(
                &run.run_id,
                pb::ReviewDecision::Resume,
                "",
                RATIONALE,
            ))
            .await,
        Code::FailedPrecondition,
        "NO_VERIFIED_CHECKPOINT",
    );
    // The owner asks to cancel meanwhile: a durable interrupt; the review cancels.
    let c = cancel(&mut s.client, &run.run_id).await.expect("cancel");
    assert!(c.interrupt_pending);
    let done = operator
        .review_quarantine(review(
            &run.run_id,
            pb::ReviewDecision::Cancel,
            "",
            RATIONALE,
        ))
        .await
        .expect("cancel review")
        .into_inner()
        .run
        .expect("run");
    assert_eq!(
        (
            done.state.as_str(),
            done.terminal_category.as_str(),
            done.interrupt_pending
        ),
        ("CANCELED", "canceled", false)
    );
    refused(
        operator
            .review_quarantine(review(&run.run_id, pb::ReviewDecision::Fail, "", RATIONALE))
            .await,
        Code::FailedPrecondition,
        "RUN_NOT_QUARANTINED",
    );
    // An unknown run is not found.
    refused(
        operator
            .review_quarantine(review(
                &Uuid::new_v4().to_string(),
                pb::ReviewDecision::Fail,
                "",
                RATIONALE,
            ))
            .await,
        Code::NotFound,
        "RUN_NOT_FOUND",
    );
}

#[tokio::test]
async fn the_offices_own_step_loop_resumes_a_reviewed_run_and_finishes_it() {
    // The office drives its runs itself; everything the test does is a gRPC call but the
    // corruption, done in PostgreSQL.
    let mut s = crate::verified::stack_with("poll_ms = 10\ntask_step_ms = 1000").await;
    let id = start_tasks(&mut s, "rec-3").await;
    let mut c = s.client.clone();
    eventually("the run enters its first step", || {
        let (mut c, id) = (c.clone(), id.clone());
        async move { get(&mut c, &id).await.expect("get").state == "ACT" }
    })
    .await;
    let run = get(&mut c, &id).await.expect("get");
    corrupt(&s, &id, i64::try_from(run.version).expect("version")).await;
    let seen = inspect(&mut c, &id, 0).await;
    let quarantined = seen.run.expect("run");
    assert_eq!(quarantined.state, "QUARANTINED");
    let point = inspect(&mut c, &id, 0).await;
    assert_eq!(point.recovery_version, run.version - 1);
    let (_, mut operator) = s.principal("operator", &["runner:review"]).await;
    let resumed = operator
        .review_quarantine(review(
            &id,
            pb::ReviewDecision::Resume,
            &point.recovery_checksum,
            RATIONALE,
        ))
        .await
        .expect("review")
        .into_inner()
        .run
        .expect("run");
    assert_eq!(resumed.state, "INGEST");
    assert_eq!(resumed.generation, quarantined.generation + 1);
    eventually("the office's step loop finishes the run", || {
        let (mut c, id) = (c.clone(), id.clone());
        async move { get(&mut c, &id).await.expect("get").state == "SUCCEEDED" }
    })
    .await;
    let t = transitions(&mut c, &id).await.expect("transitions");
    let after_review: Vec<u64> = t
        .iter()
        .filter(|t| t.version > resumed.version)
        .map(|t| t.generation)
        .collect();
    assert!(!after_review.is_empty());
    assert!(
        after_review.iter().all(|g| *g > resumed.generation),
        "driven under a newer lease generation: {after_review:?}"
    );
    // The review's own transition sits between the quarantine and the resumed loop.
    let review_t = t
        .iter()
        .find(|t| t.version == resumed.version)
        .expect("review transition");
    assert_eq!(
        (review_t.trigger.as_str(), review_t.version),
        ("recovery_resume", quarantined.version + 1)
    );
    // A replay finds the corrupt checkpoint as the run's first divergence (the rules made
    // another body than the one recorded under that checksum; issue 28, replay).
    let r = c
        .replay_run(pb::ReplayRunRequest { run_id: id.clone() })
        .await
        .expect("replay")
        .into_inner();
    let d = r.divergence.expect("the corrupt checkpoint diverges");
    assert_eq!(d.version, run.version, "{d:?}");
    assert_eq!(d.expected_checkpoint_sha256, d.replayed_checkpoint_sha256);
    assert_eq!(
        d.reason,
        "the recorded checkpoint's body is not the one its checksum was computed over"
    );
}
