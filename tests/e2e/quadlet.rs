//! Every unit file of `deploy/quadlet/`, parsed as systemd INI here (no external tool), checked
//! against the deployment's invariants for every office of `Office::ALL` (deploy/README.md):
//! each office has a migration unit and an office unit; an office serves with
//! `lychd-<office> serve`, is healthy by `lychd-<office> healthcheck` (`Notify=healthy`), runs
//! read-only, without capabilities or new privileges, as a non-root user, gets its secrets as
//! mounted Podman secrets (exactly the files its shipped configuration names) and never through
//! the environment, publishes its port on loopback only, and starts after PostgreSQL, its
//! migration and Ward; PostgreSQL is on the internal network alone; the target starts them all.
//! The operators' console (`lychd-console.container`) keeps the same container basics, holds no
//! secret but the offices' CA certificate (`lychd-tls-ca`: it verifies the offices' TLS) and
//! mounts nothing (it has no credential of its own), is not on the internal network,
//! publishes exactly `127.0.0.1:50080`, starts after Ward and is started by the target.
//! A copy with one invariant broken must fail the check (`each_broken_invariant_is_caught`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use lychd_e2e::quadlet::{Unit, load};
use lychd_runtime::Office;
use lychd_runtime::config::OfficeConfig;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

const TARGET: &str = "lychd.target";
const INTERNAL: &str = "lychd-internal.network";
const POSTGRES: &str = "lychd-postgres.service";
const PROVISION: &str = "lychd-provision.service";
const WARD: &str = "lychd-ward.service";
const CONSOLE: &str = "lychd-console.container";
/// The console's published port (`lychd-console serve`'s default).
const CONSOLE_PORT: u16 = 50080;

/// Names that carry a secret when they appear in an environment variable.
fn secret_like(s: &str) -> bool {
    let s = s.to_ascii_uppercase();
    ["PASSWORD", "SECRET", "TOKEN", "CREDENTIAL", "PASSWD", "KEY"]
        .iter()
        .any(|w| s.contains(w))
}

/// The checks every container unit passes, whatever it runs.
fn container_basics(name: &str, unit: &Unit, p: &mut Vec<String>) {
    let c = "Container";
    for (key, want) in [("ReadOnly", "true"), ("NoNewPrivileges", "true")] {
        if unit.one(c, key) != Some(want) {
            p.push(format!("{name}: {key}={want} missing"));
        }
    }
    if !unit
        .all(c, "DropCapability")
        .iter()
        .any(|v| v.eq_ignore_ascii_case("all"))
    {
        p.push(format!("{name}: DropCapability=all missing"));
    }
    if !unit.all(c, "AddCapability").is_empty() {
        p.push(format!("{name}: adds capabilities"));
    }
    match unit.one(c, "User") {
        None => p.push(format!(
            "{name}: no User= (the image's default is not checked here)"
        )),
        Some(u) => {
            let user = u.split(':').next().unwrap_or(u);
            if user.is_empty() || user == "0" || user == "root" {
                p.push(format!("{name}: runs as root (User={u})"));
            }
        }
    }
    for env in unit.all(c, "Environment") {
        let (key, value) = env.split_once('=').unwrap_or((env, ""));
        let by_reference = key.ends_with("_FILE") && value.starts_with("/run/secrets/");
        if (secret_like(key) || secret_like(value)) && !by_reference {
            p.push(format!("{name}: a secret in Environment= ({key})"));
        }
    }
    if !unit.all(c, "EnvironmentFile").is_empty()
        || !unit.all("Service", "EnvironmentFile").is_empty()
    {
        p.push(format!(
            "{name}: EnvironmentFile= (secrets go in as mounted Podman secrets)"
        ));
    }
    for env in unit.all("Service", "Environment") {
        if secret_like(env) {
            p.push(format!("{name}: a secret in [Service] Environment="));
        }
    }
    for secret in unit.all(c, "Secret") {
        let options: Vec<&str> = secret.split(',').skip(1).collect();
        if !options.contains(&"type=mount") {
            p.push(format!(
                "{name}: Secret={secret} is not type=mount (a file)"
            ));
        }
    }
    for port in unit.all(c, "PublishPort") {
        if !port.starts_with("127.0.0.1:") {
            p.push(format!("{name}: PublishPort={port} is not on loopback"));
        }
    }
    if unit.one(c, "Image").is_none() {
        p.push(format!("{name}: no Image="));
    }
    if !unit.list("Unit", "PartOf").contains(TARGET) {
        p.push(format!(
            "{name}: not PartOf={TARGET} (it would not stop with the stack)"
        ));
    }
}

