//! Decisions: unknown, expired and revoked sessions; no power without an assignment; exact
//! matching; `<type>:*`; expiry of assignments; policy generation fencing.

use lychd_ward::WardError;
use lychd_ward::domain::decision::Reason;
use lychd_ward::domain::kinds::PrincipalKind;
use lychd_ward::store::assignments;
use lychd_ward::store::credentials;
use lychd_ward::store::decisions::{self, Authentication};
use lychd_ward::store::sessions;
use secrecy::ExposeSecret;

use crate::common::{LEASE, Ward, everywhere, question};

#[tokio::test]
async fn unknown_sessions_decide_nothing() {
    let w = Ward::new().await;
    for token in [
        "",
        "lws_",
        &format!("lws_{}", "a".repeat(64)),
        "not a token",
        &format!("lwc_{}", "a".repeat(64)),
    ] {
        let d = w.ask(token, LEASE, None).await;
        assert_eq!(d.reason, Reason::SessionUnknown, "{token:?}");
        assert!(!d.allowed());
        assert_eq!(
            (d.principal, d.policy_generation, d.revocation_generation),
            (None, 0, 0)
        );
        assert_eq!(
            decisions::authenticate(&w.resolver, token, "ward")
                .await
                .unwrap(),
            Authentication::Refused(Reason::SessionUnknown)
        );
    }
    // A credential is not a session token.
    let p = w.service("svc").await;
    let (c, _) = w.session(p.id).await;
    assert_eq!(
        w.ask(c.secret.expose_secret(), LEASE, None).await.reason,
        Reason::SessionUnknown
    );
}

#[tokio::test]
async fn new_principals_have_no_power() {
    let w = Ward::new().await;
    for (kind, name) in [
        (PrincipalKind::Human, "ada"),
        (PrincipalKind::Service, "dispatcher"),
        (PrincipalKind::Peer, "peer-1"),
        (PrincipalKind::Node, "node-1"),
    ] {
        let p = w.principal(kind, name).await;
        assert_eq!(
            (p.policy_generation, p.revocation_generation, p.revoked_at),
            (0, 0, None)
        );
        let (_, s) = w.session(p.id).await;
        let token = s.token.expose_secret();
        // Authenticated...
        match decisions::authenticate(&w.resolver, token, "ward")
            .await
            .unwrap()
        {
            Authentication::Authenticated(r) => {
                assert_eq!(r.principal.id, p.id);
                assert_eq!(r.session_id, s.id);
            }
            other => panic!("{other:?}"),
        }
        // ...and allowed nothing, administration included.
        for q in [
            LEASE,
            ("ward:administer", "principal:*", "ward", "administer"),
            ("ward:decide", "decision:*", "ward", "decide"),
            ("ward:describe", "office:ward", "ward", "describe"),
        ] {
            let d = w.ask(token, q, None).await;
            assert_eq!(d.reason, Reason::NoAssignment, "{name} {q:?}");
            assert_eq!(d.principal.as_ref().map(|p| p.id), Some(p.id));
        }
        let none = assignments::list(&w.pool, Some(p.id), 100, None)
            .await
            .unwrap();
        assert!(none.items.is_empty());
    }
}

#[tokio::test]
async fn assignments_match_exactly_and_type_wildcards_only_their_type() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    let (_, s) = w.session(p.id).await;
    let t = s.token.expose_secret();
    w.grant(p.id, "dispatcher:lease", "lease:l-1", "dispatcher", "lease")
        .await;
    w.grant(p.id, "archive:read", "note:*", "archive", "read")
        .await;

    assert!(
        w.ask(
            t,
            ("dispatcher:lease", "lease:l-1", "dispatcher", "lease"),
            None
        )
        .await
        .allowed()
    );
    for q in [
        ("dispatcher:lease", "lease:l-2", "dispatcher", "lease"), // other object
        ("dispatcher:lease", "lease:*", "dispatcher", "lease"),   // exact grant ≠ type grant
        ("dispatcher:release", "lease:l-1", "dispatcher", "lease"), // other action
        ("dispatcher:lease", "lease:l-1", "orchestrator", "lease"), // other audience
        ("dispatcher:lease", "lease:l-1", "dispatcher", "inspect"), // other purpose
        ("dispatcher:lease", "lease:l-1x", "dispatcher", "lease"), // prefix is not a match
        ("dispatcher:lease", "lease:l", "dispatcher", "lease"),
    ] {
        assert_eq!(
            w.ask(t, q, None).await.reason,
            Reason::NoAssignment,
            "{q:?}"
        );
    }

    // `note:*` covers every note, and the type itself, but nothing of another type.
    for object in ["note:1", "note:abc", "note:*", "note:a:b"] {
        assert!(
            w.ask(t, ("archive:read", object, "archive", "read"), None)
                .await
                .allowed(),
            "{object}"
        );
    }
    for object in [
        "notes:1", "not:1", "note", "*", "*:*", "memory:1", "note:1 ", "Note:1", "x:note:1",
    ] {
        assert_eq!(
            w.ask(t, ("archive:read", object, "archive", "read"), None)
                .await
                .reason,
            Reason::NoAssignment,
            "{object}"
        );
    }
    // No other wildcard exists: `*` in actions, audiences or purposes is just text (and no
    // session is bound to an audience `*`).
    for (q, want) in [
        (
            ("archive:*", "note:1", "archive", "read"),
            Reason::NoAssignment,
        ),
        (("*", "note:1", "archive", "read"), Reason::NoAssignment),
        (
            ("archive:read", "note:1", "*", "read"),
            Reason::AudienceMismatch,
        ),
        (
            ("archive:read", "note:1", "archive", "*"),
            Reason::NoAssignment,
        ),
    ] {
        assert_eq!(w.ask(t, q, None).await.reason, want, "{q:?}");
    }
    // And nobody can be granted one.
    for (a, o) in [
        ("archive:*", "note:1"),
        ("*", "note:1"),
        ("archive:read", "*"),
        ("archive:read", "*:*"),
    ] {
        assert!(
            lychd_ward::domain::grammar::Action::parse(a).is_err()
                || lychd_ward::domain::grammar::Object::parse(o).is_err()
        );
    }
}

