//! Secrets are never stored: every row of every ward table, rendered as text (bytea as hex),
//! contains none of the credentials or session tokens issued — neither as text nor as the hex
//! of their bytes nor their random part — while their digests are there.

use lychd_ward::domain::kinds::{CredentialKind, PrincipalKind};
use lychd_ward::domain::secret;
use lychd_ward::store::{credentials, principals};
use secrecy::ExposeSecret;
use sqlx::Row;

use crate::common::{LEASE, Ward, everywhere};

#[tokio::test]
async fn no_table_holds_a_secret() {
    let w = Ward::new().await;
    let mut secrets: Vec<String> = Vec::new();
    let b = lychd_ward::bootstrap(&w.pool, "operator").await.unwrap();
    secrets.push(b.credential.clone());
    let op = credentials::exchange(&w.pool, &b.credential, 0, &everywhere())
        .await
        .unwrap();
    secrets.push(op.token.expose_secret().to_owned());
    for (kind, name) in [
        (PrincipalKind::Service, "svc"),
        (PrincipalKind::Human, "ada"),
    ] {
        let p = w.principal(kind, name).await;
        w.grant(p.id, LEASE.0, LEASE.1, LEASE.2, LEASE.3).await;
        for ck in [CredentialKind::Standing, CredentialKind::Enrollment] {
            let c = w.credential(p.id, ck).await;
            secrets.push(c.secret.expose_secret().to_owned());
            let s = w.exchange(&c).await;
            secrets.push(s.token.expose_secret().to_owned());
            // Use the session (decisions are audited) and try the credential again.
            w.ask(s.token.expose_secret(), LEASE, None).await;
            if let Ok(again) =
                credentials::exchange(&w.pool, c.secret.expose_secret(), 0, &everywhere()).await
            {
                secrets.push(again.token.expose_secret().to_owned());
            }
        }
        let (c, s) = w.session(p.id).await;
        secrets.push(c.secret.expose_secret().to_owned());
        secrets.push(s.token.expose_secret().to_owned());
        let rotated = credentials::rotate(&w.pool, None, c.id, None)
            .await
            .unwrap();
        secrets.push(rotated.secret.expose_secret().to_owned());
        let s = w.exchange(&rotated).await;
        secrets.push(s.token.expose_secret().to_owned());
        principals::revoke(&w.pool, None, p.id).await.unwrap();
        lychd_ward::store::decisions::authenticate(&w.resolver, s.token.expose_secret(), "ward")
            .await
            .unwrap();
    }

    // Every table of the schema, as the superuser, rendered as JSON text.
    let mut su = w.superuser().await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'ward' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(&mut su)
    .await
    .unwrap();
    for expected in [
        "principals",
        "users",
        "credentials",
        "sessions",
        "assignments",
        "audit",
    ] {
        assert!(tables.iter().any(|t| t == expected), "{expected} scanned");
    }
    let mut dump = String::new();
    for table in &tables {
        let rows = sqlx::query(&format!(
            "SELECT row_to_json(t)::text AS j FROM ward.\"{table}\" t"
        ))
        .fetch_all(&mut su)
        .await
        .unwrap();
        for row in rows {
            dump.push_str(&row.get::<String, _>("j"));
            dump.push('\n');
        }
    }
    assert!(dump.len() > 1000, "the scan saw the data");
    for s in &secrets {
        assert_eq!(s.len(), secret::RENDERED_LEN);
        let random_part = &s[4..];
        assert!(!dump.contains(s.as_str()), "a secret is stored");
        assert!(
            !dump.contains(random_part),
            "a secret's random part is stored"
        );
        assert!(
            !dump.contains(&hex::encode(s.as_bytes())),
            "a secret's bytes are stored"
        );
    }
    // The digests of credentials and sessions are what is stored.
    let digests: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT digest FROM ward.credentials UNION ALL SELECT digest FROM ward.sessions",
    )
    .fetch_all(&mut su)
    .await
    .unwrap();
    assert_eq!(digests.len(), secrets.len());
    for s in &secrets {
        assert!(
            digests.iter().any(|d| d.as_slice() == secret::digest(s)),
            "digest of each secret stored"
        );
    }
}
