//! Database faults between Ward and PostgreSQL (the test kit's `FaultProxy`): a connection lost
//! after `COMMIT` (or a self-committing write) was sent is `OUTCOME_UNKNOWN`, never "nothing
//! changed"; one lost before any write was sent is `DATABASE_UNAVAILABLE` and changed nothing;
//! and the retry is safe — a repeated rotation recovers the new secret, a repeated consumption
//! by its consumer gets the same success.

use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::{FaultProxy, Spawned};
use tonic::Code;
use uuid::Uuid;

use crate::consent::{OWNER, client_for, decide, propose, reason};

async fn ward_behind(proxy: &FaultProxy) -> (Spawned, WardClient<PeerChannel>) {
    let s =
        lychd_testkit::spawn_office_with(lychd_ward::spec(), |c| proxy.route(&mut c.database.url))
            .await;
    s.allow("ward:administer", "principal:*").await;
    let client = WardClient::new(s.channel());
    (s, client)
}

/// A service principal with a standing credential: (credential id, secret).
async fn credential(c: &mut WardClient<PeerChannel>, name: &str) -> (String, String) {
    let principal = c
        .enroll_principal(pb::EnrollPrincipalRequest {
            kind: pb::PrincipalKind::Service as i32,
            name: name.into(),
            display_name: String::new(),
        })
        .await
        .expect("enroll")
        .into_inner()
        .principal
        .expect("principal")
        .id;
    let issued = c
        .issue_credential(pb::IssueCredentialRequest {
            principal_id: principal,
            kind: pb::CredentialKind::Standing as i32,
            ttl_seconds: 0,
        })
        .await
        .expect("issue")
        .into_inner();
    (issued.credential_id, issued.credential)
}

fn rotate(id: &str, request_id: &str) -> pb::RotateCredentialRequest {
    pb::RotateCredentialRequest {
        credential_id: id.into(),
        request_id: request_id.into(),
    }
}

/// (revoked, replaced_by) of a credential, read by the superuser past the proxy.
async fn stored(s: &Spawned, id: &str) -> (bool, Option<Uuid>) {
    let mut db = s.db.superuser().await;
    sqlx::query_as("SELECT revoked_at IS NOT NULL, replaced_by FROM ward.credentials WHERE id = $1")
        .bind(Uuid::parse_str(id).expect("uuid"))
        .fetch_one(&mut db)
        .await
        .expect("credential row")
}

