//! The tables guard their own rules: immutable identities, monotonic revocations, growing
//! generations, no deletions; the runtime role cannot even try some of them.

use lychd_runtime::Office;
use lychd_ward::domain::kinds::PrincipalKind;
use lychd_ward::store::principals;
use sqlx::Connection;
use sqlx::postgres::PgConnection;
use uuid::Uuid;

use crate::common::Ward;

async fn refused(conn: &mut PgConnection, sql: &str, id: Uuid) -> String {
    let mut tx = conn.begin().await.unwrap();
    let err = sqlx::query(sql)
        .bind(id)
        .execute(&mut *tx)
        .await
        .expect_err(sql);
    tx.rollback().await.unwrap();
    err.as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.into_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn principals_are_immutable_and_revocation_monotonic() {
    let w = Ward::new().await;
    let p = w.principal(PrincipalKind::Human, "ada").await;
    let (c, s) = w.session(p.id).await;
    let mut app =
        w.db.connect_as(&Office::Ward.runtime_role(), Office::Ward)
            .await;
    for sql in [
        "UPDATE ward.principals SET name = 'eve' WHERE id = $1",
        "UPDATE ward.principals SET kind = 'service' WHERE id = $1",
        "UPDATE ward.principals SET id = gen_random_uuid() WHERE id = $1",
        "UPDATE ward.principals SET created_at = now() - interval '1 day' WHERE id = $1",
        "UPDATE ward.principals SET policy_generation = -1 WHERE id = $1",
        "UPDATE ward.users SET principal_id = gen_random_uuid() WHERE principal_id = $1",
    ] {
        let code = refused(&mut app, sql, p.id).await;
        assert!(
            code == "23000" || code == "23514" || code == "23503",
            "{sql}: {code}"
        );
    }
    // Deletion: the runtime role has no DELETE on identities.
    for sql in [
        "DELETE FROM ward.principals WHERE id = $1",
        "DELETE FROM ward.users WHERE principal_id = $1",
        "DELETE FROM ward.credentials WHERE principal_id = $1",
        "DELETE FROM ward.sessions WHERE principal_id = $1",
    ] {
        assert_eq!(refused(&mut app, sql, p.id).await, "42501", "{sql}");
    }
    for (sql, id) in [
        (
            "UPDATE ward.credentials SET digest = sha256(digest) WHERE id = $1",
            c.id,
        ),
        (
            "UPDATE ward.credentials SET expires_at = expires_at + interval '1 day' WHERE id = $1",
            c.id,
        ),
        (
            "UPDATE ward.sessions SET expires_at = expires_at + interval '1 day' WHERE id = $1",
            s.id,
        ),
        (
            "UPDATE ward.sessions SET credential_id = gen_random_uuid() WHERE id = $1",
            s.id,
        ),
    ] {
        assert_eq!(refused(&mut app, sql, id).await, "23000", "{sql}");
    }

    // Revoke, then try to undo it at every level.
    principals::revoke(&w.pool, None, p.id).await.unwrap();
    for (sql, id) in [
        (
            "UPDATE ward.principals SET revoked_at = NULL WHERE id = $1",
            p.id,
        ),
        (
            "UPDATE ward.principals SET revoked_at = now() WHERE id = $1",
            p.id,
        ),
        (
            "UPDATE ward.principals SET revocation_generation = 0 WHERE id = $1",
            p.id,
        ),
        (
            "UPDATE ward.credentials SET revoked_at = NULL WHERE id = $1",
            c.id,
        ),
        (
            "UPDATE ward.sessions SET revoked_at = NULL WHERE id = $1",
            s.id,
        ),
    ] {
        assert_eq!(refused(&mut app, sql, id).await, "23000", "{sql}");
    }
    // Even the owner and the superuser meet the guards.
    let mut owner =
        w.db.connect_as(&Office::Ward.owner_role(), Office::Ward)
            .await;
    let mut su = w.superuser().await;
    for conn in [&mut owner, &mut su] {
        assert_eq!(
            refused(
                conn,
                "UPDATE ward.principals SET revoked_at = NULL WHERE id = $1",
                p.id
            )
            .await,
            "23000"
        );
        assert_eq!(
            refused(conn, "DELETE FROM ward.principals WHERE id = $1", p.id).await,
            "23000"
        );
    }
}

#[tokio::test]
async fn the_audit_trail_is_append_only() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    w.session(p.id).await;
    let mut app =
        w.db.connect_as(&Office::Ward.runtime_role(), Office::Ward)
            .await;
    let mut owner =
        w.db.connect_as(&Office::Ward.owner_role(), Office::Ward)
            .await;
    let mut su = w.superuser().await;
    let count = "SELECT count(*) FROM ward.audit";
    let before: i64 = sqlx::query_scalar(count).fetch_one(&mut su).await.unwrap();
    assert!(before >= 3, "enrolled, issued, exchanged: {before}");
    let nil = Uuid::nil();
    // The runtime role lacks the privileges; the owner and the superuser meet the trigger.
    assert_eq!(
        refused(
            &mut app,
            "UPDATE ward.audit SET event = 'x.y' WHERE $1::uuid IS NOT NULL",
            nil
        )
        .await,
        "42501"
    );
    assert_eq!(
        refused(
            &mut app,
            "DELETE FROM ward.audit WHERE $1::uuid IS NOT NULL",
            nil
        )
        .await,
        "42501"
    );
    for conn in [&mut owner, &mut su] {
        for sql in [
            "UPDATE ward.audit SET event = 'x.y' WHERE $1::uuid IS NOT NULL",
            "DELETE FROM ward.audit WHERE $1::uuid IS NOT NULL",
            "TRUNCATE ward.audit",
        ] {
            let sql_bound = if sql.starts_with("TRUNCATE") {
                "TRUNCATE ward.audit"
            } else {
                sql
            };
            let mut tx = conn.begin().await.unwrap();
            let r = if sql.starts_with("TRUNCATE") {
                sqlx::query(sql_bound).execute(&mut *tx).await
            } else {
                sqlx::query(sql_bound).bind(nil).execute(&mut *tx).await
            };
            let code = r
                .expect_err(sql)
                .as_database_error()
                .and_then(|e| e.code())
                .map(|c| c.into_owned());
            tx.rollback().await.unwrap();
            assert_eq!(code.as_deref(), Some("23000"), "{sql}");
        }
    }
    // Appending works (that is all the office does).
    sqlx::query("INSERT INTO ward.audit (event, detail) VALUES ('test.appended', '{}')")
        .execute(&mut app)
        .await
        .unwrap();
    let after: i64 = sqlx::query_scalar(count).fetch_one(&mut su).await.unwrap();
    assert_eq!(after, before + 1);
}