/// The secret names an office's shipped configuration reads from `/run/secrets/`.
fn configured_secrets(office: Office, which: &[&str]) -> BTreeSet<String> {
    let file = deploy().join(format!("config/{office}.toml"));
    let cfg = OfficeConfig::load(office, Some(&file), Vec::new()).expect("shipped config loads");
    let mut names = BTreeSet::new();
    let root_cert = |url: &str| {
        url.split(['?', '&'])
            .find_map(|kv| kv.strip_prefix("sslrootcert="))
            .map(std::path::PathBuf::from)
    };
    for (field, path) in [
        ("password_file", cfg.database.password_file),
        ("migrate_password_file", cfg.database.migrate_password_file),
        ("credential_file", cfg.auth.credential_file),
        ("password_file", root_cert(&cfg.database.url)),
        (
            "migrate_password_file",
            root_cert(&cfg.database.migrate_url),
        ),
        ("credential_file", cfg.tls.cert_file),
        ("credential_file", cfg.tls.key_file),
        ("credential_file", cfg.tls.ca_file),
    ] {
        if let Some(name) = path
            .filter(|_| which.contains(&field))
            .and_then(|p| p.strip_prefix("/run/secrets").ok().map(Path::to_path_buf))
        {
            names.insert(name.to_string_lossy().into_owned());
        }
    }
    names
}

fn mounted_secrets(unit: &Unit) -> BTreeSet<String> {
    unit.all("Container", "Secret")
        .into_iter()
        .filter_map(|s| s.split(',').next())
        .map(str::to_owned)
        .collect()
}

fn depends_on(name: &str, unit: &Unit, deps: &[&str], p: &mut Vec<String>) {
    let requires = unit.list("Unit", "Requires");
    let after = unit.list("Unit", "After");
    for dep in deps {
        if !requires.contains(dep) {
            p.push(format!("{name}: no Requires={dep}"));
        }
        if !after.contains(dep) {
            p.push(format!("{name}: no After={dep}"));
        }
    }
}

/// `Exec=`'s first word is `binary` and its last `command`.
fn runs(name: &str, unit: &Unit, key: &str, binary: &str, command: &str, p: &mut Vec<String>) {
    let exec = unit.one("Container", key).unwrap_or_default();
    let words: Vec<&str> = exec.split_whitespace().collect();
    if words.first() != Some(&binary) || words.last() != Some(&command) {
        p.push(format!(
            "{name}: {key}= does not run `{binary} … {command}`: `{exec}`"
        ));
    }
}

