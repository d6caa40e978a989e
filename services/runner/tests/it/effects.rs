//! Effects (Runner II) over real processes (the built `lychd-ward` and `lychd-runner`), a
//! simulated external system on loopback with programmable faults, and real PostgreSQL: a
//! high-risk effect parks in `WAIT_APPROVAL` until the operator approves in Ward, its approval
//! is consumed before the intent, the intent and its outbox row commit with the checkpoint
//! entering `EXECUTE`, the adapter delivers with the idempotency key, and the receipt is
//! re-ingested; faults (dropped response, duplicate delivery, unknown outcome, permanent
//! refusal, revoked approval, kill -9 at injected points) never apply an effect twice and never
//! let a run succeed without its receipt.

use lychd_proto::runner::v1 as pb;
use lychd_proto::runner::v1::runner_client::RunnerClient;
use lychd_proto::ward::v1 as wpb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::Office;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::simeffect::{Fault, SimEffect};
use lychd_testkit::{Sandbox, channel_with};
use uuid::Uuid;

use crate::common::{eventually, refused};

/// The effect credential the Runner's adapter alone holds (a test value).
pub const CREDENTIAL: &str = "effect-cred-7f3a9c1e5b2d4a6f8e0c";

pub struct Stack {
    pub sandbox: Sandbox,
    pub sim: SimEffect,
    pub client: RunnerClient<PeerChannel>,
    pub ward: WardClient<PeerChannel>,
    pub credential_file: std::path::PathBuf,
    /// A Runner started again after the first one ended at its fault point.
    pub again: Option<lychd_testkit::OfficeProcess>,
    /// The HelmLoop office verifying the runs, their owner approving what is proposed.
    pub _verification: lychd_testkit::verify::Verification,
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.credential_file);
    }
}

/// Ward and a Runner as processes; `office` is added to the Runner's `[office]` section.
pub async fn stack(office: &str) -> Stack {
    build(office, None).await
}

/// [`stack`] with a Dispatcher whose one animator is the simulated runtime at `runtime` (model
/// `m`, family `chat`), and the Runner calling it.
pub async fn build(office: &str, runtime: Option<String>) -> Stack {
    build_with(office, runtime, None).await
}

/// [`build`] with `ward` (TOML lines) as Ward's `[office]` section (standing rules, TTLs).
pub async fn build_with(office: &str, runtime: Option<String>, ward: Option<String>) -> Stack {
    build_granted(office, runtime, ward, true).await
}

/// [`build_with`]; the Runner holds `ward:cancel` on `run:*` (as provisioning gives it) only
/// when `release`.
pub async fn build_granted(
    office: &str,
    runtime: Option<String>,
    ward: Option<String>,
    release: bool,
) -> Stack {
    let sim = SimEffect::start().await;
    let credential_file =
        std::env::temp_dir().join(format!("lychd-effect-credential-{}", Uuid::new_v4()));
    std::fs::write(&credential_file, format!("{CREDENTIAL}\n")).expect("credential file");
    // Defaults the test's `office` lines override.
    let defaults: String = [
        "poll_ms = 20",
        "approval_poll_ms = 50",
        "lease_ttl_ms = 1500",
        "effect_timeout_ms = 700",
    ]
    .into_iter()
    .filter(|l| {
        let key = l.split(' ').next().unwrap_or_default();
        !office.lines().any(|o| o.starts_with(&format!("{key} ")))
    })
    .map(|l| format!("{l}\n"))
    .collect();
    let config = format!(
        "[office]\n{defaults}effect_credential_file = \"{}\"\n{office}\n",
        credential_file.display()
    );
    let mut builder = Sandbox::builder()
        .office(Office::Runner)
        .verified(Office::Runner)
        .config_text(Office::Runner, crate::verified::office_text(&config));
    if let Some(ward) = ward {
        builder = builder.config_text(Office::Ward, format!("[office]\n{ward}\n"));
    }
    if let Some(endpoint) = &runtime {
        builder = builder
            .office(Office::Dispatcher)
            .peer(Office::Runner, Office::Dispatcher)
            .config_text(
                Office::Dispatcher,
                format!(
                    "[office]\n[[office.animators]]\nname = \"sim\"\nsource = \"soulstone\"\n\
                     dialect = \"llama_cpp\"\nendpoint = \"{endpoint}\"\n\n\
                     [[office.capabilities]]\nanimator = \"sim\"\nfamily = \"chat\"\n\
                     model_id = \"m\"\n"
                ),
            );
    }
    let mut sandbox = builder.start().await;
    let mut verification =
        lychd_testkit::verify::Verification::in_sandbox(&mut sandbox, Office::Runner).await;
    verification.approve_all();
    let mut admin = sandbox.admin();
    let runner = admin
        .ensure_office_principal("runner")
        .await
        .expect("runner principal");
    if runtime.is_some() {
        for object in ["capability:*", "lease:*"] {
            admin
                .ensure_assignment(&runner, "dispatcher:lease", object, "dispatcher", "lease")
                .await
                .expect("runner grant");
        }
    }
    // What `lychd provision` gives the Runner's service principal (RUNNER_GRANTS).
    for (action, object, audience, purpose) in [
        ("ward:propose", "effect:runner", "ward", "propose"),
        ("ward:consume", "effect:runner", "ward", "consume"),
        (
            "runner:effect_http",
            "destination:*",
            "runner",
            "effect_http",
        ),
    ] {
        admin
            .ensure_assignment(&runner, action, object, audience, purpose)
            .await
            .expect("runner grant");
    }
    if release {
        admin
            .ensure_assignment(&runner, "ward:cancel", "run:*", "ward", "cancel")
            .await
            .expect("runner grant");
    }
    // The operator: runs, reconciliation, and the approver's side of consent.
    for (action, object, audience, purpose) in [
        ("runner:start", "run:*", "runner", "start"),
        ("runner:read", "run:*", "runner", "read"),
        ("runner:cancel", "run:*", "runner", "cancel"),
        ("runner:reconcile", "run:*", "runner", "reconcile"),
        (
            "runner:effect_http",
            "destination:*",
            "runner",
            "effect_http",
        ),
        ("ward:approve", "effect:*", "ward", "approve"),
        ("ward:review", "consent:*", "ward", "review"),
    ] {
        admin
            .ensure_assignment(&sandbox.operator_id, action, object, audience, purpose)
            .await
            .expect("operator grant");
    }
    let client = RunnerClient::new(channel_with(
        &sandbox.office(Office::Runner).endpoint(),
        &sandbox.token,
    ));
    let ward = WardClient::new(channel_with(
        &sandbox.office(Office::Ward).endpoint(),
        &sandbox.token,
    ));
    Stack {
        sandbox,
        sim,
        client,
        ward,
        credential_file,
        again: None,
        _verification: verification,
    }
}

