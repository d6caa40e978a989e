//! Deterministic replay (`ReplayRun`): a finished run's transitions re-executed read-only from
//! its recorded inputs. Real processes (Ward, Dispatcher, Runner) and a simulated runtime for
//! the model steps; real PostgreSQL for the record and its tampering.

use lychd_proto::runner::v1 as pb;
use lychd_testkit::simllama::SimHealth;
use tonic::Code;
use uuid::Uuid;

use crate::common::{self, eventually, refused};
use crate::model;

/// A task step, then a model step that closes the obligation; the input makes the model answer
/// empty until the repair round (so the run verifies, is rejected, and repairs).
const INPUT: &str = "[simllama:empty-unless:repair round 2] summarize the ledger";

async fn replay(c: &mut common::Client, id: &str) -> Result<pb::ReplayRunResponse, tonic::Status> {
    c.replay_run(pb::ReplayRunRequest { run_id: id.into() })
        .await
        .map(tonic::Response::into_inner)
}

/// A digest of every row of every table of the Runner's schema (and the Dispatcher's leases).
async fn digests(s: &model::Stack) -> Vec<(String, String)> {
    let mut db = s.sandbox.db.superuser().await;
    let tables: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_schema::text, table_name::text FROM information_schema.tables \
          WHERE (table_schema = 'runner' OR (table_schema = 'dispatcher' AND table_name = 'leases')) \
            AND table_type = 'BASE TABLE' ORDER BY 1, 2",
    )
    .fetch_all(&mut db)
    .await
    .expect("tables");
    assert!(tables.len() >= 8, "{tables:?}");
    let mut out = Vec::new();
    for (schema, table) in tables {
        let d: String = sqlx::query_scalar(&format!(
            "SELECT md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM {schema}.{table} x"
        ))
        .fetch_one(&mut db)
        .await
        .expect("digest");
        out.push((format!("{schema}.{table}"), d));
    }
    out
}

/// A run through a transient failure (a retry with a recorded jitter seed), a cold-capability
/// wait, a task step, a model step answering empty, a repair round and success.
async fn eventful_run(s: &mut model::Stack) -> Uuid {
    s.sim.set_health(SimHealth::Status(500));
    let id = s.start_doc("replay-1", model::WORKFLOW, INPUT, None).await;
    let client = s.client.clone();
    let seen = |trigger: &'static str| {
        let mut c = client.clone();
        async move {
            c.list_run_transitions(pb::ListRunTransitionsRequest {
                run_id: id.to_string(),
                page: None,
            })
            .await
            .expect("transitions")
            .into_inner()
            .transitions
            .iter()
            .any(|t| t.trigger == trigger)
        }
    };
    eventually("a transient failure", || seen("transient_failure")).await;
    s.sim.set_health(SimHealth::Loading);
    eventually("a cold wait", || seen("capability_cold")).await;
    s.sim.set_health(SimHealth::Ok);
    let run = s.ended(id).await;
    assert_eq!(run.state, "SUCCEEDED");
    let t = s.triggers(id).await;
    for trigger in [
        "transient_failure",
        "capability_cold",
        "capability_warm",
        "verified_reject",
        "verified_pass",
    ] {
        assert!(t.iter().any(|x| x == trigger), "{trigger} in {t:?}");
    }
    id
}

#[tokio::test]
async fn a_run_with_a_retry_a_cold_wait_and_a_repair_round_replays_without_divergence_and_changes_nothing()
 {
    let mut s = model::stack().await;
    let id = eventful_run(&mut s).await;
    // The commit that ended the run out of verification marked its consents for release;
    // the step loop asks Ward and clears the mark after the run reads as ended. Only then is
    // the run's row final (a release still due is pushed out, rewriting it, at every retry).
    eventually("the run's consent release is asked", || async {
        let mut db = s.sandbox.db.superuser().await;
        sqlx::query_scalar::<_, bool>(
            "SELECT consent_release_due IS NULL FROM runner.runs WHERE id = $1",
        )
        .bind(id)
        .fetch_one(&mut db)
        .await
        .expect("release mark")
    })
    .await;
    let (chats, requests) = (s.sim.chats(), s.sim.requests());
    let before = digests(&s).await;
    let mut c = s.client.clone();
    let r = replay(&mut c, &id.to_string()).await.expect("replay");
    let total = s.triggers(id).await.len() as u64;
    assert_eq!(r.divergence, None, "{r:?}");
    assert_eq!(
        (r.transitions_replayed, r.transitions_total),
        (total, total)
    );
    assert!(r.inputs_read >= 2 * (total - 1), "{r:?}");
    assert_eq!(r.rules_version, lychd_runner::domain::replay::RULES_VERSION);
    assert_eq!(r.fsm_sha256, lychd_runner::domain::fsm::FSM_SHA256);
    assert!(!r.declared_nondeterminism.is_empty());
    // Read-only: no row of the Runner's schema (or the Dispatcher's leases) changed, and the
    // runtime was not called.
    assert_eq!(digests(&s).await, before);
    assert_eq!((s.sim.chats(), s.sim.requests()), (chats, requests));
    // Every kind the run read was recorded: the answers, a task result, the jitter seed, the
    // capability answers, the clocks, and the tree totals its consuming commits' gate read.
    let mut db = s.sandbox.db.superuser().await;
    let kinds: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT kind FROM runner.run_inputs WHERE run_id = $1 ORDER BY kind",
    )
    .bind(id)
    .fetch_all(&mut db)
    .await
    .expect("kinds");
    assert_eq!(
        kinds,
        [
            "capability",
            "clock",
            "model_response",
            "random",
            "task_result",
            "tree"
        ]
    );
    // The answer is kept in the Runner's schema, and the replay's answer never holds it.
    assert!(!format!("{r:?}").contains("summarize the ledger"));
}

