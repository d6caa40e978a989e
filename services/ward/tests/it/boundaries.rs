//! Issue 22 points 1–3 and issue 23 point 6 over real gRPC and PostgreSQL: no principal is the
//! authority for its own effect, secrets never reach a table or an answer, one definition of
//! what a consent binds, and the smaller races (a rule being disabled, a successor closed
//! meanwhile, the principal lock, session renewal timing) shown with held transactions.

use std::time::Duration;

use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::channel_with;
use lychd_ward::domain::consent::{BoundField, Kept};
use sqlx::Connection;
use tonic::Code;

use crate::consent::{Cast, OWNER, cast_with, client_for, consume, decide, proposal, reason};
use crate::preauth::{IN_REPORTS, rule, with_rules};

async fn cast() -> Cast {
    cast_with(|_| {}).await
}

async fn propose_req(
    c: &mut WardClient<PeerChannel>,
    req: pb::ProposeEffectRequest,
) -> pb::Consent {
    c.propose_effect(req)
        .await
        .expect("propose")
        .into_inner()
        .consent
        .expect("consent")
}

fn live(call: &str, class: pb::EffectClass) -> pb::ProposeEffectRequest {
    let mut r = proposal(call, r#"{"a":1}"#);
    r.effect_class = class as i32;
    r
}

/// The consent as stored, read by the superuser (no authority needed).
async fn stored(c: &Cast, id: &str) -> (String, Option<String>, Option<String>) {
    sqlx::query_as(
        "SELECT state, decided_by::text, consumed_by::text FROM ward.consents WHERE id = $1::uuid",
    )
    .bind(id)
    .fetch_one(&mut c.s.db.superuser().await)
    .await
    .expect("consent row")
}

#[tokio::test]
async fn a_service_holding_every_right_never_settles_its_own_proposal() {
    let c = cast().await;
    let effect = format!("effect:{OWNER}");
    // One SERVICE principal with propose, approve and consume on the same effect.
    let (agent_id, _, mut agent) = client_for(
        &c.s,
        "agent",
        &[
            ("ward:propose", &effect),
            ("ward:approve", &effect),
            ("ward:consume", &effect),
        ],
    )
    .await;
    for (call, class) in [
        ("self-1", pb::EffectClass::Migration),
        ("self-2", pb::EffectClass::Standard),
    ] {
        let consent = propose_req(&mut agent, live(call, class)).await;
        assert_eq!(consent.requested_by, agent_id);
        for verdict in [pb::Verdict::Approve, pb::Verdict::Deny] {
            let status = decide(&mut agent, &consent, verdict)
                .await
                .expect_err("its own verdict");
            assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
            assert_eq!(reason(&status), "SELF_APPROVAL", "{class:?} {verdict:?}");
        }
        // Nothing changed, and nothing can be consumed.
        assert_eq!(
            stored(&c, &consent.consent_id).await,
            ("pending".into(), None, None)
        );
        let status = consume(&mut agent, &consent, &consent.binding_digest)
            .await
            .expect_err("not granted");
        assert_eq!(reason(&status), "CONSENT_NOT_GRANTED");
    }
    // Settled by someone else, it stays the requester's to be refused: no verdict of its own.
    let consent = propose_req(&mut agent, live("self-3", pb::EffectClass::Standard)).await;
    let mut approver = c.approver.clone();
    decide(&mut approver, &consent, pb::Verdict::Deny)
        .await
        .expect("another principal denies");
    let status = decide(&mut agent, &consent, pb::Verdict::Approve)
        .await
        .expect_err("its own verdict on a settled consent");
    assert_eq!(reason(&status), "SELF_APPROVAL");
}

#[tokio::test]
async fn a_live_only_consent_is_settled_by_a_human_and_a_standard_one_by_any_other_principal() {
    let mut c = cast().await;
    let effect = format!("effect:{OWNER}");
    // `approver` is a SERVICE with ward:approve (a policy evaluator).
    for class in [
        pb::EffectClass::CoreMutation,
        pb::EffectClass::Migration,
        pb::EffectClass::DestructiveDeletion,
        pb::EffectClass::SecretOrAuthorityChange,
        pb::EffectClass::HostLifecycle,
    ] {
        let consent = propose_req(&mut c.proposer, live(&format!("{class:?}"), class)).await;
        for verdict in [pb::Verdict::Approve, pb::Verdict::Deny] {
            let status = decide(&mut c.approver, &consent, verdict)
                .await
                .expect_err("a service's verdict on a live-only class");
            assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
            assert_eq!(reason(&status), "LIVE_VERDICT_REQUIRED", "{class:?}");
        }
        assert_eq!(
            stored(&c, &consent.consent_id).await,
            ("pending".into(), None, None)
        );
    }
    // A human other than the requester settles a live-only consent; the owner consumes it.
    let (human_id, human_token) = c.s.principal(pb::PrincipalKind::Human, "alice").await;
    c.s.admin
        .clone()
        .ensure_assignment(&human_id, "ward:approve", &effect, "ward", "approve")
        .await
        .expect("assign");
    let mut human = WardClient::new(channel_with(&c.s.endpoint(), &human_token));
    let consent = propose_req(&mut c.proposer, live("m-1", pb::EffectClass::Migration)).await;
    let settled = decide(&mut human, &consent, pb::Verdict::Approve)
        .await
        .expect("a human approves");
    assert!(settled.changed);
    assert_eq!(settled.consent.expect("consent").decided_by, human_id);
    consume(&mut c.owner, &consent, &consent.binding_digest)
        .await
        .expect("consumed");
    // A standard class: a service that is not the requester may settle it.
    let standard = propose_req(&mut c.proposer, live("s-1", pb::EffectClass::Standard)).await;
    let settled = decide(&mut c.approver, &standard, pb::Verdict::Approve)
        .await
        .expect("a policy evaluator approves");
    assert!(settled.changed);
}

#[tokio::test]
async fn the_database_refuses_a_self_verdict_and_a_service_verdict_on_a_live_only_class() {
    let mut c = cast().await;
    let mine = propose_req(&mut c.proposer, live("db-1", pb::EffectClass::Standard)).await;
    let migration = propose_req(&mut c.proposer, live("db-2", pb::EffectClass::Migration)).await;
    // As the runtime role, around every guard of the code: the table itself refuses.
    let mut app = c.s.ctx.pool.acquire().await.expect("runtime connection");
    for (consent, decider) in [(&mine, &c.proposer_id), (&migration, &c.approver_id)] {
        let err = sqlx::query(
            "UPDATE ward.consents SET state = 'granted', decided_at = statement_timestamp(),
                 decided_by = $2::uuid
             WHERE id = $1::uuid",
        )
        .bind(&consent.consent_id)
        .bind(decider)
        .execute(&mut *app)
        .await
        .expect_err("refused by the table");
        let code = err
            .as_database_error()
            .and_then(|e| e.code())
            .map(|c| c.into_owned());
        assert!(
            matches!(code.as_deref(), Some("23514" | "23000")),
            "{err:?}"
        );
    }
    assert_eq!(
        stored(&c, &mine.consent_id).await,
        ("pending".into(), None, None)
    );
}

/// The spellings and nestings the hostile review used, and values shaped like secrets.
fn secret_arguments() -> (String, Vec<String>) {
    let session = format!("lws_{}", "7a".repeat(32));
    let credential = format!("lwc_{}", "c3".repeat(32));
    let secrets: Vec<String> = vec![
        "sk-api-key-value-0001".into(),
        "api-key-value-0002".into(),
        "private-key-value-0003".into(),
        "private-key-value-0004".into(),
        "x-private-key-value-0005".into(),
        "nested-api-key-0006".into(),
        "deep-passphrase-0007".into(),
        "cookie-value-0008".into(),
        session.clone(),
        credential.clone(),
        "Bearer eyJhbGciOiJIUzI1NiJ9.payload0009.signature".into(),
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC0010".into(),
        "hunter2-0011".into(),
    ];
    let args = format!(
        r#"{{"API Key":"{}","api key":"{}","private-key":"{}","Private Key":"{}","X-Private-Key":"{}",
            "path":"/srv/kept","nested":{{"deeper":[{{"Api-Key":"{}"}},{{"pass.phrase":"{}"}}]}},
            "headers":{{"Set-Cookie":"{}","note":"{}"}},"list":["{}","{}"],
            "pem":"-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----",
            "url":"postgres://app:{}@db.internal/x"}}"#,
        secrets[0],
        secrets[1],
        secrets[2],
        secrets[3],
        secrets[4],
        secrets[5],
        secrets[6],
        secrets[7],
        secrets[8],
        secrets[9],
        secrets[10],
        secrets[11],
        secrets[12],
    );
    (args, secrets)
}

