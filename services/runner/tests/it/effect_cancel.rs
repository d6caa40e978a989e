//! Cancel releases a run's pending consents (issue 28, Runner II), over real processes (the
//! built `lychd-ward` and `lychd-runner`, the simulated external system, real PostgreSQL): a
//! run waiting in `WAIT_APPROVAL` is cancelled and its consent is no longer pending at Ward —
//! settled `cancelled` by the Runner's `CancelForRun` right after the cancel commits; when that
//! ask fails, the cancel still ends the run and the step loop asks again until Ward answers.

use lychd_proto::ward::v1 as wpb;
use uuid::Uuid;

use crate::common::cancel;
use crate::effects::{Stack, build_granted, stack};

/// The run's consents Ward still holds pending.
async fn pending(s: &mut Stack, id: Uuid) -> usize {
    s.ward
        .list_consents(wpb::ListConsentsRequest {
            run_id: id.to_string(),
            state: wpb::ConsentState::Pending as i32,
            page: None,
        })
        .await
        .expect("list consents")
        .into_inner()
        .consents
        .len()
}

/// Start a high-risk run and wait until its consent is pending: the run and the consent.
async fn waiting(s: &mut Stack, request_id: &str) -> (Uuid, wpb::Consent) {
    let id = s.start(request_id, "high").await;
    s.until(id, "WAIT_APPROVAL").await;
    let c = s.consent(id).await;
    assert_eq!(c.state, wpb::ConsentState::Pending as i32);
    assert_eq!(pending(s, id).await, 1);
    (id, c)
}

#[tokio::test]
async fn cancelling_a_run_waiting_for_approval_releases_its_consent() {
    let mut s = stack("").await;
    let (id, c) = waiting(&mut s, "cancel-release-1").await;
    let run = cancel(&mut s.client, &id.to_string())
        .await
        .expect("cancel");
    assert_eq!(run.state, "CANCELED");
    // Released when `CancelRun` answers: no consent of the run is pending any more.
    assert_eq!(pending(&mut s, id).await, 0);
    let after = s.consent(id).await;
    assert_eq!(after.consent_id, c.consent_id);
    assert_eq!(after.state, wpb::ConsentState::Cancelled as i32);
    // An approval arriving later settles nothing (the consent stays cancelled), and nothing
    // is ever delivered.
    let _ = s
        .ward
        .decide(wpb::DecideRequest {
            consent_id: c.consent_id.clone(),
            verdict: wpb::Verdict::Approve as i32,
            review_digest: c.binding_digest.clone(),
        })
        .await;
    assert_eq!(
        s.consent(id).await.state,
        wpb::ConsentState::Cancelled as i32,
        "a cancelled consent takes no verdict"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.sim.deliveries(), 0);
    assert_eq!(s.run(id).await.state, "CANCELED");
    // Cancelling again answers the canceled run and settles nothing more.
    let again = cancel(&mut s.client, &id.to_string())
        .await
        .expect("cancel again");
    assert_eq!(again.state, "CANCELED");
    assert_eq!(
        s.consent(id).await.state,
        wpb::ConsentState::Cancelled as i32
    );
}

#[tokio::test]
async fn a_failed_release_is_asked_again_by_the_step_loop_until_ward_settles_it() {
    // The Runner does not hold `ward:cancel` yet: Ward refuses its first ask.
    let mut s = build_granted("", None, None, false).await;
    let (id, c) = waiting(&mut s, "cancel-release-2").await;
    let run = cancel(&mut s.client, &id.to_string())
        .await
        .expect("cancel");
    assert_eq!(
        run.state, "CANCELED",
        "the cancel commits whatever Ward says"
    );
    assert_eq!(
        pending(&mut s, id).await,
        1,
        "the refused ask settled nothing"
    );
    // The release stays due (never lost): once the Runner may cancel, its step loop asks again.
    let mut admin = s.sandbox.admin();
    let runner = admin
        .ensure_office_principal("runner")
        .await
        .expect("runner principal");
    admin
        .ensure_assignment(&runner, "ward:cancel", "run:*", "ward", "cancel")
        .await
        .expect("grant");
    crate::effect_endings::until_cancelled(&s.ward, &c.consent_id).await;
    assert_eq!(pending(&mut s, id).await, 0);
    assert_eq!(s.sim.deliveries(), 0);
}

#[tokio::test]
async fn a_recovery_review_that_cancels_a_quarantined_run_releases_its_consent() {
    let mut s = stack("").await;
    let (id, c) = waiting(&mut s, "cancel-release-3").await;
    // The run's latest checkpoint is corrupted while it waits: the step loop quarantines it.
    let version = i64::try_from(s.run(id).await.version).expect("version");
    crate::common::corrupt_checkpoint(&mut s.sandbox.db.superuser().await, id, version).await;
    s.until(id, "QUARANTINED").await;
    assert_eq!(
        pending(&mut s, id).await,
        1,
        "quarantine settles no consent"
    );
    // The operator reviews it and cancels: the consent is released.
    let mut admin = s.sandbox.admin();
    admin
        .ensure_assignment(
            &s.sandbox.operator_id,
            "runner:review",
            "run:*",
            "runner",
            "review",
        )
        .await
        .expect("grant");
    let point = s
        .client
        .inspect_checkpoint(lychd_proto::runner::v1::InspectCheckpointRequest {
            run_id: id.to_string(),
            version: 0,
        })
        .await
        .expect("inspect")
        .into_inner();
    s.client
        .review_quarantine(lychd_proto::runner::v1::ReviewQuarantineRequest {
            run_id: id.to_string(),
            decision: lychd_proto::runner::v1::ReviewDecision::Cancel as i32,
            recovery_checksum: point.recovery_checksum,
            rationale: "the waiting run is not wanted any more".into(),
        })
        .await
        .expect("review");
    assert_eq!(s.run(id).await.state, "CANCELED");
    crate::effect_endings::until_cancelled(&s.ward, &c.consent_id).await;
    assert_eq!(s.sim.deliveries(), 0);
}
