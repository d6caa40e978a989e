//! The owner's promotion authority for HelmLoop over real gRPC and real PostgreSQL: Ward and
//! the HelmLoop office in-process on one test database, Ward with its own service principal
//! and session (audiences `ward` and `helmloop`), as `lychd dev` runs them.
//!
//! The HelmLoop bundle is the core suite's PASS baseline (`core-001-pass-baseline`) without
//! its promote lineage, promotion decision and learning signal, every instant moved so that
//! the owner's approval — now — falls where the baseline's decision did, and every digest and
//! exact reference re-sealed with the core crate. Ward's records take the removed ones' place.

use std::collections::BTreeMap;
use std::time::Duration;

use lychd_auth::admin::{WardAdmin, exchange};
use lychd_auth::credentials::SessionSource;
use lychd_auth::{Authorizer, Verifier};
use lychd_helmloop::{Value, record_digest};
use lychd_proto::helmloop::v1 as hl;
use lychd_proto::helmloop::v1::helm_loop_client::HelmLoopClient;
use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::Office;
use lychd_runtime::client::{Outgoing, PeerChannel};
use lychd_runtime::config::{OfficeConfig, PeerConfig};
use lychd_runtime::health::HealthState;
use lychd_runtime::server::{InProcess, ServeContext};
use lychd_testkit::refusal::reason;
use lychd_testkit::verify::free_port;
use lychd_testkit::{TestDb, channel_with};
use lychd_ward::domain::kinds::{CredentialKind, PrincipalKind};
use lychd_ward::domain::promotion::{self, Ref, Terms};
use secrecy::{ExposeSecret, SecretString};
use sqlx::PgPool;
use tonic::Code;
use tonic_types::StatusExt;

const OWNER: &str = "owner-alice";

fn config(office: Office, db: &TestDb, port: u16) -> OfficeConfig {
    let mut c = OfficeConfig::defaults(office);
    c.server.listen = format!("127.0.0.1:{port}").parse().expect("address");
    c.database.url = db.runtime_url(office);
    c.database.migrate_url = db.owner_url(office);
    c
}

async fn pool(db: &TestDb, office: Office) -> PgPool {
    let opts = lychd_runtime::db::connect_options(&db.runtime_url(office), None, office)
        .expect("runtime url");
    lychd_runtime::db::pool(opts, 8).await.expect("pool")
}

fn context(
    office: Office,
    spec: &lychd_runtime::cli::OfficeSpec,
    config: OfficeConfig,
    pool: PgPool,
    verifier: std::sync::Arc<dyn Verifier>,
    outgoing: Outgoing,
) -> ServeContext {
    ServeContext {
        office,
        config: std::sync::Arc::new(config),
        pool,
        authorizer: Authorizer::new(office.name(), verifier),
        outgoing,
        health: HealthState::new(&[office.grpc_service()]),
        self_authenticating: spec.self_authenticating,
        finishing: Default::default(),
    }
}

fn ward_channel(endpoint: &str) -> tonic::transport::Channel {
    lychd_runtime::client::channel(endpoint).expect("endpoint")
}

/// Ward and HelmLoop in-process; HelmLoop can be stopped and started again on its port.
struct Stack {
    db: TestDb,
    ward_pool: PgPool,
    ward: Option<InProcess>,
    ward_ctx: ServeContext,
    helmloop: Option<InProcess>,
    helmloop_ctx: ServeContext,
    admin: WardAdmin,
    /// The operator's session (audiences ward and helmloop), holding the HelmLoop API but
    /// the owner-record actions.
    operator: String,
    /// Ward's own standing credential (for a test standing in for Ward's earlier attempt).
    ward_credential: String,
}