#[tokio::test]
async fn no_table_and_no_answer_holds_an_argument_secret() {
    let mut c = cast().await;
    let (args, secrets) = secret_arguments();
    let args: String = args.split_whitespace().collect::<Vec<_>>().join(" ");
    let consent = propose_req(&mut c.proposer, proposal("call-secret", &args)).await;
    let answers = [
        consent.censored_arguments_json.clone(),
        c.approver
            .get_consent(pb::GetConsentRequest {
                consent_id: consent.consent_id.clone(),
            })
            .await
            .expect("get")
            .into_inner()
            .consent
            .expect("consent")
            .censored_arguments_json,
    ];
    for answer in &answers {
        assert!(answer.contains("/srv/kept"), "ordinary values are kept");
        for s in &secrets {
            assert!(!answer.contains(s.as_str()), "{s} in the answer: {answer}");
        }
    }
    // Settle, consume and annotate it too: every table of the schema, every row, as JSON.
    decide(&mut c.approver, &consent, pb::Verdict::Approve)
        .await
        .expect("approve");
    consume(&mut c.owner, &consent, &consent.binding_digest)
        .await
        .expect("consume");
    let mut su = c.s.db.superuser().await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'ward' AND c.relkind IN ('r', 'p')",
    )
    .fetch_all(&mut su)
    .await
    .expect("tables");
    assert!(tables.iter().any(|t| t == "consents"));
    assert!(tables.iter().any(|t| t == "consent_changes"));
    let mut dump = String::new();
    for table in &tables {
        let rows: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT row_to_json(t)::text FROM ward.\"{table}\" t"
        ))
        .fetch_all(&mut su)
        .await
        .expect("rows");
        for r in rows {
            dump.push_str(&r);
            dump.push('\n');
        }
    }
    assert!(dump.contains("/srv/kept"), "the scan saw the consent");
    for s in &secrets {
        assert!(!dump.contains(s.as_str()), "{s} is stored");
    }
}

