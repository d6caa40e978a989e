//! The shared test cluster and per-test databases.

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;

use fs4::fs_std::FileExt;
use lychd_runtime::Office;
use lychd_runtime::cli::OfficeSpec;
use sha2::{Digest, Sha256};
use sqlx::Connection;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgConnection};

/// A database of its own for one test, provisioned with every office's roles and schema, and
/// migrated for the offices the test asked for.
#[derive(Debug, Clone)]
pub struct TestDb {
    pub host: String,
    pub port: u16,
    pub name: String,
    /// Superuser URL of the cluster's maintenance database (for tests that provision).
    pub admin_url: String,
}

impl TestDb {
    /// URL for `role` on this database (trust auth on loopback; no password).
    pub fn url(&self, role: &str) -> String {
        format!(
            "postgres://{role}@{}:{}/{}",
            self.host, self.port, self.name
        )
    }

    pub fn runtime_url(&self, office: Office) -> String {
        self.url(&office.runtime_role())
    }

    pub fn owner_url(&self, office: Office) -> String {
        self.url(&office.owner_role())
    }

    /// Connect as `role`, with the office schema on the search path.
    pub async fn connect_as(&self, role: &str, office: Office) -> PgConnection {
        let opts = lychd_runtime::db::connect_options(&self.url(role), None, office)
            .expect("invariant: test URLs are well formed");
        PgConnection::connect_with(&opts)
            .await
            .expect("test database accepts connections")
    }

    pub async fn superuser(&self) -> PgConnection {
        let opts = PgConnectOptions::new()
            .host(&self.host)
            .port(self.port)
            .username(&self.admin_user())
            .database(&self.name);
        PgConnection::connect_with(&opts)
            .await
            .expect("test database accepts the superuser")
    }

    fn admin_user(&self) -> String {
        self.admin_url
            .split_once("://")
            .and_then(|(_, r)| r.split('@').next())
            .map(|u| u.split(':').next().unwrap_or(u).to_owned())
            .unwrap_or_else(|| "postgres".into())
    }
}

struct Server {
    host: String,
    port: u16,
    admin_url: String,
    /// The test kit's own local cluster or container (not one named by
    /// `LYCHD_TEST_DATABASE_URL`): only
    /// there are the processes that created its databases visible in `/proc`.
    own: bool,
}

static SERVER: OnceLock<Server> = OnceLock::new();

fn server() -> &'static Server {
    SERVER.get_or_init(|| match start_server() {
        Ok(s) => s,
        Err(e) => panic!("\n\nlychd-testkit: no PostgreSQL for tests: {e}\n\n"),
    })
}

fn start_server() -> Result<Server, String> {
    if let Ok(url) = std::env::var("LYCHD_TEST_DATABASE_URL") {
        let opts: PgConnectOptions = url
            .parse()
            .map_err(|e| format!("LYCHD_TEST_DATABASE_URL: {e}"))?;
        return Ok(Server {
            host: opts.get_host().to_owned(),
            port: opts.get_port(),
            admin_url: url,
            own: false,
        });
    }
    if std::env::var("LYCHD_TEST_CONTAINERS").as_deref() == Ok("1") {
        let port = crate::container::start()?;
        return Ok(Server {
            host: "127.0.0.1".into(),
            port,
            admin_url: lychd_pg::superuser_url(port, "postgres"),
            // Its databases were created by processes of this machine: orphans are collected.
            own: true,
        });
    }
    let durability = durability()?;
    let name = cluster_name(durability);
    let base = crate::target_dir().join(name);
    std::fs::create_dir_all(crate::target_dir()).map_err(|e| e.to_string())?;
    // One cluster per run, shared by every test process: whoever holds the lock starts it (or
    // finds it running) and the others reuse it. It stays up for later runs.
    let lock_path = crate::target_dir().join(format!("{name}.lock"));
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    lock.lock_exclusive()
        .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
    let cluster = lychd_pg::Cluster::new(&base).map_err(|e| e.to_string())?;
    let port = match cluster.running_port() {
        Some(port) => port,
        None => {
            cluster.init().map_err(|e| e.to_string())?;
            let port = lychd_pg::free_port().map_err(|e| e.to_string())?;
            cluster.start(port, durability).map_err(|e| e.to_string())?;
            port
        }
    };
    let _ = writeln!(&lock, "{port}");
    let _ = FileExt::unlock(&lock);
    Ok(Server {
        host: "127.0.0.1".into(),
        port,
        admin_url: lychd_pg::superuser_url(port, "postgres"),
        own: true,
    })
}

async fn admin() -> PgConnection {
    let s = server();
    PgConnection::connect(&s.admin_url)
        .await
        .expect("test cluster accepts the superuser")
}