#[tokio::test]
async fn grammar_is_enforced_by_the_tables_too() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    let mut app =
        w.db.connect_as(&Office::Ward.runtime_role(), Office::Ward)
            .await;
    for (action, object) in [
        ("archive:*", "note:1"),
        ("*", "note:1"),
        ("archive:read", "*"),
        ("archive:read", "*:*"),
        ("archive:read", "note:a*"),
        ("Archive:read", "note:1"),
    ] {
        let r = sqlx::query(
            "INSERT INTO ward.assignments (id, principal_id, action, object, audience, purpose)
             VALUES (gen_random_uuid(), $1, $2, $3, 'archive', 'read')",
        )
        .bind(p.id)
        .bind(action)
        .bind(object)
        .execute(&mut app)
        .await;
        let code = r
            .expect_err(action)
            .as_database_error()
            .and_then(|e| e.code())
            .map(|c| c.into_owned());
        assert_eq!(code.as_deref(), Some("23514"), "{action} {object}");
    }
    // A user binds only a human principal.
    let r = sqlx::query("INSERT INTO ward.users (principal_id, display_name) VALUES ($1, 'x')")
        .bind(p.id)
        .execute(&mut app)
        .await;
    assert_eq!(
        r.expect_err("service user")
            .as_database_error()
            .and_then(|e| e.code())
            .as_deref(),
        Some("23503")
    );
}
