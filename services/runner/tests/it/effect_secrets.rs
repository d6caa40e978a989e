//! Secret isolation (loop-contract v1 `security.secret_isolation`, issue 28 point 4): the
//! effect credential reaches the effect's destination and nothing else — not a model step (the
//! simulated runtime's received requests), not the Runner's rows, log or environment.

use lychd_proto::runner::v1 as pb;
use lychd_runtime::Office;
use lychd_testkit::simllama::SimLlama;

use crate::effects::{CREDENTIAL, build};

#[tokio::test]
async fn the_effect_credential_reaches_only_the_effect_destination() {
    let runtime = SimLlama::serving("m").await;
    let mut s = build("", Some(runtime.endpoint())).await;
    let workflow = format!(
        r#"{{"schema":"lychd.runner.workflow/v1","name":"pay","version":"0.1.0",
  "obligations":[{{"id":"summary","evidence":["model_answer"]}},
                 {{"id":"paid","evidence":["effect_receipt"]}}],
  "steps":[{{"id":"draft","kind":"model","family":"chat","closes":["summary"]}},
           {{"id":"pay","kind":"effect","adapter":"http","destination":"{}","risk":"high",
             "action":{{"amount":5,"to":"acct-1"}},"closes":["paid"]}}],
  "verification":{{"owner":"owner-alice"}}}}"#,
        s.sim.url("/orders")
    );
    let run = s
        .client
        .start_run(pb::StartRunRequest {
            request_id: "secret-1".into(),
            workflow: workflow.into_bytes(),
            input: b"summarize then pay".to_vec(),
            budgets: None,
            timeout_seconds: 0,
            parent_run_id: String::new(),
        })
        .await
        .expect("start")
        .into_inner()
        .run
        .expect("run");
    let id = uuid::Uuid::parse_str(&run.run_id).expect("uuid");
    s.until(id, "WAIT_APPROVAL").await;
    let c = s.consent(id).await;
    s.approve(&c).await;
    s.until(id, "SUCCEEDED").await;
    assert_eq!(s.sim.applied(), 1);
    // The destination got it, in the Authorization header, and nothing else did.
    assert_eq!(s.sim.authorizations(), vec![format!("Bearer {CREDENTIAL}")]);
    let seen = runtime.received();
    assert!(!seen.is_empty(), "the model step ran");
    assert!(
        seen.iter().all(|r| !r.contains(CREDENTIAL)),
        "a model step received the effect credential"
    );
    // Not in any row of the Runner's schema.
    let mut db = s.sandbox.db.superuser().await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
          WHERE table_schema = 'runner' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(&mut db)
    .await
    .expect("tables");
    assert!(tables.iter().any(|t| t == "effect_ledger"));
    for t in &tables {
        let dump: Option<String> =
            sqlx::query_scalar(&format!("SELECT json_agg(t)::text FROM runner.{t} t"))
                .fetch_one(&mut db)
                .await
                .expect("dump");
        assert!(
            !dump.unwrap_or_default().contains(CREDENTIAL),
            "runner.{t} holds the credential"
        );
    }
    // Not in the Runner's log, nor its environment (it reads a file reference only).
    let runner = s.sandbox.office(Office::Runner);
    assert!(!runner.log().contains(CREDENTIAL), "the runner logged it");
    let environ = std::fs::read(format!("/proc/{}/environ", runner.pid())).expect("environ");
    assert!(
        !String::from_utf8_lossy(&environ).contains(CREDENTIAL),
        "the runner's environment holds it"
    );
}