/// Every problem of the unit directory `dir`.
fn check(dir: &Path) -> Vec<String> {
    let mut p = Vec::new();
    let units = load(dir, &mut p);
    let get = |name: &str, p: &mut Vec<String>| -> Option<&Unit> {
        let unit = units.get(name);
        if unit.is_none() {
            p.push(format!("{name} is missing"));
        }
        unit
    };
    let offices: BTreeSet<String> = Office::ALL.iter().map(|o| o.name().to_owned()).collect();
    // No unit of an office that is not one.
    for name in units.keys() {
        let Some(stem) = name
            .strip_prefix("lychd-")
            .and_then(|n| n.strip_suffix(".container"))
        else {
            continue;
        };
        let office = stem.strip_suffix("-migrate").unwrap_or(stem);
        if !offices.contains(office) && !["postgres", "provision", "console"].contains(&office) {
            p.push(format!("{name}: no office `{office}` in Office::ALL"));
        }
    }
    for (name, unit) in units.iter().filter(|(n, _)| n.ends_with(".container")) {
        container_basics(name, unit, &mut p);
    }

    let wanted = get(TARGET, &mut p)
        .map(|t| t.list("Unit", "Wants"))
        .unwrap_or_default();
    let in_target = |service: &str, p: &mut Vec<String>| {
        if !wanted.contains(service) {
            p.push(format!("{TARGET} does not want {service}"));
        }
    };
    in_target(POSTGRES, &mut p);
    in_target(PROVISION, &mut p);

    if let Some(net) = get(INTERNAL, &mut p)
        && net.one("Network", "Internal") != Some("true")
    {
        p.push(format!("{INTERNAL}: Internal=true missing"));
    }
    if let Some(pg) = get("lychd-postgres.container", &mut p) {
        if pg.all("Container", "Network") != [INTERNAL] {
            p.push("lychd-postgres.container: must be on the internal network alone".into());
        }
        if !pg.all("Container", "PublishPort").is_empty() {
            p.push("lychd-postgres.container: publishes a port".into());
        }
        if pg.one("Container", "HealthCmd").is_none()
            || pg.one("Container", "Notify") != Some("healthy")
        {
            p.push("lychd-postgres.container: no health check with Notify=healthy".into());
        }
        if !pg
            .all("Container", "Volume")
            .iter()
            .any(|v| v.starts_with("lychd-postgres.volume:"))
        {
            p.push("lychd-postgres.container: its data is not on lychd-postgres.volume".into());
        }
    }
    get("lychd-postgres.volume", &mut p);
    if let Some(prov) = get("lychd-provision.container", &mut p) {
        runs(
            "lychd-provision.container",
            prov,
            "Exec",
            "lychd",
            "/run/secrets",
            &mut p,
        );
        depends_on("lychd-provision.container", prov, &[POSTGRES], &mut p);
        if prov.one("Service", "Type") != Some("oneshot") {
            p.push("lychd-provision.container: not Type=oneshot".into());
        }
        // It sets every office's role passwords from their files (and would try to write a
        // missing one into the read-only secrets directory).
        let mounted = mounted_secrets(prov);
        for office in Office::ALL {
            for role in ["owner", "app"] {
                let secret = format!("lychd-{}-{role}-password", office.name());
                if !mounted.contains(&secret) {
                    p.push(format!("lychd-provision.container: no Secret={secret}"));
                }
            }
        }
    }

    in_target("lychd-console.service", &mut p);
    if let Some(c) = get(CONSOLE, &mut p) {
        console(c, &mut p);
    }

    for office in Office::ALL {
        let n = office.name();
        let binary = office.binary();
        let migrate_name = format!("lychd-{n}-migrate.container");
        let serve_name = format!("lychd-{n}.container");
        let migrate_service = format!("lychd-{n}-migrate.service");
        in_target(&migrate_service, &mut p);
        in_target(&format!("lychd-{n}.service"), &mut p);

        if let Some(m) = get(&migrate_name, &mut p) {
            runs(&migrate_name, m, "Exec", &binary, "migrate", &mut p);
            depends_on(&migrate_name, m, &[POSTGRES, PROVISION], &mut p);
            if m.one("Service", "Type") != Some("oneshot")
                || m.one("Service", "RemainAfterExit") != Some("yes")
            {
                p.push(format!(
                    "{migrate_name}: not a one-shot that remains after exit"
                ));
            }
            let want = configured_secrets(office, &["migrate_password_file"]);
            if mounted_secrets(m) != want {
                p.push(format!(
                    "{migrate_name}: mounts {:?}, its configuration reads {want:?}",
                    mounted_secrets(m)
                ));
            }
            if !m.all("Container", "PublishPort").is_empty() {
                p.push(format!("{migrate_name}: publishes a port"));
            }
        }

        let Some(s) = get(&serve_name, &mut p) else {
            continue;
        };
        runs(&serve_name, s, "Exec", &binary, "serve", &mut p);
        runs(&serve_name, s, "HealthCmd", &binary, "healthcheck", &mut p);
        if s.one("Container", "Notify") != Some("healthy") {
            p.push(format!("{serve_name}: Notify=healthy missing"));
        }
        let mut deps = vec![POSTGRES, migrate_service.as_str()];
        if office != Office::Ward {
            deps.push(WARD);
        }
        depends_on(&serve_name, s, &deps, &mut p);
        let port = office.default_port();
        let published = s.all("Container", "PublishPort");
        let metrics = lychd_runtime::metrics::MetricsConfig::defaults(office)
            .listen
            .port();
        let want = [
            format!("127.0.0.1:{port}:{port}"),
            format!("127.0.0.1:{metrics}:{metrics}"),
        ];
        if published != want {
            p.push(format!(
                "{serve_name}: publishes {published:?}, want exactly {want:?} (gRPC and metrics)"
            ));
        }
        if !s.all("Container", "Network").contains(&INTERNAL) {
            p.push(format!(
                "{serve_name}: not on {INTERNAL} (PostgreSQL is only there)"
            ));
        }
        let want = configured_secrets(office, &["password_file", "credential_file"]);
        if mounted_secrets(s) != want {
            p.push(format!(
                "{serve_name}: mounts {:?}, its configuration reads {want:?}",
                mounted_secrets(s)
            ));
        }
    }
    p
}

