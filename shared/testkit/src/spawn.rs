//! Offices served in the test process: own database, port 0, typed client, and a Ward (the
//! office itself when spawning Ward) that decides every call.
//!
//! Identities: `operator` (bootstrap; `ward:administer`), the office's service principal
//! (`ward:decide`), and `tester`, the principal of the returned client, which starts with only
//! `<office>:describe` — tests grant it more with [`Spawned::allow`].

use std::sync::Arc;

use lychd_auth::admin::{WardAdmin, exchange};
use lychd_auth::credentials::SessionSource;
use lychd_auth::{Authorizer, Verifier};
use lychd_proto::ward::v1::PrincipalKind;
use lychd_runtime::Office;
use lychd_runtime::cli::OfficeSpec;
use lychd_runtime::client::{Outgoing, PeerChannel, peer_channel};
use lychd_runtime::config::OfficeConfig;
use lychd_runtime::health::HealthState;
use lychd_runtime::server::{InProcess, ServeContext};
use secrecy::SecretString;
use sqlx::migrate::Migrator;

use crate::TestDb;

pub(crate) fn specs() -> [OfficeSpec; 5] {
    [
        lychd_dispatcher::spec(),
        lychd_orchestrator::spec(),
        lychd_ward::spec(),
        lychd_archive::spec(),
        lychd_helmloop_service::spec(),
    ]
}

pub(crate) fn migrators() -> Vec<(Office, &'static Migrator)> {
    specs()
        .into_iter()
        .map(|s| (s.office, s.migrator))
        .collect()
}

pub fn spec_of(office: Office) -> OfficeSpec {
    specs()
        .into_iter()
        .find(|s| s.office == office)
        .expect("invariant: every office has a spec")
}

/// An office running in this process on its own test database, with its Ward.
pub struct Spawned {
    pub office: Office,
    pub server: InProcess,
    /// The Ward deciding for this office (`None` when the office is Ward: then `server`).
    pub ward: Option<InProcess>,
    pub db: TestDb,
    /// Session token of the `tester` principal (the typed client's bearer).
    pub token: String,
    pub tester_id: String,
    /// Ward administration with the operator's session.
    pub admin: WardAdmin,
    pub ctx: ServeContext,
}

impl Spawned {
    pub fn endpoint(&self) -> String {
        self.server.endpoint()
    }

    pub fn ward_endpoint(&self) -> String {
        self.ward.as_ref().unwrap_or(&self.server).endpoint()
    }

    /// A channel that presents `token`.
    pub fn channel_with(&self, token: &str) -> PeerChannel {
        let outgoing = Outgoing::new(Some(SessionSource::fixed(SecretString::from(
            token.to_owned(),
        ))));
        peer_channel(&self.endpoint(), outgoing).expect("endpoint is valid")
    }

    /// A channel that presents the tester's session.
    pub fn channel(&self) -> PeerChannel {
        self.channel_with(&self.token)
    }

    /// Grant the tester `action` on `object` (audience: this office; purpose: the verb).
    pub async fn allow(&self, action: &str, object: &str) {
        let purpose = action.split_once(':').map(|(_, v)| v).unwrap_or(action);
        self.admin
            .clone()
            .ensure_assignment(&self.tester_id, action, object, self.office.name(), purpose)
            .await
            .expect("assign");
    }

    /// Enroll another principal with a standing credential; returns (principal id, session).
    pub async fn principal(&self, kind: PrincipalKind, name: &str) -> (String, String) {
        let mut admin = self.admin.clone();
        let id = admin.ensure_principal(kind, name).await.expect("enroll");
        let credential = admin.issue_standing(&id).await.expect("credential");
        let session = exchange(ward_channel(&self.ward_endpoint()), &credential, 0)
            .await
            .expect("exchange");
        (id, session.token)
    }

    pub async fn stop(self) {
        self.server.stop().await.expect("office stops");
        if let Some(ward) = self.ward {
            ward.stop().await.expect("ward stops");
        }
    }
}

/// A channel to `endpoint` presenting `token` as the bearer.
pub fn channel_with(endpoint: &str, token: &str) -> PeerChannel {
    let outgoing = Outgoing::new(Some(SessionSource::fixed(SecretString::from(
        token.to_owned(),
    ))));
    peer_channel(endpoint, outgoing).expect("endpoint is valid")
}

fn ward_channel(endpoint: &str) -> tonic::transport::Channel {
    lychd_runtime::client::channel(endpoint).expect("endpoint is valid")
}

fn config_for(office: Office, db: &TestDb) -> OfficeConfig {
    let mut config = OfficeConfig::defaults(office);
    config.server.listen = "127.0.0.1:0".parse().expect("loopback address");
    config.database.url = db.runtime_url(office);
    config.database.migrate_url = db.owner_url(office);
    config
}

async fn runtime_pool(config: &OfficeConfig, office: Office) -> sqlx::PgPool {
    let opts = lychd_runtime::db::connect_options(&config.database.url, None, office)
        .expect("runtime url");
    lychd_runtime::db::pool(opts, 8)
        .await
        .expect("runtime role connects")
}

fn context(
    office: Office,
    config: OfficeConfig,
    pool: sqlx::PgPool,
    verifier: Arc<dyn Verifier>,
    outgoing: Outgoing,
) -> ServeContext {
    let spec = spec_of(office);
    ServeContext {
        office,
        config: Arc::new(config),
        pool,
        authorizer: Authorizer::new(office.name(), verifier),
        outgoing,
        health: HealthState::new(&[office.grpc_service()]),
        self_authenticating: spec.self_authenticating,
        finishing: Default::default(),
    }
}