impl Stack {
    async fn new() -> Stack {
        let db =
            lychd_testkit::test_db_for(&[lychd_ward::spec(), lychd_helmloop_service::spec()]).await;
        let ward_pool = pool(&db, Office::Ward).await;
        let operator_credential = lychd_ward::bootstrap(&ward_pool, "operator")
            .await
            .expect("bootstrap")
            .credential;
        // Ward's own service principal and its standing credential, made before Ward serves
        // (as `lychd dev` issues it on a first start).
        let ward_self = lychd_ward::store::principals::enroll(
            &ward_pool,
            None,
            &lychd_ward::store::principals::Enrollment {
                kind: PrincipalKind::Service,
                name: lychd_ward::domain::grammar::PrincipalName::parse("ward").expect("name"),
                display_name: None,
            },
        )
        .await
        .expect("ward principal");
        let ttl =
            lychd_ward::domain::lifetime::credential_ttl(CredentialKind::Standing, 0).expect("ttl");
        let ward_credential = lychd_ward::store::credentials::issue(
            &ward_pool,
            None,
            ward_self.id,
            CredentialKind::Standing,
            ttl,
        )
        .await
        .expect("credential");

        let (ward_port, helmloop_port) = (free_port(), free_port());
        let ward_endpoint = format!("http://127.0.0.1:{ward_port}");
        let mut ward_config = config(Office::Ward, &db, ward_port);
        ward_config.peers.insert(
            "helmloop".into(),
            PeerConfig {
                endpoint: format!("http://127.0.0.1:{helmloop_port}"),
            },
        );
        ward_config.office = toml::from_str("promotion_retry_interval_ms = 100").expect("toml");
        let ward_session = SessionSource::start(
            ward_channel(&ward_endpoint),
            SecretString::from(ward_credential.secret.expose_secret().to_owned()),
            vec!["ward".into(), "helmloop".into()],
        );
        let spec = lychd_ward::spec();
        let ward_ctx = context(
            Office::Ward,
            &spec,
            ward_config,
            ward_pool.clone(),
            lychd_ward::local_verifier(ward_pool.clone(), &Default::default()),
            Outgoing::new(Some(ward_session.clone())),
        );
        let ward = InProcess::start(ward_ctx.clone(), spec.start)
            .await
            .expect("ward starts");
        assert!(
            ward_session.ready(Duration::from_secs(10)).await,
            "ward's own session"
        );

        let operator = exchange(
            ward_channel(&ward_endpoint),
            &operator_credential,
            0,
            &["ward", "helmloop"],
        )
        .await
        .expect("operator session")
        .token;
        let mut admin = WardAdmin::new(ward_channel(&ward_endpoint), &operator).expect("admin");
        let operator_id = find(&mut admin, "operator").await;
        // The operator appends observations and reads; owner records come only from Ward.
        for (action, object) in [
            ("helmloop:append_observation", "subject:*"),
            ("helmloop:read", "subject:*"),
            ("helmloop:reduce", "subject:*"),
            ("helmloop:reduce", "office:helmloop"),
            ("helmloop:check", "office:helmloop"),
        ] {
            assign(&mut admin, &operator_id, action, object).await;
        }
        // Ward's own principal: what lychd dev grants it at the HelmLoop office.
        let ward_id = ward_self.id.to_string();
        for (action, object) in [
            ("helmloop:append_contract", "subject:*"),
            ("helmloop:append_grant", "subject:*"),
            ("helmloop:append_assurance", "subject:*"),
            ("helmloop:append_promotion", "subject:*"),
            ("helmloop:append_learning_acceptance", "subject:*"),
            ("helmloop:read", "subject:*"),
        ] {
            assign(&mut admin, &ward_id, action, object).await;
        }

        // The HelmLoop office and its own session with Ward.
        let helmloop_id = admin
            .ensure_office_principal("helmloop")
            .await
            .expect("helmloop principal");
        let helmloop_credential = admin
            .issue_standing(&helmloop_id)
            .await
            .expect("helmloop credential");
        let helmloop_session = SessionSource::start(
            ward_channel(&ward_endpoint),
            SecretString::from(helmloop_credential),
            vec!["ward".into()],
        );
        assert!(helmloop_session.ready(Duration::from_secs(10)).await);
        let verifier = std::sync::Arc::new(lychd_auth::ward::WardVerifier::new(
            ward_channel(&ward_endpoint),
            helmloop_session.clone(),
        ));
        let mut helmloop_config = config(Office::HelmLoop, &db, helmloop_port);
        helmloop_config.peers.insert(
            "ward".into(),
            PeerConfig {
                endpoint: ward_endpoint.clone(),
            },
        );
        let spec = lychd_helmloop_service::spec();
        let helmloop_ctx = context(
            Office::HelmLoop,
            &spec,
            helmloop_config,
            pool(&db, Office::HelmLoop).await,
            verifier,
            Outgoing::new(Some(helmloop_session)),
        );
        let mut stack = Stack {
            db,
            ward_pool,
            ward: Some(ward),
            ward_ctx,
            helmloop: None,
            helmloop_ctx,
            admin,
            operator,
            ward_credential: ward_credential.secret.expose_secret().to_owned(),
        };
        stack.start_helmloop().await;
        stack
    }

    async fn start_helmloop(&mut self) {
        assert!(self.helmloop.is_none());
        let started = InProcess::start(
            self.helmloop_ctx.clone(),
            lychd_helmloop_service::spec().start,
        )
        .await
        .expect("helmloop starts");
        self.helmloop = Some(started);
    }

    async fn stop_helmloop(&mut self) {
        if let Some(h) = self.helmloop.take() {
            h.stop().await.expect("helmloop stops");
        }
    }

    fn ward_endpoint(&self) -> String {
        format!("http://{}", self.ward_ctx.config.server.listen)
    }

    /// Stop Ward and start it again on its port, over the same database.
    async fn restart_ward(&mut self) {
        if let Some(w) = self.ward.take() {
            w.stop().await.expect("ward stops");
        }
        let started = InProcess::start(self.ward_ctx.clone(), lychd_ward::spec().start)
            .await
            .expect("ward starts again");
        self.ward = Some(started);
    }

    fn helmloop_endpoint(&self) -> String {
        let addr = self.helmloop_ctx.config.server.listen;
        format!("http://{addr}")
    }

    /// The HelmLoop office as the operator.
    fn helmloop_client(&self) -> HelmLoopClient<PeerChannel> {
        HelmLoopClient::new(channel_with(&self.helmloop_endpoint(), &self.operator))
    }

    /// A principal of `kind` holding `grants` at Ward; its Ward client.
    async fn ward_client(
        &mut self,
        kind: pb::PrincipalKind,
        name: &str,
        grants: &[(&str, &str)],
    ) -> (String, WardClient<PeerChannel>) {
        let id = self
            .admin
            .ensure_principal(kind, name)
            .await
            .expect("enroll");
        for (action, object) in grants {
            assign(&mut self.admin, &id, action, object).await;
        }
        let credential = self.admin.issue_standing(&id).await.expect("credential");
        let token = exchange(
            ward_channel(&self.ward_endpoint()),
            &credential,
            0,
            &["ward"],
        )
        .await
        .expect("exchange")
        .token;
        (
            id,
            WardClient::new(channel_with(&self.ward_endpoint(), &token)),
        )
    }

    /// A service principal holding `grants` at the HelmLoop office; its HelmLoop client.
    async fn helmloop_principal(
        &mut self,
        name: &str,
        grants: &[(&str, &str)],
    ) -> HelmLoopClient<PeerChannel> {
        let id = self
            .admin
            .ensure_principal(pb::PrincipalKind::Service, name)
            .await
            .expect("enroll");
        for (action, object) in grants {
            assign(&mut self.admin, &id, action, object).await;
        }
        let credential = self.admin.issue_standing(&id).await.expect("credential");
        let token = exchange(
            ward_channel(&self.ward_endpoint()),
            &credential,
            0,
            &["helmloop"],
        )
        .await
        .expect("exchange")
        .token;
        HelmLoopClient::new(channel_with(&self.helmloop_endpoint(), &token))
    }

    async fn stop(mut self) {
        self.stop_helmloop().await;
        if let Some(w) = self.ward.take() {
            w.stop().await.expect("ward stops");
        }
        drop(self.db);
    }
}

