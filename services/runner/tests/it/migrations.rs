//! State-schema migrations on real PostgreSQL: a test-only migration `0.1.0 → 0.1.1` (adding a
//! field) is registered; migrating a run records the state's before/after digests and its
//! rollback rule in the ledger and commits a checkpoint under 0.1.1; a process that does not
//! write 0.1.1 neither claims nor resumes the run; the rollback gives back exactly the state
//! the migration started from, and the run then runs to the end.

use lychd_runner::config::Settings;
use lychd_runner::domain::checkpoint::verifies;
use lychd_runner::domain::fsm::Fsm;
use lychd_runner::domain::migration::{Migration, Registry, digest, state_of, version_of};
use lychd_runner::error::RunnerError;
use lychd_runner::service::Service;
use lychd_runner::service::driver::{Driver, Stopped};
use lychd_runner::store::{leases, recovery, runs};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::common::*;
use crate::steps::TASKS;

fn add_notes(s: &Value) -> Option<Value> {
    let mut s = s.clone();
    s.as_object_mut()?.insert("notes".into(), json!([]));
    Some(s)
}

fn drop_notes(s: &Value) -> Option<Value> {
    let mut s = s.clone();
    s.as_object_mut()?.remove("notes")?;
    Some(s)
}

/// Test-only: 0.1.0 → 0.1.1 adds an empty `notes`; its rollback removes it.
const NOTES: Migration = Migration {
    name: "test-add-notes",
    from: "0.1.0",
    to: "0.1.1",
    forward: add_notes,
    rollback: drop_notes,
    rollback_rule: "inverse: remove `notes`; exact (the digest equals the forward's before)",
};

fn driver(service: std::sync::Arc<Service>) -> Driver {
    Driver::new(
        service,
        lychd_runner::model::Models::none(),
        Settings {
            drive: true,
            lease_ttl_ms: 60_000,
            poll_ms: 10,
            concurrency: 1,
            task_step_ms: 0,
            price_milli_per_1k_tokens: Default::default(),
            effects: Default::default(),
        },
    )
}

/// [`driver`] asking the stack's independent verifier.
fn verified_driver(s: &Stack, service: std::sync::Arc<Service>) -> Driver {
    driver(service).with_verifier(s.verifier())
}

#[tokio::test]
async fn a_registered_migration_records_digests_and_rolls_back_exactly() {
    let mut s = crate::verified::stack().await;
    let pool = s.spawned.ctx.pool.clone();
    let run = s
        .client
        .start_run(lychd_proto::runner::v1::StartRunRequest {
            request_id: "mig-1".into(),
            workflow: TASKS.as_bytes().to_vec(),
            input: b"x".to_vec(),
            budgets: None,
            timeout_seconds: 0,
            parent_run_id: String::new(),
        })
        .await
        .expect("start")
        .into_inner()
        .run
        .expect("run");
    let id = Uuid::parse_str(&run.run_id).expect("uuid");
    let builtin = Service::new(pool.clone(), Fsm::bound().expect("fsm"));
    let knowing = Service::with_migrations(
        pool.clone(),
        Fsm::bound().expect("fsm"),
        Registry::builtin().with(NOTES),
    );
    // The office as shipped knows no migration.
    assert!(matches!(
        builtin.migrate_state(id, "0.1.1", "operator").await,
        Err(RunnerError::MigrationUnknown)
    ));
    let v1 = runs::checkpoint(&pool, id, None)
        .await
        .expect("read")
        .expect("v1");
    let before = digest(&state_of(&v1.body).expect("state"));

    let (after, row) = knowing
        .migrate_state(id, "0.1.1", "operator")
        .await
        .expect("migrate");
    assert_eq!(
        (
            after.state.as_str(),
            after.version,
            after.state_schema_version.as_str()
        ),
        ("CREATED", 2, "0.1.1")
    );
    assert_eq!(after.generation, 2, "a migration fences any older holder");
    assert_eq!(
        (
            row.migration.as_str(),
            row.direction.as_str(),
            row.from_version.as_str(),
            row.to_version.as_str(),
            row.checkpoint_version
        ),
        ("test-add-notes", "forward", "0.1.0", "0.1.1", 2)
    );
    assert_eq!(row.before_sha256, before);
    assert_ne!(row.after_sha256, before);
    assert_eq!(row.rollback_rule, NOTES.rollback_rule);
    let v2 = runs::checkpoint(&pool, id, None)
        .await
        .expect("read")
        .expect("v2");
    assert_eq!(v2.version, 2);
    assert!(verifies(&v2.body, &v2.checksum));
    assert_eq!(version_of(&v2.body).as_deref(), Some("0.1.1"));
    assert_eq!(
        digest(&state_of(&v2.body).expect("state")),
        row.after_sha256
    );
    let body: Value = serde_json::from_slice(&v2.body).expect("json");
    assert_eq!(body["notes"], json!([]));
    // The API shows the run under its new version.
    assert_eq!(
        get(&mut s.client, &run.run_id)
            .await
            .expect("get")
            .state_schema_version,
        "0.1.1"
    );

    // A process writing 0.1.0 does not claim it, nor resume it when handed it.
    let d = driver(builtin.clone());
    assert!(
        leases::claim(&pool, d.holder(), 60_000)
            .await
            .expect("claim")
            .is_none()
    );
    let row_now = runs::get(&pool, id, None).await.expect("get").expect("run");
    assert_eq!(d.drive(row_now).await.expect("drive"), Stopped::Idle);
    let unchanged = runs::get(&pool, id, None).await.expect("get").expect("run");
    assert_eq!(
        (unchanged.state.as_str(), unchanged.version),
        ("CREATED", 2)
    );
    // A version nobody registered is refused.
    assert!(matches!(
        knowing.migrate_state(id, "0.2.0", "operator").await,
        Err(RunnerError::MigrationUnknown)
    ));

    // The rollback: exactly the state the migration started from.
    let (back, undo) = knowing
        .migrate_state(id, "0.1.0", "operator")
        .await
        .expect("rollback");
    assert_eq!(
        (back.version, back.state_schema_version.as_str()),
        (3, "0.1.0")
    );
    assert_eq!(undo.direction, "rollback");
    assert_eq!(undo.before_sha256, row.after_sha256);
    assert_eq!(undo.after_sha256, before, "exact");
    let ledger = recovery::migrations(&pool, id).await.expect("ledger");
    assert_eq!(ledger.len(), 2);
    // No transition row for a migration: the run's state did not change.
    assert_eq!(
        transitions(&mut s.client, &run.run_id)
            .await
            .expect("t")
            .len(),
        1
    );

    // Back in 0.1.0 the office's runner claims and drives it to the end.
    let d = verified_driver(&s, builtin.clone());
    assert_eq!(
        crate::verified::drive_to_end(&s, &d, id).await.state,
        "SUCCEEDED"
    );
    // A finished run is not migrated.
    assert!(matches!(
        knowing.migrate_state(id, "0.1.1", "operator").await,
        Err(RunnerError::RunFinished)
    ));
}

