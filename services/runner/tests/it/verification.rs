//! Independent completion verification through real processes (issue 28 item 3): Ward (with
//! its own session, delivering owner records to HelmLoop), the HelmLoop office, a Dispatcher
//! with a simulated runtime, and a Runner — the built binaries. A run whose workflow has
//! `verification` ends `SUCCEEDED` only on a HelmLoop PASS it did not produce: its owner
//! records and its promotion exist only once the accountable owner approved them in Ward.

use std::time::Duration;

use lychd_canon::{Value, record_digest};
use lychd_proto::helmloop::v1 as hl;
use lychd_proto::helmloop::v1::helm_loop_client::HelmLoopClient;
use lychd_proto::runner::v1 as pb;
use lychd_proto::runner::v1::runner_client::RunnerClient;
use lychd_proto::ward::v1 as wpb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runner::domain::verification::{self as v, OBSERVED_OUTCOME};
use lychd_runtime::Office;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::simllama::SimLlama;
use lychd_testkit::verify::Verification;
use lychd_testkit::{Sandbox, channel_with};
use uuid::Uuid;

pub use lychd_testkit::verify::OWNER;
pub const OBSERVER: &str = "outcome-bot";

/// A workflow of a task and a model step, verified for [`OWNER`] (and [`OBSERVER`], when
/// `observed`).
pub fn workflow(observed: bool) -> String {
    let observer = if observed {
        format!(r#","observer":"{OBSERVER}""#)
    } else {
        String::new()
    };
    format!(
        r#"{{"schema":"lychd.runner.workflow/v1","name":"summarize","version":"0.1.0",
  "obligations":[{{"id":"gathered","evidence":["task_result"]}},{{"id":"summary","evidence":["model_answer"]}}],
  "steps":[{{"id":"gather","kind":"task","closes":["gathered"]}},
           {{"id":"draft","kind":"model","family":"chat","closes":["summary"]}}],
  "verification":{{"owner":"{OWNER}"{observer}}}}}"#
    )
}

/// What `lychd provision` gives the Runner's service principal beyond the verifier's actions
/// (`lychd_testkit::verify::VERIFIED_GRANTS`, which the shared fixture assigns).
pub const RUNNER_GRANTS: &[(&str, &str)] = &[
    ("dispatcher:lease", "capability:*"),
    ("dispatcher:lease", "lease:*"),
];

pub struct VStack {
    pub sandbox: Sandbox,
    pub _sim: SimLlama,
    pub runner: RunnerClient<PeerChannel>,
    /// The operator: reviews consents, appends observations, reads and reduces at HelmLoop.
    pub ward: WardClient<PeerChannel>,
    pub helmloop: HelmLoopClient<PeerChannel>,
    /// The accountable owner's Ward client.
    pub owner: WardClient<PeerChannel>,
    pub runner_id: String,
    /// HelmLoop and the owner (the shared fixture), kept for the stack's life.
    pub _verification: Verification,
}

fn split(action: &str) -> (&str, &str) {
    action.split_once(':').expect("action")
}

pub async fn vstack() -> VStack {
    let sim = SimLlama::serving("m").await;
    let registry = format!(
        "[office]\n[[office.animators]]\nname = \"sim\"\nsource = \"soulstone\"\n\
         dialect = \"llama_cpp\"\nendpoint = \"{}\"\n\n[[office.capabilities]]\n\
         animator = \"sim\"\nfamily = \"chat\"\nmodel_id = \"m\"\n",
        sim.endpoint()
    );
    // The shared fixture: HelmLoop in the sandbox, Ward delivering the owner records it
    // issues, the runner's verifier grants, the accountable owner [`OWNER`] enrolled — who
    // decides here as each test says (nothing is approved for it).
    let mut sandbox = Sandbox::builder()
        .office(Office::Dispatcher)
        .office(Office::Runner)
        .peer(Office::Runner, Office::Dispatcher)
        .verified(Office::Runner)
        .config_text(Office::Dispatcher, registry)
        .config_text(
            Office::Runner,
            "[office]\npoll_ms = 50\nverify_recheck_ms = 150\n",
        )
        .start()
        .await;
    let verification = Verification::in_sandbox(&mut sandbox, Office::Runner).await;
    let mut admin = sandbox.admin();
    let runner_id = admin
        .ensure_office_principal("runner")
        .await
        .expect("runner");
    assign(&sandbox, &runner_id, RUNNER_GRANTS).await;
    let operator = sandbox.operator_id.clone();
    assign(
        &sandbox,
        &operator,
        &[
            ("ward:review", "consent:*"),
            ("helmloop:append_observation", "subject:*"),
            ("helmloop:read", "subject:*"),
            ("helmloop:reduce", "subject:*"),
            ("runner:start", "run:*"),
            ("runner:read", "run:*"),
            ("runner:read_all", "run:*"),
        ],
    )
    .await;
    let ward_endpoint = sandbox.office(Office::Ward).endpoint();
    VStack {
        runner: RunnerClient::new(channel_with(
            &sandbox.office(Office::Runner).endpoint(),
            &sandbox.token,
        )),
        ward: WardClient::new(channel_with(&ward_endpoint, &sandbox.token)),
        helmloop: HelmLoopClient::new(channel_with(
            &sandbox.office(Office::HelmLoop).endpoint(),
            &sandbox.token,
        )),
        owner: verification.owner.clone(),
        sandbox,
        _sim: sim,
        runner_id,
        _verification: verification,
    }
}

