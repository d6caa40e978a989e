//! `LocalVerifier`: Ward's own `lychd_auth::Verifier`, deciding from its tables.

use lychd_auth::{AuthError, Query, is_authentication_reason};
use lychd_ward::store::{assignments, credentials};
use secrecy::ExposeSecret;

use crate::common::{LEASE, Ward};

fn query<'a>(token: &'a str, expected: Option<i64>) -> Query<'a> {
    Query {
        token,
        action: LEASE.0,
        object: LEASE.1,
        audience: LEASE.2,
        purpose: LEASE.3,
        expected_policy_generation: expected,
    }
}

#[tokio::test]
async fn the_local_verifier_answers_from_the_tables() {
    let w = Ward::new().await;
    let v = lychd_ward::local_verifier(w.pool.clone(), &Default::default());
    let p = w.service("svc").await;
    let (c, s) = w.session(p.id).await;
    let t = s.token.expose_secret();

    let who = v.authenticate(t, "ward").await.unwrap();
    assert_eq!(
        (who.id, who.kind.as_str(), who.name.as_str()),
        (p.id.to_string(), "service", "svc")
    );

    let d = v.authorize(&query(t, None)).await.unwrap();
    assert!(!d.allowed);
    assert_eq!(d.reason, "NO_ASSIGNMENT");
    assert_eq!(d.principal.as_ref().map(|p| p.name.as_str()), Some("svc"));

    let a = w.grant(p.id, LEASE.0, LEASE.1, LEASE.2, LEASE.3).await;
    let d = v
        .authorize(&query(t, Some(a.policy_generation)))
        .await
        .unwrap();
    assert!(d.allowed);
    assert_eq!(d.reason, "ALLOWED");
    assert_eq!(d.policy_generation, a.policy_generation);
    let stale = v
        .authorize(&query(t, Some(a.policy_generation - 1)))
        .await
        .unwrap();
    assert_eq!(
        (stale.allowed, stale.reason.as_str()),
        (false, "POLICY_GENERATION_STALE")
    );

    // No cache: the next decision after a revocation denies.
    assignments::unassign(&w.pool, None, a.assignment.id)
        .await
        .unwrap();
    assert_eq!(
        v.authorize(&query(t, None)).await.unwrap().reason,
        "NO_ASSIGNMENT"
    );
    credentials::revoke(&w.pool, None, c.id).await.unwrap();
    let d = v.authorize(&query(t, None)).await.unwrap();
    assert_eq!(
        (d.allowed, d.reason.as_str(), d.principal),
        (false, "CREDENTIAL_REVOKED", None)
    );
    assert!(is_authentication_reason(&d.reason));
    match v.authenticate(t, "ward").await {
        Err(AuthError::Unauthenticated(reason)) => assert_eq!(reason, "CREDENTIAL_REVOKED"),
        other => panic!("{other:?}"),
    }
    match v.authenticate("garbage", "ward").await {
        Err(AuthError::Unauthenticated(reason)) => assert_eq!(reason, "SESSION_UNKNOWN"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn without_its_database_the_verifier_allows_nothing() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    w.grant(p.id, LEASE.0, LEASE.1, LEASE.2, LEASE.3).await;
    let (_, s) = w.session(p.id).await;
    let v = lychd_ward::local_verifier(w.pool.clone(), &Default::default());
    assert!(
        v.authorize(&query(s.token.expose_secret(), None))
            .await
            .unwrap()
            .allowed
    );
    w.pool.close().await;
    assert!(matches!(
        v.authorize(&query(s.token.expose_secret(), None)).await,
        Err(AuthError::Unavailable(_))
    ));
    assert!(matches!(
        v.authenticate(s.token.expose_secret(), "ward").await,
        Err(AuthError::Unavailable(_))
    ));
}