/// Change bound field `f` of a proposal request (or who proposes it): every field of the one
/// definition, one at a time. The match is exhaustive: a new bound field does not compile here
/// until this test varies it.
fn vary(f: BoundField, r: &mut pb::ProposeEffectRequest) -> bool {
    let b = r.binding.get_or_insert_with(Default::default);
    match f {
        BoundField::RunId => r.run_id.push('x'),
        BoundField::EffectOwner => {
            // Another owner the proposer may propose for (granted in the test).
            r.effect_owner = "runner2".into()
        }
        BoundField::EffectId => r.effect_id.push('x'),
        BoundField::EffectRevision => r.effect_revision += 1,
        BoundField::ToolName => r.tool_name.push('x'),
        BoundField::DeferredCallId => r.deferred_call_id.push('x'),
        BoundField::ArgumentsDigest => r.arguments_json = br#"{"a":2}"#.to_vec(),
        BoundField::EffectClass => r.effect_class = pb::EffectClass::Bounded as i32,
        BoundField::WorkflowVersion => b.workflow_version.push('x'),
        BoundField::ActionHash => b.action_hash.push('x'),
        BoundField::ArtifactHash => b.artifact_hash.push('x'),
        BoundField::DestinationHash => b.destination_hash.push('x'),
        BoundField::Visibility => b.visibility.push('x'),
        BoundField::Scope => b.scope.push('x'),
        BoundField::Actor => b.actor.push('x'),
        BoundField::Expiry => {
            b.expiry.as_mut().expect("bound").seconds += 1;
        }
        BoundField::Nonce => b.nonce.push('x'),
        BoundField::Rationale => b.rationale.push('x'),
        BoundField::RequestedBy => return true,
    }
    false
}

