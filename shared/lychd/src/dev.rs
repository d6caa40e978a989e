//! `lychd dev`: the local stack.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use lychd_runtime::Office;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

use crate::DevArgs;

const DATABASE: &str = "lychd";

pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let bin_dir = office_bin_dir(&args)?;
    let state = absolute(&args.state_dir)?;
    let dev_dir = state.join("dev");
    std::fs::create_dir_all(dev_dir.join("config"))?;
    std::fs::create_dir_all(dev_dir.join("logs"))?;
    let _ = std::fs::remove_file(dev_dir.join("endpoints.json"));

    // PostgreSQL: persisted under <state>/pg, or a throwaway one.
    let ephemeral_dir = if args.ephemeral {
        Some(tempfile_dir()?)
    } else {
        None
    };
    let pg_base = ephemeral_dir.clone().unwrap_or_else(|| state.join("pg"));
    let cluster = lychd_pg::Cluster::new(&pg_base).map_err(|e| anyhow::anyhow!("{e}"))?;
    let durability = if args.ephemeral {
        lychd_pg::Durability::Throwaway
    } else {
        lychd_pg::Durability::Durable
    };
    let pg_port = match cluster.running_port() {
        Some(port) => {
            println!(
                "postgres  already running on 127.0.0.1:{port} ({})",
                pg_base.display()
            );
            port
        }
        None => {
            cluster.init().map_err(|e| anyhow::anyhow!("{e}"))?;
            let port = if args.pg_port == 0 {
                lychd_pg::free_port()?
            } else {
                args.pg_port
            };
            cluster
                .start(port, durability)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("postgres  127.0.0.1:{port}  ({})", pg_base.display());
            port
        }
    };
    let result = run_offices(&args, &bin_dir, &dev_dir, pg_port).await;
    println!("stopping postgres");
    if let Err(e) = cluster.stop() {
        eprintln!("lychd: {e}");
    }
    if let Some(dir) = ephemeral_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

