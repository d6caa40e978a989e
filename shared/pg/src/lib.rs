//! A local PostgreSQL cluster for development and tests, started from the machine's binaries
//! (no container engine): finds `initdb`/`pg_ctl`/`postgres` on `PATH` or under
//! `/usr/lib/postgresql/*/bin`, runs them as the `postgres` system user when this process is
//! root (initdb refuses root), listens on loopback TCP only, and provisions the office roles
//! and schemas.
//!
//! Invariant: development and test infrastructure only; no office links this crate.

use std::path::{Path, PathBuf};
use std::process::Command;

use lychd_runtime::db::provision_all_sql;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

pub const INSTALL_HINT: &str = "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH or under \
     /usr/lib/postgresql/*/bin: install them, e.g. `apt-get install -y postgresql` (Debian/Ubuntu) or \
     `dnf install -y postgresql-server` (Fedora)";

#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("{INSTALL_HINT}")]
    NotInstalled,
    #[error(
        "running as root, but there is no `postgres` system user to run PostgreSQL as (initdb refuses root): `useradd --system postgres`, or install the postgresql package which creates it"
    )]
    NoPostgresUser,
    #[error("{step} failed: {detail}")]
    Step { step: &'static str, detail: String },
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("sql: {0}")]
    Sql(#[from] sqlx::Error),
}

/// Where the server binaries are.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub dir: PathBuf,
}

impl Binaries {
    pub fn locate() -> Result<Self, PgError> {
        let has_all = |dir: &Path| {
            ["initdb", "pg_ctl", "postgres"]
                .iter()
                .all(|b| dir.join(b).is_file())
        };
        if let Some(path) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&path) {
                let initdb = dir.join("initdb");
                if initdb.is_file() {
                    let real = std::fs::canonicalize(&initdb)?;
                    if let Some(real_dir) = real.parent().filter(|d| has_all(d)) {
                        return Ok(Binaries {
                            dir: real_dir.to_owned(),
                        });
                    }
                }
            }
        }
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let v = e.file_name().to_str()?.parse::<u32>().ok()?;
                let dir = e.path().join("bin");
                has_all(&dir).then_some((v, dir))
            })
            .collect();
        versions.sort();
        versions
            .pop()
            .map(|(_, dir)| Binaries { dir })
            .ok_or(PgError::NotInstalled)
    }

    fn command(&self, name: &str, run_as: Option<RunAs>) -> Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(self.dir.join(name));
        if let Some(user) = run_as {
            cmd.uid(user.uid).gid(user.gid);
        }
        // Own process group: a terminal's Ctrl-C reaches the supervisor, which stops the
        // server in order, instead of reaching the postmaster directly.
        cmd.process_group(0);
        cmd.env_remove("PGDATA").env("LC_ALL", "C");
        cmd
    }
}

#[derive(Debug, Clone, Copy)]
struct RunAs {
    uid: u32,
    gid: u32,
}

fn run_as() -> Result<Option<RunAs>, PgError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let user = nix::unistd::User::from_name("postgres")
        .map_err(|e| PgError::Step {
            step: "looking up the postgres user",
            detail: e.to_string(),
        })?
        .ok_or(PgError::NoPostgresUser)?;
    Ok(Some(RunAs {
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
    }))
}

/// A cluster under `base` (`base/data`, `base/postgres.log`).
#[derive(Debug, Clone)]
pub struct Cluster {
    pub base: PathBuf,
    bins: Binaries,
    run_as: Option<RunAs>,
}

/// How a cluster runs: durable (dev stack) or fast and throwaway (tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Durable,
    Throwaway,
}

impl Cluster {
    pub fn new(base: impl Into<PathBuf>) -> Result<Self, PgError> {
        Ok(Cluster {
            base: base.into(),
            bins: Binaries::locate()?,
            run_as: run_as()?,
        })
    }

    pub fn data_dir(&self) -> PathBuf {
        self.base.join("data")
    }

    pub fn log_file(&self) -> PathBuf {
        self.base.join("postgres.log")
    }

    pub fn is_initialized(&self) -> bool {
        self.data_dir().join("PG_VERSION").is_file()
    }

