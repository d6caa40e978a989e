//! Offices served in the test process: own database, port 0, and a Ward that decides every
//! call — the built `lychd-ward` binary as a real process, or the office itself when spawning
//! Ward (bootstrapped by that binary, deciding with its spec's `local_verifier`).
//!
//! The caller names the office by its [`OfficeSpec`] (`spawn_office(lychd_dispatcher::spec())`),
//! so the kit links no office, and a test links only the offices it spawns. The database holds
//! Ward's schema and the spawned office's (see [`crate::test_db_for`]); a typed client is one
//! line on [`Spawned::channel`]: `DispatcherClient::new(spawned.channel())`.
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
use lychd_runtime::server::{Finishing, InProcess, ServeContext};
use secrecy::SecretString;

use crate::{OfficeProcess, TestDb};

/// An office running in this process on its own test database, with its Ward.
pub struct Spawned {
    pub office: Office,
    pub server: InProcess,
    /// The Ward deciding for this office, a `lychd-ward` process (`None` when the office is
    /// Ward: then `server`).
    pub ward: Option<OfficeProcess>,
    /// The Ward process's configuration and log.
    ward_dir: Option<tempfile::TempDir>,
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
        match &self.ward {
            Some(ward) => ward.endpoint(),
            None => self.server.endpoint(),
        }
    }

    /// A channel that presents `token` (over server-only TLS when the office serves TLS).
    pub fn channel_with(&self, token: &str) -> PeerChannel {
        let outgoing = Outgoing::new(Some(SessionSource::fixed(SecretString::from(
            token.to_owned(),
        ))))
        .with_tls(anonymous_tls(&self.ctx.config));
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

    /// Enroll another principal with a standing credential; returns (principal id, session
    /// bound to this office).
    pub async fn principal(&self, kind: PrincipalKind, name: &str) -> (String, String) {
        self.principal_at(kind, name, &[self.office.name()]).await
    }

    /// [`Spawned::principal`] with a session bound to `audiences`.
    pub async fn principal_at(
        &self,
        kind: PrincipalKind,
        name: &str,
        audiences: &[&str],
    ) -> (String, String) {
        let mut admin = self.admin.clone();
        let id = admin.ensure_principal(kind, name).await.expect("enroll");
        let credential = admin.issue_standing(&id).await.expect("credential");
        let session = exchange(self.ward_channel(), &credential, 0, audiences)
            .await
            .expect("exchange");
        (id, session.token)
    }

    /// A channel to this office's Ward presenting nothing (server-only TLS when Ward serves
    /// TLS in-process).
    pub fn ward_channel(&self) -> tonic::transport::Channel {
        let tls = match &self.ward {
            Some(_) => None,
            None => anonymous_tls(&self.ctx.config),
        };
        lychd_runtime::client::channel_tls(&self.ward_endpoint(), tls.as_ref())
            .expect("endpoint is valid")
    }

    pub async fn stop(self) {
        self.server.stop().await.expect("office stops");
        if let Some(ward) = self.ward {
            ward.stop().await.expect("ward stops");
        }
        drop(self.ward_dir);
    }
}

/// Where the Ward of a spawned office runs.
enum WardAt {
    /// Ward is the office under test.
    InProcess {
        server: InProcess,
        ctx: ServeContext,
    },
    /// The `lychd-ward` binary, with the directory of its configuration and log.
    Process {
        process: OfficeProcess,
        dir: tempfile::TempDir,
    },
}

/// Withdraw `principal_id`'s live assignment of `action` on `object`, with `warden` (a Ward
/// client whose session may administer).
pub async fn unassign(
    warden: &mut lychd_proto::ward::v1::ward_client::WardClient<PeerChannel>,
    principal_id: &str,
    action: &str,
    object: &str,
) {
    let assignments = warden
        .list_assignments(lychd_proto::ward::v1::ListAssignmentsRequest {
            principal_id: principal_id.to_owned(),
            page: None,
        })
        .await
        .expect("list assignments")
        .into_inner()
        .assignments;
    let a = assignments
        .iter()
        .find(|a| a.action == action && a.object == object)
        .expect("the assignment");
    warden
        .unassign(lychd_proto::ward::v1::UnassignRequest {
            assignment_id: a.id.clone(),
        })
        .await
        .expect("unassign");
}

/// A channel to `endpoint` presenting `token` as the bearer.
pub fn channel_with(endpoint: &str, token: &str) -> PeerChannel {
    let outgoing = Outgoing::new(Some(SessionSource::fixed(SecretString::from(
        token.to_owned(),
    ))));
    peer_channel(endpoint, outgoing).expect("endpoint is valid")
}

/// Server-only TLS to an office configured by `config` (its CA, no client certificate).
fn anonymous_tls(config: &OfficeConfig) -> Option<tonic::transport::ClientTlsConfig> {
    lychd_runtime::tls::Material::load(&config.tls)
        .expect("the office's TLS files load")
        .anonymous_client()
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
    let opts = lychd_runtime::db::session_options(opts, &config.database);
    lychd_runtime::db::pool(opts, 8)
        .await
        .expect("runtime role connects")
}

fn context(
    spec: &OfficeSpec,
    config: OfficeConfig,
    pool: sqlx::PgPool,
    verifier: Arc<dyn Verifier>,
    outgoing: Outgoing,
    finishing: Finishing,
) -> ServeContext {
    let office = spec.office;
    let mutual = config.tls.mutual();
    ServeContext {
        office,
        config: Arc::new(config),
        pool,
        authorizer: Authorizer::new(office.name(), verifier)
            .with_peer_check(lychd_runtime::tls::peer_check(mutual)),
        outgoing,
        health: HealthState::new(&[office.grpc_service()]),
        self_authenticating: spec.self_authenticating,
        finishing,
    }
}