/// A workflow: a task step, then an effect step of `risk` delivering `{"amount":5,...}` to the
/// simulated system; the obligation needs the effect's receipt.
pub fn workflow(sim: &SimEffect, risk: &str) -> String {
    format!(
        r#"{{"schema":"lychd.runner.workflow/v1","name":"pay","version":"0.1.0",
  "obligations":[{{"id":"paid","evidence":["effect_receipt"]}}],
  "steps":[{{"id":"prepare","kind":"task"}},
           {{"id":"pay","kind":"effect","adapter":"http","destination":"{}","risk":"{risk}",
             "action":{{"amount":5,"to":"acct-1"}},"closes":["paid"]}}],
  "verification":{{"owner":"owner-alice"}}}}"#,
        sim.url("/orders")
    )
}

impl Stack {
    pub async fn start(&mut self, request_id: &str, risk: &str) -> Uuid {
        let run = self
            .client
            .start_run(pb::StartRunRequest {
                request_id: request_id.into(),
                workflow: workflow(&self.sim, risk).into_bytes(),
                input: b"pay the invoice".to_vec(),
                budgets: None,
                timeout_seconds: 0,
                parent_run_id: String::new(),
            })
            .await
            .expect("start")
            .into_inner()
            .run
            .expect("a run");
        Uuid::parse_str(&run.run_id).expect("uuid")
    }

    pub async fn run(&mut self, id: Uuid) -> pb::Run {
        self.client
            .get_run(pb::GetRunRequest {
                run_id: id.to_string(),
            })
            .await
            .expect("get")
            .into_inner()
            .run
            .expect("run")
    }

    /// Wait until run `id` is in `state` (at most 20 s).
    pub async fn until(&mut self, id: Uuid, state: &str) -> pb::Run {
        let client = self.client.clone();
        eventually(&format!("the run reaches {state}"), || {
            let mut c = client.clone();
            async move {
                c.get_run(pb::GetRunRequest {
                    run_id: id.to_string(),
                })
                .await
                .map(|r| r.into_inner().run.expect("run").state == state)
                .unwrap_or(false)
            }
        })
        .await;
        self.run(id).await
    }

    pub async fn inspect(&mut self, id: Uuid) -> pb::InspectEffectResponse {
        self.client
            .inspect_effect(pb::InspectEffectRequest {
                run_id: id.to_string(),
            })
            .await
            .expect("inspect")
            .into_inner()
    }

    /// The run's pending consent (it waits in `WAIT_APPROVAL`).
    pub async fn consent(&mut self, id: Uuid) -> wpb::Consent {
        let consent_id = self.inspect(id).await.consent_id;
        self.ward
            .get_consent(wpb::GetConsentRequest { consent_id })
            .await
            .expect("get consent")
            .into_inner()
            .consent
            .expect("consent")
    }

