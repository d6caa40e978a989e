//! Retention while runs flow (issue 30 item 3): the office's own job, with ages of two seconds
//! and a round every second, deletes finished run trees with every row naming them — and never a
//! run still in use: one not terminal, a finished child of a root that is not, one whose consent
//! release or compensation is still due, or one with an outbox row not settled. The effect ledger stays
//! append-only for the runtime role; only the owner's pruning function deletes from it.

use std::time::{Duration, Instant};

use lychd_proto::runner::v1 as pb;
use lychd_runtime::Office;
use tonic::Code;
use uuid::Uuid;

use crate::common::*;

const RETENTION: &str = "interval_seconds = 1\nbatch_size = 3\npause_ms = 0\n\
    [keep_seconds]\nruns = 2\neffect_runs = 2\n";

/// Every table that names a run, with the column that does.
const TABLES: [&str; 11] = [
    "runs",
    "run_transitions",
    "run_checkpoints",
    "run_reviews",
    "state_migrations",
    "provenance_snapshots",
    "run_inputs",
    "effects",
    "effect_outbox",
    "effect_ledger",
    "effect_compensations",
];

async fn retained() -> Stack {
    let office: toml::Table = "drive = false".parse().expect("office");
    let retention: toml::Table = RETENTION.parse().expect("retention");
    let spawned = lychd_testkit::spawn_office_with(lychd_runner::spec(), move |c| {
        c.office = office;
        c.retention = retention;
    })
    .await;
    for action in TESTER_ACTIONS {
        spawned.allow(action, "run:*").await;
    }
    // As provisioning gives it: a cancelled run's consents are released at once, so no release
    // stays due.
    let mut admin = spawned.admin.clone();
    let runner = admin
        .ensure_office_principal("runner")
        .await
        .expect("runner");
    admin
        .ensure_assignment(&runner, "ward:cancel", "run:*", "ward", "cancel")
        .await
        .expect("grant");
    let client = lychd_proto::runner::v1::runner_client::RunnerClient::new(spawned.channel());
    Stack {
        spawned,
        client,
        verification: None,
    }
}

async fn start_under(c: &mut Client, request_id: &str, parent: &str) -> pb::Run {
    c.start_run(pb::StartRunRequest {
        parent_run_id: parent.into(),
        ..start_req(request_id, "in")
    })
    .await
    .expect("start")
    .into_inner()
    .run
    .expect("a run")
}

/// How many rows of each table in [`TABLES`] name run `id` (its own row for `runs`).
async fn rows(s: &Stack, id: &str) -> Vec<i64> {
    let mut db = s.db().await;
    let mut counts = Vec::new();
    for table in TABLES {
        let column = if table == "runs" { "id" } else { "run_id" };
        let n: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM runner.{table} WHERE {column} = $1::uuid"
        ))
        .bind(id)
        .fetch_one(&mut db)
        .await
        .expect("count");
        counts.push(n);
    }
    counts
}

/// Give run `id` one effect whose outbox row is settled or not, with two ledger entries.
async fn with_effect(s: &Stack, id: &str, settled: bool) {
    let mut db = s.db().await;
    use sha2::Digest;
    let key = format!(
        "sha256:{}",
        hex::encode(sha2::Sha256::digest(id.as_bytes()))
    );
    sqlx::query(
        "INSERT INTO runner.effects (run_id, effect_sequence, transition_id, step, adapter, \
             adapter_version, destination, action_digest, idempotency_tuple, idempotency_key, \
             consent_id, binding_digest, version) \
         VALUES ($1::uuid, 1, $2, 'send', 'http', '1', 'example.test', $3, 'tuple', $3, 'c', 'b', 2)",
    )
    .bind(id)
    .bind(Uuid::new_v4())
    .bind(&key)
    .execute(&mut db)
    .await
    .expect("effect");
    sqlx::query(
        "INSERT INTO runner.effect_outbox (idempotency_key, run_id, effect_sequence, destination, \
             action, settled_at) \
         VALUES ($1, $2::uuid, 1, 'example.test', '\\x00', CASE WHEN $3 THEN now() END)",
    )
    .bind(&key)
    .bind(id)
    .bind(settled)
    .execute(&mut db)
    .await
    .expect("outbox");
    sqlx::query(
        "INSERT INTO runner.effect_ledger (run_id, effect_sequence, kind, generation, actor) \
         VALUES ($1::uuid, 1, 'intent', 1, 'runner'), ($1::uuid, 1, 'receipt', 1, 'runner')",
    )
    .bind(id)
    .execute(&mut db)
    .await
    .expect("ledger");
}

/// Mark run `id`'s consent release (`column` = `consent_release_due`) or compensation
/// (`compensation_due`) due, or no longer.
async fn set_due(s: &Stack, id: &str, column: &str, due: bool) {
    let mut db = s.db().await;
    sqlx::query(&format!(
        "UPDATE runner.runs SET {column} = CASE WHEN $2 THEN now() END WHERE id = $1::uuid"
    ))
    .bind(id)
    .bind(due)
    .execute(&mut db)
    .await
    .expect("release due");
}