#[tokio::test]
async fn expired_and_revoked_sessions_are_refused() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    w.grant(p.id, LEASE.0, LEASE.1, LEASE.2, LEASE.3).await;
    let c = w
        .credential(p.id, lychd_ward::domain::kinds::CredentialKind::Standing)
        .await;

    // A one-second session, by the database clock.
    let short = credentials::exchange(&w.pool, c.secret.expose_secret(), 1, &everywhere())
        .await
        .unwrap();
    assert!(
        w.ask(short.token.expose_secret(), LEASE, None)
            .await
            .allowed()
    );
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let d = w.ask(short.token.expose_secret(), LEASE, None).await;
    assert_eq!(d.reason, Reason::SessionExpired);
    assert_eq!(
        d.principal, None,
        "nothing is said about whom an invalid token belonged to"
    );
    assert_eq!(
        decisions::authenticate(&w.resolver, short.token.expose_secret(), "ward")
            .await
            .unwrap(),
        Authentication::Refused(Reason::SessionExpired)
    );

    // Aged in the database only.
    let s = w.exchange(&c).await;
    w.force(
        "UPDATE ward.sessions SET expires_at = created_at + interval '1 millisecond' WHERE id = $1",
        s.id,
    )
    .await;
    assert_eq!(
        w.ask(s.token.expose_secret(), LEASE, None).await.reason,
        Reason::SessionExpired
    );

    // Revoked: monotonic and idempotent; other sessions of the credential stay valid.
    let a = w.exchange(&c).await;
    let b = w.exchange(&c).await;
    let r = sessions::revoke(&w.pool, None, a.id).await.unwrap();
    assert!(r.changed);
    assert_eq!(
        w.ask(a.token.expose_secret(), LEASE, None).await.reason,
        Reason::SessionRevoked
    );
    assert!(w.ask(b.token.expose_secret(), LEASE, None).await.allowed());
    let again = sessions::revoke(&w.pool, None, a.id).await.unwrap();
    assert!(!again.changed);
    assert_eq!(again.revocation_generation, r.revocation_generation);
    assert!(matches!(
        sessions::revoke(&w.pool, None, uuid::Uuid::new_v4()).await,
        Err(WardError::NotFound(_))
    ));
}

#[tokio::test]
async fn policy_generations_fence_prepared_work() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    let (_, s) = w.session(p.id).await;
    let t = s.token.expose_secret();
    let first = w.grant(p.id, LEASE.0, LEASE.1, LEASE.2, LEASE.3).await;
    assert_eq!(first.policy_generation, 1);

    let d = w.ask(t, LEASE, Some(1)).await;
    assert!(d.allowed());
    assert_eq!(d.policy_generation, 1);
    assert_eq!(
        w.ask(t, LEASE, Some(0)).await.reason,
        Reason::PolicyGenerationStale
    );
    assert_eq!(
        w.ask(t, LEASE, Some(2)).await.reason,
        Reason::PolicyGenerationStale
    );

    // Any change to the principal's assignments — even an unrelated grant — moves the fence.
    let other = w
        .grant(p.id, "archive:read", "note:*", "archive", "read")
        .await;
    assert_eq!(other.policy_generation, 2);
    let stale = w.ask(t, LEASE, Some(1)).await;
    assert_eq!(stale.reason, Reason::PolicyGenerationStale);
    assert_eq!(stale.policy_generation, 2);
    assert!(w.ask(t, LEASE, Some(2)).await.allowed());
    assert!(w.ask(t, LEASE, None).await.allowed());

    // Withdrawal: denies, bumps; a second withdrawal changes nothing.
    let u = assignments::unassign(&w.pool, None, first.assignment.id)
        .await
        .unwrap();
    assert_eq!((u.changed, u.policy_generation), (true, 3));
    assert_eq!(w.ask(t, LEASE, None).await.reason, Reason::NoAssignment);
    assert_eq!(
        w.ask(t, LEASE, Some(2)).await.reason,
        Reason::PolicyGenerationStale
    );
    let u2 = assignments::unassign(&w.pool, None, first.assignment.id)
        .await
        .unwrap();
    assert_eq!((u2.changed, u2.policy_generation), (false, 3));
    assert!(matches!(
        assignments::unassign(&w.pool, None, uuid::Uuid::new_v4()).await,
        Err(WardError::NotFound(_))
    ));
}