fn fully_bound(call: &str) -> pb::ProposeEffectRequest {
    let mut r = proposal(call, r#"{"a":1}"#);
    r.binding = Some(pb::ConsentBinding {
        workflow_version: "wf-1".into(),
        action_hash: "ah".into(),
        artifact_hash: "arh".into(),
        destination_hash: "dh".into(),
        visibility: "private".into(),
        scope: "reports".into(),
        actor: "agent-1".into(),
        expiry: Some(prost_types::Timestamp {
            seconds: 2_000_000_000,
            nanos: 0,
        }),
        nonce: "n-1".into(),
        rationale: "why".into(),
    });
    r
}

#[tokio::test]
async fn changing_any_one_bound_field_refuses_consumption() {
    let mut c = cast().await;
    let (_, _, mut other_proposer) = client_for(
        &c.s,
        "proposer2",
        &[("ward:propose", &format!("effect:{OWNER}"))],
    )
    .await;
    c.s.admin
        .clone()
        .ensure_assignment(
            &c.proposer_id,
            "ward:propose",
            "effect:runner2",
            "ward",
            "propose",
        )
        .await
        .expect("assign");
    let base = fully_bound("call-base");
    let approved = propose_req(&mut c.proposer, base.clone()).await;
    decide(&mut c.approver, &approved, pb::Verdict::Approve)
        .await
        .expect("approve");
    // Every field of the definition, from the same definition: the call about to be made
    // differs in that field alone, so its binding digest differs and consumption is refused.
    let mut digests = std::collections::BTreeSet::new();
    for &f in BoundField::ALL {
        let mut changed = base.clone();
        let by_another = vary(f, &mut changed);
        let proposer = if by_another {
            &mut other_proposer
        } else {
            &mut c.proposer
        };
        let variant = propose_req(proposer, changed).await;
        assert_ne!(variant.binding_digest, approved.binding_digest, "{f:?}");
        assert!(digests.insert(variant.binding_digest.clone()), "{f:?}");
        let status = consume(&mut c.owner, &approved, &variant.binding_digest)
            .await
            .expect_err("another call");
        assert_eq!(reason(&status), "CONSENT_BINDING_MISMATCH", "{f:?}");
    }
    assert_eq!(digests.len(), BoundField::ALL.len());
    // Every stored column of the definition: a row whose bound field no longer matches its
    // digest is not consumable either, even with the digest that was approved. (The owner may
    // consume for the changed effect owner too, so the refusal is the binding's.)
    let owner_id =
        c.s.admin
            .clone()
            .ensure_principal(pb::PrincipalKind::Service, "owner")
            .await
            .expect("owner");
    c.s.admin
        .clone()
        .ensure_assignment(&owner_id, "ward:consume", "effect:*", "ward", "consume")
        .await
        .expect("assign");
    let mut su = c.s.db.superuser().await;
    sqlx::query("SET session_replication_role = replica")
        .execute(&mut su)
        .await
        .expect("replica mode");
    for (i, &f) in BoundField::ALL.iter().enumerate() {
        let consent = propose_req(&mut c.proposer, fully_bound(&format!("call-{i}"))).await;
        decide(&mut c.approver, &consent, pb::Verdict::Approve)
            .await
            .expect("approve");
        let name = f.name();
        let change = match f.kept() {
            Kept::Column("text") if name == "effect_class" => {
                format!("{name} = CASE WHEN {name} = 'standard' THEN 'bounded' ELSE 'standard' END")
            }
            // The last character changed to another digit: the column's own checks (a digest's
            // hex, an identifier's grammar) still hold.
            Kept::Column("text") => format!(
                "{name} = overlay({name} placing
                     CASE WHEN right({name}, 1) = '0' THEN '1' ELSE '0' END
                     from length({name}))"
            ),
            Kept::Column("bigint") => format!("{name} = {name} + 1"),
            Kept::Column("uuid") => format!("{name} = $2::uuid"),
            Kept::Column(other) => panic!("no change written for a {other} column"),
            Kept::Binding => format!(
                "binding = jsonb_set(binding, '{{{name}}}',
                     CASE WHEN jsonb_typeof(binding->'{name}') = 'number'
                          THEN to_jsonb((binding->>'{name}')::bigint + 1)
                          ELSE to_jsonb(coalesce(binding->>'{name}', '') || 'x') END)"
            ),
        };
        let n = sqlx::query(&format!(
            "UPDATE ward.consents SET {change} WHERE id = $1::uuid"
        ))
        .bind(&consent.consent_id)
        // Another principal (not the decider: a self-verdict the table refuses by itself).
        .bind(&owner_id)
        .execute(&mut su)
        .await
        .expect("forced change")
        .rows_affected();
        assert_eq!(n, 1);
        let status = consume(&mut c.owner, &consent, &consent.binding_digest)
            .await
            .expect_err("a stored field changed");
        assert_eq!(reason(&status), "CONSENT_BINDING_MISMATCH", "{f:?}");
    }
    // The approved call itself is consumable.
    consume(&mut c.owner, &approved, &approved.binding_digest)
        .await
        .expect("the approved call");
}

