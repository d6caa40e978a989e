//! Role separation and the migrate/serve contract.

use lychd_runtime::Office;
use lychd_testkit::{run_office, test_db, test_db_for, test_db_unmigrated};

use crate::text;

fn sqlstate(err: sqlx::Error) -> String {
    match err {
        sqlx::Error::Database(e) => e.code().map(|c| c.into_owned()).unwrap_or_default(),
        other => panic!("expected a database error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn runtime_role_is_confined_to_dml_on_its_own_schema() {
    let db = test_db().await;
    // The owner creates a table through a migration-like step.
    let mut owner = db
        .connect_as(&Office::Ward.owner_role(), Office::Ward)
        .await;
    sqlx::raw_sql("CREATE TABLE ward.probe (id int PRIMARY KEY)")
        .execute(&mut owner)
        .await
        .expect("owner creates");

    let mut ward = db
        .connect_as(&Office::Ward.runtime_role(), Office::Ward)
        .await;
    sqlx::raw_sql("INSERT INTO ward.probe VALUES (1)")
        .execute(&mut ward)
        .await
        .expect("own DML allowed");
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM ward.probe")
        .fetch_one(&mut ward)
        .await
        .expect("select");
    assert_eq!(n, 1);

    for ddl in [
        "CREATE TABLE ward.evil (id int)",
        "DROP TABLE ward.probe",
        "ALTER TABLE ward.probe ADD COLUMN x int",
        "CREATE TEMP TABLE scratch (id int)",
        "CREATE TABLE public.evil (id int)",
        "CREATE SCHEMA evil",
        "DELETE FROM ward._sqlx_migrations",
    ] {
        let err = sqlx::raw_sql(ddl).execute(&mut ward).await.expect_err(ddl);
        assert_eq!(
            sqlstate(err),
            "42501",
            "{ddl} must be refused for lack of privilege"
        );
    }

    let mut dispatcher = db
        .connect_as(&Office::Dispatcher.runtime_role(), Office::Dispatcher)
        .await;
    for sql in [
        "SELECT * FROM ward.probe",
        "INSERT INTO ward.probe VALUES (2)",
        "SELECT * FROM ward._sqlx_migrations",
    ] {
        let err = sqlx::raw_sql(sql)
            .execute(&mut dispatcher)
            .await
            .expect_err(sql);
        assert_eq!(
            sqlstate(err),
            "42501",
            "another office's runtime role: {sql}"
        );
    }
    let mut dispatcher_owner = db
        .connect_as(&Office::Dispatcher.owner_role(), Office::Dispatcher)
        .await;
    let err = sqlx::raw_sql("SELECT * FROM ward.probe")
        .execute(&mut dispatcher_owner)
        .await
        .expect_err("owner of another office");
    assert_eq!(sqlstate(err), "42501");
}

fn write_config(
    dir: &std::path::Path,
    office: Office,
    db: &lychd_testkit::TestDb,
) -> std::path::PathBuf {
    let token = dir.join("token");
    std::fs::write(&token, lychd_testkit::random_token()).expect("token");
    let path = dir.join(format!("{office}.toml"));
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[metrics]\nlisten = \"127.0.0.1:0\"\n[database]\nurl = \"{}\"\nmigrate_url = \"{}\"\n[auth]\ncredential_file = \"{}\"\n",
            db.runtime_url(office),
            db.owner_url(office),
            token.display()
        ),
    )
    .expect("config");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn migrate_is_idempotent_and_serve_refuses_pending_migrations() {
    let db = test_db_unmigrated().await;
    let dir = tempfile::tempdir().expect("tmp");
    let office = Office::Archive;
    let config = write_config(dir.path(), office, &db);

    let serve = run_office(office, &config, &["serve"]).await;
    assert_eq!(
        serve.status.code(),
        Some(1),
        "serve on an unmigrated schema must refuse"
    );
    let err = text(&serve.stderr);
    assert!(
        err.contains("not migrated") && err.contains("lychd-archive migrate"),
        "{err}"
    );

    let migrations = crate::spec_of(office).migrator.iter().count();
    let latest = crate::latest_migration(office);
    let first = run_office(office, &config, &["migrate"]).await;
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(
        text(&first.stdout).contains(&format!("applied {migrations} migration")),
        "{}",
        text(&first.stdout)
    );
    let second = run_office(office, &config, &["migrate"]).await;
    assert!(second.status.success(), "{}", text(&second.stderr));
    assert!(
        text(&second.stdout).contains(&format!("up to date at version {latest}")),
        "{}",
        text(&second.stdout)
    );

    // Forget the applied migration: serve must now see it pending.
    let mut admin = db.superuser().await;
    sqlx::raw_sql("DELETE FROM archive._sqlx_migrations")
        .execute(&mut admin)
        .await
        .expect("forget");
    let serve = run_office(office, &config, &["serve"]).await;
    assert_eq!(serve.status.code(), Some(1));
    let err = text(&serve.stderr);
    assert!(
        err.contains(&format!("{migrations} migration(s) pending"))
            && err.contains("lychd-archive migrate"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_refuses_a_runtime_role_that_can_do_ddl() {
    let db = test_db_for(&[lychd_dispatcher::spec()]).await;
    let dir = tempfile::tempdir().expect("tmp");
    let office = Office::Dispatcher;
    let config = write_config(dir.path(), office, &db);
    let mut admin = db.superuser().await;
    sqlx::raw_sql("GRANT CREATE ON SCHEMA dispatcher TO lychd_dispatcher_app; GRANT USAGE ON SCHEMA ward TO lychd_dispatcher_app")
        .execute(&mut admin)
        .await
        .expect("over-grant");
    let serve = run_office(office, &config, &["serve"]).await;
    assert_eq!(serve.status.code(), Some(1));
    let err = text(&serve.stderr);
    assert!(
        err.contains("can create objects in schema(s) dispatcher"),
        "{err}"
    );
    assert!(err.contains("can use other office schema(s) ward"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_configuration_exits_2_naming_file_and_field() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("ward.toml");
    std::fs::write(
        &path,
        "[server]\nlisten = \"127.0.0.1:0\"\nlisen_typo = 1\n",
    )
    .expect("config");
    let out = run_office(Office::Ward, &path, &["serve"]).await;
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains(&path.display().to_string()) && err.contains("server.lisen_typo"),
        "{err}"
    );
}