/// The console: a client holding no secret, on loopback, after Ward.
fn console(c: &Unit, p: &mut Vec<String>) {
    runs(CONSOLE, c, "Exec", "lychd-console", "serve", p);
    runs(CONSOLE, c, "HealthCmd", "lychd-console", "healthcheck", p);
    if c.one("Container", "Notify") != Some("healthy") {
        p.push(format!("{CONSOLE}: Notify=healthy missing"));
    }
    // Only the offices' CA certificate (public: it verifies the offices' certificates, the
    // console being a server-only TLS client), never a credential.
    if mounted_secrets(c).iter().any(|s| s != "lychd-tls-ca") {
        p.push(format!(
            "{CONSOLE}: mounts a secret (the console holds no credential of its own)"
        ));
    }
    if !c.all("Container", "Volume").is_empty() {
        p.push(format!(
            "{CONSOLE}: mounts a volume (it needs no file of its own)"
        ));
    }
    if c.all("Container", "Network").contains(&INTERNAL) {
        p.push(format!(
            "{CONSOLE}: on {INTERNAL} (it talks to offices, never to PostgreSQL)"
        ));
    }
    let published = c.all("Container", "PublishPort");
    let want = format!("127.0.0.1:{CONSOLE_PORT}:{CONSOLE_PORT}");
    if published != [want.as_str()] {
        p.push(format!(
            "{CONSOLE}: publishes {published:?}, want exactly {want}"
        ));
    }
    depends_on(CONSOLE, c, &[WARD], p);
}

#[test]
fn every_unit_of_every_office_keeps_the_deployment_invariants() {
    let problems = check(&deploy().join("quadlet"));
    assert!(
        problems.is_empty(),
        "deploy/quadlet:\n{}",
        problems.join("\n")
    );
}

/// A copy of `deploy/quadlet` in a temporary directory.
fn copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    for entry in std::fs::read_dir(deploy().join("quadlet"))
        .expect("quadlet dir")
        .flatten()
    {
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy");
    }
    dir
}

fn edit(dir: &Path, file: &str, f: impl FnOnce(String) -> String) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).expect("read");
    let changed = f(text.clone());
    assert_ne!(changed, text, "the mutation of {file} changed nothing");
    std::fs::write(&path, changed).expect("write");
}