/// Serve the office of `spec` (e.g. `lychd_dispatcher::spec()`) in-process on port 0, with its
/// Ward, over a fresh database migrated for the two. Ward is the built `lychd-ward` binary
/// (`cargo build --workspace --bins`), or the office itself when `spec` is Ward's.
pub async fn spawn_office(spec: OfficeSpec) -> Spawned {
    spawn_office_with(spec, |_| {}).await
}

/// Like [`spawn_office`], with a chance to adjust the office's configuration first.
pub async fn spawn_office_with(
    spec: OfficeSpec,
    adjust: impl FnOnce(&mut OfficeConfig),
) -> Spawned {
    let office = spec.office;
    let ward_migrator = if office == Office::Ward {
        spec.migrator
    } else {
        crate::pg::ward_migrator().await
    };
    let db =
        crate::pg::migrated(vec![(Office::Ward, ward_migrator), (office, spec.migrator)]).await;

    // Ward first: it decides for everyone. In-process when it is the office under test
    // (adjusted before its pool is made, so an adjusted database URL — a fault proxy — is
    // used); otherwise its binary, as operators run it.
    let mut adjust = Some(adjust);
    let (ward, operator_credential) = if office == Office::Ward {
        let mut ward_config = config_for(Office::Ward, &db);
        if let Some(adjust) = adjust.take() {
            adjust(&mut ward_config);
        }
        let operator_credential = crate::process::bootstrap_ward_on(&db).await;
        let ward_pool = runtime_pool(&ward_config, Office::Ward).await;
        let local_verifier = spec
            .local_verifier
            .expect("invariant: Ward's spec decides from its own tables");
        let finishing = Finishing::default();
        let verifier = local_verifier(ward_pool.clone(), &finishing);
        let ctx = context(
            &spec,
            ward_config,
            ward_pool,
            verifier,
            Outgoing::default(),
            finishing,
        );
        let server = InProcess::start(ctx.clone(), spec.start)
            .await
            .expect("ward starts");
        (WardAt::InProcess { server, ctx }, operator_credential)
    } else {
        let (process, credential, dir) = crate::process::start_ward(&db, 8).await;
        (WardAt::Process { process, dir }, credential)
    };
    let (ward_endpoint, ward_tls) = match &ward {
        WardAt::InProcess { server, ctx } => (server.endpoint(), anonymous_tls(&ctx.config)),
        WardAt::Process { process, .. } => (process.endpoint(), None),
    };
    let ward_channel = |endpoint: &str| {
        lychd_runtime::client::channel_tls(endpoint, ward_tls.as_ref()).expect("endpoint is valid")
    };

    let ward_audience = Office::Ward.name();
    let operator = exchange(
        ward_channel(&ward_endpoint),
        &operator_credential,
        0,
        &[ward_audience],
    )
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
    // The tester's session is bound to the office under test; in Ward's tests, where it is
    // also the token Ward is asked about for other offices, to every office.
    let tester_audiences: Vec<&str> = if office == Office::Ward {
        Office::ALL.iter().map(|o| o.name()).collect()
    } else {
        vec![office.name()]
    };
    let tester = exchange(
        ward_channel(&ward_endpoint),
        &tester_credential,
        0,
        &tester_audiences,
    )
    .await
    .expect("tester session");
    admin
        .allow_describe(&tester_id, office.name())
        .await
        .expect("describe");

    let (ward, ward_dir) = match ward {
        WardAt::InProcess { server, ctx } => {
            return Spawned {
                office,
                server,
                ward: None,
                ward_dir: None,
                db,
                token: tester.token,
                tester_id,
                admin,
                ctx,
            };
        }
        WardAt::Process { process, dir } => (process, dir),
    };

    let service_id = admin
        .ensure_office_principal(office.name())
        .await
        .expect("service principal");
    let credential = admin
        .issue_standing(&service_id)
        .await
        .expect("service credential");
    let mut config = config_for(office, &db);
    config.peers.insert(
        "ward".into(),
        lychd_runtime::config::PeerConfig {
            endpoint: ward_endpoint.clone(),
        },
    );
    if let Some(adjust) = adjust.take() {
        adjust(&mut config);
    }
    // The office's session is bound to Ward and to every peer it is configured to call (as
    // its binary's is).
    let mut audiences = vec![ward_audience.to_owned()];
    audiences.extend(config.peers.keys().filter(|p| *p != ward_audience).cloned());
    let session = SessionSource::start(
        ward_channel(&ward_endpoint),
        SecretString::from(credential),
        audiences,
    );
    assert!(
        session.ready(std::time::Duration::from_secs(10)).await,
        "office session from ward"
    );
    let verifier = Arc::new(lychd_auth::ward::WardVerifier::new(
        ward_channel(&ward_endpoint),
        session.clone(),
    ));
    let pool = runtime_pool(&config, office).await;
    let ctx = context(
        &spec,
        config,
        pool,
        verifier,
        Outgoing::new(Some(session)),
        Finishing::default(),
    );
    let server = InProcess::start(ctx.clone(), spec.start)
        .await
        .expect("office starts");
    Spawned {
        office,
        server,
        ward: Some(ward),
        ward_dir: Some(ward_dir),
        db,
        token: tester.token,
        tester_id,
        admin,
        ctx,
    }
}