async fn find(admin: &mut WardAdmin, name: &str) -> String {
    admin
        .ensure_principal(pb::PrincipalKind::Human, name)
        .await
        .expect("principal")
}

async fn assign(admin: &mut WardAdmin, id: &str, action: &str, object: &str) {
    let (audience, purpose) = action.split_once(':').expect("action");
    admin
        .ensure_assignment(id, action, object, audience, purpose)
        .await
        .expect("assign");
}

// ---- the bundle ---------------------------------------------------------------------------

fn baseline() -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/helmloop/core/cases/core-001-pass-baseline.json");
    serde_json::from_slice(&std::fs::read(path).expect("baseline case")).expect("json")
}

fn millis(s: &str) -> Option<i64> {
    if s.len() != 24 || !s.ends_with('Z') || s.as_bytes().get(10) != Some(&b'T') {
        return None;
    }
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

fn shift(v: &mut serde_json::Value, by: i64) {
    match v {
        serde_json::Value::String(s) => {
            if let Some(ms) = millis(s) {
                *s = promotion::timestamp(ms + by).expect("in range");
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| shift(x, by)),
        serde_json::Value::Object(m) => m.values_mut().for_each(|x| shift(x, by)),
        _ => {}
    }
}

/// Point every exact reference at the re-sealed digest of its target.
fn rebind(v: &mut serde_json::Value, sealed: &BTreeMap<(String, String), String>) {
    match v {
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| rebind(x, sealed)),
        serde_json::Value::Object(m) => {
            let key = (
                m.get("recordType").and_then(|x| x.as_str()),
                m.get("id").and_then(|x| x.as_str()),
            );
            if let (Some(t), Some(id)) = key
                && m.contains_key("digest")
                && !m.contains_key("schemaVersion")
                && let Some(d) = sealed.get(&(t.to_owned(), id.to_owned()))
            {
                m.insert("digest".into(), serde_json::Value::String(d.clone()));
            }
            m.values_mut().for_each(|x| rebind(x, sealed));
        }
        _ => {}
    }
}

fn seal(v: &mut serde_json::Value) -> String {
    let d = record_digest(&Value::from_serde(v).expect("value"))
        .expect("digest")
        .to_string();
    v["digest"] = serde_json::Value::String(d.clone());
    d
}

/// The baseline's records but the owner's promotion ones, and its context, moved so that the
/// baseline's decision instant is `decided_ms`.
struct Bundle {
    records: Vec<serde_json::Value>,
    context: serde_json::Value,
    /// The instant the bundle was shifted to: every request built from it derives its times
    /// from this, so a replayed request is the same request whatever the clock says by then.
    decided_ms: i64,
}

fn bundle(decided_ms: i64) -> Bundle {
    let case = baseline();
    let baseline_decision = millis("2025-01-21T13:00:00.000Z").expect("instant");
    let by = decided_ms - baseline_decision;
    let mut context = case["input"]["context"].clone();
    shift(&mut context, by);
    let mut sealed = BTreeMap::new();
    let mut records = Vec::new();
    for r in case["input"]["records"].as_array().expect("records") {
        let id = r["id"].as_str().expect("id");
        if id.starts_with("grant-promote")
            || id.starts_with("promotion-")
            || id.starts_with("learning-")
        {
            continue;
        }
        let mut r = r.clone();
        shift(&mut r, by);
        rebind(&mut r, &sealed);
        let d = seal(&mut r);
        sealed.insert(
            (
                r["recordType"].as_str().expect("type").to_owned(),
                id.to_owned(),
            ),
            d,
        );
        records.push(r);
    }
    Bundle {
        records,
        context,
        decided_ms,
    }
}

fn find_record<'a>(b: &'a Bundle, id: &str) -> &'a serde_json::Value {
    b.records.iter().find(|r| r["id"] == id).expect("record")
}

fn reference(r: &serde_json::Value) -> pb::HelmLoopRef {
    pb::HelmLoopRef {
        id: r["id"].as_str().expect("id").to_owned(),
        digest: r["digest"].as_str().expect("digest").to_owned(),
    }
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms")
}

fn request(b: &Bundle, run: &str) -> pb::ProposePromotionRequest {
    let contract = find_record(b, "contract-payments-1");
    let not_after = b.decided_ms + 30 * 24 * 3600 * 1000;
    pb::ProposePromotionRequest {
        run_id: run.into(),
        contract: Some(reference(contract)),
        target_revision: Some(pb::HelmLoopRef {
            id: contract["revision"]["id"].as_str().expect("rev").into(),
            digest: contract["revision"]["digest"].as_str().expect("rev").into(),
        }),
        assurance: Some(reference(find_record(b, "assurance-1"))),
        evidence: vec![
            reference(find_record(b, "evidence-latency-1")),
            reference(find_record(b, "evidence-outcome-1")),
        ],
        grantee_id: "release-host".into(),
        scope: vec!["release/payments".into()],
        not_after: Some(prost_types::Timestamp {
            seconds: not_after / 1000,
            nanos: 0,
        }),
    }
}

async fn append(client: &mut HelmLoopClient<PeerChannel>, records: &[serde_json::Value]) {
    client
        .append_records(hl::AppendRecordsRequest {
            records: records
                .iter()
                .map(|r| serde_json::to_vec(r).expect("json"))
                .collect(),
        })
        .await
        .expect("append");
}

fn is_owner_record(r: &serde_json::Value) -> bool {
    matches!(
        r["recordType"].as_str(),
        Some(
            "OutcomeContractV1"
                | "AuthorityGrantV1"
                | "AssuranceDecisionV1"
                | "PromotionDecisionV1"
        )
    ) || r["disposition"] == "accepted"
}

/// Propose `records` as owner records at Ward; the consent.
async fn propose_owner_records(
    c: &mut WardClient<PeerChannel>,
    records: &[serde_json::Value],
    run: &str,
) -> Result<pb::ProposeOwnerRecordsResponse, tonic::Status> {
    c.propose_owner_records(pb::ProposeOwnerRecordsRequest {
        run_id: run.into(),
        records: records
            .iter()
            .map(|r| serde_json::to_vec(r).expect("json"))
            .collect(),
    })
    .await
    .map(tonic::Response::into_inner)
}