#[test]
fn each_broken_invariant_is_caught() {
    type Mutation = (&'static str, fn(&Path), &'static str);
    let cases: &[Mutation] = &[
        (
            "no health check",
            |d| {
                edit(d, "lychd-archive.container", |t| {
                    t.lines()
                        .filter(|l| !l.starts_with("HealthCmd="))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
            },
            "lychd-archive.container: HealthCmd= does not run",
        ),
        (
            "a secret in the environment",
            |d| {
                edit(d, "lychd-ward.container", |t| {
                    t.replace(
                        "[Container]\n",
                        "[Container]\nEnvironment=LYCHD_WARD__DATABASE__PASSWORD=hunter2\n",
                    )
                })
            },
            "lychd-ward.container: a secret in Environment=",
        ),
        (
            "a port on every address",
            |d| {
                edit(d, "lychd-dispatcher.container", |t| {
                    t.replace(
                        "PublishPort=127.0.0.1:50051:50051",
                        "PublishPort=0.0.0.0:50051:50051",
                    )
                })
            },
            "lychd-dispatcher.container: PublishPort=0.0.0.0:50051:50051 is not on loopback",
        ),
        (
            "no dependency on ward",
            |d| {
                edit(d, "lychd-helmloop.container", |t| {
                    t.replace("Requires=lychd-ward.service\n", "")
                })
            },
            "lychd-helmloop.container: no Requires=lychd-ward.service",
        ),
        (
            "an office without units",
            |d| {
                std::fs::remove_file(d.join("lychd-orchestrator.container")).expect("rm");
                std::fs::remove_file(d.join("lychd-orchestrator-migrate.container")).expect("rm");
            },
            "lychd-orchestrator.container is missing",
        ),
        (
            "running as root",
            |d| {
                edit(d, "lychd-archive-migrate.container", |t| {
                    t.replace("User=10001:10001", "User=0")
                })
            },
            "lychd-archive-migrate.container: runs as root",
        ),
        (
            "a secret as an environment variable",
            |d| {
                edit(d, "lychd-ward.container", |t| {
                    t.replace(
                        "lychd-ward-credential,type=mount,",
                        "lychd-ward-credential,type=env,",
                    )
                })
            },
            "is not type=mount",
        ),
        (
            "PostgreSQL on the outside network",
            |d| {
                edit(d, "lychd-postgres.container", |t| {
                    t.replace(
                        "Network=lychd-internal.network",
                        "Network=lychd-internal.network\nNetwork=lychd.network",
                    )
                })
            },
            "lychd-postgres.container: must be on the internal network alone",
        ),
        (
            "capabilities kept",
            |d| {
                edit(d, "lychd-provision.container", |t| {
                    t.replace("DropCapability=all", "DropCapability=NET_RAW")
                })
            },
            "lychd-provision.container: DropCapability=all missing",
        ),
        (
            "an office's role password not provisioned",
            |d| {
                edit(d, "lychd-provision.container", |t| {
                    t.replace(
                        "Secret=lychd-runner-app-password,type=mount,uid=10001,gid=10001,mode=0400\n",
                        "",
                    )
                })
            },
            "lychd-provision.container: no Secret=lychd-runner-app-password",
        ),
        (
            "a secret given to the console",
            |d| {
                edit(d, CONSOLE, |t| {
                    t.replace(
                        "[Container]\n",
                        "[Container]\nSecret=lychd-ward-credential,type=mount,uid=10001,gid=10001,mode=0400\n",
                    )
                })
            },
            "lychd-console.container: mounts a secret",
        ),
        (
            "the console published beyond loopback",
            |d| {
                edit(d, CONSOLE, |t| {
                    t.replace(
                        "PublishPort=127.0.0.1:50080:50080",
                        "PublishPort=50080:50080",
                    )
                })
            },
            "lychd-console.container: PublishPort=50080:50080 is not on loopback",
        ),
        (
            "not started by the target",
            |d| {
                edit(d, "lychd.target", |t| {
                    t.replace(" lychd-archive.service", "")
                })
            },
            "lychd.target does not want lychd-archive.service",
        ),
    ];
    for (what, mutate, expected) in cases {
        let dir = copy();
        assert!(
            check(dir.path()).is_empty(),
            "the copy passes before: {what}"
        );
        mutate(dir.path());
        let problems = check(dir.path());
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{what}: want a problem containing `{expected}`, got {problems:#?}"
        );
    }
}

#[test]
fn the_parser_reads_repeated_keys_continuations_and_refuses_garbage() {
    let unit = Unit::parse(
        "# comment\n[Unit]\nRequires=a b\nRequires=c\n\n[Container]\nExec=lychd \\\n  serve\n; other\n",
    )
    .expect("parses");
    assert_eq!(
        unit.list("Unit", "Requires"),
        BTreeSet::from(["a", "b", "c"])
    );
    assert_eq!(unit.one("Container", "Exec"), Some("lychd  serve"));
    assert!(Unit::parse("Key=outside").is_err());
    assert!(Unit::parse("[Unit]\njust words").is_err());
}