/// Assign `grants` to principal `id`.
async fn assign(sandbox: &Sandbox, id: &str, grants: &[(&str, &str)]) {
    let mut admin = sandbox.admin();
    for (action, object) in grants {
        let (aud, purpose) = split(action);
        admin
            .ensure_assignment(id, action, object, aud, purpose)
            .await
            .expect("assign");
    }
}

/// A session of principal `id` for `audiences`.
pub async fn session(sandbox: &Sandbox, id: &str, audiences: &[&str]) -> String {
    let credential = sandbox
        .admin()
        .issue_standing(id)
        .await
        .expect("credential");
    let ward =
        lychd_runtime::client::channel(&sandbox.office(Office::Ward).endpoint()).expect("endpoint");
    lychd_auth::admin::exchange(ward, &credential, 0, audiences)
        .await
        .expect("session")
        .token
}

impl VStack {
    pub async fn start(&mut self, request_id: &str, workflow: &str) -> Uuid {
        let run = self
            .runner
            .start_run(pb::StartRunRequest {
                request_id: request_id.into(),
                workflow: workflow.as_bytes().to_vec(),
                input: b"summarize the ledger".to_vec(),
                budgets: None,
                timeout_seconds: 0,
                parent_run_id: String::new(),
            })
            .await
            .expect("start")
            .into_inner()
            .run
            .expect("run");
        Uuid::parse_str(&run.run_id).expect("uuid")
    }

    pub async fn run(&mut self, id: Uuid) -> pb::Run {
        self.runner
            .get_run(pb::GetRunRequest {
                run_id: id.to_string(),
            })
            .await
            .expect("get")
            .into_inner()
            .run
            .expect("run")
    }

