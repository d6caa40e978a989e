//! Retention while consents flow (issue 30 item 3): Ward's own job, configured with ages of two
//! seconds and a round every second, deletes settled consents nothing holds and long-ended
//! sessions — never a pending consent, a granted one not yet consumed, one bound to a proposal,
//! or a session still valid — and never an audit record; it keeps the audit's months created
//! ahead.

use std::time::{Duration, Instant};

use lychd_proto::ward::v1 as pb;
use uuid::Uuid;

use crate::consent::{Cast, cast_with, consume, decide, propose};

const RETENTION: &str = "interval_seconds = 1\nbatch_size = 3\npause_ms = 0\n\
    [keep_seconds]\nconsents = 2\nsessions = 2\n";

async fn count(c: &Cast, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(&mut c.s.db.superuser().await)
        .await
        .expect("count")
}

#[tokio::test(flavor = "multi_thread")]
async fn retention_under_traffic_keeps_what_is_in_use_and_removes_what_settled() {
    let mut c = cast_with(|cfg| {
        cfg.retention = toml::from_str(RETENTION).expect("retention toml");
    })
    .await;
    let audit_before = count(&c, "SELECT count(*) FROM ward.audit").await;

    // In use throughout: pending consents, granted ones not consumed yet, and a denied one
    // bound to a proposal (proposal history is kept for good, and its consent with it).
    let mut pending = Vec::new();
    let mut usable = Vec::new();
    for i in 0..3 {
        pending.push(propose(&mut c.proposer, &format!("pending-{i}"), "{}").await);
        let g = propose(&mut c.proposer, &format!("usable-{i}"), "{}").await;
        decide(&mut c.approver, &g, pb::Verdict::Approve)
            .await
            .expect("approve");
        usable.push(g);
    }
    let bound = propose(&mut c.proposer, "bound", "{}").await;
    c.proposer
        .create_proposal(pb::CreateProposalRequest {
            consent_id: bound.consent_id.clone(),
            group_id: String::new(),
            revises: String::new(),
            occurrence: "step-1".into(),
        })
        .await
        .expect("proposal");
    decide(&mut c.approver, &bound, pb::Verdict::Deny)
        .await
        .expect("deny");

    // A session that ends at once, and the operator's own (valid for an hour).
    let (id, _) =
        c.s.principal(pb::PrincipalKind::Service, "short-lived")
            .await;
    let credential = c.s.admin.clone().issue_standing(&id).await.expect("issue");
    let channel = lychd_runtime::client::channel(&c.s.endpoint()).expect("endpoint");
    lychd_auth::admin::exchange(channel, &credential, 1, &["ward"])
        .await
        .expect("a one-second session");

    // Traffic for six seconds: consents proposed and approved then consumed, or denied.
    let until = Instant::now() + Duration::from_secs(6);
    let mut settled = 0;
    while Instant::now() < until {
        let call = format!("flow-{settled}");
        let p = propose(&mut c.proposer, &call, "{}").await;
        if settled % 2 == 0 {
            decide(&mut c.approver, &p, pb::Verdict::Approve)
                .await
                .expect("approve");
            consume(&mut c.owner, &p, &p.binding_digest)
                .await
                .expect("consume");
        } else {
            decide(&mut c.approver, &p, pb::Verdict::Deny)
                .await
                .expect("deny");
        }
        settled += 1;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert!(settled > 40, "traffic flowed: {settled} consents");
    tokio::time::sleep(Duration::from_secs(5)).await;

    // What is in use is all there and still usable.
    for p in &pending {
        let d = decide(&mut c.approver, p, pb::Verdict::Deny)
            .await
            .expect("a pending consent is still decided");
        assert_eq!(
            d.consent.expect("consent").state,
            pb::ConsentState::Denied as i32
        );
    }
    for g in &usable {
        consume(&mut c.owner, g, &g.binding_digest)
            .await
            .expect("a granted consent is still consumed");
    }
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM ward.consents WHERE id = $1")
        .bind(bound.consent_id.parse::<Uuid>().expect("id"))
        .fetch_one(&mut c.s.db.superuser().await)
        .await
        .expect("count");
    assert_eq!(kept, 1, "a consent bound to a proposal stays");
    // What settled more than the age ago went, with its change rows.
    let left = count(&c, "SELECT count(*) FROM ward.consents").await;
    assert_eq!(
        left,
        (pending.len() + usable.len() + 1) as i64,
        "of {settled} settled consents none is left"
    );
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM ward.consent_changes ch
              WHERE NOT EXISTS (SELECT 1 FROM ward.consents c WHERE c.id = ch.consent_id)"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM ward.sessions WHERE expires_at < now()"
        )
        .await,
        0,
        "the ended session went"
    );
    assert!(
        count(&c, "SELECT count(*) FROM ward.sessions").await > 0,
        "valid sessions stay"
    );
    // The audit only grew, and its next three months exist.
    assert!(count(&c, "SELECT count(*) FROM ward.audit").await > audit_before);
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent
              JOIN pg_class k ON k.oid = i.inhrelid
             WHERE p.relname = 'audit' AND k.relname = 'audit_y' || to_char(
                   date_trunc('month', now() AT TIME ZONE 'UTC') + interval '3 months', 'YYYY\"m\"MM')"
        )
        .await,
        1,
        "the audit's partition three months ahead exists"
    );
}

