//! Credentials: exchange, one-time enrollment, expiry, revocation, rotation.

use lychd_ward::WardError;
use lychd_ward::domain::decision::{ExchangeRefusal, Reason};
use lychd_ward::domain::kinds::{CredentialKind, PrincipalKind};
use lychd_ward::domain::lifetime;
use lychd_ward::store::{credentials, principals, sessions};
use secrecy::ExposeSecret;

use crate::common::{LEASE, Ward, everywhere};

fn refused(r: Result<credentials::NewSession, WardError>) -> ExchangeRefusal {
    match r {
        Err(WardError::Refused(reason)) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn unknown_and_malformed_credentials_are_refused() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    let real = w.credential(p.id, CredentialKind::Standing).await;
    let secret = real.secret.expose_secret();
    let unknown = format!("lwc_{}", "0".repeat(64));
    // Same shape with one digit changed, a session-shaped token, garbage, and the empty string.
    let flipped = format!(
        "{}{}",
        &secret[..secret.len() - 1],
        if secret.ends_with('0') { '1' } else { '0' }
    );
    let session_shaped = format!("lws_{}", &secret[4..]);
    for bad in [
        unknown.as_str(),
        flipped.as_str(),
        session_shaped.as_str(),
        "lwc_",
        "",
        "Bearer x",
        &secret.to_uppercase(),
    ] {
        assert_eq!(
            refused(credentials::exchange(&w.pool, bad, 0, &everywhere()).await),
            ExchangeRefusal::CredentialUnknown,
            "{bad:?}"
        );
    }
    // The real one still works.
    credentials::exchange(&w.pool, secret, 0, &everywhere())
        .await
        .expect("exchange");
}

#[tokio::test]
async fn enrollment_credentials_exchange_once_standing_ones_repeatedly() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    let enrollment = w.credential(p.id, CredentialKind::Enrollment).await;
    let first = w.exchange(&enrollment).await;
    assert_eq!(first.principal.id, p.id);
    assert_eq!(
        refused(
            credentials::exchange(&w.pool, enrollment.secret.expose_secret(), 0, &everywhere())
                .await
        ),
        ExchangeRefusal::CredentialExchanged
    );
    // The session obtained first stays valid.
    let d = w.ask(first.token.expose_secret(), LEASE, None).await;
    assert_eq!(
        d.reason,
        Reason::NoAssignment,
        "authenticated, without power"
    );

    // Many concurrent exchanges of one enrollment credential: exactly one wins.
    let e2 = w.credential(p.id, CredentialKind::Enrollment).await;
    let secret = e2.secret.expose_secret().to_owned();
    let tries = (0..8).map(|_| {
        let pool = w.pool.clone();
        let secret = secret.clone();
        tokio::spawn(async move { credentials::exchange(&pool, &secret, 0, &everywhere()).await })
    });
    let mut won = 0;
    for t in tries {
        match t.await.expect("task") {
            Ok(_) => won += 1,
            Err(WardError::Refused(ExchangeRefusal::CredentialExchanged)) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(won, 1);

    let standing = w.credential(p.id, CredentialKind::Standing).await;
    let a = w.exchange(&standing).await;
    let b = w.exchange(&standing).await;
    assert_ne!(a.id, b.id);
    assert_ne!(a.token.expose_secret(), b.token.expose_secret());
}

#[tokio::test]
async fn expired_credentials_are_refused_and_sessions_never_outlive_them() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    // A credential of one second: a session asked for an hour gets at most that second.
    let short = credentials::issue(&w.pool, None, p.id, CredentialKind::Standing, 1)
        .await
        .unwrap();
    let s = credentials::exchange(&w.pool, short.secret.expose_secret(), 3600, &everywhere())
        .await
        .unwrap();
    assert!(s.expires_at <= short.expires_at);
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    assert_eq!(
        refused(
            credentials::exchange(&w.pool, short.secret.expose_secret(), 0, &everywhere()).await
        ),
        ExchangeRefusal::CredentialExpired
    );
    assert_eq!(
        w.ask(s.token.expose_secret(), LEASE, None).await.reason,
        Reason::SessionExpired
    );

    // Expiry is the database's clock: age a credential in the database only.
    let c = w.credential(p.id, CredentialKind::Standing).await;
    let live = w.exchange(&c).await;
    w.force("UPDATE ward.credentials SET expires_at = created_at + interval '1 millisecond' WHERE id = $1", c.id)
        .await;
    assert_eq!(
        refused(credentials::exchange(&w.pool, c.secret.expose_secret(), 0, &everywhere()).await),
        ExchangeRefusal::CredentialExpired
    );
    // Its session, had it been longer-lived, ends with it.
    assert_eq!(
        w.ask(live.token.expose_secret(), LEASE, None).await.reason,
        Reason::SessionExpired
    );
}

#[tokio::test]
async fn session_lifetimes_are_defaulted_and_capped() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    let c = w.credential(p.id, CredentialKind::Standing).await;
    let now = time::OffsetDateTime::now_utc();
    let default = credentials::exchange(&w.pool, c.secret.expose_secret(), 0, &everywhere())
        .await
        .unwrap();
    let capped = credentials::exchange(&w.pool, c.secret.expose_secret(), u32::MAX, &everywhere())
        .await
        .unwrap();
    let secs = |s: &credentials::NewSession| (s.expires_at - now).whole_seconds();
    assert!(
        (3590..=3610).contains(&secs(&default)),
        "{}",
        secs(&default)
    );
    let max = i64::from(lifetime::SESSION_MAX_SECS);
    assert!(
        (max - 10..=max + 10).contains(&secs(&capped)),
        "{}",
        secs(&capped)
    );
}