    /// Wait (at most 60 s) until run `id` satisfies `ok`; the run.
    pub async fn until(&mut self, id: Uuid, what: &str, ok: impl Fn(&pb::Run) -> bool) -> pb::Run {
        let t = std::time::Instant::now();
        loop {
            let r = self.run(id).await;
            if ok(&r) {
                return r;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{what}: the run is {} ({:?})",
                r.state,
                r.verification
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Wait until run `id` is held with `reason`.
    pub async fn held(&mut self, id: Uuid, reason: &str) -> pb::Run {
        self.until(id, &format!("held for {reason}"), |r| {
            r.state == "WAIT_VERIFICATION"
                && r.verification
                    .as_ref()
                    .is_some_and(|v| v.reasons.iter().any(|x| x == reason))
        })
        .await
    }

    /// The pending consent of run `id` for `tool` (`helmloop.issue` or `helmloop.promote`).
    pub async fn pending(&mut self, id: Uuid, tool: &str) -> wpb::Consent {
        let t = std::time::Instant::now();
        loop {
            let listed = self
                .ward
                .list_consents(wpb::ListConsentsRequest {
                    run_id: id.to_string(),
                    state: wpb::ConsentState::Pending as i32,
                    page: None,
                })
                .await
                .expect("list consents")
                .into_inner()
                .consents;
            if let Some(c) = listed.into_iter().find(|c| c.tool_name == tool) {
                return c;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "a pending {tool}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The owner's verdict on run `id`'s pending `tool` consent.
    pub async fn decide(&mut self, id: Uuid, tool: &str, approve: bool) {
        let c = self.pending(id, tool).await;
        let verdict = if approve {
            wpb::Verdict::Approve
        } else {
            wpb::Verdict::Deny
        };
        self.owner
            .decide(wpb::DecideRequest {
                consent_id: c.consent_id,
                verdict: verdict as i32,
                review_digest: c.binding_digest,
            })
            .await
            .expect("the owner decides");
    }

    /// The owner approves run `id`'s owner records, then its promotion.
    pub async fn approve(&mut self, id: Uuid) {
        self.decide(id, "helmloop.issue", true).await;
        self.decide(id, "helmloop.promote", true).await;
    }

    /// A stored body at HelmLoop.
    pub async fn record(&mut self, record_type: &str, id: &str) -> Option<Value> {
        let got = self
            .helmloop
            .get_record(hl::GetRecordRequest {
                record_type: record_type.into(),
                id: id.into(),
            })
            .await
            .ok()?
            .into_inner()
            .records;
        got.first()
            .map(|r| lychd_canon::parse(&r.body).expect("canonical"))
    }

    /// The observer's evidence on run `id`'s outcome (`status`/`conclusion`), appended by
    /// the operator under id `rec`.
    pub async fn observe(&mut self, id: Uuid, rec: &str, status: &str, conclusion: &str) {
        let contract = self
            .record("OutcomeContractV1", &v::contract_id(&id.to_string()))
            .await
            .expect("the owner issued the contract");
        let crit = v::criterion(OBSERVED_OUTCOME, &v::observed_description(OBSERVER));
        let now = time::OffsetDateTime::now_utc();
        let ms = i64::try_from(now.unix_timestamp_nanos() / 1_000_000).expect("ms");
        let body = serde_json::json!({
            "schemaVersion": "0.1", "recordType": "EvidenceRecordV1", "id": rec,
            "subject": contract.get("subject").expect("subject").to_serde(),
            "revision": contract.get("revision").expect("revision").to_serde(),
            "policy": contract.get("policy").expect("policy").to_serde(),
            "source": {"system": "observer", "producer": OBSERVER, "locator": "observer://run"},
            "issuedAt": v::timestamp(ms),
            "contractRef": {"recordType": "OutcomeContractV1",
                "id": contract.get("id").expect("id").to_serde(),
                "digest": contract.get("digest").expect("digest").to_serde()},
            "claim": "the run's summary was read by its reader",
            "criterionResult": {"id": crit.get("id").expect("id").to_serde(),
                "digest": crit.get("digest").expect("digest").to_serde(), "conclusion": conclusion},
            "status": status,
            "observedAt": v::timestamp(ms),
            "validUntil": v::timestamp(ms + 3_600_000),
            "provenance": {"artifactDigest": format!("sha256:{}", "33".repeat(32))},
            "dependencyRevisions": [contract.get("revision").expect("revision").to_serde()],
            "limitations": [],
        });
        let mut value = Value::from_serde(&body).expect("profile");
        let digest = record_digest(&value).expect("digest").render();
        if let Value::Object(m) = &mut value {
            m.insert("digest", Value::String(digest));
        }
        self.helmloop
            .append_records(hl::AppendRecordsRequest {
                records: vec![lychd_canon::to_canonical_vec(&value).expect("canonical")],
            })
            .await
            .expect("the observer's evidence is appended");
    }

    /// Every run that ended `SUCCEEDED` has a PASS it did not produce: its verification says
    /// PASS, with the predicate's every conjunct, its success transition's actor is the
    /// HelmLoop office, and the stored evaluation at HelmLoop is a PASS.
    pub async fn success_only_on_pass(&mut self, runs: &[Uuid]) -> usize {
        let mut succeeded = 0;
        for id in runs {
            let r = self.run(*id).await;
            if r.state != "SUCCEEDED" {
                continue;
            }
            succeeded += 1;
            let ver = r.verification.expect("a succeeded run was verified");
            assert_eq!(ver.disposition, "PASS", "{id}");
            assert!(
                ver.obligations_closed
                    && ver.independent_pass
                    && ver.no_unknown_effect
                    && ver.terminal_edge_legal,
                "{id}: {ver:?}"
            );
            let last = self
                .runner
                .list_run_transitions(pb::ListRunTransitionsRequest {
                    run_id: id.to_string(),
                    page: None,
                })
                .await
                .expect("transitions")
                .into_inner()
                .transitions
                .pop()
                .expect("a transition");
            assert_eq!(
                (last.trigger.as_str(), last.actor.as_str()),
                ("verified_pass", "helmloop")
            );
            let evaluation = self
                .helmloop
                .get_evaluation(hl::GetEvaluationRequest {
                    input_digest: ver.input_digest.clone(),
                })
                .await
                .expect("the stored evaluation")
                .into_inner();
            let summary = evaluation.summary.expect("summary");
            assert_eq!(summary.disposition, hl::Disposition::Pass as i32, "{id}");
        }
        succeeded
    }
}

#[tokio::test]
async fn a_run_succeeds_only_on_the_owners_promotion_and_a_helmloop_pass() {
    let mut s = vstack().await;
    let id = s.start("verify-pass", &workflow(false)).await;
    // Held: the owner has not issued the contract and the assurance yet.
    let r = s.held(id, "OWNER_RECORDS_PENDING").await;
    let ver = r.verification.expect("verification");
    assert_eq!(ver.subject_id, format!("run-{id}"));
    assert!(ver.obligations_closed && !ver.independent_pass);
    // The runner's candidate observations are stored, under the runner's principal.
    let receipt = s
        .record("ExecutionReceiptV1", &format!("receipt-{id}"))
        .await
        .expect("the receipt");
    assert_eq!(
        receipt.get("status").and_then(Value::as_str),
        Some("succeeded")
    );
    // A runner killed while the run is held: another process resumes the verification and
    // drafts the same bytes (HelmLoop replays them, never a second body).
    s.sandbox
        .restart(Office::Runner, nix::sys::signal::Signal::SIGKILL)
        .await;
    s.runner = RunnerClient::new(channel_with(
        &s.sandbox.office(Office::Runner).endpoint(),
        &s.sandbox.token,
    ));
    s.decide(id, "helmloop.issue", true).await;
    // Held again, by HelmLoop's own reduction: every axis but the promotion passes, which the
    // runner proposed once the records existed and the owner has not decided.
    let r = s.held(id, "PROMOTION_NOT_REQUESTED").await;
    assert_eq!(
        r.verification.expect("verification").reasons,
        ["PROMOTION_NOT_REQUESTED"]
    );
    assert_ne!(s.run(id).await.state, "SUCCEEDED");
    s.decide(id, "helmloop.promote", true).await;
    let r = s.until(id, "succeeded", |r| r.state == "SUCCEEDED").await;
    let ver = r.verification.expect("verification");
    assert_eq!(ver.disposition, "PASS");
    assert!(
        ver.axes.contains(&"promotion=APPROVED".to_owned()),
        "{:?}",
        ver.axes
    );
    assert_eq!(s.success_only_on_pass(&[id]).await, 1);
    // Asked several times, across a crash: every identity of the run holds exactly one body.
    assert!(ver.asked >= 3, "{ver:?}");
    for (t, rid) in [
        ("ExecutionReceiptV1", format!("receipt-{id}")),
        ("EvidenceRecordV1", format!("evidence-{id}.gathered")),
        ("EvidenceRecordV1", format!("evidence-{id}.summary")),
        ("OutcomeContractV1", format!("contract-{id}")),
        ("AssuranceDecisionV1", format!("assurance-{id}")),
    ] {
        let bodies = s
            .helmloop
            .get_record(hl::GetRecordRequest {
                record_type: t.into(),
                id: rid.clone(),
            })
            .await
            .expect("record")
            .into_inner()
            .records;
        assert_eq!(bodies.len(), 1, "{t} {rid}");
        assert!(!bodies[0].equivocation, "{t} {rid}");
    }
    // The path: VERIFY held, waited, changed, passed.
    let triggers: Vec<String> = s
        .runner
        .list_run_transitions(pb::ListRunTransitionsRequest {
            run_id: id.to_string(),
            page: None,
        })
        .await
        .expect("transitions")
        .into_inner()
        .transitions
        .into_iter()
        .map(|t| t.trigger)
        .collect();
    let tail: Vec<&str> = triggers
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        ["verification_hold", "verification_changed", "verified_pass"]
    );
    s.sandbox.stop().await;
}

#[tokio::test]
async fn a_contradicted_outcome_rejects_and_the_runner_cannot_write_its_verdict() {
    let mut s = vstack().await;
    let id = s.start("verify-reject", &workflow(true)).await;
    s.approve(id).await;
    // Everything but the outcome passes: held for the independent observer.
    s.held(id, "OUTCOME_NOT_OBSERVED").await;
    s.observe(id, "observed-1", "contradicts", "NOT_MET").await;
    let r = s.until(id, "failed", |r| r.state == "FAILED").await;
    let ver = r.verification.expect("verification");
    assert_eq!(
        (ver.disposition.as_str(), ver.reasons.as_slice()),
        ("REJECT", &["OUTCOME_NOT_MET".to_owned()][..])
    );
    assert_eq!(r.terminal_category, "permanent_failure");
    assert_eq!(s.success_only_on_pass(&[id]).await, 0);

    // The runner's own principal cannot write the records it is judged by: HelmLoop refuses
    // its append of a promotion decision and of a contract, and Ward its verdict.
    let token = session(&s.sandbox, &s.runner_id.clone(), &["helmloop", "ward"]).await;
    let mut as_runner = HelmLoopClient::new(channel_with(
        &s.sandbox.office(Office::HelmLoop).endpoint(),
        &token,
    ));
    let decisions = s
        .helmloop
        .list_records(hl::ListRecordsRequest {
            subject_id: format!("run-{id}"),
            record_type: "PromotionDecisionV1".into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner()
        .records;
    let contract = s
        .record("OutcomeContractV1", &v::contract_id(&id.to_string()))
        .await
        .expect("contract");
    for body in [
        decisions
            .first()
            .expect("the owner's decision")
            .body
            .clone(),
        lychd_canon::to_canonical_vec(&contract).expect("canonical"),
    ] {
        let refused = as_runner
            .append_records(hl::AppendRecordsRequest {
                records: vec![body],
            })
            .await
            .expect_err("the runner appends no owner record");
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    }
    let mut ward_as_runner = WardClient::new(channel_with(
        &s.sandbox.office(Office::Ward).endpoint(),
        &token,
    ));
    let id2 = s.start("verify-self", &workflow(false)).await;
    let c = s.pending(id2, "helmloop.issue").await;
    let refused = ward_as_runner
        .decide(wpb::DecideRequest {
            consent_id: c.consent_id,
            verdict: wpb::Verdict::Approve as i32,
            review_digest: c.binding_digest,
        })
        .await
        .expect_err("the runner settles nothing");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    assert_eq!(s.run(id2).await.state, "WAIT_VERIFICATION");
    s.sandbox.stop().await;
}

#[tokio::test]
async fn an_ambiguous_outcome_is_held_for_review_and_decided_by_the_owner() {
    let mut s = vstack().await;
    let id = s.start("verify-gray", &workflow(true)).await;
    s.decide(id, "helmloop.issue", true).await;
    s.pending(id, "helmloop.promote").await;
    // The observer says both: the contract's human_gray_band — held, released from its lease.
    s.observe(id, "observed-a", "supports", "MET").await;
    s.observe(id, "observed-b", "contradicts", "NOT_MET").await;
    let r = s.held(id, "OUTCOME_MIXED").await;
    assert!(
        r.verification
            .expect("verification")
            .reasons
            .contains(&"PROMOTION_NOT_REQUESTED".to_owned())
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    let r = s.run(id).await;
    assert_eq!(
        r.state, "WAIT_VERIFICATION",
        "still held: asked again, not decided"
    );
    // Released from its lease between asks (it is claimed only to be asked again).
    let mut db = s.sandbox.db.superuser().await;
    let t = std::time::Instant::now();
    loop {
        let lease: Option<String> =
            sqlx::query_scalar("SELECT lease_holder FROM runner.runs WHERE id = $1")
                .bind(id)
                .fetch_one(&mut db)
                .await
                .expect("lease");
        if lease.is_none() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "a held run is released"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The owner reviews and refuses the promotion: the run fails, never succeeds.
    s.decide(id, "helmloop.promote", false).await;
    let r = s.until(id, "failed", |r| r.state == "FAILED").await;
    assert_eq!(
        r.verification.expect("verification").reasons,
        ["PROMOTION_REFUSED_BY_OWNER"]
    );
    assert_eq!(s.success_only_on_pass(&[id]).await, 0);
    s.sandbox.stop().await;
}