/// Every partition of the audit refuses change as the parent does (the owner and the superuser
/// meet the trigger, the runtime role lacks the privilege), and the operator's procedure of
/// `docs/operations.md` — export a month, detach it, drop it — works as the owner, leaving the
/// other months' rows untouched.
#[tokio::test]
async fn audit_partitions_are_append_only_and_an_old_month_is_detached_by_the_owner() {
    let c = cast_with(|_| {}).await;
    let db = &c.s.db;
    let mut owner = db
        .connect_as(
            &lychd_runtime::Office::Ward.owner_role(),
            lychd_runtime::Office::Ward,
        )
        .await;
    let mut app = db
        .connect_as(
            &lychd_runtime::Office::Ward.runtime_role(),
            lychd_runtime::Office::Ward,
        )
        .await;
    // A record of an old month (written as the office writes: an insert into the parent).
    sqlx::query("SELECT ward.audit_ensure_partitions(0, now() - interval '14 months')")
        .execute(&mut owner)
        .await
        .expect("old months");
    sqlx::query(
        "INSERT INTO ward.audit (at, event) VALUES (now() - interval '13 months', 'test.old')",
    )
    .execute(&mut app)
    .await
    .expect("append");
    let month: String = sqlx::query_scalar(
        "SELECT 'audit_y' || to_char(date_trunc('month', (now() - interval '13 months')
                AT TIME ZONE 'UTC'), 'YYYY\"m\"MM')",
    )
    .fetch_one(&mut owner)
    .await
    .expect("name");
    for (conn, code) in [(&mut owner, "23000"), (&mut app, "42501")] {
        for sql in [
            format!("DELETE FROM ward.{month}"),
            format!("UPDATE ward.{month} SET event = 'x.y'"),
            format!("TRUNCATE ward.{month}"),
            "TRUNCATE ward.audit_default".to_owned(),
        ] {
            let err = sqlx::query(&sql).execute(&mut *conn).await.expect_err(&sql);
            let got = err
                .as_database_error()
                .and_then(|e| e.code())
                .map(|c| c.into_owned());
            assert_eq!(got.as_deref(), Some(code), "{sql}");
        }
    }
    let total = count(&c, "SELECT count(*) FROM ward.audit").await;
    // The operator's procedure (after exporting it with pg_dump --table).
    sqlx::query(&format!(
        "ALTER TABLE ward.audit DETACH PARTITION ward.{month}"
    ))
    .execute(&mut owner)
    .await
    .expect("detach");
    sqlx::query(&format!("DROP TABLE ward.{month}"))
        .execute(&mut owner)
        .await
        .expect("drop");
    assert_eq!(
        count(&c, "SELECT count(*) FROM ward.audit").await,
        total - 1,
        "only the old month's record left with it"
    );
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM ward.audit WHERE event = 'test.old'"
        )
        .await,
        0
    );
}

/// Migration 0012 on a Ward that already has an audit: every record is kept — its sequence
/// number, time, event and detail — each in the partition of its month, and the sequence goes
/// on from where it was.
#[tokio::test]
async fn partitioning_the_audit_keeps_every_existing_record_in_its_month() {
    use lychd_runtime::Office;
    use sqlx::migrate::Migrator;
    let db = lychd_testkit::test_db_unmigrated().await;
    let opts = lychd_runtime::db::connect_options(&db.owner_url(Office::Ward), None, Office::Ward)
        .expect("owner url");
    let owner = lychd_runtime::db::pool(opts, 1).await.expect("owner");
    let before = Migrator {
        migrations: lychd_ward::MIGRATOR
            .iter()
            .filter(|m| m.version <= 11)
            .cloned()
            .collect::<Vec<_>>()
            .into(),
        ..Migrator::DEFAULT
    };
    before.run(&owner).await.expect("migrations up to 0011");
    sqlx::query(
        "INSERT INTO ward.audit (at, event, detail, record_id)
         SELECT now() - make_interval(days => 20 * i), 'test.before', jsonb_build_object('i', i),
                CASE WHEN i % 2 = 0 THEN gen_random_uuid() END
           FROM generate_series(1, 30) i",
    )
    .execute(&owner)
    .await
    .expect("an audit before");
    let snapshot = "SELECT seq, at, detail::text FROM ward.audit ORDER BY seq";
    let rows: Vec<(i64, time::OffsetDateTime, String)> = sqlx::query_as(snapshot)
        .fetch_all(&owner)
        .await
        .expect("read");
    lychd_ward::MIGRATOR.run(&owner).await.expect("0012");
    let after: Vec<(i64, time::OffsetDateTime, String)> = sqlx::query_as(snapshot)
        .fetch_all(&owner)
        .await
        .expect("read");
    assert_eq!(after, rows, "every record kept as it was");
    let misplaced: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ward.audit a JOIN pg_class c ON c.oid = a.tableoid
          WHERE c.relname <> 'audit_y' || to_char(a.at AT TIME ZONE 'UTC', 'YYYY\"m\"MM')",
    )
    .fetch_one(&owner)
    .await
    .expect("placement");
    assert_eq!(misplaced, 0, "each record in its month's partition");
    let next: i64 =
        sqlx::query_scalar("INSERT INTO ward.audit (event) VALUES ('test.after') RETURNING seq")
            .fetch_one(&owner)
            .await
            .expect("append");
    assert_eq!(
        next,
        rows.last().expect("rows").0 + 1,
        "the sequence goes on"
    );
}