async fn exchanges(s: &Spawned, secret: &str) -> Result<(), tonic::Status> {
    lychd_auth::admin::exchange(
        lychd_runtime::client::channel(&s.endpoint()).expect("endpoint"),
        secret,
        0,
        &["ward"],
    )
    .await
    .map(|_| ())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotation_whose_commit_answer_is_lost_is_unknown_and_its_repeat_recovers_the_secret() {
    let proxy = FaultProxy::start().await;
    let (s, mut c) = ward_behind(&proxy).await;
    let (old, old_secret) = credential(&mut c, "svc-rotated").await;

    // The COMMIT of the rotation reaches PostgreSQL; its answer never reaches Ward.
    proxy.drop_after_commit_of("SET replaced_by");
    let lost = c
        .rotate_credential(rotate(&old, "rotate-1"))
        .await
        .expect_err("the answer was lost");
    assert_eq!(proxy.fired(), 1);
    assert_eq!(
        (lost.code(), reason(&lost).as_str()),
        (Code::Unavailable, "OUTCOME_UNKNOWN"),
        "{lost:?}"
    );
    // It did take effect: the old credential is revoked and replaced.
    let (revoked, replaced_by) = stored(&s, &old).await;
    assert!(revoked);
    let replaced_by = replaced_by.expect("replaced");
    assert_eq!(
        reason(
            &exchanges(&s, &old_secret)
                .await
                .expect_err("old one revoked")
        ),
        "CREDENTIAL_REVOKED"
    );

    // Without the request id, a repeat is refused (it cannot be told from another rotation).
    let refused = c
        .rotate_credential(rotate(&old, ""))
        .await
        .expect_err("a rotation of a revoked credential");
    assert_eq!(reason(&refused), "CREDENTIAL_REVOKED");
    // Under another request id, too.
    let refused = c
        .rotate_credential(rotate(&old, "rotate-2"))
        .await
        .expect_err("another rotation");
    assert_eq!(reason(&refused), "CREDENTIAL_REVOKED");

    // The same rotation again: the credential it created (whose secret was lost, never
    // exchanged) is rotated in turn, and the answer carries a fresh secret that works.
    let recovered = c
        .rotate_credential(rotate(&old, "rotate-1"))
        .await
        .expect("the repeat recovers")
        .into_inner();
    assert_ne!(recovered.credential_id, replaced_by.to_string());
    assert_eq!(
        stored(&s, &replaced_by.to_string()).await,
        (
            true,
            Some(Uuid::parse_str(&recovered.credential_id).expect("uuid"))
        )
    );
    // Repeating once more follows the chain: the previous answer's secret stops working.
    let again = c
        .rotate_credential(rotate(&old, "rotate-1"))
        .await
        .expect("still never exchanged")
        .into_inner();
    assert_ne!(again.credential_id, recovered.credential_id);
    assert_eq!(
        reason(
            &exchanges(&s, &recovered.credential)
                .await
                .expect_err("replaced by the repeat")
        ),
        "CREDENTIAL_REVOKED"
    );
    exchanges(&s, &again.credential)
        .await
        .expect("the recovered secret is good");
    // Once the new credential was exchanged, the rotation is over: no more secrets for it.
    let over = c
        .rotate_credential(rotate(&old, "rotate-1"))
        .await
        .expect_err("exchanged already");
    assert_eq!(reason(&over), "CREDENTIAL_REVOKED");
    exchanges(&s, &again.credential)
        .await
        .expect("the refused repeat changed nothing");

    // A bad request id is the caller's mistake.
    let bad = c
        .rotate_credential(rotate(&again.credential_id, "has space"))
        .await
        .expect_err("bad request id");
    assert_eq!(bad.code(), Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotation_cut_before_its_commit_is_unavailable_and_changed_nothing() {
    let proxy = FaultProxy::start().await;
    let (s, mut c) = ward_behind(&proxy).await;
    let (old, old_secret) = credential(&mut c, "svc-kept").await;

    // The connection is lost at the rotation's first statement: nothing was written.
    proxy.drop_after_statement("SELECT principal_id FROM ward.credentials");
    let failed = c
        .rotate_credential(rotate(&old, "rotate-1"))
        .await
        .expect_err("connection lost");
    assert_eq!(proxy.fired(), 1);
    assert_eq!(
        (failed.code(), reason(&failed).as_str()),
        (Code::Unavailable, "DATABASE_UNAVAILABLE"),
        "{failed:?}"
    );
    assert_eq!(stored(&s, &old).await, (false, None));
    exchanges(&s, &old_secret)
        .await
        .expect("the old credential still works");

    // A COMMIT that never reached PostgreSQL is still unknown to Ward (it cannot tell), and
    // the repeat under the same request id does the rotation once.
    proxy.drop_before_commit_of("SET replaced_by");
    let lost = c
        .rotate_credential(rotate(&old, "rotate-1"))
        .await
        .expect_err("commit lost");
    assert_eq!(reason(&lost), "OUTCOME_UNKNOWN");
    assert_eq!(stored(&s, &old).await, (false, None));
    let done = c
        .rotate_credential(rotate(&old, "rotate-1"))
        .await
        .expect("the repeat rotates")
        .into_inner();
    assert_eq!(
        stored(&s, &old).await,
        (
            true,
            Some(Uuid::parse_str(&done.credential_id).expect("uuid"))
        )
    );
    exchanges(&s, &done.credential).await.expect("new secret");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_consumption_whose_answer_is_lost_is_unknown_and_its_consumer_may_retry() {
    let proxy = FaultProxy::start().await;
    let s =
        lychd_testkit::spawn_office_with(lychd_ward::spec(), |c| proxy.route(&mut c.database.url))
            .await;
    let effect = format!("effect:{OWNER}");
    let (_, _, mut proposer) = client_for(&s, "proposer", &[("ward:propose", &effect)]).await;
    let (_, _, mut approver) = client_for(
        &s,
        "approver",
        &[("ward:approve", &effect), ("ward:review", "consent:*")],
    )
    .await;
    let (owner_id, _, mut owner) = client_for(&s, "owner", &[("ward:consume", &effect)]).await;
    let (_, _, mut other) = client_for(&s, "other-owner", &[("ward:consume", &effect)]).await;
    let consent = propose(&mut proposer, "call-1", r#"{"path":"/tmp/x"}"#).await;
    decide(&mut approver, &consent, pb::Verdict::Approve)
        .await
        .expect("approve");
    let consume = |digest: &str| pb::ConsumeConsentRequest {
        consent_id: consent.consent_id.clone(),
        binding_digest: digest.to_owned(),
    };

    // The self-committing update reaches PostgreSQL; its answer is lost.
    proxy.drop_after_statement("SET consumed_at = statement_timestamp()");
    let lost = owner
        .consume_consent(consume(&consent.binding_digest))
        .await
        .expect_err("answer lost");
    assert_eq!(proxy.fired(), 1);
    assert_eq!(
        (lost.code(), reason(&lost).as_str()),
        (Code::Unavailable, "OUTCOME_UNKNOWN"),
        "{lost:?}"
    );

    // The consumer retries: the same success, naming it as the consumer.
    let consumed = owner
        .consume_consent(consume(&consent.binding_digest))
        .await
        .expect("the consumer's retry succeeds")
        .into_inner()
        .consent
        .expect("consent");
    assert_eq!(consumed.consumed_by, owner_id);
    assert!(consumed.consumed_at.is_some());
    let again = owner
        .consume_consent(consume(&consent.binding_digest))
        .await
        .expect("and again")
        .into_inner()
        .consent
        .expect("consent");
    assert_eq!(again.consumed_at, consumed.consumed_at);

    // Anyone else, or another call, is refused: the approval was good for one effect.
    let refused = other
        .consume_consent(consume(&consent.binding_digest))
        .await
        .expect_err("another consumer");
    assert_eq!(reason(&refused), "CONSENT_CONSUMED");
    let mut changed = consent.binding_digest.clone();
    let last = if changed.ends_with('0') { "1" } else { "0" };
    changed.replace_range(changed.len() - 1.., last);
    let refused = owner
        .consume_consent(consume(&changed))
        .await
        .expect_err("another call");
    assert_eq!(reason(&refused), "CONSENT_BINDING_MISMATCH");
}

/// `lock_timeout` and `idle_in_transaction_session_timeout` of the office's sessions, and the
/// pinned isolation level: a held lock is waited for at most the configured time, and the
/// office's connections read committed even where the database's default says otherwise.
#[tokio::test(flavor = "multi_thread")]
async fn a_held_lock_is_waited_for_at_most_the_lock_timeout_and_sessions_are_pinned() {
    let s = lychd_testkit::spawn_office_with(lychd_ward::spec(), |c| {
        c.database.lock_timeout_ms = 300;
        c.database.idle_in_transaction_timeout_ms = 500;
    })
    .await;
    s.allow("ward:administer", "principal:*").await;
    let mut c = WardClient::new(s.channel());
    let (cred, _) = credential(&mut c, "svc-locked").await;

    // Another session holds the credential's principal row.
    let mut holder = s.db.superuser().await;
    sqlx::query("BEGIN")
        .execute(&mut holder)
        .await
        .expect("begin");
    sqlx::query(
        "SELECT 1 FROM ward.principals p JOIN ward.credentials c ON c.principal_id = p.id
         WHERE c.id = $1 FOR UPDATE OF p",
    )
    .bind(Uuid::parse_str(&cred).expect("uuid"))
    .execute(&mut holder)
    .await
    .expect("lock");
    let waited = c
        .rotate_credential(rotate(&cred, "r"))
        .await
        .expect_err("the lock is held");
    assert_eq!(
        (waited.code(), reason(&waited).as_str()),
        (Code::Aborted, "LOCK_TIMEOUT"),
        "{waited:?}"
    );
    assert_eq!(stored(&s, &cred).await, (false, None), "nothing changed");
    sqlx::query("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("release");
    c.rotate_credential(rotate(&cred, "r"))
        .await
        .expect("free again");

    // The session settings, on a fresh connection of the office's kind, even where the
    // database's default isolation is another.
    sqlx::query(&format!(
        "ALTER DATABASE {} SET default_transaction_isolation = 'serializable'",
        s.db.name
    ))
    .execute(&mut holder)
    .await
    .expect("alter database");
    let plain =
        s.db.connect_as("lychd_ward_app", lychd_runtime::Office::Ward)
            .await;
    let opts = lychd_runtime::db::connect_options(
        &s.db.runtime_url(lychd_runtime::Office::Ward),
        None,
        lychd_runtime::Office::Ward,
    )
    .expect("url");
    let opts = lychd_runtime::db::session_options(opts, &s.ctx.config.database);
    let mut office = <sqlx::PgConnection as sqlx::Connection>::connect_with(&opts)
        .await
        .expect("connect");
    let show = |what: &'static str| format!("SHOW {what}");
    let mut plain = plain;
    let default: String = sqlx::query_scalar(&show("transaction_isolation"))
        .fetch_one(&mut plain)
        .await
        .expect("show");
    assert_eq!(default, "serializable", "the database's default");
    for (setting, expected) in [
        ("transaction_isolation", "read committed"),
        ("lock_timeout", "300ms"),
        ("idle_in_transaction_session_timeout", "500ms"),
    ] {
        let value: String = sqlx::query_scalar(&show(setting))
            .fetch_one(&mut office)
            .await
            .expect("show");
        assert_eq!(value, expected, "{setting}");
    }
    // A transaction left idle past the timeout is ended by PostgreSQL, its locks released.
    sqlx::query("BEGIN")
        .execute(&mut office)
        .await
        .expect("begin");
    sqlx::query("SELECT 1 FROM ward.principals FOR UPDATE")
        .execute(&mut office)
        .await
        .expect("lock");
    tokio::time::sleep(std::time::Duration::from_millis(900)).await;
    sqlx::query("SELECT 1")
        .execute(&mut office)
        .await
        .expect_err("the idle transaction was ended");
}

/// Issue 23.5: PostgreSQL reads but cannot write (`default_transaction_read_only`). Decisions
/// are answered from reads while their records wait; once the oldest waiting record is older
/// than the bound, new decisions are refused `DECISION_LOG_UNAVAILABLE`; when writes come back
/// the queued records are written and decisions are answered again.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_database_bounds_how_long_decisions_wait_for_their_records() {
    let s = lychd_testkit::spawn_office_with(lychd_ward::spec(), |c| {
        c.office
            .insert("decision_log_max_age_ms".into(), toml::Value::Integer(700));
    })
    .await;
    s.allow("ward:decide", "decision:*").await;
    let mut c = WardClient::new(s.channel());
    let ask = pb::AuthorizeRequest {
        token: s.token.clone(),
        action: "ward:decide".into(),
        object: "decision:x".into(),
        audience: "ward".into(),
        purpose: "decide".into(),
        expected_policy_generation: None,
    };
    c.authorize(ask.clone()).await.expect("answered");
    let mut admin = s.db.superuser().await;
    let read_only = |on: bool| {
        format!(
            "ALTER DATABASE {} SET default_transaction_read_only = {}",
            s.db.name,
            if on { "on" } else { "off" }
        )
    };
    // Nothing waits to be written (listing the audit flushes the log); every record that waits
    // from here on was queued after `started`.
    s.admin.clone().audit(1).await.expect("flushed");
    let started = std::time::Instant::now();
    // Read-only from now on: every session of Ward's starts again under it.
    sqlx::query(&read_only(true))
        .execute(&mut admin)
        .await
        .expect("read only");
    let terminate = format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
         WHERE datname = '{}' AND usename = 'lychd_ward_app'",
        s.db.name
    );
    sqlx::query(&terminate)
        .execute(&mut admin)
        .await
        .expect("terminate");
    let before = audited(&mut admin).await;

    // Decisions go on (reads) until the oldest unwritten record is older than the bound.
    let mut answered = 0u32;
    let refused = loop {
        match c.authorize(ask.clone()).await {
            Ok(_) => answered += 1,
            // Connections broken by the restart fail the one statement sent on each.
            Err(e) if reason(&e) == "DATABASE_UNAVAILABLE" => {}
            Err(e) => break e,
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "never refused"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(
        (refused.code(), reason(&refused).as_str()),
        (Code::Unavailable, "DECISION_LOG_UNAVAILABLE"),
        "{refused:?}"
    );
    assert!(answered > 0, "decisions were answered while records waited");
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(700),
        "refused only past the bound"
    );
    assert_eq!(audited(&mut admin).await, before, "nothing written");

    // Writable again: the waiting records are written, and decisions are answered.
    sqlx::query(&read_only(false))
        .execute(&mut admin)
        .await
        .expect("writable");
    sqlx::query(&terminate)
        .execute(&mut admin)
        .await
        .expect("terminate");
    let started = std::time::Instant::now();
    loop {
        match c.authorize(ask.clone()).await {
            Ok(_) => break,
            Err(e)
                if matches!(
                    reason(&e).as_str(),
                    "DATABASE_UNAVAILABLE" | "DECISION_LOG_UNAVAILABLE"
                ) => {}
            Err(e) => panic!("{e:?}"),
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "never answered again"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Records are written behind the answer (the writer may still hold later batches when the
    // first decision is answered again): flush, then none of the answered ones is missing.
    s.admin.clone().audit(1).await.expect("flushed");
    assert!(
        audited(&mut admin).await >= before + i64::from(answered),
        "every answered decision's record was written"
    );
}

async fn audited(db: &mut sqlx::PgConnection) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM ward.audit WHERE event LIKE 'authorize.%'")
        .fetch_one(db)
        .await
        .expect("count")
}

/// Issue 23.5: a decision batch whose answer is lost after PostgreSQL committed it is retried
/// whole, and each record is written once (its id, `ON CONFLICT DO NOTHING`).
#[tokio::test(flavor = "multi_thread")]
async fn a_decision_batch_committed_without_an_answer_is_written_once() {
    let proxy = FaultProxy::start().await;
    let (s, mut c) = ward_behind(&proxy).await;
    s.allow("ward:decide", "decision:*").await;
    let ask = pb::AuthorizeRequest {
        token: s.token.clone(),
        action: "ward:decide".into(),
        object: "decision:once".into(),
        audience: "ward".into(),
        purpose: "decide".into(),
        expected_policy_generation: None,
    };
    proxy.drop_after_statement("INSERT INTO ward.audit (record_id");
    c.authorize(ask.clone()).await.expect("answered");
    let mut db = s.db.superuser().await;
    let started = std::time::Instant::now();
    while proxy.fired() == 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "never fired"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Every record queued so far is written (the retry included), each once.
    let started = std::time::Instant::now();
    loop {
        let (rows, distinct, object): (i64, i64, i64) = sqlx::query_as(
            "SELECT count(*), count(DISTINCT record_id),
                    count(*) FILTER (WHERE detail->>'object' = 'decision:once')
             FROM ward.audit WHERE record_id IS NOT NULL",
        )
        .fetch_one(&mut db)
        .await
        .expect("count");
        assert_eq!(rows, distinct, "a record was written twice");
        if object == 1 {
            break;
        }
        assert!(object == 0, "{object} records of one decision");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the batch was never written"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The writer went on past the retried batch: a later decision is recorded (ListAudit
    // flushes the log first).
    c.authorize(pb::AuthorizeRequest {
        object: "decision:later".into(),
        ..ask
    })
    .await
    .expect("answered");
    s.admin.clone().audit(1).await.expect("flushed");
    let later: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ward.audit WHERE detail->>'object' = 'decision:later'",
    )
    .fetch_one(&mut db)
    .await
    .expect("count");
    assert_eq!(later, 1);
}