/// Wait until some backend of the test database waits on a lock.
async fn until_blocked(c: &Cast, what: &str) {
    let mut su = c.s.db.superuser().await;
    for _ in 0..200 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut su)
        .await
        .expect("activity");
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{what} never waited on the held lock");
}

#[tokio::test]
async fn a_proposal_racing_a_rule_disable_is_not_granted_by_the_rule() {
    let (mut c, _dir) = with_rules(&[("a.toml", rule("reports", ""))]).await;
    let granted = crate::consent::propose(&mut c.proposer, "call-0", IN_REPORTS).await;
    assert_eq!(granted.granted_by_rule, "reports", "the rule grants");
    // A disable in flight (its transaction holds the rule row, not yet committed).
    let mut held = c.s.db.superuser().await;
    let mut tx = held.begin().await.expect("begin");
    sqlx::query(
        "UPDATE ward.preauth_rules SET disabled_by = $1::uuid, disabled_at = statement_timestamp()
         WHERE slug = 'reports'",
    )
    .bind(&c.approver_id)
    .execute(&mut *tx)
    .await
    .expect("disable in flight");
    let mut proposer = c.proposer.clone();
    let racing =
        tokio::spawn(
            async move { crate::consent::propose(&mut proposer, "call-1", IN_REPORTS).await },
        );
    until_blocked(&c, "the proposal").await;
    assert!(!racing.is_finished(), "the grant waits for the disable");
    tx.commit().await.expect("disable commits");
    let consent = racing.await.expect("task");
    assert_eq!(consent.state, pb::ConsentState::Pending as i32);
    assert_eq!(
        consent.granted_by_rule, "",
        "the disabled rule granted nothing"
    );
}

#[tokio::test]
async fn a_successor_closed_while_a_supersession_waits_is_not_admitted() {
    let mut c = cast().await;
    let mut proposals = Vec::new();
    for call in ["call-1", "call-2"] {
        let consent = crate::consent::propose(&mut c.proposer, call, r#"{"a":1}"#).await;
        let p = c
            .proposer
            .create_proposal(pb::CreateProposalRequest {
                consent_id: consent.consent_id.clone(),
                group_id: proposals
                    .first()
                    .map(|p: &pb::Proposal| p.group_id.clone())
                    .unwrap_or_default(),
                revises: String::new(),
                occurrence: "step-1".into(),
            })
            .await
            .expect("create")
            .into_inner()
            .proposal
            .expect("proposal");
        proposals.push(p);
    }
    let (first, second) = (&proposals[0], &proposals[1]);
    // The successor's withdrawal in flight: its proposal row locked and its withdrawal record
    // appended, not yet committed (what `Withdraw` does in its transaction).
    let mut held = c.s.db.superuser().await;
    let mut tx = held.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM ward.proposals WHERE id = $1::uuid FOR UPDATE")
        .bind(&second.proposal_id)
        .execute(&mut *tx)
        .await
        .expect("lock the successor");
    sqlx::query(
        "WITH n AS (UPDATE ward.proposals SET records = records + 1 WHERE id = $1::uuid
                    RETURNING records)
         INSERT INTO ward.proposal_records (id, proposal_id, seq, kind, actor, source)
         SELECT gen_random_uuid(), $1::uuid, n.records, 'withdrawal', $2::uuid, 'service' FROM n",
    )
    .bind(&second.proposal_id)
    .bind(&c.proposer_id)
    .execute(&mut *tx)
    .await
    .expect("withdrawal in flight");
    let mut proposer = c.proposer.clone();
    let request = pb::SupersedeRequest {
        predecessor_id: first.proposal_id.clone(),
        successor_id: second.proposal_id.clone(),
    };
    let racing = tokio::spawn(async move { proposer.supersede(request).await });
    until_blocked(&c, "the supersession").await;
    assert!(
        !racing.is_finished(),
        "the supersession waits for the successor"
    );
    tx.commit().await.expect("withdrawal commits");
    let status = racing.await.expect("task").expect_err("closed successor");
    assert_eq!(reason(&status), "PROPOSAL_CLOSED", "{status:?}");
    // The predecessor is untouched: still open, its consent still pending.
    let (state, _, _) = stored(&c, &first.consent_id).await;
    assert_eq!(state, "pending");
}

