//! Budget and deadline endings release a run's pending consents (issue 28, Runner II), over
//! real processes (the built `lychd-ward`, `lychd-runner` and, for verification, HelmLoop and a
//! Dispatcher; the simulated external system; real PostgreSQL): a run waiting in
//! `WAIT_APPROVAL` or `WAIT_VERIFICATION` that its deadline or a budget ends leaves no consent
//! pending at Ward — the ending marks the release in its own transaction and the step loop
//! asks Ward's `CancelForRun` (as a cancel does); nothing is ever delivered after it.

use lychd_proto::runner::v1 as pb;
use lychd_proto::ward::v1 as wpb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::simeffect::SimEffect;
use uuid::Uuid;

use crate::common::{eventually, transitions};
use crate::effects::{Stack, stack};

/// The effects workflow (a task, then a high-risk payment to the simulated system) with
/// `verification` declared, as every workflow that could end `SUCCEEDED` must.
pub fn verified_workflow(sim: &SimEffect) -> String {
    format!(
        r#"{{"schema":"lychd.runner.workflow/v1","name":"pay","version":"0.1.0",
  "obligations":[{{"id":"paid","evidence":["effect_receipt"]}}],
  "steps":[{{"id":"prepare","kind":"task"}},
           {{"id":"pay","kind":"effect","adapter":"http","destination":"{}","risk":"high",
             "action":{{"amount":5,"to":"acct-1"}},"closes":["paid"]}}],
  "verification":{{"owner":"owner-alice"}}}}"#,
        sim.url("/orders")
    )
}

/// Run `run_id`'s consents in `state` at Ward.
pub async fn consents(
    ward: &mut WardClient<PeerChannel>,
    run_id: Uuid,
    state: wpb::ConsentState,
) -> Vec<wpb::Consent> {
    ward.list_consents(wpb::ListConsentsRequest {
        run_id: run_id.to_string(),
        state: state as i32,
        page: None,
    })
    .await
    .expect("list consents")
    .into_inner()
    .consents
}

/// Wait until consent `consent_id` is settled `cancelled` at Ward.
pub async fn until_cancelled(ward: &WardClient<PeerChannel>, consent_id: &str) {
    eventually("the runner releases the consent", || {
        let mut w = ward.clone();
        let consent_id = consent_id.to_owned();
        async move {
            w.get_consent(wpb::GetConsentRequest { consent_id })
                .await
                .ok()
                .and_then(|r| r.into_inner().consent)
                .is_some_and(|c| c.state == wpb::ConsentState::Cancelled as i32)
        }
    })
    .await;
}

/// Start the verified high-risk run with `timeout_seconds` and `budgets`; wait until its
/// approval is pending: the run and its consent.
async fn waiting(
    s: &mut Stack,
    request_id: &str,
    timeout_seconds: i64,
    budgets: Option<pb::Budgets>,
) -> (Uuid, wpb::Consent) {
    let run = s
        .client
        .start_run(pb::StartRunRequest {
            request_id: request_id.into(),
            workflow: verified_workflow(&s.sim).into_bytes(),
            input: b"pay the invoice".to_vec(),
            budgets,
            timeout_seconds,
            parent_run_id: String::new(),
        })
        .await
        .expect("start")
        .into_inner()
        .run
        .expect("a run");
    let id = Uuid::parse_str(&run.run_id).expect("uuid");
    s.until(id, "WAIT_APPROVAL").await;
    let c = s.consent(id).await;
    assert_eq!(c.state, wpb::ConsentState::Pending as i32);
    (id, c)
}