async fn run_offices(
    args: &DevArgs,
    bin_dir: &Path,
    dev_dir: &Path,
    pg_port: u16,
) -> anyhow::Result<()> {
    lychd_pg::provision(pg_port, DATABASE)
        .await
        .map_err(|e| anyhow::anyhow!("provisioning: {e}"))?;
    let credentials_dir = dev_dir.join("credentials");
    std::fs::create_dir_all(&credentials_dir)?;

    let mut ports = BTreeMap::new();
    for (i, office) in Office::ALL.into_iter().enumerate() {
        let wanted = args.base_port.saturating_add(i as u16);
        let port = if std::net::TcpListener::bind(("127.0.0.1", wanted)).is_ok() {
            wanted
        } else {
            lychd_pg::free_port()?
        };
        ports.insert(office, port);
    }
    // No model runtime runs on a developer's machine: a simulated llama.cpp runtime stands in,
    // and the Dispatcher's real probe observes it.
    let runtime = lychd_simllama::SimLlama::serving(DEV_MODEL).await;
    let mut offices = Vec::new();
    for office in Office::ALL {
        let config = dev_dir.join("config").join(format!("{office}.toml"));
        // Ward's own credential exists only once Ward has issued it (below, on a first start).
        let credential = credentials_dir.join(format!("{office}.credential"));
        let credential =
            (office != Office::Ward || credential.is_file()).then_some(credential.as_path());
        let mut text = office_config(office, &ports, pg_port, credential);
        if office == Office::Dispatcher {
            text.push_str(&dispatcher_registry(&runtime.endpoint()));
        }
        std::fs::write(&config, text)?;
        let binary = bin_dir.join(office.binary());
        let out = Command::new(&binary)
            .arg("--config")
            .arg(&config)
            .arg("migrate")
            .output()
            .await?;
        if !out.status.success() {
            bail!(
                "{} migrate failed: {}",
                office,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        print!("{}", String::from_utf8_lossy(&out.stdout));
        offices.push(Supervised::new(
            office,
            binary,
            config,
            dev_dir.join("logs").join(format!("{office}.log")),
            ports[&office],
        ));
    }

    // Ward first: bootstrap once, then it decides for everyone.
    let operator_credential = dev_dir.join("operator.credential");
    let ward = &mut offices[Office::ALL
        .iter()
        .position(|o| *o == Office::Ward)
        .expect("ward is an office")];
    if !operator_credential.is_file() {
        let out = Command::new(&ward.binary)
            .arg("--config")
            .arg(&ward.config)
            .arg("bootstrap")
            .output()
            .await?;
        if !out.status.success() {
            bail!(
                "ward bootstrap failed: {} (a persisted stack whose {} was lost cannot be recovered: remove {} to start over)",
                String::from_utf8_lossy(&out.stderr).trim(),
                operator_credential.display(),
                dev_dir.parent().unwrap_or(dev_dir).join("pg").display()
            );
        }
        write_secret(
            &operator_credential,
            String::from_utf8_lossy(&out.stdout).trim(),
        )?;
        println!(
            "ward bootstrapped: operator credential in {} (mode 0600)",
            operator_credential.display()
        );
    }
    ward.spawn()?;
    ward.wait_serving(Duration::from_secs(30)).await?;
    let ward_channel =
        lychd_runtime::client::channel(&format!("http://127.0.0.1:{}", ports[&Office::Ward]))?;
    let credential = std::fs::read_to_string(&operator_credential)?;
    let session = lychd_auth::admin::exchange(
        ward_channel.clone(),
        credential.trim(),
        OPERATOR_SESSION_SECONDS,
    )
    .await
    .context("operator session from ward")?;
    let token_file = dev_dir.join("operator.token");
    let _ = std::fs::remove_file(&token_file);
    write_secret(&token_file, &session.token)?;

    // Each office (Ward too: it calls its peers' Describe): a service principal allowed to ask
    // Ward and to describe its peers; the operator may describe every office.
    let mut admin = lychd_auth::admin::WardAdmin::new(ward_channel, &session.token)?;
    grant(&mut admin, &session.principal_id, OPERATOR_GRANTS).await?;
    let ward_had_credential = credentials_dir.join("ward.credential").is_file();
    for office in Office::ALL {
        admin
            .allow_describe(&session.principal_id, office.name())
            .await?;
        let id = admin.ensure_office_principal(office.name()).await?;
        for peer in Office::ALL.into_iter().filter(|p| *p != office) {
            admin.allow_describe(&id, peer.name()).await?;
        }
        if office == Office::Orchestrator {
            grant(&mut admin, &id, ORCHESTRATOR_GRANTS).await?;
        }
        let file = credentials_dir.join(format!("{office}.credential"));
        if !file.is_file() {
            write_secret(&file, &admin.issue_standing(&id).await?)?;
        }
    }
    if !ward_had_credential {
        // First start: Ward ran without a credential of its own; now it has one.
        let ward = offices
            .iter_mut()
            .find(|o| o.office == Office::Ward)
            .expect("ward is an office");
        let credential = credentials_dir.join("ward.credential");
        std::fs::write(
            &ward.config,
            office_config(Office::Ward, &ports, pg_port, Some(&credential)),
        )?;
        ward.stop().await;
        ward.spawn()?;
        ward.wait_serving(Duration::from_secs(30)).await?;
    }
    for o in offices.iter_mut().filter(|o| o.office != Office::Ward) {
        o.spawn()?;
    }
    for o in offices.iter_mut().filter(|o| o.office != Office::Ward) {
        o.wait_serving(Duration::from_secs(45)).await?;
    }

    let endpoints: BTreeMap<&str, String> = offices
        .iter()
        .map(|o| (o.office.name(), format!("127.0.0.1:{}", o.port)))
        .collect();
    let endpoints_file = dev_dir.join("endpoints.json");
    std::fs::write(
        &endpoints_file,
        serde_json::to_string_pretty(&endpoints)? + "\n",
    )?;

    println!();
    for o in &offices {
        println!(
            "{:<13} 127.0.0.1:{}  (log: {})",
            o.office.name(),
            o.port,
            o.log.display()
        );
    }
    println!(
        "runtime       {}  (simulated llama.cpp: animator {DEV_ANIMATOR}, model {DEV_MODEL})",
        runtime.endpoint()
    );
    println!("endpoints     {}", endpoints_file.display());
    println!(
        "operator      {} (standing credential) and {} (session, 12 h), mode 0600",
        operator_credential.display(),
        token_file.display()
    );
    let dispatcher_port = ports[&Office::Dispatcher];
    println!("\ntry:\n  grpcurl -plaintext 127.0.0.1:{dispatcher_port} list");
    println!(
        "  grpcurl -plaintext -H \"authorization: Bearer $(cat {})\" -d '{{\"include_peers\": true}}' 127.0.0.1:{dispatcher_port} lychd.dispatcher.v1.Dispatcher/Describe",
        token_file.display()
    );
    println!(
        "  grpcurl -plaintext -H \"authorization: Bearer $(cat {})\" -d '{{\"demand\": {{\"family\": \"FAMILY_CHAT\", \"model_id\": \"{DEV_MODEL}\"}}, \"holder\": \"me\"}}' 127.0.0.1:{dispatcher_port} lychd.dispatcher.v1.Dispatcher/Lease",
        token_file.display()
    );
    println!("\nCtrl-C stops everything.");

    supervise(&mut offices).await;
    // Ward last: the others may still ask it while draining.
    offices.sort_by_key(|o| o.office == Office::Ward);
    for o in &mut offices {
        o.stop().await;
    }
    let _ = std::fs::remove_file(&endpoints_file);
    Ok(())
}

/// The dev stack's one animator and the model its simulated runtime serves.
const DEV_ANIMATOR: &str = "sim0";
const DEV_MODEL: &str = "qwen3-0.6b";

/// What the dev operator holds besides `ward:administer` and describing every office: the
/// Dispatcher's read, lease and observe API, so the printed examples work.
const OPERATOR_GRANTS: &[(&str, &str)] = &[
    ("dispatcher:read", "capability:*"),
    ("dispatcher:read", "lease:*"),
    ("dispatcher:read", "event:*"),
    ("dispatcher:lease", "capability:*"),
    ("dispatcher:lease", "lease:*"),
    ("dispatcher:observe", "animator:*"),
];

/// The Orchestrator's service principal: it observes animators and alone closes and reopens
/// admission.
const ORCHESTRATOR_GRANTS: &[(&str, &str)] = &[
    ("dispatcher:observe", "animator:*"),
    ("dispatcher:admission", "animator:*"),
];

/// Assign each `(action, object)` of `grants` to `id` (audience: the action's office; purpose:
/// its verb).
async fn grant(
    admin: &mut lychd_auth::admin::WardAdmin,
    id: &str,
    grants: &[(&str, &str)],
) -> Result<(), tonic::Status> {
    for (action, object) in grants {
        let (office, verb) = action.split_once(':').unwrap_or((action, action));
        admin
            .ensure_assignment(id, action, object, office, verb)
            .await?;
    }
    Ok(())
}

/// The Dispatcher's registry: one dedicated animator on the simulated runtime.
fn dispatcher_registry(endpoint: &str) -> String {
    format!(
        "\n[office]\n\n[[office.animators]]\nname = \"{DEV_ANIMATOR}\"\nsource = \"soulstone\"\n\
         dialect = \"llama_cpp\"\nendpoint = \"{endpoint}\"\ndedicated = true\n\n\
         [[office.capabilities]]\nanimator = \"{DEV_ANIMATOR}\"\nfamily = \"chat\"\n\
         model_id = \"{DEV_MODEL}\"\ninput_modalities = [\"text\"]\ncontext_tokens = 8192\n"
    )
}

/// Lifetime asked for the operator's dev session (Ward may cap it).
const OPERATOR_SESSION_SECONDS: u32 = 12 * 3600;

/// Restart crashed offices with backoff until SIGINT or SIGTERM.
async fn supervise(offices: &mut [Supervised]) {
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        eprintln!("lychd: cannot install signal handlers");
        return;
    };
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            _ = int.recv() => break,
            _ = term.recv() => break,
            _ = tick.tick() => {
                for o in offices.iter_mut() {
                    o.check_and_restart();
                }
            }
        }
    }
    println!("\nstopping offices");
}

