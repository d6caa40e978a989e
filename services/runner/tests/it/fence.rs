//! The fence: a state commit names the run's state, aggregate version and lease generation it
//! read; when any of them moved (another runner took the lease, or committed first) the commit
//! is refused and nothing is written.

use lychd_runner::domain::checkpoint::{Checkpoint, checksum};
use lychd_runner::store::runs::{self, NewTransition};
use uuid::Uuid;

use crate::common::*;

#[tokio::test]
async fn a_stale_version_or_generation_commits_nothing() {
    let mut s = stack().await;
    let run = start(&mut s.client, "f-1", "").await;
    let id = Uuid::parse_str(&run.run_id).expect("uuid");
    let pool = &s.spawned.ctx.pool;
    let read = runs::get(pool, id, None).await.expect("get").expect("run");
    let c = Checkpoint {
        body: b"{}".to_vec(),
        checksum: checksum(b"{}"),
    };
    let start_edge = NewTransition {
        source_state: "CREATED",
        target_state: "PLAN",
        trigger: "start",
        actor: "runner",
        capability: "",
    };
    // Another runner took the lease: the generation moved.
    let mut db = s.db().await;
    sqlx::query("UPDATE runner.runs SET generation = generation + 1 WHERE id = $1")
        .bind(id)
        .execute(&mut db)
        .await
        .expect("new generation");
    let mut tx = pool.begin().await.expect("tx");
    assert!(
        runs::commit(&mut tx, &read, &start_edge, None, &c)
            .await
            .expect("commit")
            .is_none()
    );
    tx.rollback().await.expect("rollback");
    // Under the current generation the commit goes through once; the same read again is stale.
    let current = runs::get(pool, id, None).await.expect("get").expect("run");
    let mut tx = pool.begin().await.expect("tx");
    let after = runs::commit(&mut tx, &current, &start_edge, None, &c)
        .await
        .expect("commit")
        .expect("committed");
    tx.commit().await.expect("commit tx");
    assert_eq!(
        (after.state.as_str(), after.version, after.generation),
        ("PLAN", 2, 2)
    );
    let mut tx = pool.begin().await.expect("tx");
    assert!(
        runs::commit(&mut tx, &current, &start_edge, None, &c)
            .await
            .expect("commit")
            .is_none()
    );
    tx.rollback().await.expect("rollback");
    let t = transitions(&mut s.client, &run.run_id)
        .await
        .expect("transitions");
    assert_eq!(
        t.iter()
            .map(|t| (t.version, t.generation))
            .collect::<Vec<_>>(),
        [(1, 1), (2, 2)]
    );
}
