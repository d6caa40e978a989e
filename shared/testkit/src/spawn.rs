//! Offices served in the test process: own database, port 0, typed client.

use std::sync::Arc;

use lychd_runtime::Office;
use lychd_runtime::auth::Authenticator;
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

/// An office running in this process on its own test database.
pub struct Spawned {
    pub server: InProcess,
    pub db: TestDb,
    pub token: String,
    pub ctx: ServeContext,
}

impl Spawned {
    pub fn endpoint(&self) -> String {
        self.server.endpoint()
    }

    /// A channel that presents this office's credential.
    pub fn channel(&self) -> PeerChannel {
        let outgoing =
            Outgoing::new(&SecretString::from(self.token.clone())).expect("test token is ascii");
        peer_channel(&self.endpoint(), outgoing).expect("endpoint is valid")
    }
}

/// Serve `office` in-process on port 0 over a fresh migrated database.
pub async fn spawn_office(office: Office) -> Spawned {
    spawn_office_with(office, |_| {}).await
}

/// Like [`spawn_office`], with a chance to adjust the configuration first.
pub async fn spawn_office_with(office: Office, adjust: impl FnOnce(&mut OfficeConfig)) -> Spawned {
    let db = crate::test_db().await;
    let token = crate::random_token();
    let mut config = OfficeConfig::defaults(office);
    config.server.listen = "127.0.0.1:0".parse().expect("loopback address");
    config.database.url = db.runtime_url(office);
    config.database.migrate_url = db.owner_url(office);
    adjust(&mut config);
    let opts = lychd_runtime::db::connect_options(&config.database.url, None, office)
        .expect("runtime url");
    let pool = lychd_runtime::db::pool(opts, 4)
        .await
        .expect("runtime role connects");
    let secret = SecretString::from(token.clone());
    let ctx = ServeContext {
        office,
        config: Arc::new(config),
        pool,
        authenticator: Authenticator::new(&secret),
        outgoing: Outgoing::new(&secret).expect("test token is ascii"),
        health: HealthState::new(&[office.grpc_service()]),
    };
    let server = InProcess::start(ctx.clone(), spec_of(office).start)
        .await
        .expect("office starts");
    Spawned {
        server,
        db,
        token,
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

/// Spawn the Dispatcher in-process with a typed client.
pub async fn spawn_dispatcher() -> (Spawned, typed::dispatcher::DispatcherClient<PeerChannel>) {
    let s = spawn_office(Office::Dispatcher).await;
    let c = typed::dispatcher::DispatcherClient::new(s.channel());
    (s, c)
}

/// Spawn the Orchestrator in-process with a typed client.
pub async fn spawn_orchestrator() -> (
    Spawned,
    typed::orchestrator::OrchestratorClient<PeerChannel>,
) {
    let s = spawn_office(Office::Orchestrator).await;
    let c = typed::orchestrator::OrchestratorClient::new(s.channel());
    (s, c)
}

/// Spawn Ward in-process with a typed client.
pub async fn spawn_ward() -> (Spawned, typed::ward::WardClient<PeerChannel>) {
    let s = spawn_office(Office::Ward).await;
    let c = typed::ward::WardClient::new(s.channel());
    (s, c)
}

/// Spawn the Archive in-process with a typed client.
pub async fn spawn_archive() -> (Spawned, typed::archive::ArchiveClient<PeerChannel>) {
    let s = spawn_office(Office::Archive).await;
    let c = typed::archive::ArchiveClient::new(s.channel());
    (s, c)
}

/// Spawn HelmLoop in-process with a typed client.
pub async fn spawn_helmloop() -> (Spawned, typed::helmloop::HelmLoopClient<PeerChannel>) {
    let s = spawn_office(Office::HelmLoop).await;
    let c = typed::helmloop::HelmLoopClient::new(s.channel());
    (s, c)
}