struct Supervised {
    office: Office,
    binary: PathBuf,
    config: PathBuf,
    log: PathBuf,
    port: u16,
    child: Option<Child>,
    started: Instant,
    failures: u32,
    restart_at: Option<Instant>,
}

impl Supervised {
    fn new(office: Office, binary: PathBuf, config: PathBuf, log: PathBuf, port: u16) -> Self {
        Supervised {
            office,
            binary,
            config,
            log,
            port,
            child: None,
            started: Instant::now(),
            failures: 0,
            restart_at: None,
        }
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&self.binary)
            .arg("--config")
            .arg(&self.config)
            .arg("serve")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            // Own process group: Ctrl-C reaches only `lychd dev`, which stops each office in order.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("start {}", self.binary.display()))?;
        self.child = Some(child);
        self.started = Instant::now();
        Ok(())
    }

    async fn wait_serving(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!(
                    "{} exited with {status} before serving; see {}",
                    self.office,
                    self.log.display()
                );
            }
            if serving(addr).await {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} not serving after {timeout:?}; see {}",
                    self.office,
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Report a crash and schedule a restart: 1 s, 2 s, 4 s … capped at 30 s; a run of a
    /// minute resets the backoff.
    fn check_and_restart(&mut self) {
        if let Some(at) = self.restart_at {
            if Instant::now() >= at {
                self.restart_at = None;
                match self.spawn() {
                    Ok(()) => println!("{} restarted", self.office),
                    Err(e) => eprintln!("{} restart failed: {e:#}", self.office),
                }
            }
            return;
        }
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if let Ok(Some(status)) = child.try_wait() {
            self.child = None;
            if self.started.elapsed() > Duration::from_secs(60) {
                self.failures = 0;
            }
            let delay =
                Duration::from_secs(1u64 << self.failures.min(5)).min(Duration::from_secs(30));
            self.failures += 1;
            eprintln!(
                "{} exited ({status}); restarting in {}s (see {})",
                self.office,
                delay.as_secs(),
                self.log.display()
            );
            self.restart_at = Some(Instant::now() + delay);
        }
    }

    async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        match tokio::time::timeout(Duration::from_secs(15), child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => eprintln!("{} stopped with {status}", self.office),
            _ => {
                eprintln!("{} did not stop in 15 s; killing", self.office);
                let _ = child.kill().await;
            }
        }
    }
}