/// The offices whose migrations a test database holds, each once, in [`Office`] order.
pub(crate) type Migrations = Vec<(Office, &'static Migrator)>;

fn normalized(mut set: Migrations) -> Migrations {
    set.sort_by_key(|(office, _)| *office);
    set.dedup_by_key(|(office, _)| *office);
    set
}

/// Digest of a set of offices' migrations: each set has its own template, rebuilt when one of
/// its migrations changes.
fn migrations_digest(set: &Migrations) -> String {
    let mut h = Sha256::new();
    for (office, migrator) in set {
        h.update(office.name());
        for m in migrator.iter() {
            h.update(m.version.to_le_bytes());
            h.update(&m.checksum);
        }
    }
    hex::encode(&h.finalize()[..6])
}

/// Make sure the template database of `set` exists: every office provisioned, the offices of
/// `set` migrated (built once per cluster and migration set).
async fn template(set: &Migrations) -> String {
    let name = format!("lychd_tpl_{}", migrations_digest(set));
    let mut admin = admin().await;
    sqlx::query("SELECT pg_advisory_lock(7374)")
        .execute(&mut admin)
        .await
        .expect("advisory lock");
    let ready: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)",
    )
    .bind(&name)
    .fetch_one(&mut admin)
    .await
    .expect("query pg_database");
    if !ready {
        let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS \"{name}\""))
            .execute(&mut admin)
            .await;
        let s = server();
        lychd_pg::provision(s.port, &name)
            .await
            .expect("provision template database");
        let db = TestDb {
            host: s.host.clone(),
            port: s.port,
            name: name.clone(),
            admin_url: s.admin_url.clone(),
        };
        for &(office, migrator) in set {
            let opts = lychd_runtime::db::connect_options(&db.owner_url(office), None, office)
                .expect("owner url");
            let pool = lychd_runtime::db::pool(opts, 1)
                .await
                .expect("owner connects to template");
            lychd_runtime::db::migrate(&pool, office, migrator)
                .await
                .expect("migrate template");
            pool.close().await;
        }
        sqlx::raw_sql(&format!("ALTER DATABASE \"{name}\" WITH IS_TEMPLATE true"))
            .execute(&mut admin)
            .await
            .expect("mark template");
    }
    sqlx::query("SELECT pg_advisory_unlock(7374)")
        .execute(&mut admin)
        .await
        .expect("advisory unlock");
    name
}

/// `t_<pid>_<uuid>`: the creating process is part of the name, so that databases left behind by
/// processes that are gone can be found.
fn new_name() -> String {
    format!("t_{}_{}", std::process::id(), uuid::Uuid::new_v4().simple())
}

/// Is the process that created test database `name` still running? Names without a process
/// (an older scheme) have none.
fn creator_alive(name: &str) -> bool {
    name.strip_prefix("t_")
        .and_then(|rest| rest.split_once('_'))
        .and_then(|(pid, _)| pid.parse::<u32>().ok())
        .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
}

/// Drop the test databases of processes that are gone (finished or killed tests and benches,
/// of this run or earlier ones). The cluster outlives runs by design; without this it kept
/// every test's database, and autovacuum's visits to hundreds of idle databases were a steady
/// background load (the lease bench's p99 at 500 calls/s was 30–40 % higher with 280 of them).
/// Only on the test kit's own cluster; returns how many it dropped.
pub async fn collect_garbage() -> usize {
    if !server().own {
        return 0;
    }
    let mut admin = admin().await;
    sqlx::query("SELECT pg_advisory_lock(7375)")
        .execute(&mut admin)
        .await
        .expect("advisory lock");
    let dropped = drop_orphans(&mut admin).await;
    let _ = sqlx::query("SELECT pg_advisory_unlock(7375)")
        .execute(&mut admin)
        .await;
    dropped
}

/// [`collect_garbage`] once per process, skipped while another process collects.
async fn collect_garbage_once(admin: &mut PgConnection) {
    static ONCE: OnceLock<()> = OnceLock::new();
    if !server().own || ONCE.set(()).is_err() {
        return;
    }
    let collector: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(7375)")
        .fetch_one(&mut *admin)
        .await
        .unwrap_or(false);
    if collector {
        drop_orphans(admin).await;
        let _ = sqlx::query("SELECT pg_advisory_unlock(7375)")
            .execute(&mut *admin)
            .await;
    }
}

async fn drop_orphans(admin: &mut PgConnection) -> usize {
    let names: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 't\\_%'")
            .fetch_all(&mut *admin)
            .await
            .unwrap_or_default();
    let mut dropped = 0;
    for name in names.iter().filter(|n| !creator_alive(n)) {
        // Best effort: a database that cannot be dropped now is tried again by a later process.
        let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        if sqlx::raw_sql(&sql).execute(&mut *admin).await.is_ok() {
            dropped += 1;
        }
    }
    dropped
}

