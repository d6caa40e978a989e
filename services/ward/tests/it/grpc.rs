//! The handlers over real gRPC (in-process Ward on port 0, the test kit's `tester` session):
//! bad input is refused with field violations and changes nothing; the exchange takes the
//! credential as its bearer; administration and decisions need their assignments.

use lychd_proto::common::v1::PageRequest;
use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::Spawned;
use prost_types::Timestamp;
use tonic::Code;
use tonic_types::StatusExt;

async fn counts(s: &Spawned) -> Vec<i64> {
    let mut su = s.db.superuser().await;
    let mut out = Vec::new();
    for t in [
        "principals",
        "users",
        "credentials",
        "sessions",
        "assignments",
    ] {
        out.push(
            sqlx::query_scalar(&format!("SELECT count(*) FROM ward.{t}"))
                .fetch_one(&mut su)
                .await
                .unwrap(),
        );
    }
    out
}

/// `INVALID_ARGUMENT` with the first field's own reason (one Ward declares for a bad field),
/// naming exactly `fields`, echoing nothing.
fn assert_invalid<T: std::fmt::Debug>(r: Result<T, tonic::Status>, fields: &[&str], secret: &str) {
    let status = r.expect_err("bad input must be refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let details = status.get_error_details();
    let reason = details
        .error_info()
        .map(|i| i.reason.clone())
        .unwrap_or_default();
    let declared = lychd_ward::error::REFUSALS.catalogue().any(|r| {
        r.name == reason && r.code == Code::InvalidArgument && r.name != "INVALID_ARGUMENT"
    });
    assert!(declared, "{reason} is not one of Ward's bad-field reasons");
    let got: Vec<_> = details
        .bad_request()
        .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
        .unwrap_or_default();
    assert_eq!(got, fields, "{status:?}");
    if !secret.is_empty() {
        assert!(
            !status.message().contains(secret),
            "the refusal echoes its input"
        );
        for v in &details.bad_request().unwrap().field_violations {
            assert!(!v.description.contains(secret));
        }
    }
}

fn page(token: &str) -> Option<PageRequest> {
    Some(PageRequest {
        page_size: 0,
        page_token: token.to_owned(),
    })
}

/// Ward in-process with a typed client (the tester's session).
async fn spawn_ward() -> (Spawned, WardClient<PeerChannel>) {
    let s = lychd_testkit::spawn_office(lychd_ward::spec()).await;
    let client = WardClient::new(s.channel());
    (s, client)
}

pub(crate) async fn admin_client() -> (Spawned, WardClient<PeerChannel>) {
    let (s, client) = spawn_ward().await;
    s.allow("ward:administer", "principal:*").await;
    s.allow("ward:decide", "decision:*").await;
    (s, client)
}

#[tokio::test]
async fn bad_input_is_refused_with_field_violations_and_changes_nothing() {
    let (s, mut c) = admin_client().await;
    let before = counts(&s).await;
    let id = uuid::Uuid::new_v4().to_string();

    let enroll = |kind, name: &str, display_name: &str| pb::EnrollPrincipalRequest {
        kind,
        name: name.to_owned(),
        display_name: display_name.to_owned(),
    };
    assert_invalid(c.enroll_principal(enroll(7, "ok", "")).await, &["kind"], "");
    assert_invalid(c.enroll_principal(enroll(0, "ok", "")).await, &["kind"], "");
    assert_invalid(
        c.enroll_principal(enroll(1, "Sneaky Name", "")).await,
        &["name"],
        "Sneaky Name",
    );
    assert_invalid(c.enroll_principal(enroll(1, "", "")).await, &["name"], "");
    assert_invalid(
        c.enroll_principal(enroll(-3, "a b", " x")).await,
        &["kind", "name", "display_name"],
        "",
    );

    let issue = |principal_id: &str, kind, ttl_seconds| pb::IssueCredentialRequest {
        principal_id: principal_id.to_owned(),
        kind,
        ttl_seconds,
    };
    assert_invalid(
        c.issue_credential(issue("nope", 2, 0)).await,
        &["principal_id"],
        "nope",
    );
    assert_invalid(
        c.issue_credential(issue("", 2, 0)).await,
        &["principal_id"],
        "",
    );
    assert_invalid(c.issue_credential(issue(&id, 7, 0)).await, &["kind"], "");
    assert_invalid(
        c.issue_credential(issue(&id, 1, 31 * 86_400)).await,
        &["ttl_seconds"],
        "",
    );
    assert_invalid(
        c.issue_credential(issue(&id, 2, u32::MAX)).await,
        &["ttl_seconds"],
        "",
    );

    let rotate = |id: &str| pb::RotateCredentialRequest {
        credential_id: id.to_owned(),
        ..Default::default()
    };
    assert_invalid(
        c.rotate_credential(rotate("")).await,
        &["credential_id"],
        "",
    );
    assert_invalid(
        c.rotate_credential(rotate("lwc_0000")).await,
        &["credential_id"],
        "lwc_0000",
    );

    use pb::revoke_request::Target;
    assert_invalid(
        c.revoke(pb::RevokeRequest { target: None }).await,
        &["target"],
        "",
    );
    for (target, field) in [
        (Target::CredentialId("x".into()), "credential_id"),
        (Target::SessionId("".into()), "session_id"),
        (Target::PrincipalId("1234".into()), "principal_id"),
    ] {
        assert_invalid(
            c.revoke(pb::RevokeRequest {
                target: Some(target),
            })
            .await,
            &[field],
            "",
        );
    }

    let assign =
        |action: &str, object: &str, audience: &str, purpose: &str, expires_at| pb::AssignRequest {
            principal_id: s.tester_id.clone(),
            action: action.to_owned(),
            object: object.to_owned(),
            audience: audience.to_owned(),
            purpose: purpose.to_owned(),
            expires_at,
        };
    assert_invalid(
        c.assign(assign("archive:*", "note:1", "archive", "read", None))
            .await,
        &["action"],
        "",
    );
    assert_invalid(
        c.assign(assign("archive:read", "*", "archive", "read", None))
            .await,
        &["object"],
        "",
    );
    assert_invalid(
        c.assign(assign("archive:read", "note:a*", "archive", "read", None))
            .await,
        &["object"],
        "",
    );
    assert_invalid(
        c.assign(assign("", "", "", "", None)).await,
        &["action", "object", "audience", "purpose"],
        "",
    );
    let bad_time = Some(Timestamp {
        seconds: 1,
        nanos: -5,
    });
    assert_invalid(
        c.assign(assign(
            "archive:read",
            "note:1",
            "archive",
            "read",
            bad_time,
        ))
        .await,
        &["expires_at"],
        "",
    );
    let past = Some(Timestamp {
        seconds: 1_000_000_000,
        nanos: 0,
    });
    assert_invalid(
        c.assign(assign("archive:read", "note:1", "archive", "read", past))
            .await,
        &["expires_at"],
        "",
    );
    let mut no_principal = assign("archive:read", "note:1", "archive", "read", None);
    no_principal.principal_id = "x".into();
    assert_invalid(c.assign(no_principal).await, &["principal_id"], "");
    assert_invalid(
        c.unassign(pb::UnassignRequest {
            assignment_id: "x".into(),
        })
        .await,
        &["assignment_id"],
        "",
    );

    // Page tokens: garbage, and a token of another list.
    let principals = c
        .list_principals(pb::ListPrincipalsRequest {
            page: Some(PageRequest {
                page_size: 1,
                page_token: String::new(),
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let foreign = principals.page.unwrap().next_page_token;
    assert!(!foreign.is_empty());
    assert_invalid(
        c.list_principals(pb::ListPrincipalsRequest { page: page("zz") })
            .await,
        &["page.page_token"],
        "",
    );
    assert_invalid(
        c.list_audit(pb::ListAuditRequest {
            page: page(&foreign),
        })
        .await,
        &["page.page_token"],
        "",
    );
    assert_invalid(
        c.list_assignments(pb::ListAssignmentsRequest {
            principal_id: "bad".into(),
            page: page(&foreign),
        })
        .await,
        &["principal_id", "page.page_token"],
        "",
    );

    // Decisions.
    assert_invalid(
        c.authenticate(pb::AuthenticateRequest {
            token: String::new(),
            audience: "ward".into(),
        })
        .await,
        &["token"],
        "",
    );
    let ask = |token: &str, action: &str, object: &str, expected| pb::AuthorizeRequest {
        token: token.to_owned(),
        action: action.to_owned(),
        object: object.to_owned(),
        audience: "ward".into(),
        purpose: "read".into(),
        expected_policy_generation: expected,
    };
    assert_invalid(
        c.authorize(ask("", "a:b", "c:d", None)).await,
        &["token"],
        "",
    );
    assert_invalid(
        c.authorize(ask(&s.token, "a", "c:*x", Some(-1))).await,
        &["action", "object", "expected_policy_generation"],
        &s.token,
    );

    assert_eq!(counts(&s).await, before, "bad input changed nothing");
    s.stop().await;
}

#[tokio::test]
async fn exchange_administration_and_decisions_over_grpc() {
    let (s, mut c) = spawn_ward().await;
    // The tester starts with nothing but describe.
    let denied = c
        .enroll_principal(pb::EnrollPrincipalRequest {
            kind: 2,
            name: "svc".into(),
            display_name: String::new(),
        })
        .await
        .expect_err("no power");
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert_eq!(
        denied.get_error_details().error_info().unwrap().reason,
        "NO_ASSIGNMENT"
    );
    s.allow("ward:administer", "principal:*").await;

    let svc = c
        .enroll_principal(pb::EnrollPrincipalRequest {
            kind: 2,
            name: "svc".into(),
            display_name: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .principal
        .unwrap();
    assert_eq!(
        (svc.kind, svc.policy_generation, svc.revocation_generation),
        (2, 0, 0)
    );
    let again = c
        .enroll_principal(pb::EnrollPrincipalRequest {
            kind: 2,
            name: "svc".into(),
            display_name: String::new(),
        })
        .await
        .expect_err("names are unique");
    assert_eq!(again.code(), Code::AlreadyExists);

    let issued = c
        .issue_credential(pb::IssueCredentialRequest {
            principal_id: svc.id.clone(),
            kind: 1,
            ttl_seconds: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(issued.credential.starts_with("lwc_"));

    // The credential is the bearer of the exchange; an enrollment credential works once.
    let mut with_credential = WardClient::new(s.channel_with(&issued.credential));
    let session = with_credential
        .exchange_credential(pb::ExchangeCredentialRequest {
            ttl_seconds: 0,
            audiences: vec!["ward".into(), "dispatcher".into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(session.session_token.starts_with("lws_"));
    assert_eq!(session.principal.as_ref().unwrap().id, svc.id);
    let twice = with_credential
        .exchange_credential(pb::ExchangeCredentialRequest {
            ttl_seconds: 0,
            audiences: vec!["ward".into(), "dispatcher".into()],
        })
        .await
        .expect_err("enrollment credentials exchange once");
    assert_eq!(twice.code(), Code::Unauthenticated);
    assert_eq!(
        twice.get_error_details().error_info().unwrap().reason,
        "CREDENTIAL_EXCHANGED"
    );
    assert!(!twice.message().contains(&issued.credential));
    let unknown = WardClient::new(s.channel_with(&format!("lwc_{}", "0".repeat(64))))
        .exchange_credential(pb::ExchangeCredentialRequest {
            ttl_seconds: 0,
            audiences: vec!["ward".into(), "dispatcher".into()],
        })
        .await
        .expect_err("unknown");
    assert_eq!(unknown.code(), Code::Unauthenticated);

    // The new session resolves itself without `ward:decide`; someone else's token needs it.
    let mut as_svc = WardClient::new(s.channel_with(&session.session_token));
    let own = as_svc
        .authenticate(pb::AuthenticateRequest {
            token: session.session_token.clone(),
            audience: "ward".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(matches!(
        own.result,
        Some(pb::authenticate_response::Result::Authenticated(_))
    ));
    let other = as_svc
        .authenticate(pb::AuthenticateRequest {
            token: s.token.clone(),
            audience: "ward".into(),
        })
        .await
        .expect_err("needs ward:decide");
    assert_eq!(other.code(), Code::PermissionDenied);
    // An empty question names no audience to hold `ward:decide` for: bad input, answered to
    // an authenticated caller.
    let refused = c
        .authorize(pb::AuthorizeRequest::default())
        .await
        .expect_err("bad input");
    assert_eq!(refused.code(), Code::InvalidArgument);

    s.allow("ward:decide", "decision:*").await;
    let ask = |expected| pb::AuthorizeRequest {
        token: session.session_token.clone(),
        action: "dispatcher:lease".into(),
        object: "lease:l-1".into(),
        audience: "dispatcher".into(),
        purpose: "lease".into(),
        expected_policy_generation: expected,
    };
    let d = c.authorize(ask(None)).await.unwrap().into_inner();
    assert_eq!(
        (d.decision, d.reason.as_str()),
        (pb::Decision::Deny as i32, "NO_ASSIGNMENT")
    );
    let assigned = c
        .assign(pb::AssignRequest {
            principal_id: svc.id.clone(),
            action: "dispatcher:lease".into(),
            object: "lease:*".into(),
            audience: "dispatcher".into(),
            purpose: "lease".into(),
            expires_at: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(assigned.policy_generation, 1);
    let d = c.authorize(ask(Some(1))).await.unwrap().into_inner();
    assert_eq!(
        (d.decision, d.reason.as_str(), d.policy_generation),
        (pb::Decision::Allow as i32, "ALLOWED", 1)
    );
    let d = c.authorize(ask(Some(0))).await.unwrap().into_inner();
    assert_eq!(d.reason, "POLICY_GENERATION_STALE");
    let listed = c
        .list_assignments(pb::ListAssignmentsRequest {
            principal_id: svc.id.clone(),
            page: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.assignments.len(), 1);

    // Revocation: monotonic, idempotent, effective on the next decision.
    use pb::revoke_request::Target;
    let r = c
        .revoke(pb::RevokeRequest {
            target: Some(Target::SessionId(session.session_id.clone())),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.changed, r.revocation_generation), (true, 1));
    let r = c
        .revoke(pb::RevokeRequest {
            target: Some(Target::SessionId(session.session_id.clone())),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.changed, r.revocation_generation), (false, 1));
    let d = c.authorize(ask(None)).await.unwrap().into_inner();
    assert_eq!(
        (d.decision, d.reason.as_str(), d.principal),
        (pb::Decision::Deny as i32, "SESSION_REVOKED", None)
    );
    let gone = as_svc
        .authenticate(pb::AuthenticateRequest {
            token: session.session_token.clone(),
            audience: "ward".into(),
        })
        .await
        .expect_err("revoked");
    assert_eq!(gone.code(), Code::Unauthenticated);
    let missing = c
        .revoke(pb::RevokeRequest {
            target: Some(Target::CredentialId(uuid::Uuid::new_v4().to_string())),
        })
        .await
        .expect_err("unknown credential");
    assert_eq!(missing.code(), Code::NotFound);

    // The audit shows it all, with identities and generations, never a secret.
    let audit = c
        .list_audit(pb::ListAuditRequest { page: None })
        .await
        .unwrap()
        .into_inner();
    let events: Vec<&str> = audit.events.iter().map(|e| e.event.as_str()).collect();
    for expected in [
        "principal.enrolled",
        "credential.issued",
        "session.exchanged",
        "refusals.counted",
        "assignment.granted",
        "session.revoked",
        "authorize.allow",
        "authorize.deny",
    ] {
        assert!(events.contains(&expected), "{expected} in {events:?}");
    }
    let rendered = format!("{audit:?}");
    for secret in [&issued.credential, &session.session_token, &s.token] {
        assert!(!rendered.contains(secret.as_str()));
    }
    s.stop().await;
}

/// Audit rows per `<event> <action>`, after a listing (which flushes the decision log; its own
/// `ward:administer` check is recorded too).
pub(crate) async fn audit_events(s: &Spawned) -> std::collections::BTreeMap<String, i64> {
    WardClient::new(s.channel())
        .list_audit(pb::ListAuditRequest { page: page("") })
        .await
        .expect("list audit");
    let mut su = s.db.superuser().await;
    sqlx::query_as::<_, (String, i64)>(
        "SELECT event || ' ' || coalesce(detail->>'action', ''), count(*) FROM ward.audit GROUP BY 1",
    )
        .fetch_all(&mut su)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// Refusals counted for `source` and `reason` (after a listing, which writes the counts).
async fn counted(s: &Spawned, source: &str, reason: &str) -> i64 {
    audit_events(s).await;
    let mut su = s.db.superuser().await;
    sqlx::query_scalar(
        "SELECT coalesce(sum((detail->>'count')::bigint), 0)::bigint FROM ward.audit
          WHERE event = 'refusals.counted' AND detail->>'source' = $1 AND detail->>'reason' = $2",
    )
    .bind(source)
    .bind(reason)
    .fetch_one(&mut su)
    .await
    .unwrap()
}

/// `Authorize` and `Authenticate` (about another token) are not authenticated by the layer: the
/// asker's own `ward:decide` question is resolved in the statement that answers it. An asker
/// that authenticates nobody is `UNAUTHENTICATED` (and counted, not audited one row each), one
/// without `ward:decide` is `PERMISSION_DENIED` (and audited); neither answers anything. An allowed asker's
/// decision is ONE audit record naming it as the actor (its `ward:decide` allowance is not
/// recorded apart).
#[tokio::test]
async fn askers_are_decided_in_the_statement_that_answers_them() {
    let (s, mut c) = admin_client().await;
    let question = pb::AuthorizeRequest {
        token: s.token.clone(),
        action: "dispatcher:lease".into(),
        object: "capability:a".into(),
        audience: "dispatcher".into(),
        purpose: "lease".into(),
        expected_policy_generation: None,
    };
    let before = audit_events(&s).await;
    let counted_before = counted(&s, "127.0.0.1", "SESSION_UNKNOWN").await;
    let unknown = format!("lws_{}", "0".repeat(64));
    for bearer in [unknown.as_str(), "not-a-session"] {
        let mut stranger = WardClient::new(s.channel_with(bearer));
        let refused = stranger
            .authorize(question.clone())
            .await
            .expect_err("unknown asker");
        assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
        assert_eq!(
            refused.get_error_details().error_info().unwrap().reason,
            "SESSION_UNKNOWN"
        );
        let refused = stranger
            .authenticate(pb::AuthenticateRequest {
                token: s.token.clone(),
                audience: "ward".into(),
            })
            .await
            .expect_err("unknown asker");
        assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
        // Its own (unknown) token: the same refusal, not an answer.
        let refused = stranger
            .authenticate(pb::AuthenticateRequest {
                token: bearer.to_owned(),
                audience: "ward".into(),
            })
            .await
            .expect_err("unknown caller");
        assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    }
    let after = audit_events(&s).await;
    assert_eq!(
        counted(&s, "127.0.0.1", "SESSION_UNKNOWN").await - counted_before,
        6,
        "each refusal of a stranger is counted: {after:?}"
    );
    assert_eq!(
        after.get("authorize.deny ward:decide"),
        before.get("authorize.deny ward:decide"),
        "and none is audited one row each"
    );
    assert_eq!(
        after.get("authorize.allow dispatcher:lease"),
        before.get("authorize.allow dispatcher:lease"),
        "nothing was answered"
    );

    // A principal without `ward:decide` may resolve its own token but ask about no other.
    let (_, session) = s.principal(pb::PrincipalKind::Service, "asker").await;
    let mut asker = WardClient::new(s.channel_with(&session));
    let refused = asker
        .authorize(question.clone())
        .await
        .expect_err("no ward:decide");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert_eq!(
        refused.get_error_details().error_info().unwrap().reason,
        "NO_ASSIGNMENT"
    );

    // The tester holds `ward:decide`: one audit record for the decision, naming it twice.
    let before = audit_events(&s).await;
    let d = c.authorize(question).await.unwrap().into_inner();
    assert_eq!(
        (d.decision, d.reason.as_str()),
        (pb::Decision::Deny as i32, "NO_ASSIGNMENT")
    );
    let after = audit_events(&s).await;
    let added = |key: &str| after.get(key).unwrap_or(&0) - before.get(key).unwrap_or(&0);
    assert_eq!(
        (
            added("authorize.deny dispatcher:lease"),
            added("authorize.allow ward:decide"),
            added("authorize.deny ward:decide"),
        ),
        (1, 0, 0),
        "{before:?} → {after:?}"
    );
    let mut su = s.db.superuser().await;
    let (actor, subject, action): (Option<uuid::Uuid>, Option<uuid::Uuid>, String) =
        sqlx::query_as(
            "SELECT actor_id, subject_id, detail->>'action' FROM ward.audit
              WHERE detail->>'action' = 'dispatcher:lease' ORDER BY seq DESC LIMIT 1",
        )
        .fetch_one(&mut su)
        .await
        .unwrap();
    let tester = uuid::Uuid::parse_str(&s.tester_id).unwrap();
    assert_eq!(
        (actor, subject, action.as_str()),
        (Some(tester), Some(tester), "dispatcher:lease")
    );
    s.stop().await;
}

/// Sessions are bound to the audiences chosen at exchange: Ward refuses one presented to any
/// other office (its own administration included), and an office may ask only about tokens
/// presented to itself (`ward:decide` on `decision:<office>`).
#[tokio::test]
async fn sessions_are_bound_to_their_audiences() {
    let (s, _) = admin_client().await;
    let (archive_id, _) = s.principal(pb::PrincipalKind::Service, "archive").await;
    let credential = s.admin.clone().issue_standing(&archive_id).await.unwrap();
    let exchange = |audiences: &[&str]| pb::ExchangeCredentialRequest {
        ttl_seconds: 0,
        audiences: audiences.iter().map(|a| (*a).to_owned()).collect(),
    };
    let mut with_credential = WardClient::new(s.channel_with(&credential));

    // Audiences are required and well-formed; the answer names them sorted and distinct.
    for bad in [&[][..], &["Ward"][..], &["ward"; 17][..]] {
        let refused = with_credential
            .exchange_credential(exchange(bad))
            .await
            .expect_err("bad audiences");
        assert_eq!(refused.code(), Code::InvalidArgument, "{bad:?}");
        assert_eq!(
            refused
                .get_error_details()
                .bad_request()
                .unwrap()
                .field_violations[0]
                .field,
            "audiences"
        );
    }
    let at_archive = with_credential
        .exchange_credential(exchange(&["archive", "ward", "archive"]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(at_archive.audiences, ["archive", "ward"]);
    let only_archive = with_credential
        .exchange_credential(exchange(&["archive"]))
        .await
        .unwrap()
        .into_inner();

    // Presented to Ward, a session not bound to Ward authenticates nobody.
    let replayed = WardClient::new(s.channel_with(&only_archive.session_token))
        .list_principals(pb::ListPrincipalsRequest::default())
        .await
        .expect_err("not for ward");
    assert_eq!(replayed.code(), Code::Unauthenticated);
    assert_eq!(
        replayed.get_error_details().error_info().unwrap().reason,
        "SESSION_AUDIENCE_MISMATCH"
    );

    // The archive, holding `ward:decide` on `decision:archive` only, asks about a token
    // presented to itself, not about one presented to the Dispatcher.
    s.admin
        .clone()
        .ensure_office_principal("archive")
        .await
        .unwrap();
    let mut as_archive = WardClient::new(s.channel_with(&at_archive.session_token));
    let ask = |audience: &str, token: &str| pb::AuthorizeRequest {
        token: token.to_owned(),
        action: format!("{audience}:describe"),
        object: format!("office:{audience}"),
        audience: audience.to_owned(),
        purpose: "describe".into(),
        expected_policy_generation: None,
    };
    let own = as_archive
        .authorize(ask("archive", &s.token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(own.reason, "NO_ASSIGNMENT", "answered: {own:?}");
    let elsewhere = as_archive
        .authorize(ask("dispatcher", &s.token))
        .await
        .expect_err("not the archive's to ask");
    assert_eq!(elsewhere.code(), Code::PermissionDenied);
    // A token bound to the archive, asked about for the Dispatcher by one who may ask: refused.
    let d = WardClient::new(s.channel_with(&s.token))
        .authorize(ask("dispatcher", &only_archive.session_token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(d.reason, "SESSION_AUDIENCE_MISMATCH");
    assert_eq!(d.principal, None, "nothing said about whose it is");
    s.stop().await;
}

/// `ExchangeCredential` judges the credential before its input: an outsider (a credential that
/// authenticates nobody) is `UNAUTHENTICATED` whatever audiences it sends, and counted as a
/// stranger; only a caller whose credential is good hears `INVALID_ARGUMENT` about them, and
/// that changes nothing (the credential still exchanges afterwards).
#[tokio::test]
async fn an_outsiders_bad_audiences_are_unauthenticated_not_invalid() {
    let (s, _) = admin_client().await;
    let exchange = |audiences: &[&str]| pb::ExchangeCredentialRequest {
        ttl_seconds: 0,
        audiences: audiences.iter().map(|a| (*a).to_owned()).collect(),
    };
    let bad_audiences: [&[&str]; 3] = [&[], &["Ward"], &["ward"; 17]];
    let counted_before = counted(&s, "127.0.0.1", "CREDENTIAL_UNKNOWN").await;
    let unknown = format!("lwc_{}", "0".repeat(64));
    for bearer in [unknown.as_str(), "junk"] {
        let mut outsider = WardClient::new(s.channel_with(bearer));
        for bad in bad_audiences {
            let refused = outsider
                .exchange_credential(exchange(bad))
                .await
                .expect_err("an outsider");
            assert_eq!(
                refused.code(),
                Code::Unauthenticated,
                "{bad:?}: {refused:?}"
            );
            assert_eq!(
                refused.get_error_details().error_info().unwrap().reason,
                "CREDENTIAL_UNKNOWN"
            );
            assert!(refused.get_error_details().bad_request().is_none());
        }
    }
    assert_eq!(
        counted(&s, "127.0.0.1", "CREDENTIAL_UNKNOWN").await - counted_before,
        6,
        "each outsider's refusal is counted"
    );
    // A good credential: its bad audiences are its mistake, and nothing is spent.
    let (id, _) = s.principal(pb::PrincipalKind::Service, "insider").await;
    let credential = s.admin.clone().issue_standing(&id).await.unwrap();
    let mut insider = WardClient::new(s.channel_with(&credential));
    let sessions_before = counts(&s).await;
    for bad in bad_audiences {
        assert_invalid(
            insider.exchange_credential(exchange(bad)).await,
            &["audiences"],
            &credential,
        );
    }
    assert_eq!(counts(&s).await, sessions_before, "nothing changed");
    insider
        .exchange_credential(exchange(&["ward"]))
        .await
        .expect("the credential still exchanges");
    s.stop().await;
}

/// A stranger refused by Ward's own auth layer (its verifier, source `ward`) is counted, and
/// `ListAudit` writes that count before it answers — not only its API's — so the listing made
/// right after the refusal already shows it (the periodic write is 10 s away).
#[tokio::test]
async fn list_audit_shows_the_auth_layers_counts_at_once() {
    let (s, mut c) = admin_client().await;
    let before = counted(&s, "ward", "SESSION_UNKNOWN").await;
    let unknown = format!("lws_{}", "0".repeat(64));
    let mut stranger = WardClient::new(s.channel_with(&unknown));
    for _ in 0..3 {
        let refused = stranger
            .list_principals(pb::ListPrincipalsRequest::default())
            .await
            .expect_err("a stranger");
        assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    }
    let listed = std::time::Instant::now();
    let audit = c
        .list_audit(pb::ListAuditRequest { page: None })
        .await
        .expect("list audit")
        .into_inner();
    let mut su = s.db.superuser().await;
    let now: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum((detail->>'count')::bigint), 0)::bigint FROM ward.audit
          WHERE event = 'refusals.counted' AND detail->>'source' = 'ward'
            AND detail->>'reason' = 'SESSION_UNKNOWN'",
    )
    .fetch_one(&mut su)
    .await
    .unwrap();
    assert!(
        listed.elapsed() < std::time::Duration::from_secs(5),
        "well before the periodic write"
    );
    assert_eq!(now - before, 3, "counted and written by the listing");
    assert!(
        audit.events.iter().any(|e| e.event == "refusals.counted"),
        "the listing itself shows them"
    );
    s.stop().await;
}
