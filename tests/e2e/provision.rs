//! `lychd provision` as deploy/README.md runs it, on a PostgreSQL of its own: the password
//! files, the database with every role's password, Ward's bootstrap with every office's
//! credential through a temporary Ward, and enrollment at a running Ward — each run twice to
//! show it is idempotent — and then a provisioned office starts and serves with nothing but
//! the files those commands wrote.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use lychd_pg::{Cluster, Durability};
use lychd_runtime::Office;
use lychd_testkit::bin_path;

/// A throwaway PostgreSQL (its directory readable by the `postgres` user when tests run as
/// root), stopped and removed when dropped.
struct Postgres {
    cluster: Cluster,
    base: PathBuf,
    port: u16,
}

impl Postgres {
    fn start() -> Postgres {
        let base = std::env::temp_dir().join(format!(
            "lychd-provision-test-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        std::fs::create_dir_all(&base).expect("pg dir");
        let cluster = Cluster::new(&base).expect("postgres binaries");
        cluster.init().expect("initdb");
        let port = lychd_pg::free_port().expect("port");
        cluster
            .start(port, Durability::Throwaway)
            .expect("start postgres");
        Postgres {
            cluster,
            base,
            port,
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.cluster.stop();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// A serving office, killed when dropped.
struct Serving(Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn lychd(args: &[&str]) -> Output {
    let out = Command::new(bin_path("lychd"))
        .args(args)
        .output()
        .expect("run lychd");
    assert!(
        out.status.success(),
        "lychd {args:?}: {}{}",
        crate::text(&out.stdout),
        crate::text(&out.stderr)
    );
    out
}

/// Every file of `dir` with its content.
fn contents(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(e.path()).expect("read"))
        })
        .collect()
}

/// An office configuration like `deploy/config/<office>.toml`, on loopback, with its secrets in
/// `secrets`.
fn config(
    dir: &Path,
    office: Office,
    pg: u16,
    ports: &BTreeMap<Office, u16>,
    secrets: &Path,
) -> PathBuf {
    let s = secrets.display();
    let n = office.name();
    let mut text = format!(
        "[server]\nlisten = \"127.0.0.1:{}\"\n\n[metrics]\nlisten = \"127.0.0.1:0\"\n\n\
         [database]\nurl = \"postgres://{}@127.0.0.1:{pg}/lychd\"\npassword_file = \"{s}/lychd-{n}-app-password\"\n\
         migrate_url = \"postgres://{}@127.0.0.1:{pg}/lychd\"\nmigrate_password_file = \"{s}/lychd-{n}-owner-password\"\n\n\
         [auth]\ncredential_file = \"{s}/lychd-{n}-credential\"\n",
        ports[&office],
        office.runtime_role(),
        office.owner_role(),
    );
    if office != Office::Ward {
        text.push_str(&format!(
            "\n[peers.ward]\nendpoint = \"http://127.0.0.1:{}\"\n",
            ports[&Office::Ward]
        ));
    }
    let path = dir.join(format!("{n}.toml"));
    std::fs::write(&path, text).expect("config");
    path
}

fn office(office: Office, config: &Path, command: &str) -> Output {
    let out = Command::new(bin_path(&office.binary()))
        .arg("--config")
        .arg(config)
        .arg(command)
        .output()
        .expect("run office");
    assert!(
        out.status.success(),
        "{office} {command}: {}",
        crate::text(&out.stderr)
    );
    out
}

fn serve(office: Office, config: &Path) -> Serving {
    Serving(
        Command::new(bin_path(&office.binary()))
            .arg("--config")
            .arg(config)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve"),
    )
}

/// `lychd-<office> healthcheck` until it answers SERVING.
fn wait_healthy(office: Office, config: &Path) {
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let out = Command::new(bin_path(&office.binary()))
            .arg("--config")
            .arg(config)
            .arg("healthcheck")
            .output()
            .expect("healthcheck");
        if out.status.success() {
            return;
        }
        assert!(Instant::now() < deadline, "{office} never healthy");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deployment_is_provisioned_by_commands_and_its_offices_start() {
    let pg = Postgres::start();
    let work = tempfile::tempdir().expect("tmp");
    let secrets = work.path().join("secrets");
    let s = secrets.to_str().expect("utf-8 path");
    let started = Instant::now();

    // 1. Password files: one per role and the superuser's, mode 0600, kept when run again.
    lychd(&["provision", "secrets", "--dir", s]);
    let passwords = contents(&secrets);
    assert_eq!(
        passwords.len(),
        1 + 2 * Office::ALL.len(),
        "{:?}",
        passwords.keys()
    );
    for name in passwords.keys() {
        let mode = std::fs::metadata(secrets.join(name))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name}");
    }
    let again = lychd(&["provision", "secrets", "--dir", s]);
    assert_eq!(contents(&secrets), passwords);
    assert!(!crate::text(&again.stdout).contains(&passwords["lychd-ward-app-password"]));

    // 2. The database, roles, schemas and passwords (twice: nothing changes).
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", pg.port);
    let first = lychd(&["provision", "database", "--url", &url, "--secrets-dir", s]);
    assert!(crate::text(&first.stdout).contains("database `lychd` created"));
    let second = lychd(&["provision", "database", "--url", &url, "--secrets-dir", s]);
    assert!(crate::text(&second.stdout).contains("database `lychd` exists"));
    assert_eq!(contents(&secrets), passwords);
    let mut conn = lychd_pg::superuser_connection(pg.port, "postgres")
        .await
        .expect("connect");
    let without: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_authid WHERE rolname LIKE 'lychd\\_%' AND rolpassword IS NULL",
    )
    .fetch_one(&mut conn)
    .await
    .expect("roles");
    assert_eq!(without, 0, "every office role has its password");

    // 3. Migrations as each owner role, with the password files.
    let ports: BTreeMap<Office, u16> = Office::ALL
        .into_iter()
        .map(|o| (o, lychd_pg::free_port().expect("port")))
        .collect();
    let configs: BTreeMap<Office, PathBuf> = Office::ALL
        .into_iter()
        .map(|o| (o, config(work.path(), o, pg.port, &ports, &secrets)))
        .collect();
    for (o, c) in &configs {
        office(*o, c, "migrate");
    }

    // 4. Ward's bootstrap and every office's credential, through a temporary Ward; twice.
    let ward_bin = bin_path("lychd-ward");
    let ward_config = configs[&Office::Ward].to_str().expect("utf-8");
    let bootstrap = [
        "provision",
        "bootstrap",
        "--config",
        ward_config,
        "--secrets-dir",
        s,
        "--ward-bin",
        ward_bin.to_str().expect("utf-8"),
    ];
    lychd(&bootstrap);
    let issued = contents(&secrets);
    assert!(issued.contains_key("lychd-operator-credential"));
    for o in Office::ALL {
        assert!(issued.contains_key(&format!("lychd-{o}-credential")), "{o}");
    }
    lychd(&bootstrap);
    assert_eq!(
        contents(&secrets),
        issued,
        "a second bootstrap changes nothing"
    );

    // 5. Ward serves with its own credential; a removed credential is issued again by
    //    `enroll`, and the office then starts with the files alone.
    let _ward = serve(Office::Ward, &configs[&Office::Ward]);
    wait_healthy(Office::Ward, &configs[&Office::Ward]);
    std::fs::remove_file(secrets.join("lychd-archive-credential")).expect("rm");
    let ward_url = format!("http://127.0.0.1:{}", ports[&Office::Ward]);
    lychd(&[
        "provision",
        "enroll",
        "--ward",
        &ward_url,
        "--secrets-dir",
        s,
    ]);
    let enrolled = contents(&secrets);
    assert_ne!(
        enrolled["lychd-archive-credential"], issued["lychd-archive-credential"],
        "a new credential"
    );
    assert_eq!(
        enrolled["lychd-helmloop-credential"],
        issued["lychd-helmloop-credential"]
    );
    let _archive = serve(Office::Archive, &configs[&Office::Archive]);
    wait_healthy(Office::Archive, &configs[&Office::Archive]);
    eprintln!("provisioned and serving after {:?}", started.elapsed());
}