#[tokio::test]
async fn assignments_expire_by_the_database_clock_and_are_unique_while_live() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    let (_, s) = w.session(p.id).await;
    let t = s.token.expose_secret();
    let q = question(LEASE.0, LEASE.1, LEASE.2, LEASE.3);
    let soon = time::OffsetDateTime::now_utc() + time::Duration::seconds(1);
    let a = assignments::assign(&w.pool, None, p.id, &q, Some(soon))
        .await
        .unwrap();
    assert!(w.ask(t, LEASE, None).await.allowed());
    // Live duplicate: refused.
    assert!(matches!(
        assignments::assign(&w.pool, None, p.id, &q, None).await,
        Err(WardError::AlreadyExists(_))
    ));
    tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
    assert_eq!(w.ask(t, LEASE, None).await.reason, Reason::NoAssignment);
    assert!(
        assignments::list(&w.pool, Some(p.id), 10, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // An expired duplicate does not block a new grant.
    let b = assignments::assign(&w.pool, None, p.id, &q, None)
        .await
        .unwrap();
    assert_ne!(a.assignment.id, b.assignment.id);
    assert!(w.ask(t, LEASE, None).await.allowed());
    // An end in the past is bad input; nothing changes.
    let past = time::OffsetDateTime::now_utc() - time::Duration::seconds(5);
    let q2 = question("archive:read", "note:1", "archive", "read");
    match assignments::assign(&w.pool, None, p.id, &q2, Some(past)).await {
        Err(WardError::InvalidArgument(v)) => assert_eq!(
            v.iter().next().map(|v| v.field.as_str()),
            Some("expires_at")
        ),
        other => panic!("{other:?}"),
    }
    let listed = assignments::list(&w.pool, Some(p.id), 10, None)
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    // Unknown and revoked principals get nothing.
    assert!(matches!(
        assignments::assign(&w.pool, None, uuid::Uuid::new_v4(), &q2, None).await,
        Err(WardError::NotFound(_))
    ));
    lychd_ward::store::principals::revoke(&w.pool, None, p.id)
        .await
        .unwrap();
    assert!(matches!(
        assignments::assign(&w.pool, None, p.id, &q2, None).await,
        Err(WardError::PrincipalRevoked)
    ));
}

#[tokio::test]
async fn listings_page_by_key() {
    let w = Ward::new().await;
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(w.service(&format!("svc-{i}")).await.id);
    }
    ids.sort();
    let mut seen = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let page = lychd_ward::store::principals::list(&w.pool, 3, after)
            .await
            .unwrap();
        pages += 1;
        seen.extend(page.items.iter().map(|p| p.id));
        if page.next_page_token.is_empty() {
            break;
        }
        after = lychd_ward::domain::paging::uuid_after(
            lychd_ward::domain::paging::List::Principals,
            &page.next_page_token,
        )
        .unwrap();
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ids);

    // Assignments of one principal, in pages of one.
    for n in 0..3 {
        w.grant(
            ids[0],
            "archive:read",
            &format!("note:{n}"),
            "archive",
            "read",
        )
        .await;
    }
    w.grant(ids[1], "archive:read", "note:x", "archive", "read")
        .await;
    let mut after = None;
    let mut got = 0;
    loop {
        let page = assignments::list(&w.pool, Some(ids[0]), 1, after)
            .await
            .unwrap();
        got += page.items.len();
        assert!(page.items.iter().all(|a| a.principal_id == ids[0]));
        if page.next_page_token.is_empty() {
            break;
        }
        after = lychd_ward::domain::paging::uuid_after(
            lychd_ward::domain::paging::List::Assignments,
            &page.next_page_token,
        )
        .unwrap();
    }
    assert_eq!(got, 3);
    assert_eq!(
        assignments::list(&w.pool, None, 100, None)
            .await
            .unwrap()
            .items
            .len(),
        4
    );
}