/// A fresh database with every office provisioned and Ward migrated (copied from a template):
/// what a test of Ward's store needs, and the schema every in-process office's Ward uses.
pub async fn test_db() -> TestDb {
    migrated(vec![(Office::Ward, ward_migrator().await)]).await
}

/// Ward's migrations, read from its crate's `migrations/` directory: the same files its binary
/// embeds (`sqlx::migrate!`), so the kit migrates Ward's schema without linking Ward.
pub(crate) async fn ward_migrator() -> &'static Migrator {
    static WARD: tokio::sync::OnceCell<Migrator> = tokio::sync::OnceCell::const_new();
    WARD.get_or_init(|| async {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../services/ward/migrations");
        Migrator::new(dir.as_path())
            .await
            .unwrap_or_else(|e| panic!("Ward's migrations at {}: {e}", dir.display()))
    })
    .await
}

/// A fresh database with every office provisioned and the offices of `specs` migrated (copied
/// from the template of exactly that set), e.g. `test_db_for(&[lychd_dispatcher::spec()])`.
/// An empty `specs` gives a database with no migration applied.
pub async fn test_db_for(specs: &[OfficeSpec]) -> TestDb {
    migrated(specs.iter().map(|s| (s.office, s.migrator)).collect()).await
}

pub(crate) async fn migrated(set: Migrations) -> TestDb {
    let set = normalized(set);
    let tpl = template(&set).await;
    let s = server();
    let name = new_name();
    let mut admin = admin().await;
    collect_garbage_once(&mut admin).await;
    sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\" TEMPLATE \"{tpl}\""))
        .execute(&mut admin)
        .await
        .expect("create test database from template");
    // Database-level privileges are not copied from a template: close those doors again.
    sqlx::raw_sql(&lychd_runtime::db::provision_database_sql(&name))
        .execute(&mut admin)
        .await
        .expect("database privileges");
    TestDb {
        host: s.host.clone(),
        port: s.port,
        name,
        admin_url: s.admin_url.clone(),
    }
}

/// A fresh database with roles and schemas provisioned but no migration applied.
pub async fn test_db_unmigrated() -> TestDb {
    let s = server();
    let name = new_name();
    lychd_pg::provision(s.port, &name)
        .await
        .expect("provision test database");
    TestDb {
        host: s.host.clone(),
        port: s.port,
        name,
        admin_url: s.admin_url.clone(),
    }
}

/// Where the shared cluster lives (for tools that stop it).
pub fn cluster_dir() -> PathBuf {
    crate::target_dir().join(cluster_name(lychd_pg::Durability::Throwaway))
}

/// Where the cluster this process uses lives (the one [`DURABILITY_ENV`] selects).
pub(crate) fn active_cluster_dir() -> PathBuf {
    let durability = durability().unwrap_or(lychd_pg::Durability::Throwaway);
    crate::target_dir().join(cluster_name(durability))
}

/// The environment variable that selects the test kit's local cluster: unset or `throwaway`
/// (the default: `fsync`, `synchronous_commit` and `full_page_writes` off, under
/// `target/lychd-test-pg/`), or `durable` (production durability: those settings at their
/// defaults, a second cluster under `target/lychd-test-pg-durable/`). For benches that must
/// also be measured as a deployment commits; tests use the default.
pub const DURABILITY_ENV: &str = "LYCHD_TEST_PG_DURABILITY";

/// The durability the test kit's local cluster runs with in this process ([`DURABILITY_ENV`]).
pub fn durability() -> Result<lychd_pg::Durability, String> {
    match std::env::var(DURABILITY_ENV).as_deref() {
        Err(_) | Ok("") | Ok("throwaway") => Ok(lychd_pg::Durability::Throwaway),
        Ok("durable") => Ok(lychd_pg::Durability::Durable),
        Ok(other) => Err(format!(
            "{DURABILITY_ENV}={other:?}: expected `throwaway` or `durable`"
        )),
    }
}

fn cluster_name(durability: lychd_pg::Durability) -> &'static str {
    match durability {
        lychd_pg::Durability::Throwaway => "lychd-test-pg",
        lychd_pg::Durability::Durable => "lychd-test-pg-durable",
    }
}

/// Stop the durable cluster (a bench that started it stops it when done; the throwaway one
/// stays up for later runs). Idempotent.
pub fn stop_durable_cluster() -> Result<(), String> {
    let base = crate::target_dir().join(cluster_name(lychd_pg::Durability::Durable));
    if !base.join("data").is_dir() {
        return Ok(());
    }
    lychd_pg::Cluster::new(&base)
        .and_then(|c| c.stop())
        .map_err(|e| e.to_string())
}