/// Store `b` at the HelmLoop office as it is stored for real: observations by the operator,
/// owner records (contract, execution grant lineage, assurance) through Ward, approved by the
/// owner and delivered.
async fn store_bundle(stack: &Stack, cast: &mut Cast, b: &Bundle) {
    let (owner, observations): (Vec<_>, Vec<_>) =
        b.records.iter().cloned().partition(is_owner_record);
    append(&mut stack.helmloop_client(), &observations).await;
    let consent = propose_owner_records(&mut cast.proposer, &owner, "run-bundle")
        .await
        .expect("propose owner records")
        .consent
        .expect("consent");
    approve(&mut cast.owner, &consent)
        .await
        .expect("owner approves");
    delivered(&mut cast.reviewer, &consent.consent_id).await;
}

async fn reduce_stored(stack: &Stack, b: &Bundle) -> hl::ReductionSummary {
    stack
        .helmloop_client()
        .reduce_stored(hl::ReduceStoredRequest {
            context: serde_json::to_vec(&b.context).expect("json"),
            return_input: false,
        })
        .await
        .expect("reduce stored")
        .into_inner()
        .summary
        .expect("summary")
}

struct Cast {
    proposer: WardClient<PeerChannel>,
    owner: WardClient<PeerChannel>,
    owner_id: String,
    other: WardClient<PeerChannel>,
    reviewer: WardClient<PeerChannel>,
}

async fn cast(stack: &mut Stack) -> Cast {
    let (_, proposer) = stack
        .ward_client(
            pb::PrincipalKind::Service,
            "runner-promote",
            &[("ward:propose", "effect:helmloop")],
        )
        .await;
    let (owner_id, owner) = stack
        .ward_client(
            pb::PrincipalKind::Human,
            OWNER,
            &[("ward:approve", "effect:helmloop")],
        )
        .await;
    let (_, other) = stack
        .ward_client(
            pb::PrincipalKind::Human,
            "approver-bob",
            &[("ward:approve", "effect:*")],
        )
        .await;
    let (_, reviewer) = stack
        .ward_client(
            pb::PrincipalKind::Human,
            "reviewer-carol",
            &[("ward:review", "consent:*")],
        )
        .await;
    Cast {
        proposer,
        owner,
        owner_id,
        other,
        reviewer,
    }
}

/// Propose the promotion of `b` for `run`: the consent it created (or found).
async fn proposed(c: &mut WardClient<PeerChannel>, b: &Bundle, run: &str) -> pb::Consent {
    c.propose_promotion(request(b, run))
        .await
        .expect("propose")
        .into_inner()
        .consent
        .expect("consent")
}

async fn approve(
    client: &mut WardClient<PeerChannel>,
    consent: &pb::Consent,
) -> Result<pb::DecideResponse, tonic::Status> {
    client
        .decide(pb::DecideRequest {
            consent_id: consent.consent_id.clone(),
            verdict: pb::Verdict::Approve as i32,
            review_digest: consent.binding_digest.clone(),
        })
        .await
        .map(tonic::Response::into_inner)
}

async fn promotion_of(c: &mut WardClient<PeerChannel>, id: &str) -> pb::Promotion {
    c.get_promotion(pb::GetPromotionRequest {
        consent_id: id.to_owned(),
    })
    .await
    .expect("get promotion")
    .into_inner()
    .promotion
    .expect("promotion")
}