async fn gone(s: &Stack, id: &str) -> bool {
    rows(s, id).await.iter().all(|n| *n == 0)
}

#[tokio::test(flavor = "multi_thread")]
async fn retention_under_traffic_deletes_finished_trees_and_nothing_in_use() {
    let s = retained().await;
    let mut c = s.client.clone();

    // In use throughout.
    let mut kept = Vec::new();
    for i in 0..3 {
        kept.push(start(&mut c, &format!("live-{i}"), "in").await.run_id);
    }
    let root = start(&mut c, "root", "in").await.run_id;
    let child = start_under(&mut c, "child", &root).await.run_id;
    cancel(&mut c, &child).await.expect("cancel child");
    kept.extend([root.clone(), child.clone()]);
    let releasing = start(&mut c, "releasing", "in").await.run_id;
    cancel(&mut c, &releasing).await.expect("cancel");
    set_due(&s, &releasing, "consent_release_due", true).await;
    let compensating = start(&mut c, "compensating", "in").await.run_id;
    cancel(&mut c, &compensating).await.expect("cancel");
    set_due(&s, &compensating, "compensation_due", true).await;
    let unsettled = start(&mut c, "unsettled", "in").await.run_id;
    cancel(&mut c, &unsettled).await.expect("cancel");
    with_effect(&s, &unsettled, false).await;
    kept.extend([releasing.clone(), compensating.clone(), unsettled.clone()]);
    // Finished, with its effect settled: goes by `effect_runs`, ledger and all.
    let settled = start(&mut c, "settled", "in").await.run_id;
    cancel(&mut c, &settled).await.expect("cancel");
    with_effect(&s, &settled, true).await;
    let mut before = Vec::new();
    for id in &kept {
        before.push(rows(&s, id).await);
    }

    // Traffic for five seconds (more than two rounds past the age): runs started and cancelled
    // by three workers, while every run in use is read; every read must succeed.
    let until = Instant::now() + Duration::from_secs(5);
    let workers: Vec<_> = (0..3)
        .map(|w| {
            let mut c = s.client.clone();
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut ended = Vec::new();
                let mut n = 0;
                while Instant::now() < until {
                    let run = start(&mut c, &format!("w{w}-{n}"), "in").await;
                    cancel(&mut c, &run.run_id).await.expect("cancel");
                    ended.push(run.run_id);
                    for id in &kept {
                        get(&mut c, id).await.expect("a run in use is read");
                        transitions(&mut c, id)
                            .await
                            .expect("its transitions are read");
                    }
                    n += 1;
                }
                ended
            })
        })
        .collect();
    let mut ended = Vec::new();
    for w in workers {
        ended.extend(w.await.expect("worker"));
    }
    assert!(ended.len() >= 6, "traffic flowed: {}", ended.len());

    ended.push(settled.clone());
    for id in &ended {
        eventually(&format!("finished run {id} deleted with its rows"), || {
            gone(&s, id)
        })
        .await;
        refused(get(&mut c, id).await, Code::NotFound, "RUN_NOT_FOUND");
    }
    for (id, rows_before) in kept.iter().zip(&before) {
        assert_eq!(
            &rows(&s, id).await,
            rows_before,
            "run in use {id} untouched"
        );
    }
    assert_eq!(rows(&s, &unsettled).await[9], 2, "its ledger kept");

    // Once its release or compensation is no longer due, the run goes too.
    set_due(&s, &releasing, "consent_release_due", false).await;
    set_due(&s, &compensating, "compensation_due", false).await;
    eventually("released run deleted", || gone(&s, &releasing)).await;
    eventually("compensated run deleted", || gone(&s, &compensating)).await;
}

#[tokio::test]
async fn the_runtime_role_cannot_delete_effects_or_their_ledger() {
    let s = stack().await;
    let mut c = s.client.clone();
    let run = start(&mut c, "effect", "in").await.run_id;
    with_effect(&s, &run, true).await;
    let mut app = s
        .spawned
        .db
        .connect_as(&Office::Runner.runtime_role(), Office::Runner)
        .await;
    // Even with the pruning setting the owner's function uses, the runtime role holds no DELETE.
    sqlx::query("SELECT set_config('runner.pruning', 'runs', false)")
        .execute(&mut app)
        .await
        .expect("set");
    for table in ["effect_ledger", "effects"] {
        let e = sqlx::query(&format!(
            "DELETE FROM runner.{table} WHERE run_id = $1::uuid"
        ))
        .bind(&run)
        .execute(&mut app)
        .await
        .expect_err("the runtime role's delete is refused");
        let code = e
            .as_database_error()
            .and_then(|d| d.code())
            .map(|c| c.into_owned());
        assert_eq!(code.as_deref(), Some("42501"), "{table}: {e}");
    }
    assert_eq!(rows(&s, &run).await[7..10], [1, 1, 2], "nothing deleted");
}