#[tokio::test]
async fn an_administrative_change_of_a_principal_does_not_block_its_proposals() {
    let mut c = cast().await;
    // A second credential of the proposer, whose revocation will be held mid-transaction:
    // `credentials::revoke` locks the principal, then waits on the credential row we lock.
    c.s.admin
        .clone()
        .issue_standing(&c.proposer_id)
        .await
        .expect("credential");
    let credential: uuid::Uuid = sqlx::query_scalar(
        "SELECT id FROM ward.credentials WHERE principal_id = $1::uuid
         ORDER BY created_at DESC LIMIT 1",
    )
    .bind(&c.proposer_id)
    .fetch_one(&mut c.s.db.superuser().await)
    .await
    .expect("credential id");
    let mut held = c.s.db.superuser().await;
    let mut tx = held.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM ward.credentials WHERE id = $1 FOR UPDATE")
        .bind(credential)
        .execute(&mut *tx)
        .await
        .expect("lock the credential");
    let pool = c.s.ctx.pool.clone();
    let revoking = tokio::spawn(async move {
        lychd_ward::store::credentials::revoke(&pool, None, credential).await
    });
    until_blocked(&c, "the revocation").await;
    // The revocation holds the principal's lock now; a proposal by that principal (its consent
    // row's foreign key names the principal) is not held up by it.
    let proposed = tokio::time::timeout(
        Duration::from_secs(5),
        crate::consent::propose(&mut c.proposer, "call-1", r#"{"a":1}"#),
    )
    .await
    .expect("the proposal does not wait for the principal's lock");
    assert_eq!(proposed.state, pb::ConsentState::Pending as i32);
    assert!(!revoking.is_finished(), "the revocation was still held");
    tx.commit().await.expect("release");
    assert!(revoking.await.expect("task").expect("revoked").changed);
}

#[tokio::test]
async fn a_session_answers_its_lifetime_by_the_database_clock() {
    let c = cast().await;
    let credential =
        c.s.admin
            .clone()
            .issue_standing(&c.proposer_id)
            .await
            .expect("credential");
    let mut ward = WardClient::new(channel_with(&c.s.endpoint(), &credential));
    for (ttl, lifetime) in [(600, 600), (0, 3_600)] {
        let answer = ward
            .exchange_credential(pb::ExchangeCredentialRequest {
                ttl_seconds: ttl,
                audiences: vec!["ward".into()],
            })
            .await
            .expect("exchange")
            .into_inner();
        assert_eq!(answer.lifetime_seconds, lifetime);
        // The database's clock measured it: expires_at minus the session's creation instant.
        let (expires, created): (i64, i64) = sqlx::query_as(
            "SELECT extract(epoch FROM expires_at)::bigint, extract(epoch FROM created_at)::bigint
             FROM ward.sessions WHERE id = $1::uuid",
        )
        .bind(&answer.session_id)
        .fetch_one(&mut c.s.db.superuser().await)
        .await
        .expect("session");
        assert!((expires - created - i64::from(lifetime)).abs() <= 1);
        assert_eq!(
            lychd_auth::credentials::renew_after(answer.lifetime_seconds),
            Duration::from_secs(u64::from(lifetime) * 2 / 3)
        );
    }
}
