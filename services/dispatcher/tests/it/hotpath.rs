//! What the lease path writes, made cheaper without weakening a rule (issue 31): a grant does not
//! rewrite a cached observation that already says the same and is fresh, and the rules of a
//! lease row are still enforced by the database (the `leases_rules` trigger) on every insert and
//! on every update of a column they read.

use sqlx::{PgConnection, Row};
use time::OffsetDateTime;

use lychd_testkit::simllama::SimLlama;

use crate::common::*;

const KEY: &str = "gpu0:chat:m";

/// The cached observation row of [`KEY`]: its row version, phase, reason and time.
async fn cached(db: &mut PgConnection) -> (String, String, String, OffsetDateTime) {
    let r = sqlx::query(
        "SELECT xmin::text AS version, phase, reason, observed_at FROM dispatcher.observations
          WHERE capability_key = $1",
    )
    .bind(KEY)
    .fetch_one(db)
    .await
    .expect("the key has a cached observation");
    (
        r.get("version"),
        r.get("phase"),
        r.get("reason"),
        r.get("observed_at"),
    )
}

async fn set(db: &mut PgConnection, assignments: &str) {
    sqlx::query(&format!(
        "UPDATE dispatcher.observations SET {assignments} WHERE capability_key = $1"
    ))
    .bind(KEY)
    .execute(db)
    .await
    .expect("set the cached observation");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grant_rewrites_the_cached_observation_only_when_it_changed_or_aged() {
    let sim = SimLlama::serving("m").await;
    let mut s = stack(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
    )
    .await;
    let mut db = s.spawned.db.superuser().await;
    granted(lease(&mut s.client, exact(KEY)).await);
    assert_eq!(cached(&mut db).await.1, "WARM");

    // The same phase and reason, observed just now: the grant writes no new row version.
    set(&mut db, "observed_at = now()").await;
    let fresh = cached(&mut db).await;
    granted(lease(&mut s.client, exact(KEY)).await);
    assert_eq!(
        cached(&mut db).await,
        fresh,
        "an unchanged, fresh row is left alone"
    );

    // The same, but older than a second: rewritten with the grant's time.
    set(&mut db, "observed_at = now() - interval '2 seconds'").await;
    let aged = cached(&mut db).await;
    granted(lease(&mut s.client, exact(KEY)).await);
    let after = cached(&mut db).await;
    assert_ne!(after.0, aged.0, "a new row version");
    assert!(after.3 > aged.3, "observed again: {after:?} after {aged:?}");

    // Fresh, but saying something else (here its reason): rewritten with what was observed.
    set(&mut db, "reason = 'STALE', observed_at = now()").await;
    granted(lease(&mut s.client, exact(KEY)).await);
    let after = cached(&mut db).await;
    assert_eq!((after.1.as_str(), after.2.as_str()), ("WARM", ""));
    s.spawned.stop().await;
}

/// Insert a lease row of `gpu0` with `columns` = `values` overriding a valid row's.
async fn insert(db: &mut PgConnection, id: &str, over: &[(&str, &str)]) -> Result<(), String> {
    let mut cols = vec![
        ("id", format!("'{id}'")),
        ("capability_key", format!("'{KEY}'")),
        ("key_version", "1".into()),
        ("family", "'chat'".into()),
        ("model_id", "'m'".into()),
        ("animator", "'gpu0'".into()),
        ("holder", "'h'".into()),
        ("principal_id", "'p'".into()),
        ("priority", "50".into()),
        ("admission_generation", "0".into()),
        ("issued_at", "now()".into()),
        ("expires_at", "now() + interval '1 minute'".into()),
    ];
    for (name, value) in over {
        match cols.iter_mut().find(|(c, _)| c == name) {
            Some(c) => c.1 = (*value).to_owned(),
            None => cols.push((name, (*value).to_owned())),
        }
    }
    let names: Vec<&str> = cols.iter().map(|c| c.0).collect();
    let values: Vec<&str> = cols.iter().map(|c| c.1.as_str()).collect();
    sqlx::query(&format!(
        "INSERT INTO dispatcher.leases ({}) VALUES ({})",
        names.join(", "),
        values.join(", ")
    ))
    .execute(db)
    .await
    .map(|_| ())
    .map_err(sqlstate)
}

fn sqlstate(e: sqlx::Error) -> String {
    e.as_database_error()
        .and_then(|d| d.code())
        .map(|c| c.into_owned())
        .unwrap_or_else(|| format!("not a database error: {e}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_database_refuses_a_lease_row_that_breaks_a_rule_on_insert_and_update() {
    let sim = SimLlama::serving("m").await;
    let s = stack(
        &(animator("gpu0", &sim.endpoint(), "dedicated = true")
            + &capability("gpu0", "chat", "m", "")),
    )
    .await;
    let mut db = s.spawned.db.superuser().await;
    let broken: &[&[(&str, &str)]] = &[
        &[("key_version", "3")],
        &[("family", "NULL")],
        &[("model_id", "NULL")],
        &[("interface_id", "'i'")],
        &[
            ("key_version", "2"),
            ("interface_id", "'i'"),
            ("profile_ref", "'p'"),
        ],
        &[("expires_at", "now()")],
        &[("holder", "''")],
        &[("holder", "repeat('h', 129)")],
        &[("priority", "-1")],
        &[("priority", "101")],
        &[("request_id", "''")],
        &[("request_id", "repeat('r', 129)")],
    ];
    for (i, over) in broken.iter().enumerate() {
        let id = format!("00000000-0000-0000-0000-{i:012}");
        assert_eq!(
            insert(&mut db, &id, over).await,
            Err("23514".to_owned()),
            "{over:?} is refused as a check violation"
        );
    }
    // The edges of every rule are allowed, in both key versions.
    let ok = "10000000-0000-0000-0000-000000000000";
    insert(
        &mut db,
        ok,
        &[
            ("holder", "repeat('h', 128)"),
            ("priority", "100"),
            ("request_id", "repeat('r', 128)"),
        ],
    )
    .await
    .expect("a valid version 1 row");
    insert(
        &mut db,
        "10000000-0000-0000-0000-000000000001",
        &[
            ("key_version", "2"),
            ("family", "NULL"),
            ("model_id", "NULL"),
            ("interface_id", "'i'"),
            ("profile_ref", "'p'"),
            ("priority", "0"),
        ],
    )
    .await
    .expect("a valid version 2 row");
    // An update that sets a column a rule reads is checked (a renewal sets the expiry) ...
    for set in [
        "expires_at = issued_at",
        "holder = ''",
        "priority = 101",
        "family = NULL",
    ] {
        let e = sqlx::query(&format!(
            "UPDATE dispatcher.leases SET {set} WHERE id = '{ok}'"
        ))
        .execute(&mut db)
        .await
        .map_err(sqlstate);
        assert_eq!(e.map(|_| ()), Err("23514".to_owned()), "{set} is refused");
    }
    // ... and a release, which sets only its time, is written.
    let released = sqlx::query(&format!(
        "UPDATE dispatcher.leases SET released_at = now() WHERE id = '{ok}'"
    ))
    .execute(&mut db)
    .await
    .expect("release")
    .rows_affected();
    assert_eq!(released, 1);
    s.spawned.stop().await;
}