async fn serving(addr: SocketAddr) -> bool {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let Ok(endpoint) = tonic::transport::Endpoint::from_shared(format!("http://{addr}")) else {
        return false;
    };
    let Ok(channel) = endpoint.connect().await else {
        return false;
    };
    matches!(
        HealthClient::new(channel).check(HealthCheckRequest { service: String::new() }).await,
        Ok(r) if r.get_ref().status == 1
    )
}

fn office_config(
    office: Office,
    ports: &BTreeMap<Office, u16>,
    pg_port: u16,
    credential: Option<&Path>,
) -> String {
    let mut s = format!(
        "# written by `lychd dev`; regenerated at every start\n\
         [server]\nlisten = \"127.0.0.1:{}\"\n\n\
         [database]\nurl = \"postgres://{}@127.0.0.1:{pg_port}/{DATABASE}\"\n\
         migrate_url = \"postgres://{}@127.0.0.1:{pg_port}/{DATABASE}\"\n\n\
         [telemetry]\nformat = \"json\"\nfilter = \"info\"\n",
        ports[&office],
        office.runtime_role(),
        office.owner_role(),
    );
    if let Some(file) = credential {
        s.push_str(&format!(
            "\n[auth]\ncredential_file = \"{}\"\n",
            file.display()
        ));
    }
    for (peer, port) in ports.iter().filter(|(p, _)| **p != office) {
        s.push_str(&format!(
            "\n[peers.{peer}]\nendpoint = \"http://127.0.0.1:{port}\"\n"
        ));
    }
    s
}

/// Write a secret with mode 0600 (created new; an existing file is replaced).
fn write_secret(path: &Path, secret: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(secret.as_bytes())?;
    Ok(())
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_owned()
    } else {
        std::env::current_dir()?.join(p)
    })
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("lychd-dev-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Where the office binaries are: next to this one. Run through cargo (`cargo run -p lychd`),
/// they are built first so the stack never runs stale offices.
fn office_bin_dir(args: &DevArgs) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("binary has no directory")?.to_owned();
    if let (Some(cargo), false) = (std::env::var_os("CARGO"), args.no_build) {
        let release = dir.file_name().is_some_and(|n| n == "release");
        let mut cmd = std::process::Command::new(cargo);
        cmd.arg("build");
        if release {
            cmd.arg("--release");
        }
        for office in Office::ALL {
            cmd.arg("--bin").arg(office.binary());
        }
        println!("building office binaries");
        let status = cmd.status().context("run cargo build")?;
        if !status.success() {
            bail!("cargo build of the office binaries failed");
        }
    }
    for office in Office::ALL {
        let bin = dir.join(office.binary());
        if !bin.is_file() {
            bail!(
                "{} not found: build them with `cargo build --workspace --bins`",
                bin.display()
            );
        }
    }
    Ok(dir)
}