    /// `initdb` once (trust authentication on loopback only, superuser `postgres`, UTF-8, C locale).
    pub fn init(&self) -> Result<(), PgError> {
        std::fs::create_dir_all(&self.base)?;
        self.give_to_server_user(&self.base)?;
        if self.is_initialized() {
            return Ok(());
        }
        let out = self
            .bins
            .command("initdb", self.run_as)
            .arg("-D")
            .arg(self.data_dir())
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .output()?;
        if !out.status.success() {
            return Err(PgError::Step {
                step: "initdb",
                detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(())
    }

    fn give_to_server_user(&self, path: &Path) -> Result<(), PgError> {
        if let Some(user) = self.run_as {
            nix::unistd::chown(
                path,
                Some(nix::unistd::Uid::from_raw(user.uid)),
                Some(nix::unistd::Gid::from_raw(user.gid)),
            )
            .map_err(|e| PgError::Step {
                step: "chown to postgres",
                detail: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// Serve TLS from the next start: `cert_pem` and `key_pem` written to the data directory
    /// (the key readable by the server's user only), switched on by `lychd-tls.conf`, which
    /// `postgresql.conf` includes (once; a later call replaces the certificate).
    pub fn enable_tls(&self, cert_pem: &str, key_pem: &str) -> Result<(), PgError> {
        use std::os::unix::fs::PermissionsExt;
        let data = self.data_dir();
        for (name, pem, mode) in [
            ("server.crt", cert_pem, 0o644),
            ("server.key", key_pem, 0o600),
            (
                "lychd-tls.conf",
                "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n",
                0o644,
            ),
        ] {
            let path = data.join(name);
            std::fs::write(&path, pem)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
            self.give_to_server_user(&path)?;
        }
        let conf = data.join("postgresql.conf");
        let text = std::fs::read_to_string(&conf)?;
        let include = "include_if_exists = 'lychd-tls.conf'";
        if !text.contains(include) {
            std::fs::write(&conf, format!("{text}\n{include}\n"))?;
        }
        Ok(())
    }

    /// Start on `127.0.0.1:port` (TCP only, no unix socket) and wait until it accepts.
    pub fn start(&self, port: u16, durability: Durability) -> Result<(), PgError> {
        let mut opts = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=400"
        );
        if durability == Durability::Throwaway {
            opts.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        let out = self
            .bins
            .command("pg_ctl", self.run_as)
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.log_file())
            .args(["-w", "-t", "60", "-o", &opts, "start"])
            .output()?;
        if !out.status.success() {
            let log = std::fs::read_to_string(self.log_file()).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(10).collect();
            return Err(PgError::Step {
                step: "pg_ctl start",
                detail: format!(
                    "{}; log tail: {}",
                    String::from_utf8_lossy(&out.stderr).trim(),
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                ),
            });
        }
        Ok(())
    }

    /// Stop (fast mode: active sessions are disconnected). Idempotent.
    pub fn stop(&self) -> Result<(), PgError> {
        if !self.data_dir().join("postmaster.pid").exists() {
            return Ok(());
        }
        let out = self
            .bins
            .command("pg_ctl", self.run_as)
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "fast", "-w", "stop"])
            .output()?;
        if !out.status.success() && self.data_dir().join("postmaster.pid").exists() {
            return Err(PgError::Step {
                step: "pg_ctl stop",
                detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(())
    }

    /// The port in a running cluster's `postmaster.pid`, if it runs.
    pub fn running_port(&self) -> Option<u16> {
        let pid_file = std::fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        let pid: i32 = pid_file.lines().next()?.trim().parse().ok()?;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).ok()?;
        pid_file.lines().nth(3)?.trim().parse().ok()
    }
}

/// `postgres://postgres@127.0.0.1:PORT/DB` (trust authentication on loopback).
pub fn superuser_url(port: u16, database: &str) -> String {
    format!("postgres://postgres@127.0.0.1:{port}/{database}")
}

/// A free loopback TCP port for a server about to be started (bound and released), for dev
/// and tests.
///
/// Chosen at random BELOW the kernel's ephemeral range, never from it: a port the kernel hands
/// out for a bind to port 0 (a metrics endpoint on `127.0.0.1:0`, any test's client or
/// listener) can then never be this one between its release here and the server's bind. A port
/// taken from the ephemeral range was seen handed to an office's own metrics endpoint just
/// before its gRPC server bound it (`Address already in use`). No port is handed out twice by
/// one process; the range stops [`HEADROOM`] short of the ephemeral range, so `lychd dev`'s
/// ports counted up from one of these stay below it too. Where no such range exists (an
/// ephemeral range starting below [`FLOOR`] + [`HEADROOM`]), the kernel chooses.
pub fn free_port() -> Result<u16, PgError> {
    use std::hash::BuildHasher;
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());

    let top = ephemeral_start().saturating_sub(HEADROOM);
    if top > FLOOR {
        let span = u64::from(top - FLOOR);
        // Random keys of their own for this call: each attempt's hash is a fresh pick.
        let random = std::collections::hash_map::RandomState::new();
        for attempt in 0..256u32 {
            let offset = random.hash_one(attempt) % span;
            let port = FLOOR + u16::try_from(offset).unwrap_or(0);
            let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
            if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                given.insert(port);
                return Ok(port);
            }
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The lowest port [`free_port`] chooses.
pub const FLOOR: u16 = 10_000;
/// Ports left free between [`free_port`]'s range and the ephemeral range.
pub const HEADROOM: u16 = 64;

/// The first port of the kernel's ephemeral range (Linux's `ip_local_port_range`; 32768, its
/// default, where it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

pub async fn superuser_connection(port: u16, database: &str) -> Result<PgConnection, PgError> {
    let opts = PgConnectOptions::new()
        .host("127.0.0.1")
        .port(port)
        .username("postgres")
        .database(database)
        .application_name("lychd-pg");
    Ok(PgConnection::connect_with(&opts).await?)
}

/// Create `database` if missing and provision every office's roles and schema in it.
pub async fn provision(port: u16, database: &str) -> Result<(), PgError> {
    let mut admin = superuser_connection(port, "postgres").await?;
    // Roles are cluster-wide: serialize provisioning across processes (advisory locks are
    // per database, so the lock is taken in `postgres` and held while the target is provisioned).
    sqlx::query("SELECT pg_advisory_lock(7373)")
        .execute(&mut admin)
        .await?;
    let result = provision_locked(&mut admin, port, database).await;
    sqlx::query("SELECT pg_advisory_unlock(7373)")
        .execute(&mut admin)
        .await?;
    admin.close().await?;
    result
}

async fn provision_locked(
    admin: &mut PgConnection,
    port: u16,
    database: &str,
) -> Result<(), PgError> {
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(database)
            .fetch_one(&mut *admin)
            .await?;
    if !exists {
        sqlx::raw_sql(&format!("CREATE DATABASE \"{database}\""))
            .execute(&mut *admin)
            .await?;
    }
    let mut conn = superuser_connection(port, database).await?;
    for sql in provision_all_sql(database) {
        sqlx::raw_sql(&sql).execute(&mut conn).await?;
    }
    conn.close().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_below_the_ephemeral_range_distinct_and_bindable() {
        let top = ephemeral_start().saturating_sub(HEADROOM);
        assert!(
            top > FLOOR,
            "this machine's ephemeral range starts at {}",
            ephemeral_start()
        );
        let ports: Vec<u16> = (0..200).map(|_| free_port().expect("a port")).collect();
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port was handed out twice");
        for port in ports {
            assert!(
                (FLOOR..top).contains(&port),
                "{port} outside {FLOOR}..{top}"
            );
        }
        // A port given out is free to bind (the last one: the others were checked as they came).
        let last = free_port().expect("a port");
        std::net::TcpListener::bind(("127.0.0.1", last)).expect("bind the port given");
        // And a kernel-chosen port never falls in the range.
        let kernel = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 0");
        let chosen = kernel.local_addr().expect("addr").port();
        assert!(
            chosen >= top,
            "the kernel chose {chosen}, inside {FLOOR}..{top}"
        );
    }
}