/// Wait until every issued record of `id` is delivered.
async fn delivered(c: &mut WardClient<PeerChannel>, id: &str) -> pb::Promotion {
    for _ in 0..200 {
        let p = promotion_of(c, id).await;
        if !p.records.is_empty() && p.records.iter().all(|r| r.delivered_at.is_some()) {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("promotion records were not delivered within 10 s");
}

async fn stored_count(stack: &Stack, id: &str) -> i64 {
    let mut conn = stack.db.superuser().await;
    sqlx::query_scalar("SELECT count(*) FROM helmloop.records WHERE record_id LIKE $1")
        .bind(format!("%{id}%"))
        .fetch_one(&mut conn)
        .await
        .expect("count")
}

// ---- the tests ----------------------------------------------------------------------------

#[tokio::test]
async fn an_owner_approved_promotion_issues_valid_records_that_reduce_to_pass() {
    let mut stack = Stack::new().await;
    let mut cast = cast(&mut stack).await;
    let b = bundle(now_ms());
    store_bundle(&stack, &mut cast, &b).await;

    let proposed = cast
        .proposer
        .propose_promotion(request(&b, "run-promote-1"))
        .await
        .expect("propose")
        .into_inner();
    let consent = proposed.consent.expect("consent");
    assert!(proposed.created);
    assert_eq!(consent.state, pb::ConsentState::Pending as i32);
    assert_eq!(
        consent.effect_class,
        pb::EffectClass::SecretOrAuthorityChange as i32,
        "a promotion is a live-only consent"
    );
    let promotion = proposed.promotion.expect("promotion");
    assert_eq!(promotion.owner_name, OWNER);
    assert_eq!(promotion.owner_id, cast.owner_id);
    assert!(
        promotion.records.is_empty(),
        "nothing issued before the verdict"
    );

    // The same proposal again is the same consent.
    let again = cast
        .proposer
        .propose_promotion(request(&b, "run-promote-1"))
        .await
        .expect("propose again")
        .into_inner();
    assert!(!again.created);
    assert_eq!(
        again.consent.expect("consent").consent_id,
        consent.consent_id
    );

    let decided = approve(&mut cast.owner, &consent)
        .await
        .expect("owner approves");
    assert!(decided.changed);
    let settled = decided.consent.expect("consent");
    assert_eq!(settled.state, pb::ConsentState::Granted as i32);
    assert!(
        settled.consumed_at.is_some(),
        "the approval is consumed by the issuance"
    );

    let p = delivered(&mut cast.reviewer, &consent.consent_id).await;
    let kinds: Vec<&str> = p.records.iter().map(|r| r.record_type.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "AuthorityGrantV1",
            "AuthorityGrantV1",
            "PromotionDecisionV1",
            "AuthorityGrantV1"
        ]
    );
    assert!(p.records.iter().all(|r| r.delivery == "stored"));

    // What `helmloop validate` says of the issued records, as a bundle.
    let issued = format!(
        "[{}]",
        p.records
            .iter()
            .map(|r| String::from_utf8(r.body.clone()).expect("utf-8"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let report = lychd_helmloop::validate::validate_document(issued.as_bytes());
    assert!(report.is_valid(), "{}", report.to_json());
    for r in &p.records {
        let body = lychd_helmloop::parse(&r.body).expect("body");
        let issuer = body.get("issuerId").or(body.get("ownerId"));
        assert_eq!(issuer.and_then(Value::as_str), Some(OWNER));
    }
    let states: Vec<String> = p
        .records
        .iter()
        .filter_map(|r| {
            let v = lychd_helmloop::parse(&r.body).ok()?;
            Some(v.get("lineage")?.get("state")?.as_str()?.to_owned())
        })
        .collect();
    assert_eq!(states, ["available", "reserved", "consumed"]);

    // Delivered with the rest of the bundle, the stored records reduce to PASS.
    let summary = reduce_stored(&stack, &b).await;
    assert_eq!(
        summary.disposition,
        hl::Disposition::Pass as i32,
        "reject {:?} hold {:?} axes {:?}",
        summary.reject_codes,
        summary.hold_codes,
        summary.axes
    );
    let axes = summary.axes.expect("axes");
    assert_eq!(axes.promotion, "APPROVED");

    // A verdict after the first changes nothing and issues nothing more.
    let later = approve(&mut cast.owner, &consent).await.expect("again");
    assert!(!later.changed);
    assert_eq!(
        promotion_of(&mut cast.reviewer, &consent.consent_id)
            .await
            .records
            .len(),
        4
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_non_owner_is_refused_and_a_non_owner_issued_grant_does_not_pass() {
    let mut stack = Stack::new().await;
    let mut cast = cast(&mut stack).await;
    let b = bundle(now_ms());
    store_bundle(&stack, &mut cast, &b).await;
    let consent = proposed(&mut cast.proposer, &b, "run-promote-2").await;

    // `ward:approve` on every effect is not ownership.
    let refused = approve(&mut cast.other, &consent)
        .await
        .expect_err("not the owner");
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert_eq!(reason(&refused), "NOT_THE_OWNER");
    let p = promotion_of(&mut cast.reviewer, &consent.consent_id).await;
    assert!(p.records.is_empty(), "nothing issued");
    let c = cast
        .reviewer
        .get_consent(pb::GetConsentRequest {
            consent_id: consent.consent_id.clone(),
        })
        .await
        .expect("consent")
        .into_inner()
        .consent
        .expect("consent");
    assert_eq!(c.state, pb::ConsentState::Pending as i32, "nothing settled");
    let mut conn = stack.db.superuser().await;
    let outbox: i64 =
        sqlx::query_scalar("SELECT count(*) FROM ward.promotion_outbox WHERE consent_id = $1")
            .bind(uuid::Uuid::parse_str(&consent.consent_id).expect("uuid"))
            .fetch_one(&mut conn)
            .await
            .expect("count");
    assert_eq!(outbox, 0);

    // The reducer's own verdict on the same records issued by someone who is not the owner.
    let terms = Terms {
        contract: Ref {
            id: "contract-payments-1".into(),
            digest: find_record(&b, "contract-payments-1")["digest"]
                .as_str()
                .expect("digest")
                .into(),
        },
        subject: Value::from_serde(&find_record(&b, "contract-payments-1")["subject"])
            .expect("subject"),
        policy: Value::from_serde(&find_record(&b, "contract-payments-1")["policy"])
            .expect("policy"),
        owner: "approver-bob".into(),
        target: Ref {
            id: "rev-42".into(),
            digest: find_record(&b, "contract-payments-1")["revision"]["digest"]
                .as_str()
                .expect("digest")
                .into(),
        },
        assurance: Ref {
            id: "assurance-1".into(),
            digest: find_record(&b, "assurance-1")["digest"]
                .as_str()
                .expect("d")
                .into(),
        },
        evidence: ["evidence-latency-1", "evidence-outcome-1"]
            .iter()
            .map(|id| Ref {
                id: (*id).into(),
                digest: find_record(&b, id)["digest"].as_str().expect("d").into(),
            })
            .collect(),
        grantee: "release-host".into(),
        scope: vec!["release/payments".into()],
        not_after_ms: now_ms() + 3_600_000,
    };
    let forged = promotion::issue(&terms, "forged", now_ms()).expect("issued");
    let mut records: Vec<serde_json::Value> = b.records.clone();
    records.extend(
        forged
            .iter()
            .map(|r| serde_json::from_str(&r.body).expect("json")),
    );
    let input =
        serde_json::json!({"protocolVersion": "0.1", "context": b.context, "records": records});
    let summary = stack
        .helmloop_client()
        .reduce(hl::ReduceRequest {
            input: serde_json::to_vec(&input).expect("json").into(),
            store: false,
            return_input: false,
        })
        .await
        .expect("reduce")
        .into_inner()
        .summary
        .expect("summary");
    assert_ne!(summary.disposition, hl::Disposition::Pass as i32);
    assert!(
        [hl::Disposition::Hold as i32, hl::Disposition::Reject as i32]
            .contains(&summary.disposition)
    );
    assert_ne!(summary.axes.expect("axes").promotion, "APPROVED");
    assert!(
        summary
            .reject_codes
            .iter()
            .any(|c| c == "AUTHORITY_WRONG_BINDING"),
        "a grant issued by another than the accountable owner is wrongly bound: {:?}",
        summary.reject_codes
    );
    stack.stop().await;
}

#[tokio::test]
async fn delivery_is_retried_until_helmloop_is_back_and_a_lost_acknowledgement_is_looked_up() {
    let mut stack = Stack::new().await;
    let mut cast = cast(&mut stack).await;
    let b = bundle(now_ms());
    store_bundle(&stack, &mut cast, &b).await;
    let first = proposed(&mut cast.proposer, &b, "run-promote-3").await;
    let second = proposed(&mut cast.proposer, &b, "run-promote-4").await;

    // HelmLoop goes down; the owner approves both; Ward keeps the records and keeps trying.
    stack.stop_helmloop().await;
    approve(&mut cast.owner, &first)
        .await
        .expect("approve first");
    approve(&mut cast.owner, &second)
        .await
        .expect("approve second");
    let mut attempted = false;
    for _ in 0..100 {
        let p = promotion_of(&mut cast.reviewer, &second.consent_id).await;
        if p.records.iter().all(|r| r.attempts >= 2) {
            attempted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(attempted, "delivery is retried while helmloop is down");
    let p = promotion_of(&mut cast.reviewer, &second.consent_id).await;
    assert!(p.records.iter().all(|r| r.delivered_at.is_none()));

    // The second promotion's records did arrive (an attempt whose acknowledgement was lost):
    // another HelmLoop instance on the same store takes them while Ward's peer is still down.
    let mut other_ctx = stack.helmloop_ctx.clone();
    let mut other_config = (*other_ctx.config).clone();
    other_config.server.listen = "127.0.0.1:0".parse().expect("address");
    other_ctx.config = std::sync::Arc::new(other_config);
    let other = InProcess::start(other_ctx, lychd_helmloop_service::spec().start)
        .await
        .expect("second helmloop");
    let ward_token = exchange(
        ward_channel(&stack.ward_endpoint()),
        &stack.ward_credential,
        0,
        &["helmloop"],
    )
    .await
    .expect("ward's session")
    .token;
    let mut direct = HelmLoopClient::new(channel_with(&other.endpoint(), &ward_token));
    let bodies: Vec<serde_json::Value> = p
        .records
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("json"))
        .collect();
    append(&mut direct, &bodies).await;
    other.stop().await.expect("second helmloop stops");

    // HelmLoop is back: the first promotion's records are sent, the second's are found.
    stack.start_helmloop().await;
    let p1 = delivered(&mut cast.reviewer, &first.consent_id).await;
    assert!(
        p1.records.iter().all(|r| r.delivery == "stored"),
        "{:?}",
        p1.records
    );
    let p2 = delivered(&mut cast.reviewer, &second.consent_id).await;
    assert!(
        p2.records.iter().all(|r| r.delivery == "found"),
        "a lost acknowledgement is resolved by looking the record up: {:?}",
        p2.records.iter().map(|r| &r.delivery).collect::<Vec<_>>()
    );
    // One stored body per issued record: nothing issued or stored twice.
    for p in [&p1, &p2] {
        for r in &p.records {
            let got = stack
                .helmloop_client()
                .get_record(hl::GetRecordRequest {
                    record_type: r.record_type.clone(),
                    id: r.id.clone(),
                })
                .await
                .expect("get record")
                .into_inner()
                .records;
            assert_eq!(got.len(), 1, "{}", r.id);
            assert_eq!(got[0].digest, r.digest);
        }
    }
    let key = uuid::Uuid::parse_str(&second.consent_id)
        .expect("uuid")
        .simple()
        .to_string();
    assert_eq!(stored_count(&stack, &key).await, 4);
    let outbox: i64 =
        sqlx::query_scalar("SELECT count(*) FROM ward.promotion_outbox WHERE consent_id = ANY($1)")
            .bind(
                [&first, &second]
                    .map(|c| uuid::Uuid::parse_str(&c.consent_id).expect("uuid"))
                    .to_vec(),
            )
            .fetch_one(&stack.ward_pool)
            .await
            .expect("count");
    assert_eq!(outbox, 8, "four records per approval, none re-issued");
    stack.stop().await;
}

#[tokio::test]
async fn bad_promotion_input_is_refused_with_every_field_named() {
    let mut stack = Stack::new().await;
    let mut cast = cast(&mut stack).await;
    let b = bundle(now_ms());
    let mut bad = request(&b, "run bad");
    bad.contract = None;
    bad.target_revision = Some(pb::HelmLoopRef {
        id: "-rev".into(),
        digest: "sha256:XYZ".into(),
    });
    bad.evidence.push(bad.evidence[0].clone());
    bad.grantee_id = String::new();
    bad.scope = vec!["release/*".into()];
    bad.not_after = Some(prost_types::Timestamp {
        seconds: 1,
        nanos: 5,
    });
    let refused = cast
        .proposer
        .propose_promotion(bad)
        .await
        .expect_err("bad input");
    assert_eq!(refused.code(), Code::InvalidArgument);
    let mut fields: Vec<String> = refused
        .get_error_details()
        .bad_request()
        .expect("field violations")
        .field_violations
        .iter()
        .map(|v| v.field.clone())
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "contract",
            "evidence",
            "grantee_id",
            "not_after",
            "run_id",
            "scope[0]",
            "target_revision.digest",
            "target_revision.id"
        ]
    );
    assert!(!refused.message().contains("XYZ"), "no value is echoed");

    // A contract HelmLoop does not hold, and an owner Ward does not know.
    let refused = cast
        .proposer
        .propose_promotion(request(&b, "run-promote-5"))
        .await
        .expect_err("no contract stored");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert_eq!(reason(&refused), "CONTRACT_NOT_FOUND");
    let mut contract = find_record(&b, "contract-payments-1").clone();
    contract["accountableOwnerId"] = "owner-zed".into();
    contract["subject"]["ownerId"] = "owner-zed".into();
    seal(&mut contract);
    // Ward proposes no owner record for an owner it does not know.
    let refused = propose_owner_records(
        &mut cast.proposer,
        std::slice::from_ref(&contract),
        "run-promote-5",
    )
    .await
    .expect_err("no owner");
    assert_eq!(reason(&refused), "OWNER_NOT_ENROLLED");
    // Such a contract exists only if it was stored before owner records came from Ward alone:
    // a test-only importer explicitly granted the contract action on every subject stores it.
    let mut importer = stack
        .helmloop_principal(
            "legacy-importer",
            &[("helmloop:append_contract", "subject:*")],
        )
        .await;
    append(&mut importer, std::slice::from_ref(&contract)).await;
    let mut r = request(&b, "run-promote-5");
    r.contract = Some(reference(&contract));
    let refused = cast
        .proposer
        .propose_promotion(r)
        .await
        .expect_err("no owner");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert_eq!(reason(&refused), "OWNER_NOT_ENROLLED");
    stack.stop().await;
}

#[tokio::test]
async fn without_a_helmloop_peer_promotions_are_refused_as_not_configured() {
    let s = lychd_testkit::spawn_office(lychd_ward::spec()).await;
    let (id, token) = s
        .principal(pb::PrincipalKind::Service, "runner-promote")
        .await;
    s.admin
        .clone()
        .ensure_assignment(&id, "ward:propose", "effect:helmloop", "ward", "propose")
        .await
        .expect("assign");
    let mut client = WardClient::new(channel_with(&s.endpoint(), &token));
    let b = bundle(now_ms());
    let refused = client
        .propose_promotion(request(&b, "run-promote-6"))
        .await
        .expect_err("no helmloop");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert_eq!(reason(&refused), "HELMLOOP_NOT_CONFIGURED");
    s.stop().await;
}

#[tokio::test]
async fn concurrent_contradictory_owner_verdicts_settle_once_and_issue_at_most_once() {
    let mut stack = Stack::new().await;
    let mut cast = cast(&mut stack).await;
    let b = bundle(now_ms());
    store_bundle(&stack, &mut cast, &b).await;
    let consent = proposed(&mut cast.proposer, &b, "run-promote-7").await;
    let verdicts = (0..32).map(|i| {
        let mut owner = cast.owner.clone();
        let consent = consent.clone();
        tokio::spawn(async move {
            owner
                .decide(pb::DecideRequest {
                    consent_id: consent.consent_id.clone(),
                    verdict: if i % 2 == 0 {
                        pb::Verdict::Approve
                    } else {
                        pb::Verdict::Deny
                    } as i32,
                    review_digest: consent.binding_digest.clone(),
                })
                .await
                .expect("decide")
                .into_inner()
        })
    });
    let answers: Vec<pb::DecideResponse> = futures::future::join_all(verdicts)
        .await
        .into_iter()
        .map(|r| r.expect("task"))
        .collect();
    assert_eq!(
        answers.iter().filter(|a| a.changed).count(),
        1,
        "one verdict"
    );
    let states: std::collections::BTreeSet<i32> = answers
        .iter()
        .map(|a| a.consent.as_ref().expect("consent").state)
        .collect();
    assert_eq!(states.len(), 1, "every caller sees the settled verdict");
    let granted = states.contains(&(pb::ConsentState::Granted as i32));
    let outbox: i64 =
        sqlx::query_scalar("SELECT count(*) FROM ward.promotion_outbox WHERE consent_id = $1")
            .bind(uuid::Uuid::parse_str(&consent.consent_id).expect("uuid"))
            .fetch_one(&stack.ward_pool)
            .await
            .expect("count");
    assert_eq!(outbox, if granted { 4 } else { 0 });
    if granted {
        delivered(&mut cast.reviewer, &consent.consent_id).await;
    }
    stack.stop().await;
}

#[tokio::test]
async fn an_approval_issued_while_helmloop_is_down_survives_a_ward_restart_and_is_delivered() {
    let mut stack = Stack::new().await;
    let mut cast = cast(&mut stack).await;
    let b = bundle(now_ms());
    store_bundle(&stack, &mut cast, &b).await;
    let consent = proposed(&mut cast.proposer, &b, "run-promote-8").await;
    stack.stop_helmloop().await;
    approve(&mut cast.owner, &consent).await.expect("approve");
    let p = promotion_of(&mut cast.reviewer, &consent.consent_id).await;
    assert_eq!(p.records.len(), 4, "issued with the verdict");
    assert!(p.records.iter().all(|r| r.delivered_at.is_none()));

    // The outbox is Ward's own table: a restart loses nothing and delivery resumes.
    stack.restart_ward().await;
    stack.start_helmloop().await;
    let p = delivered(&mut cast.reviewer, &consent.consent_id).await;
    assert!(
        p.records.iter().all(|r| r.delivery == "stored"),
        "{:?}",
        p.records
    );
    let summary = reduce_stored(&stack, &b).await;
    assert_eq!(
        summary.disposition,
        hl::Disposition::Pass as i32,
        "reject {:?} hold {:?}",
        summary.reject_codes,
        summary.hold_codes
    );
    stack.stop().await;
}

#[tokio::test]
async fn an_identity_ward_will_issue_cannot_be_claimed_before_it_is_delivered() {
    let mut stack = Stack::new().await;
    let mut cast = cast(&mut stack).await;
    let b = bundle(now_ms());
    store_bundle(&stack, &mut cast, &b).await;
    let consent = proposed(&mut cast.proposer, &b, "run-promote-9").await;
    let pending = promotion_of(&mut cast.reviewer, &consent.consent_id).await;
    let terms = Terms::from_value(&lychd_helmloop::parse(&pending.terms_json).expect("terms"))
        .expect("terms read back");
    let consent_key = uuid::Uuid::parse_str(&consent.consent_id)
        .expect("uuid")
        .simple()
        .to_string();

    // A principal allowed to append grants and decisions for the promotion's own subject
    // tries to claim the identities derived from the consent alone.
    let mut claiming = stack
        .helmloop_principal(
            "claimer",
            &[
                ("helmloop:append_grant", "subject:svc-payments"),
                ("helmloop:append_promotion", "subject:svc-payments"),
            ],
        )
        .await;
    let claims = promotion::issue(&terms, &consent_key, now_ms()).expect("claims");
    let refused = claiming
        .append_records(hl::AppendRecordsRequest {
            records: claims.iter().map(|r| r.body.clone().into_bytes()).collect(),
        })
        .await
        .expect_err("an owner identity on one subject's authority");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    for r in &claims {
        let found = stack
            .helmloop_client()
            .get_record(hl::GetRecordRequest {
                record_type: r.record_type.into(),
                id: r.id.clone(),
            })
            .await
            .expect_err("nothing claimed");
        assert_eq!(found.code(), Code::NotFound);
    }

    // The owner approves: Ward's identities carry an unpredictable component, nothing
    // equivocates, and the promotion passes.
    approve(&mut cast.owner, &consent).await.expect("approve");
    let p = delivered(&mut cast.reviewer, &consent.consent_id).await;
    for r in &p.records {
        assert!(
            r.id.starts_with("ward-promot") && r.id.contains(&format!("{consent_key}-")),
            "{}",
            r.id
        );
        assert!(
            claims.iter().all(|c| c.id != r.id),
            "{} was predictable",
            r.id
        );
        assert_eq!(r.delivery, "stored", "{}", r.id);
    }
    let summary = reduce_stored(&stack, &b).await;
    assert_eq!(
        summary.disposition,
        hl::Disposition::Pass as i32,
        "reject {:?} hold {:?}",
        summary.reject_codes,
        summary.hold_codes
    );
    stack.stop().await;
}

#[tokio::test]
async fn owner_records_are_issued_only_on_the_owners_approval_and_the_operator_cannot_append_them()
{
    let mut stack = Stack::new().await;
    let mut cast = cast(&mut stack).await;
    let b = bundle(now_ms());
    let owner_records: Vec<serde_json::Value> = b
        .records
        .iter()
        .filter(|r| is_owner_record(r))
        .cloned()
        .collect();
    assert_eq!(
        owner_records.len(),
        5,
        "contract, three grant steps, assurance"
    );

    // The operator holds every HelmLoop action but the owner records': it appends none.
    let refused = stack
        .helmloop_client()
        .append_records(hl::AppendRecordsRequest {
            records: vec![serde_json::to_vec(&owner_records[0]).expect("json")],
        })
        .await
        .expect_err("the operator appends no owner record");
    assert_eq!(refused.code(), Code::PermissionDenied);

    // An observation is no owner record; every bad record is named.
    let observation = b
        .records
        .iter()
        .find(|r| r["recordType"] == "EvidenceRecordV1")
        .expect("evidence")
        .clone();
    let refused = propose_owner_records(
        &mut cast.proposer,
        &[owner_records[0].clone(), observation],
        "run-owner-1",
    )
    .await
    .expect_err("an observation");
    assert_eq!(refused.code(), Code::InvalidArgument);
    let fields: Vec<String> = refused
        .get_error_details()
        .bad_request()
        .expect("violations")
        .field_violations
        .iter()
        .map(|v| v.field.clone())
        .collect();
    assert_eq!(fields, ["records[1]"]);

    let answer = propose_owner_records(&mut cast.proposer, &owner_records, "run-owner-1")
        .await
        .expect("propose");
    assert!(answer.created);
    let consent = answer.consent.expect("consent");
    assert_eq!(
        consent.effect_class,
        pb::EffectClass::SecretOrAuthorityChange as i32,
        "live-only"
    );
    assert_eq!(answer.promotion.expect("issuance").owner_name, OWNER);
    // Not the owner: nothing settles, nothing is issued or stored.
    let refused = approve(&mut cast.other, &consent)
        .await
        .expect_err("not the owner");
    assert_eq!(reason(&refused), "NOT_THE_OWNER");
    assert!(
        promotion_of(&mut cast.reviewer, &consent.consent_id)
            .await
            .records
            .is_empty()
    );
    let missing = stack
        .helmloop_client()
        .get_record(hl::GetRecordRequest {
            record_type: "OutcomeContractV1".into(),
            id: "contract-payments-1".into(),
        })
        .await
        .expect_err("not stored before the approval");
    assert_eq!(missing.code(), Code::NotFound);

    // The owner approves: exactly the proposed bodies are issued and delivered once.
    approve(&mut cast.owner, &consent).await.expect("approve");
    let p = delivered(&mut cast.reviewer, &consent.consent_id).await;
    assert_eq!(p.records.len(), 5);
    for (issued, proposed) in p.records.iter().zip(&owner_records) {
        assert_eq!(issued.id, proposed["id"].as_str().expect("id"));
        assert_eq!(issued.digest, proposed["digest"].as_str().expect("digest"));
        assert_eq!(issued.delivery, "stored");
        let got = stack
            .helmloop_client()
            .get_record(hl::GetRecordRequest {
                record_type: issued.record_type.clone(),
                id: issued.id.clone(),
            })
            .await
            .expect("stored")
            .into_inner()
            .records;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].digest, issued.digest);
    }
    // The identities are taken now: proposing them again is refused.
    let again = propose_owner_records(&mut cast.proposer, &owner_records, "run-owner-2")
        .await
        .expect_err("taken");
    assert_eq!(reason(&again), "RECORD_IDENTITY_TAKEN");

    // With the observations, the bundle and Ward's promotion reduce to PASS.
    let observations: Vec<serde_json::Value> = b
        .records
        .iter()
        .filter(|r| !is_owner_record(r))
        .cloned()
        .collect();
    append(&mut stack.helmloop_client(), &observations).await;
    let promoted = proposed(&mut cast.proposer, &b, "run-owner-3").await;
    approve(&mut cast.owner, &promoted).await.expect("approve");
    delivered(&mut cast.reviewer, &promoted.consent_id).await;
    let summary = reduce_stored(&stack, &b).await;
    assert_eq!(
        summary.disposition,
        hl::Disposition::Pass as i32,
        "reject {:?} hold {:?}",
        summary.reject_codes,
        summary.hold_codes
    );
    stack.stop().await;
}
