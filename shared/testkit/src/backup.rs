//! Backup and restore as `docs/operations.md` ("Backup and restore") tells operators to do it,
//! for the tests and the bench that check it: `pg_dumpall --roles-only` and `pg_dump -Fc` of a
//! database, a fresh cluster of the machine's PostgreSQL (the same launcher as the test
//! cluster), the roles replayed with `psql` and the dump restored with `pg_restore`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::TestDb;

/// A client tool of the machine's PostgreSQL (`pg_dump`, `pg_restore`, `psql`, …).
pub fn tool(name: &str) -> PathBuf {
    lychd_pg::Binaries::locate()
        .unwrap_or_else(|e| panic!("{e}"))
        .dir
        .join(name)
}

fn run(mut command: Command, what: &str) -> Duration {
    let started = Instant::now();
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    started.elapsed()
}

fn connection(command: &mut Command, host: &str, port: u16) {
    command.args(["-h", host, "-p", &port.to_string(), "-U", "postgres"]);
}

/// `pg_dumpall --roles-only` of the cluster of `db` into `file` (roles, their attributes and
/// settings; the passwords' hashes when there are any).
pub fn dump_roles(db: &TestDb, file: &Path) -> Duration {
    let mut c = Command::new(tool("pg_dumpall"));
    connection(&mut c, &db.host, db.port);
    c.args(["--roles-only", "--no-role-passwords", "-f"])
        .arg(file);
    run(c, "pg_dumpall --roles-only")
}

/// `pg_dump -Fc` of the database of `db` into `file` (one consistent snapshot of every schema);
/// `schema`: only that office's schema.
pub fn dump(db: &TestDb, schema: Option<&str>, file: &Path) -> Duration {
    let mut c = Command::new(tool("pg_dump"));
    connection(&mut c, &db.host, db.port);
    c.args(["-Fc", "-f"]).arg(file);
    if let Some(s) = schema {
        c.args(["--schema", s]);
    }
    c.arg(&db.name);
    run(c, "pg_dump")
}

/// Restore one office's schema dump (`dump(db, Some(schema), …)`) into the database of `db`,
/// after dropping that schema (the office stopped): `DROP SCHEMA … CASCADE` with `psql`, then
/// `pg_restore --exit-on-error`.
pub fn restore_schema(db: &TestDb, schema: &str, dump: &Path) -> Duration {
    let mut c = Command::new(tool("psql"));
    connection(&mut c, &db.host, db.port);
    c.args(["-q", "-v", "ON_ERROR_STOP=1", "-d", &db.name, "-c"])
        .arg(format!("DROP SCHEMA {schema} CASCADE"));
    run(c, "psql drop schema");
    let mut c = Command::new(tool("pg_restore"));
    connection(&mut c, &db.host, db.port);
    c.args(["--exit-on-error", "-d", &db.name]).arg(dump);
    run(c, "pg_restore")
}

/// A cluster of its own (the machine's PostgreSQL binaries), stopped when dropped.
pub struct FreshCluster {
    pub cluster: lychd_pg::Cluster,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl FreshCluster {
    pub fn start() -> FreshCluster {
        Self::start_with(lychd_pg::Durability::Throwaway)
    }

    /// [`FreshCluster::start`] with `durability` (`Durable` for timings that mean something).
    pub fn start_with(durability: lychd_pg::Durability) -> FreshCluster {
        let dir = tempfile::tempdir().expect("temp dir");
        // The server runs as `postgres` when we are root: it must reach its directory.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        let cluster =
            lychd_pg::Cluster::new(dir.path().join("cluster")).unwrap_or_else(|e| panic!("{e}"));
        cluster.init().unwrap_or_else(|e| panic!("{e}"));
        let port = lychd_pg::free_port().expect("free port");
        cluster
            .start(port, durability)
            .unwrap_or_else(|e| panic!("{e}"));
        FreshCluster {
            cluster,
            port,
            _dir: dir,
        }
    }

    /// `psql -f roles.sql` (the `postgres` role exists already: that one statement fails and
    /// the rest run), then `pg_restore --create --exit-on-error` of `dump` (the database under
    /// its own name, with its settings and grants). Returns the restore's time (roles excluded).
    pub fn restore(&self, roles: &Path, dump: &Path) -> Duration {
        let mut c = Command::new(tool("psql"));
        connection(&mut c, "127.0.0.1", self.port);
        c.args(["-q", "-d", "postgres", "-f"]).arg(roles);
        run(c, "psql roles");
        let mut c = Command::new(tool("pg_restore"));
        connection(&mut c, "127.0.0.1", self.port);
        c.args(["--create", "--exit-on-error", "-d", "postgres"])
            .arg(dump);
        run(c, "pg_restore")
    }

    /// Superuser URL of `database` on this cluster.
    pub fn url(&self, database: &str) -> String {
        lychd_pg::superuser_url(self.port, database)
    }
}

impl Drop for FreshCluster {
    fn drop(&mut self) {
        let _ = self.cluster.stop();
    }
}
