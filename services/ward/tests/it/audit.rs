//! The audit trail records administrative changes and decisions with identities and
//! generations, newest first, in pages.

use lychd_ward::domain::decision::{ExchangeRefusal, Reason};
use lychd_ward::domain::kinds::CredentialKind;
use lychd_ward::domain::paging;
use lychd_ward::store::audit::{self, AuditRecord};
use lychd_ward::store::{assignments, credentials, principals};
use secrecy::ExposeSecret;

use crate::common::{LEASE, Ward, everywhere};

async fn all(w: &Ward) -> Vec<AuditRecord> {
    let mut out = Vec::new();
    let mut before = None;
    loop {
        let page = audit::list(&w.pool, 4, before).await.unwrap();
        out.extend(page.items);
        if page.next_page_token.is_empty() {
            return out;
        }
        before = paging::seq_before(paging::List::Audit, &page.next_page_token).unwrap();
    }
}

#[tokio::test]
async fn changes_and_decisions_are_recorded() {
    let w = Ward::new().await;
    let b = lychd_ward::bootstrap(&w.pool, "operator").await.unwrap();
    let op = b.principal_id;
    let p = principals::enroll(
        &w.pool,
        Some(op),
        &principals::Enrollment {
            kind: lychd_ward::domain::kinds::PrincipalKind::Service,
            name: lychd_ward::domain::grammar::PrincipalName::parse("svc").unwrap(),
            display_name: None,
        },
    )
    .await
    .unwrap();
    let c = credentials::issue(&w.pool, Some(op), p.id, CredentialKind::Enrollment, 60)
        .await
        .unwrap();
    let s = w.exchange(&c).await;
    // A refused exchange changes nothing and writes nothing (its caller counts it).
    assert!(matches!(
        credentials::exchange(&w.pool, c.secret.expose_secret(), 0, &everywhere()).await,
        Err(lychd_ward::WardError::Refused(
            ExchangeRefusal::CredentialExchanged
        ))
    ));
    let a = assignments::assign(
        &w.pool,
        Some(op),
        p.id,
        &crate::common::question(LEASE.0, LEASE.1, LEASE.2, LEASE.3),
        None,
    )
    .await
    .unwrap();
    w.ask(s.token.expose_secret(), LEASE, Some(1)).await;
    w.ask(
        s.token.expose_secret(),
        ("archive:read", "note:1", "archive", "read"),
        None,
    )
    .await;
    assignments::unassign(&w.pool, Some(op), a.assignment.id)
        .await
        .unwrap();
    lychd_ward::store::sessions::revoke(&w.pool, Some(op), s.id)
        .await
        .unwrap();
    // So does a refused authentication.
    assert_eq!(
        lychd_ward::store::decisions::authenticate(&w.resolver, s.token.expose_secret(), "ward")
            .await
            .unwrap(),
        lychd_ward::store::decisions::Authentication::Refused(Reason::SessionRevoked)
    );
    principals::revoke(&w.pool, Some(op), p.id).await.unwrap();

    let events = all(&w).await;
    let names: Vec<&str> = events.iter().rev().map(|e| e.event.as_str()).collect();
    assert_eq!(
        names,
        [
            "ward.bootstrapped",
            "principal.enrolled",
            "credential.issued",
            "session.exchanged",
            "assignment.granted",
            "authorize.allow",
            "authorize.deny",
            "assignment.withdrawn",
            "session.revoked",
            "principal.revoked",
        ]
    );
    // Newest first, strictly.
    assert!(events.windows(2).all(|w| w[0].seq > w[1].seq));
    let by = |name: &str| events.iter().find(|e| e.event == name).unwrap();
    assert_eq!(by("ward.bootstrapped").actor_id, None);
    assert_eq!(by("principal.enrolled").actor_id, Some(op));
    assert_eq!(by("principal.enrolled").subject_id, Some(p.id));
    let allow = by("authorize.allow");
    assert_eq!(allow.subject_id, Some(p.id));
    assert_eq!(allow.detail["reason"], "ALLOWED");
    assert_eq!(allow.detail["action"], LEASE.0);
    assert_eq!(allow.detail["policy_generation"], 1);
    assert_eq!(allow.detail["expected_policy_generation"], 1);
    assert_eq!(allow.detail["session_id"], s.id.to_string());
    assert_eq!(by("authorize.deny").detail["reason"], "NO_ASSIGNMENT");
    assert_eq!(by("assignment.withdrawn").detail["policy_generation"], 2);
    assert_eq!(by("principal.revoked").detail["revocation_generation"], 2);
}
