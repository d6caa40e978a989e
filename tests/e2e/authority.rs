//! Authority across processes: Ward decides every call of every office; new principals have no
//! power; forged identity headers grant nothing; revocation and policy changes take effect on
//! the next call; bootstrap happens once; no secret reaches a log.

use lychd_proto::archive::v1::DescribeRequest;
use lychd_proto::archive::v1::archive_client::ArchiveClient;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_proto::ward::v1::{
    AuthorizeRequest, Decision, PrincipalKind, RevokeRequest, UnassignRequest,
    revoke_request::Target,
};
use lychd_runtime::Office;
use lychd_testkit::{Sandbox, run_office};
use tonic::Code;

use crate::{channel_with, text};
use lychd_testkit::refusal::reason;

async fn describe(
    sandbox: &Sandbox,
    token: &str,
    extra: &[(&'static str, &str)],
) -> Result<(), tonic::Status> {
    let mut client = ArchiveClient::new(channel_with(
        &sandbox.office(Office::Archive).endpoint(),
        token,
    ));
    let mut request = tonic::Request::new(DescribeRequest {
        include_peers: false,
    });
    for (k, v) in extra {
        request.metadata_mut().insert(*k, v.parse().expect("ascii"));
    }
    client.describe(request).await.map(|_| ())
}

#[tokio::test(flavor = "multi_thread")]
async fn ward_decides_every_call_and_changes_apply_on_the_next_one() {
    let mut sandbox = Sandbox::builder().office(Office::Archive).start().await;
    let ward_endpoint = sandbox.office(Office::Ward).endpoint();
    let mut admin = sandbox.admin();

    // The operator was granted archive:describe by the sandbox.
    describe(&sandbox, &sandbox.token, &[])
        .await
        .expect("operator may describe");

    // A new principal has no power, whatever headers it sends.
    let alice = admin
        .ensure_principal(PrincipalKind::Human, "alice")
        .await
        .expect("enroll");
    let credential = admin.issue_standing(&alice).await.expect("credential");
    let session = lychd_auth::admin::exchange(
        lychd_runtime::client::channel(&ward_endpoint).expect("ch"),
        &credential,
        0,
        &["archive", "ward"],
    )
    .await
    .expect("exchange");
    let forged = [
        ("x-principal", sandbox.operator_id.as_str()),
        ("x-lychd-principal", "operator"),
        ("x-user", "operator"),
    ];
    let denied = describe(&sandbox, &session.token, &forged)
        .await
        .expect_err("no power");
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert_eq!(reason(&denied), "NO_ASSIGNMENT");
    // Forged headers without any bearer: unauthenticated.
    let anonymous = {
        let mut client = ArchiveClient::new(
            lychd_runtime::client::peer_channel(
                &sandbox.office(Office::Archive).endpoint(),
                lychd_runtime::client::Outgoing::default(),
            )
            .expect("channel"),
        );
        let mut request = tonic::Request::new(DescribeRequest {
            include_peers: false,
        });
        request
            .metadata_mut()
            .insert("x-principal", sandbox.operator_id.parse().expect("ascii"));
        client.describe(request).await.expect_err("no bearer")
    };
    assert_eq!(anonymous.code(), Code::Unauthenticated);

    // Granted: allowed on the next call. Unassigned: denied on the next call.
    admin
        .allow_describe(&alice, "archive")
        .await
        .expect("grant");
    describe(&sandbox, &session.token, &[])
        .await
        .expect("allowed after grant");
    let mut ward_admin = WardClient::new(channel_with(&ward_endpoint, &sandbox.token));
    let assignments = ward_admin
        .list_assignments(lychd_proto::ward::v1::ListAssignmentsRequest {
            principal_id: alice.clone(),
            page: None,
        })
        .await
        .expect("list")
        .into_inner()
        .assignments;
    let describe_assignment = assignments
        .iter()
        .find(|a| a.action == "archive:describe")
        .expect("assignment");
    ward_admin
        .unassign(UnassignRequest {
            assignment_id: describe_assignment.id.clone(),
        })
        .await
        .expect("unassign");
    let denied = describe(&sandbox, &session.token, &[])
        .await
        .expect_err("unassigned");
    assert_eq!(reason(&denied), "NO_ASSIGNMENT");

    // Revoking the session: the next call is unauthenticated.
    admin
        .allow_describe(&alice, "archive")
        .await
        .expect("grant again");
    describe(&sandbox, &session.token, &[])
        .await
        .expect("allowed again");
    let whoami = WardClient::new(channel_with(&ward_endpoint, &session.token))
        .authenticate(lychd_proto::ward::v1::AuthenticateRequest {
            token: session.token.clone(),
            audience: String::new(),
        })
        .await
        .expect("a principal may resolve its own token")
        .into_inner();
    let session_id = match whoami.result {
        Some(lychd_proto::ward::v1::authenticate_response::Result::Authenticated(a)) => {
            a.session_id
        }
        other => panic!("own token did not resolve: {other:?}"),
    };
    ward_admin
        .revoke(RevokeRequest {
            target: Some(Target::SessionId(session_id)),
        })
        .await
        .expect("revoke session");
    let refused = describe(&sandbox, &session.token, &[])
        .await
        .expect_err("revoked");
    assert_eq!(refused.code(), Code::Unauthenticated);

    // Only principals holding ward:decide may ask Ward for decisions about others.
    let another = lychd_auth::admin::exchange(
        lychd_runtime::client::channel(&ward_endpoint).expect("ch"),
        &credential,
        0,
        &["ward"],
    )
    .await
    .expect("a standing credential exchanges again");
    let refused = WardClient::new(channel_with(&ward_endpoint, &another.token))
        .authorize(AuthorizeRequest {
            token: sandbox.token.clone(),
            action: "archive:describe".into(),
            object: "office:archive".into(),
            audience: "archive".into(),
            purpose: "describe".into(),
            expected_policy_generation: None,
        })
        .await
        .expect_err("alice may not ask for decisions");
    assert_eq!(refused.code(), Code::PermissionDenied);

    // Policy generation fencing, asked as an office would (the operator may decide? no: use
    // the archive's own service session through the admin-issued credential).
    let archive_id = admin
        .ensure_office_principal("archive")
        .await
        .expect("archive principal");
    let archive_credential = admin.issue_standing(&archive_id).await.expect("credential");
    let archive_session = lychd_auth::admin::exchange(
        lychd_runtime::client::channel(&ward_endpoint).expect("ch"),
        &archive_credential,
        0,
        &["ward"],
    )
    .await
    .expect("exchange");
    let mut as_archive = WardClient::new(channel_with(&ward_endpoint, &archive_session.token));
    let ask = |expected: Option<i64>| AuthorizeRequest {
        token: sandbox.token.clone(),
        action: "archive:describe".into(),
        object: "office:archive".into(),
        audience: "archive".into(),
        purpose: "describe".into(),
        expected_policy_generation: expected,
    };
    let now = as_archive
        .authorize(ask(None))
        .await
        .expect("authorize")
        .into_inner();
    assert_eq!(now.decision, Decision::Allow as i32, "{now:?}");
    let current = as_archive
        .authorize(ask(Some(now.policy_generation)))
        .await
        .expect("authorize")
        .into_inner();
    assert_eq!(current.decision, Decision::Allow as i32);
    let stale = as_archive
        .authorize(ask(Some(now.policy_generation - 1)))
        .await
        .expect("authorize")
        .into_inner();
    assert_eq!(stale.decision, Decision::Deny as i32);
    assert_eq!(stale.reason, "POLICY_GENERATION_STALE");

    // Bootstrap happens once.
    let again = run_office(
        Office::Ward,
        &sandbox.office(Office::Ward).config_path,
        &["bootstrap"],
    )
    .await;
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).trim().is_empty(),
        "no credential printed the second time"
    );
    assert!(
        text(&again.stderr).contains("already bootstrapped"),
        "{}",
        text(&again.stderr)
    );

    // No secret or token reached any log.
    let (operator_token, operator_credential) =
        (sandbox.token.clone(), sandbox.operator_credential.clone());
    let secrets = [
        operator_token.as_str(),
        operator_credential.as_str(),
        credential.as_str(),
        session.token.as_str(),
        another.token.as_str(),
        archive_credential.as_str(),
        archive_session.token.as_str(),
    ];
    sandbox.stop().await;
    for log in sandbox.offices.values().map(|p| p.log()) {
        for secret in secrets {
            assert!(!log.contains(secret), "a secret appears in an office log");
        }
    }
}