/// Run `id` ended in `state` by `event` out of `WAIT_APPROVAL`; its consent `c` is released,
/// a late approval settles nothing, and nothing is delivered.
async fn released(s: &mut Stack, id: Uuid, c: &wpb::Consent, state: &str, event: &str) {
    s.until(id, state).await;
    let t = transitions(&mut s.client, &id.to_string())
        .await
        .expect("transitions");
    let last = t.last().expect("a transition");
    assert_eq!(
        (last.source_state.as_str(), last.trigger.as_str()),
        ("WAIT_APPROVAL", event)
    );
    until_cancelled(&s.ward, &c.consent_id).await;
    assert!(
        consents(&mut s.ward, id, wpb::ConsentState::Pending)
            .await
            .is_empty(),
        "no consent of the ended run is pending"
    );
    // The operator's approval arriving late is refused: the consent stays cancelled.
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
        wpb::ConsentState::Cancelled as i32
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.sim.deliveries(), 0, "nothing delivered");
    s.no_duplicates();
    assert_eq!(s.run(id).await.state, state);
}

#[tokio::test]
async fn the_deadline_of_a_run_waiting_for_approval_releases_its_consent() {
    let mut s = stack("").await;
    let (id, c) = waiting(&mut s, "deadline-release-1", 3, None).await;
    released(&mut s, id, &c, "TIMED_OUT", "deadline_passed").await;
}

#[tokio::test]
async fn the_suspended_budget_of_a_run_waiting_for_approval_releases_its_consent() {
    let mut s = stack("").await;
    let budgets = pb::Budgets {
        max_suspended_seconds: 2,
        ..Default::default()
    };
    let (id, c) = waiting(&mut s, "budget-release-1", 0, Some(budgets)).await;
    released(&mut s, id, &c, "BUDGET_EXHAUSTED", "budget_exhausted").await;
}

#[tokio::test]
async fn the_suspended_budget_of_a_run_held_for_verification_releases_its_owner_records_consent() {
    let mut s = crate::verification::vstack().await;
    // What `lychd provision` gives the Runner: the release of an ended run's consents.
    s.sandbox
        .admin()
        .ensure_assignment(&s.runner_id, "ward:cancel", "run:*", "ward", "cancel")
        .await
        .expect("grant");
    let budgets = pb::Budgets {
        max_suspended_seconds: 3,
        ..Default::default()
    };
    let run = s
        .runner
        .start_run(pb::StartRunRequest {
            request_id: "verify-budget-release-1".into(),
            workflow: crate::verification::workflow(false).into_bytes(),
            input: b"summarize the ledger".to_vec(),
            budgets: Some(budgets),
            timeout_seconds: 0,
            parent_run_id: String::new(),
        })
        .await
        .expect("start")
        .into_inner()
        .run
        .expect("a run");
    let id = Uuid::parse_str(&run.run_id).expect("uuid");
    s.held(id, "OWNER_RECORDS_PENDING").await;
    let c = s.pending(id, "helmloop.issue").await;
    let ended = s
        .until(id, "the budget ends the held run", |r| {
            r.state == "BUDGET_EXHAUSTED"
        })
        .await;
    assert_eq!(ended.terminal_category, "budget_exhausted");
    let t = transitions(&mut s.runner, &id.to_string())
        .await
        .expect("transitions");
    let last = t.last().expect("a transition");
    assert_eq!(
        (last.source_state.as_str(), last.trigger.as_str()),
        ("WAIT_VERIFICATION", "budget_exhausted")
    );
    until_cancelled(&s.ward, &c.consent_id).await;
    assert!(
        consents(&mut s.ward, id, wpb::ConsentState::Pending)
            .await
            .is_empty(),
        "no consent of the ended run is pending"
    );
    // The owner's approval arriving late issues nothing: the consent stays cancelled.
    let _ = s
        .owner
        .decide(wpb::DecideRequest {
            consent_id: c.consent_id.clone(),
            verdict: wpb::Verdict::Approve as i32,
            review_digest: c.binding_digest.clone(),
        })
        .await;
    let after = s
        .ward
        .get_consent(wpb::GetConsentRequest {
            consent_id: c.consent_id.clone(),
        })
        .await
        .expect("get consent")
        .into_inner()
        .consent
        .expect("consent");
    assert_eq!(after.state, wpb::ConsentState::Cancelled as i32);
    assert!(t.iter().all(|t| t.target_state != "SUCCEEDED"));
}