#[tokio::test]
async fn a_tampered_model_answer_is_the_first_divergence_at_its_transition() {
    let mut s = model::stack().await;
    let id = eventful_run(&mut s).await;
    let mut db = s.sandbox.db.superuser().await;
    // The last model answer (the repair round's): its content changed in PostgreSQL.
    let version: i64 = sqlx::query_scalar(
        "UPDATE runner.run_inputs SET body = convert_to(replace(convert_from(body, 'UTF8'), \
                '\"content\":\"', '\"content\":\"tampered '), 'UTF8') \
          WHERE (run_id, version, seq) = (SELECT run_id, version, seq FROM runner.run_inputs \
                 WHERE run_id = $1 AND kind = 'model_response' ORDER BY version DESC LIMIT 1) \
          RETURNING version",
    )
    .bind(id)
    .fetch_one(&mut db)
    .await
    .expect("tamper");
    let mut c = s.client.clone();
    let r = replay(&mut c, &id.to_string()).await.expect("replay");
    let d = r.divergence.expect("a divergence");
    assert_eq!(d.version, version as u64, "{d:?}");
    assert_eq!(d.transition_index, version as u64 - 1);
    assert_eq!(r.transitions_replayed, version as u64 - 1);
    assert_eq!(
        (d.expected_trigger.as_str(), d.replayed_trigger.as_str()),
        ("step_result", "step_result")
    );
    assert_eq!(d.expected_target_state, d.replayed_target_state);
    assert_ne!(d.expected_checkpoint_sha256, d.replayed_checkpoint_sha256);
    assert_eq!(d.reason, "another checkpoint");
    // A tampered clock read is found as well (the recorded order of reads is part of it).
    sqlx::query(
        "UPDATE runner.run_inputs SET kind = 'random' \
          WHERE run_id = $1 AND version = 2 AND seq = 1",
    )
    .bind(id)
    .execute(&mut db)
    .await
    .expect("tamper clock");
    let r = replay(&mut c, &id.to_string()).await.expect("replay");
    let d = r.divergence.expect("a divergence");
    assert_eq!((d.transition_index, d.version), (1, 2), "{d:?}");
    assert_eq!(d.reason, "read a clock input where random was recorded");
}

#[tokio::test]
async fn replay_refuses_bad_ids_unfinished_and_others_runs_and_unreplayable_versions() {
    let s = common::stack().await;
    let mut c = s.client.clone();
    refused(
        replay(&mut c, "nope").await,
        Code::InvalidArgument,
        "RUN_ID_MALFORMED",
    );
    refused(
        replay(&mut c, &Uuid::new_v4().to_string()).await,
        Code::NotFound,
        "RUN_NOT_FOUND",
    );
    let run = common::start(&mut c, "replay-r", "data").await;
    // Not ended (the step loop is off: it stays CREATED).
    refused(
        replay(&mut c, &run.run_id).await,
        Code::FailedPrecondition,
        "RUN_NOT_ENDED",
    );
    common::cancel(&mut c, &run.run_id).await.expect("cancel");
    // Another principal's run is not found, even with `runner:read`.
    let (_, mut other) = s.principal("other", &["runner:read"]).await;
    refused(
        replay(&mut other, &run.run_id).await,
        Code::NotFound,
        "RUN_NOT_FOUND",
    );
    // A finished run of external events only (creation, the caller's cancel) replays.
    let r = replay(&mut c, &run.run_id).await.expect("replay");
    assert_eq!(
        (r.transitions_replayed, r.transitions_total, r.divergence),
        (2, 2, None)
    );
    // A run recorded before inputs were, or under another FSM, is not replayed.
    let mut db = s.db().await;
    for (change, back) in [
        ("inputs_recorded = NULL", "inputs_recorded = true"),
        ("fsm_sha256 = repeat('0', 64)", "fsm_sha256 = $2"),
        (
            "state_schema_version = '9.9.9'",
            "state_schema_version = '0.1.0'",
        ),
    ] {
        for (set, expect) in [(change, false), (back, true)] {
            sqlx::query(&format!(
                "UPDATE runner.runs SET {set} WHERE id = $1::uuid AND $2 <> ''"
            ))
            .bind(&run.run_id)
            .bind(lychd_runner::domain::fsm::FSM_SHA256)
            .execute(&mut db)
            .await
            .expect("change");
            let answer = replay(&mut c, &run.run_id).await;
            if expect {
                assert!(answer.is_ok(), "{set}: {answer:?}");
            } else {
                refused(
                    answer,
                    Code::FailedPrecondition,
                    "REPLAY_VERSION_UNSUPPORTED",
                );
            }
        }
    }
}