#[tokio::test]
async fn revoked_credentials_refuse_exchange_and_end_their_sessions() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    w.grant(p.id, LEASE.0, LEASE.1, LEASE.2, LEASE.3).await;
    let (c, s) = w.session(p.id).await;
    let (other_c, other_s) = w.session(p.id).await;
    assert!(w.ask(s.token.expose_secret(), LEASE, None).await.allowed());

    let r = credentials::revoke(&w.pool, None, c.id).await.unwrap();
    assert!(r.changed);
    assert_eq!(r.revocation_generation, p.revocation_generation + 1);
    assert_eq!(
        w.ask(s.token.expose_secret(), LEASE, None).await.reason,
        Reason::CredentialRevoked
    );
    assert_eq!(
        refused(credentials::exchange(&w.pool, c.secret.expose_secret(), 0, &everywhere()).await),
        ExchangeRefusal::CredentialRevoked
    );
    // Idempotent and monotonic: a second revoke changes nothing.
    let again = credentials::revoke(&w.pool, None, c.id).await.unwrap();
    assert!(!again.changed);
    assert_eq!(again.revocation_generation, r.revocation_generation);
    // Other credentials of the principal are untouched.
    let d = w.ask(other_s.token.expose_secret(), LEASE, None).await;
    assert!(d.allowed());
    assert_eq!(
        d.revocation_generation, r.revocation_generation,
        "decided under the new generation"
    );
    w.exchange(&other_c).await;
    // Unknown ids.
    assert!(matches!(
        credentials::revoke(&w.pool, None, uuid::Uuid::new_v4()).await,
        Err(WardError::NotFound(_))
    ));
}

#[tokio::test]
async fn rotation_replaces_the_credential_and_ends_the_old_sessions() {
    let w = Ward::new().await;
    let p = w.service("svc").await;
    w.grant(p.id, LEASE.0, LEASE.1, LEASE.2, LEASE.3).await;
    let (old, old_session) = w.session(p.id).await;
    let new = credentials::rotate(&w.pool, None, old.id, None)
        .await
        .unwrap();
    assert_ne!(new.id, old.id);
    assert_eq!(new.kind, CredentialKind::Standing);
    assert_eq!(
        w.ask(old_session.token.expose_secret(), LEASE, None)
            .await
            .reason,
        Reason::CredentialRevoked
    );
    assert_eq!(
        refused(credentials::exchange(&w.pool, old.secret.expose_secret(), 0, &everywhere()).await),
        ExchangeRefusal::CredentialRevoked
    );
    let fresh = w.exchange(&new).await;
    assert!(
        w.ask(fresh.token.expose_secret(), LEASE, None)
            .await
            .allowed()
    );
    // The replacement keeps the old lifetime (a year by default).
    let lifetime = (new.expires_at - old.expires_at).whole_seconds();
    assert!((0..60).contains(&lifetime), "{lifetime}");
    // A revoked (here: rotated) credential cannot be rotated again.
    assert!(matches!(
        credentials::rotate(&w.pool, None, old.id, None).await,
        Err(WardError::CredentialRevoked)
    ));
    let replaced_by: Option<uuid::Uuid> =
        sqlx::query_scalar("SELECT replaced_by FROM ward.credentials WHERE id = $1")
            .bind(old.id)
            .fetch_one(&w.pool)
            .await
            .unwrap();
    assert_eq!(replaced_by, Some(new.id));
}

#[tokio::test]
async fn revoked_principals_lose_everything_and_get_nothing_new() {
    let w = Ward::new().await;
    let p = w.principal(PrincipalKind::Human, "ada").await;
    w.grant(p.id, LEASE.0, LEASE.1, LEASE.2, LEASE.3).await;
    let (c, s) = w.session(p.id).await;
    let r = principals::revoke(&w.pool, None, p.id).await.unwrap();
    assert!(r.changed);
    assert_eq!(
        w.ask(s.token.expose_secret(), LEASE, None).await.reason,
        Reason::PrincipalRevoked
    );
    assert_eq!(
        refused(credentials::exchange(&w.pool, c.secret.expose_secret(), 0, &everywhere()).await),
        ExchangeRefusal::PrincipalRevoked
    );
    assert!(
        !principals::revoke(&w.pool, None, p.id)
            .await
            .unwrap()
            .changed
    );
    assert!(matches!(
        credentials::issue(&w.pool, None, p.id, CredentialKind::Standing, 60).await,
        Err(WardError::PrincipalRevoked)
    ));
    assert!(matches!(
        credentials::rotate(&w.pool, None, c.id, None).await,
        Err(WardError::PrincipalRevoked)
    ));
    // The session row itself was revoked too.
    assert!(!sessions::revoke(&w.pool, None, s.id).await.unwrap().changed);
}
