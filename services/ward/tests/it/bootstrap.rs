//! Bootstrap: once, even under concurrency; the operator administers and nothing else.

use lychd_ward::WardError;
use lychd_ward::domain::decision::Reason;
use lychd_ward::store::{assignments, credentials, principals};

use crate::common::{Ward, everywhere};

const ADMINISTER: (&str, &str, &str, &str) =
    ("ward:administer", "principal:*", "ward", "administer");

#[tokio::test]
async fn bootstrap_creates_one_operator_with_administration_only() {
    let w = Ward::new().await;
    let b = lychd_ward::bootstrap(&w.pool, "operator").await.unwrap();
    assert!(
        !format!("{b:?}").contains(&b.credential),
        "credential redacted in Debug"
    );
    assert!(b.credential.starts_with("lwc_"));

    let session = credentials::exchange(&w.pool, &b.credential, 0, &everywhere())
        .await
        .unwrap();
    assert_eq!(session.principal.id, b.principal_id);
    assert_eq!(
        session.principal.kind,
        lychd_ward::domain::kinds::PrincipalKind::Human
    );
    assert_eq!(session.principal.policy_generation, 1);
    let t = secrecy::ExposeSecret::expose_secret(&session.token).to_owned();
    assert!(w.ask(&t, ADMINISTER, None).await.allowed());
    assert!(w.ask(&t, ADMINISTER, Some(1)).await.allowed());
    for q in [
        ("ward:administer", "principal:x", "ward", "administer"),
        ("ward:administer", "principal:*", "dispatcher", "administer"),
        ("ward:decide", "decision:*", "ward", "decide"),
        ("dispatcher:lease", "lease:*", "dispatcher", "lease"),
    ] {
        let reason = w.ask(&t, q, None).await.reason;
        let want = if q.1 == "principal:x" {
            Reason::Allowed
        } else {
            Reason::NoAssignment
        };
        assert_eq!(reason, want, "{q:?}");
    }
    // Standing: a restarted operator tool exchanges again.
    credentials::exchange(&w.pool, &b.credential, 0, &everywhere())
        .await
        .unwrap();
    let listed = assignments::list(&w.pool, Some(b.principal_id), 10, None)
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);

    // Only once, whatever the name.
    for name in ["operator", "someone-else"] {
        assert!(matches!(
            lychd_ward::bootstrap(&w.pool, name).await,
            Err(WardError::AlreadyBootstrapped)
        ));
    }
    assert!(matches!(
        lychd_ward::bootstrap(&w.pool, "Bad Name").await,
        Err(WardError::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn bootstrap_refuses_once_any_principal_exists() {
    let w = Ward::new().await;
    w.service("early").await;
    assert!(matches!(
        lychd_ward::bootstrap(&w.pool, "operator").await,
        Err(WardError::AlreadyBootstrapped)
    ));
    assert_eq!(
        principals::list(&w.pool, 10, None)
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_bootstraps_have_exactly_one_winner() {
    for _round in 0..3 {
        let w = Ward::with_pool(12).await;
        let tries: Vec<_> = (0..8)
            .map(|i| {
                let pool = w.pool.clone();
                tokio::spawn(
                    async move { lychd_ward::bootstrap(&pool, &format!("operator-{i}")).await },
                )
            })
            .collect();
        let mut winners = 0;
        for t in tries {
            match t.await.unwrap() {
                Ok(_) => winners += 1,
                Err(WardError::AlreadyBootstrapped) => {}
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
        assert_eq!(winners, 1);
        assert_eq!(
            principals::list(&w.pool, 10, None)
                .await
                .unwrap()
                .items
                .len(),
            1
        );
    }
}
