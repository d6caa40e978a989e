//! The test kit's own upkeep of the shared cluster.

use sqlx::{Connection, PgConnection};

async fn exists(admin: &mut PgConnection, name: &str) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(name)
        .fetch_one(admin)
        .await
        .expect("query pg_database")
}

#[tokio::test(flavor = "multi_thread")]
async fn databases_of_processes_that_are_gone_are_dropped_and_others_kept() {
    let db = lychd_testkit::test_db().await;
    let mut admin = PgConnection::connect(&db.admin_url)
        .await
        .expect("superuser connects");
    let mut finished = std::process::Command::new("true")
        .spawn()
        .expect("run true");
    let gone = finished.id();
    finished.wait().expect("true exits");
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let orphan = format!("t_{gone}_{suffix}");
    let ours = format!("t_{}_{suffix}", std::process::id());
    for name in [&orphan, &ours] {
        sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut admin)
            .await
            .expect("create database");
    }

    let dropped = lychd_testkit::collect_garbage().await;

    assert!(dropped >= 1, "the orphan is dropped (dropped {dropped})");
    assert!(
        !exists(&mut admin, &orphan).await,
        "database of a gone process"
    );
    assert!(
        exists(&mut admin, &ours).await,
        "database of a running process"
    );
    assert!(
        exists(&mut admin, &db.name).await,
        "this test's own database"
    );
    sqlx::raw_sql(&format!("DROP DATABASE \"{ours}\""))
        .execute(&mut admin)
        .await
        .expect("drop");
}