    /// The operator approves the exact call it reviewed.
    pub async fn approve(&mut self, c: &wpb::Consent) {
        self.ward
            .decide(wpb::DecideRequest {
                consent_id: c.consent_id.clone(),
                verdict: wpb::Verdict::Approve as i32,
                review_digest: c.binding_digest.clone(),
            })
            .await
            .expect("decide");
    }

    /// Start a high-risk run, wait for its approval, approve it: the run id.
    pub async fn approved(&mut self, request_id: &str) -> Uuid {
        let id = self.start(request_id, "high").await;
        self.until(id, "WAIT_APPROVAL").await;
        let c = self.consent(id).await;
        self.approve(&c).await;
        id
    }

    pub async fn ledger(&mut self, id: Uuid) -> Vec<String> {
        self.inspect(id)
            .await
            .ledger
            .into_iter()
            .map(|e| e.kind)
            .collect()
    }

    /// Restart the Runner after it ended itself at a fault point, without fault points.
    pub async fn restart_without_faults(&mut self) {
        let p = self.sandbox.office_mut(Office::Runner);
        assert!(
            p.wait_exit(std::time::Duration::from_secs(20))
                .await
                .is_some(),
            "the runner ends at its fault point"
        );
        let text = std::fs::read_to_string(&p.config_path).expect("config");
        let text: String = text
            .lines()
            .filter(|l| !l.starts_with("fault_points"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&p.config_path, text).expect("config");
        let again = self.sandbox.start_another(Office::Runner).await;
        self.client = RunnerClient::new(channel_with(&again.endpoint(), &self.sandbox.token));
        self.again = Some(again);
    }

    /// Nothing applied twice at the external system, whatever key it came under.
    pub fn no_duplicates(&self) {
        assert_eq!(self.sim.duplicates(), 0, "an effect was applied twice");
    }
}

#[tokio::test]
async fn a_high_risk_effect_waits_for_the_operators_approval_and_is_applied_once() {
    let mut s = stack("").await;
    let id = s.start("pay-1", "high").await;
    s.until(id, "WAIT_APPROVAL").await;
    // Nothing is delivered before the approval.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(s.sim.deliveries(), 0);
    let c = s.consent(id).await;
    assert_eq!(c.state, wpb::ConsentState::Pending as i32);
    let b = c.binding.clone().expect("binding");
    assert_eq!(b.action_hash, s.inspect(id).await.action_digest);
    assert!(b.destination_hash.starts_with("sha256:") && !b.nonce.is_empty());
    assert_eq!(b.workflow_version, "0.1.0");
    s.approve(&c).await;
    let run = s.until(id, "SUCCEEDED").await;
    assert_eq!(run.terminal_category, "success");
    assert_eq!((s.sim.applied(), s.sim.deliveries()), (1, 1));
    s.no_duplicates();
    // The approval was consumed (once, by the runner), and the ledger holds every step.
    let after = s.consent(id).await;
    assert!(after.consumed_at.is_some(), "consumed at effect time");
    let kinds = s.ledger(id).await;
    for k in [
        "proposal",
        "policy_verdict",
        "approval_consumption",
        "intent",
        "attempt",
        "response",
        "receipt",
        "acknowledgement",
    ] {
        assert!(kinds.iter().any(|x| x == k), "ledger has {k}: {kinds:?}");
    }
    let i = s.inspect(id).await;
    assert!(i.idempotency_key.starts_with("sha256:"));
    assert_eq!(s.sim.keys(), vec![i.idempotency_key.clone()]);
    // The receipt was re-ingested: its digest is the one the system answered.
    let receipt = s.sim.receipt(&i.idempotency_key).expect("receipt");
    let ledger = i
        .ledger
        .iter()
        .find(|e| e.kind == "receipt")
        .expect("receipt");
    assert!(
        ledger
            .detail_json
            .contains(&lychd_runner::domain::effect::receipt_digest(&receipt))
    );
    // The credential went only to the destination.
    assert_eq!(s.sim.authorizations(), vec![format!("Bearer {CREDENTIAL}")]);
}

#[tokio::test]
async fn a_dropped_response_is_reconciled_by_status_query_not_delivered_again() {
    let mut s = stack("").await;
    s.sim.fault(Fault::CommitThenDrop);
    let id = s.approved("drop-1").await;
    s.until(id, "SUCCEEDED").await;
    assert_eq!((s.sim.applied(), s.sim.deliveries()), (1, 1));
    assert!(s.sim.status_queries() >= 1);
    s.no_duplicates();
    assert!(s.ledger(id).await.iter().any(|k| k == "reconciliation"));
}

#[tokio::test]
async fn a_duplicate_delivery_is_applied_once() {
    let mut s = stack("").await;
    s.sim.fault(Fault::Duplicate);
    let id = s.approved("dup-1").await;
    s.until(id, "SUCCEEDED").await;
    assert_eq!((s.sim.applied(), s.sim.deliveries()), (1, 2));
    s.no_duplicates();
}

#[tokio::test]
async fn a_permanent_refusal_fails_the_run_and_applies_nothing() {
    let mut s = stack("").await;
    s.sim.fault(Fault::Permanent);
    let id = s.approved("perm-1").await;
    let run = s.until(id, "FAILED").await;
    assert_eq!(run.terminal_category, "permanent_failure");
    assert_eq!(s.sim.applied(), 0);
}

#[tokio::test]
async fn an_unknown_outcome_waits_for_a_human_who_settles_it_with_the_evidence_seen() {
    let mut s = stack("").await;
    s.sim
        .fault(Fault::Slow(std::time::Duration::from_millis(1500)));
    s.sim.break_status();
    let id = s.approved("unknown-1").await;
    s.until(id, "HUMAN_RECONCILIATION").await;
    // Never a blind retry, never success: one delivery, and the run waits.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(s.run(id).await.state, "HUMAN_RECONCILIATION");
    assert_eq!(s.sim.deliveries(), 1);
    let i = s.inspect(id).await;
    let receipt = s.sim.receipt(&i.idempotency_key).expect("applied late");
    let digest = lychd_runner::domain::effect::receipt_digest(&receipt);
    let resolve =
        |evidence: &str, r: pb::EffectResolution, receipt: &str| pb::ResolveUnknownOutcomeRequest {
            run_id: id.to_string(),
            resolution: r as i32,
            receipt_digest: receipt.into(),
            evidence_digest: evidence.into(),
        };
    // A digest of another ledger is stale; a bad one is bad input; nothing changes.
    let stale = format!("sha256:{}", "0".repeat(64));
    refused(
        s.client
            .resolve_unknown_outcome(resolve(&stale, pb::EffectResolution::Confirmed, &digest))
            .await,
        tonic::Code::FailedPrecondition,
        "EVIDENCE_STALE",
    );
    refused(
        s.client
            .resolve_unknown_outcome(resolve(
                &i.ledger_digest,
                pb::EffectResolution::Confirmed,
                "",
            ))
            .await,
        tonic::Code::InvalidArgument,
        "DIGEST_MALFORMED",
    );
    assert_eq!(s.run(id).await.state, "HUMAN_RECONCILIATION");
    s.client
        .resolve_unknown_outcome(resolve(
            &i.ledger_digest,
            pb::EffectResolution::Confirmed,
            &digest,
        ))
        .await
        .expect("resolve");
    s.until(id, "SUCCEEDED").await;
    assert_eq!(s.sim.applied(), 1);
    s.no_duplicates();
    // Twice: the run is no longer reconciling.
    refused(
        s.client
            .resolve_unknown_outcome(resolve(&i.ledger_digest, pb::EffectResolution::Abandon, ""))
            .await,
        tonic::Code::FailedPrecondition,
        "RUN_NOT_RECONCILING",
    );
}

#[tokio::test]
async fn an_abandoned_unknown_outcome_ends_the_run_effect_outcome_unknown() {
    let mut s = stack("").await;
    s.sim
        .fault(Fault::Slow(std::time::Duration::from_millis(1500)));
    s.sim.break_status();
    let id = s.approved("abandon-1").await;
    s.until(id, "HUMAN_RECONCILIATION").await;
    let evidence = s.inspect(id).await.ledger_digest;
    s.client
        .resolve_unknown_outcome(pb::ResolveUnknownOutcomeRequest {
            run_id: id.to_string(),
            resolution: pb::EffectResolution::Abandon as i32,
            receipt_digest: String::new(),
            evidence_digest: evidence,
        })
        .await
        .expect("abandon");
    let run = s.run(id).await;
    assert_eq!(
        (run.state.as_str(), run.terminal_category.as_str()),
        ("EFFECT_OUTCOME_UNKNOWN", "unknown_external_outcome")
    );
}

#[tokio::test]
async fn a_transient_failure_is_delivered_again_with_the_same_key() {
    let mut s = stack("").await;
    s.sim.fault(Fault::Transient);
    let id = s.approved("transient-1").await;
    s.until(id, "SUCCEEDED").await;
    assert_eq!((s.sim.applied(), s.sim.deliveries()), (1, 2));
    s.no_duplicates();
    let attempts = s
        .ledger(id)
        .await
        .into_iter()
        .filter(|k| k == "attempt")
        .count();
    assert_eq!(attempts, 2, "each delivery is a ledger attempt");
}