/// Serve `office` in-process on port 0 over a fresh migrated database.
pub async fn spawn_office(office: Office) -> Spawned {
    spawn_office_with(office, |_| {}).await
}

/// Like [`spawn_office`], with a chance to adjust the office's configuration first.
pub async fn spawn_office_with(office: Office, adjust: impl FnOnce(&mut OfficeConfig)) -> Spawned {
    let db = crate::test_db().await;
    let mut adjust = Some(adjust);

    // Ward first: it decides for everyone.
    let ward_config = config_for(Office::Ward, &db);
    let ward_pool = runtime_pool(&ward_config, Office::Ward).await;
    let bootstrapped = lychd_ward::bootstrap(&ward_pool, "operator")
        .await
        .expect("bootstrap ward");
    let mut ward_config = ward_config;
    if office == Office::Ward
        && let Some(adjust) = adjust.take()
    {
        adjust(&mut ward_config);
    }
    let ward_ctx = context(
        Office::Ward,
        ward_config,
        ward_pool.clone(),
        lychd_ward::local_verifier(ward_pool),
        Outgoing::default(),
    );
    let ward = InProcess::start(ward_ctx.clone(), spec_of(Office::Ward).start)
        .await
        .expect("ward starts");
    let ward_endpoint = ward.endpoint();

    let operator = exchange(ward_channel(&ward_endpoint), &bootstrapped.credential, 0)
        .await
        .expect("operator session");
    let mut admin = WardAdmin::new(ward_channel(&ward_endpoint), &operator.token).expect("admin");
    let tester_id = admin
        .ensure_principal(PrincipalKind::Human, "tester")
        .await
        .expect("tester");
    let tester_credential = admin
        .issue_standing(&tester_id)
        .await
        .expect("tester credential");
    let tester = exchange(ward_channel(&ward_endpoint), &tester_credential, 0)
        .await
        .expect("tester session");
    admin
        .allow_describe(&tester_id, office.name())
        .await
        .expect("describe");

    if office == Office::Ward {
        return Spawned {
            office,
            server: ward,
            ward: None,
            db,
            token: tester.token,
            tester_id,
            admin,
            ctx: ward_ctx,
        };
    }

    let service_id = admin
        .ensure_office_principal(office.name())
        .await
        .expect("service principal");
    let credential = admin
        .issue_standing(&service_id)
        .await
        .expect("service credential");
    let session =
        SessionSource::start(ward_channel(&ward_endpoint), SecretString::from(credential));
    assert!(
        session.ready(std::time::Duration::from_secs(10)).await,
        "office session from ward"
    );
    let verifier = Arc::new(lychd_auth::ward::WardVerifier::new(
        ward_channel(&ward_endpoint),
        session.clone(),
    ));

    let mut config = config_for(office, &db);
    config.peers.insert(
        "ward".into(),
        lychd_runtime::config::PeerConfig {
            endpoint: ward_endpoint,
        },
    );
    if let Some(adjust) = adjust.take() {
        adjust(&mut config);
    }
    let pool = runtime_pool(&config, office).await;
    let ctx = context(office, config, pool, verifier, Outgoing::new(Some(session)));
    let server = InProcess::start(ctx.clone(), spec_of(office).start)
        .await
        .expect("office starts");
    Spawned {
        office,
        server,
        ward: Some(ward),
        db,
        token: tester.token,
        tester_id,
        admin,
        ctx,
    }
}

mod typed {
    pub use lychd_proto::archive::v1::archive_client as archive;
    pub use lychd_proto::dispatcher::v1::dispatcher_client as dispatcher;
    pub use lychd_proto::helmloop::v1::helm_loop_client as helmloop;
    pub use lychd_proto::orchestrator::v1::orchestrator_client as orchestrator;
    pub use lychd_proto::ward::v1::ward_client as ward;
}

/// Spawn the Dispatcher in-process with a typed client (the tester's session).
pub async fn spawn_dispatcher() -> (Spawned, typed::dispatcher::DispatcherClient<PeerChannel>) {
    let s = spawn_office(Office::Dispatcher).await;
    let c = typed::dispatcher::DispatcherClient::new(s.channel());
    (s, c)
}

/// Spawn the Orchestrator in-process with a typed client (the tester's session).
pub async fn spawn_orchestrator() -> (
    Spawned,
    typed::orchestrator::OrchestratorClient<PeerChannel>,
) {
    let s = spawn_office(Office::Orchestrator).await;
    let c = typed::orchestrator::OrchestratorClient::new(s.channel());
    (s, c)
}

/// Spawn Ward in-process with a typed client (the tester's session).
pub async fn spawn_ward() -> (Spawned, typed::ward::WardClient<PeerChannel>) {
    let s = spawn_office(Office::Ward).await;
    let c = typed::ward::WardClient::new(s.channel());
    (s, c)
}

/// Spawn the Archive in-process with a typed client (the tester's session).
pub async fn spawn_archive() -> (Spawned, typed::archive::ArchiveClient<PeerChannel>) {
    let s = spawn_office(Office::Archive).await;
    let c = typed::archive::ArchiveClient::new(s.channel());
    (s, c)
}

/// Spawn HelmLoop in-process with a typed client (the tester's session).
pub async fn spawn_helmloop() -> (Spawned, typed::helmloop::HelmLoopClient<PeerChannel>) {
    let s = spawn_office(Office::HelmLoop).await;
    let c = typed::helmloop::HelmLoopClient::new(s.channel());
    (s, c)
}