#[tokio::test]
async fn a_rollback_that_would_not_restore_the_recorded_state_is_refused() {
    let s = stack().await;
    let pool = s.spawned.ctx.pool.clone();
    let mut c = s.client.clone();
    let run = start(&mut c, "mig-2", "").await;
    let id = Uuid::parse_str(&run.run_id).expect("uuid");
    let knowing = Service::with_migrations(
        pool.clone(),
        Fsm::bound().expect("fsm"),
        Registry::builtin().with(NOTES),
    );
    knowing
        .migrate_state(id, "0.1.1", "operator")
        .await
        .expect("migrate");
    // The ledger's before digest no longer matches what the rollback would give back.
    let mut db = s.db().await;
    sqlx::query(
        "UPDATE runner.state_migrations SET before_sha256 = repeat('0', 64) WHERE run_id = $1",
    )
    .bind(id)
    .execute(&mut db)
    .await
    .expect("tamper");
    assert!(matches!(
        knowing.migrate_state(id, "0.1.0", "operator").await,
        Err(RunnerError::RollbackNotExact)
    ));
    let r = runs::get(&pool, id, None).await.expect("get").expect("run");
    assert_eq!((r.version, r.state_schema_version.as_str()), (2, "0.1.1"));
    // A leased run is not migrated.
    sqlx::query(
        "UPDATE runner.runs SET lease_holder = 'someone', \
                lease_expires_at = now() + interval '1 minute' WHERE id = $1",
    )
    .bind(id)
    .execute(&mut db)
    .await
    .expect("lease");
    assert!(matches!(
        knowing.migrate_state(id, "0.1.0", "operator").await,
        Err(RunnerError::RunLeased)
    ));
}

#[tokio::test]
async fn a_checkpoint_from_before_a_migration_is_no_recovery_point() {
    let s = stack().await;
    let pool = s.spawned.ctx.pool.clone();
    let mut c = s.client.clone();
    let run = start(&mut c, "mig-3", "").await;
    let id = Uuid::parse_str(&run.run_id).expect("uuid");
    let knowing = Service::with_migrations(
        pool.clone(),
        Fsm::bound().expect("fsm"),
        Registry::builtin().with(NOTES),
    );
    knowing
        .migrate_state(id, "0.1.1", "operator")
        .await
        .expect("migrate");
    let mut db = s.db().await;
    sqlx::query(
        "UPDATE runner.run_checkpoints SET body = '\\x00' WHERE run_id = $1 AND version = 2",
    )
    .bind(id)
    .execute(&mut db)
    .await
    .expect("corrupt");
    let seen = knowing
        .inspect(id, lychd_runner::service::runs::Reader::All, None)
        .await
        .expect("inspect");
    assert!(!seen.verified);
    assert_eq!(seen.run.state, "QUARANTINED");
    // Version 1 verifies, but it is in 0.1.0 and the run in 0.1.1: nothing to restore.
    assert!(
        knowing
            .recovery_point(&seen.run)
            .await
            .expect("point")
            .is_none()
    );
}
