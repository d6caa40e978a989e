//! The offices as child processes: their binaries, one-shot commands (`migrate`, `bootstrap`),
//! `serve` in a process group of its own with its log, readiness, restart with backoff after a
//! crash, and stop.
//!
//! Readiness is identity: every start of an office gets a fresh instance id (passed in
//! `LYCHD_INSTANCE`), and the office is taken as serving only when its port answers health
//! SERVING *naming that id*. A process of another stack answering on the same port is not this
//! office; when the office exits because its port was taken between choosing and binding, the
//! wait says so ([`PortTaken`]) and the stack chooses its ports again.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use lychd_runtime::Office;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

use super::configuration::loopback_url;
use super::summary::duration_text;

/// How often crashed offices are looked for.
const CHECK_EVERY: Duration = Duration::from_millis(250);
/// How often a starting office is asked whether it serves.
const POLL_SERVING: Duration = Duration::from_millis(100);
/// How long an office has to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// Where the office binaries are: next to this one. Run through cargo (`cargo run -p lychd`),
/// they are built first (unless `no_build`) so the stack never runs stale offices.
/// The simulated host's binary (`shared/simllama`), built and found with the offices'.
pub(super) const SIMHOST: &str = "lychd-simhost";
/// The operators' console's binary (`apps/console`), a client of the offices.
pub(super) const CONSOLE: &str = "lychd-console";

pub(super) fn office_bin_dir(no_build: bool) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("binary has no directory")?.to_owned();
    if let (Some(cargo), false) = (std::env::var_os("CARGO"), no_build) {
        let release = dir.file_name().is_some_and(|n| n == "release");
        let mut cmd = std::process::Command::new(cargo);
        cmd.arg("build");
        if release {
            cmd.arg("--release");
        }
        for office in Office::ALL {
            cmd.arg("--bin").arg(office.binary());
        }
        cmd.arg("--bin").arg(SIMHOST);
        cmd.arg("--bin").arg(CONSOLE);
        println!("building office binaries");
        let status = cmd.status().context("run cargo build")?;
        if !status.success() {
            bail!("cargo build of the office binaries failed");
        }
    }
    for name in Office::ALL
        .iter()
        .map(|o| o.binary())
        .chain([SIMHOST.to_owned(), CONSOLE.to_owned()])
    {
        let bin = dir.join(name);
        if !bin.is_file() {
            bail!(
                "{} not found: build them with `cargo build --workspace --bins`",
                bin.display()
            );
        }
    }
    Ok(dir)
}

/// One office: `<binary> --config <config> <command>`.
pub(super) struct Supervised {
    pub office: Office,
    /// Which replica of the office (0: the first, the one `endpoints.json` names).
    pub replica: usize,
    binary: PathBuf,
    config: PathBuf,
    log: PathBuf,
    port: u16,
    child: Option<Child>,
    /// The instance id of the current (or last) start.
    instance: String,
    started: Instant,
    backoff: Backoff,
    restart_at: Option<Instant>,
}

/// An office exited before serving and its port is held by another process: it was taken
/// between choosing and binding.
#[derive(Debug)]
pub(super) struct PortTaken {
    pub office: Office,
    pub port: u16,
}

impl std::fmt::Display for PortTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} could not bind port {}: another process took it",
            self.office, self.port
        )
    }
}

impl std::error::Error for PortTaken {}

impl Supervised {
    pub fn new(office: Office, binary: PathBuf, config: PathBuf, log: PathBuf, port: u16) -> Self {
        Supervised {
            office,
            replica: 0,
            binary,
            config,
            log,
            port,
            child: None,
            instance: String::new(),
            started: Instant::now(),
            backoff: Backoff::default(),
            restart_at: None,
        }
    }

    /// This process is replica `replica` of its office (`lychd dev --replicas`).
    pub fn with_replica(mut self, replica: usize) -> Self {
        self.replica = replica;
        self
    }

    /// How messages name it: `dispatcher`, or `dispatcher#2` for its second replica.
    pub fn label(&self) -> String {
        match self.replica {
            0 => self.office.to_string(),
            r => format!("{}#{}", self.office, r + 1),
        }
    }

    /// The office's binary.
    pub fn binary(&self) -> &std::path::Path {
        &self.binary
    }

    /// The configuration file it runs with.
    pub fn config(&self) -> &std::path::Path {
        &self.config
    }

    fn command(&self, command: &str) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--config").arg(&self.config).arg(command);
        cmd
    }

    /// Run `command` (`migrate`, `bootstrap`) to its end: its standard output, or an error
    /// that carries its standard error.
    pub async fn run_once(&self, command: &str) -> anyhow::Result<String> {
        let out = self
            .command(command)
            .output()
            .await
            .with_context(|| format!("start {}", self.binary.display()))?;
        if !out.status.success() {
            bail!(
                "{} {command} failed: {}",
                self.label(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Start `serve` as a new instance, its standard error appended to its log.
    pub fn spawn(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        self.instance = uuid::Uuid::new_v4().simple().to_string();
        let child = self
            .command("serve")
            .env(lychd_runtime::health::INSTANCE_ENV, &self.instance)
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

    /// Start `serve` and wait until it serves.
    pub async fn start(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.spawn()?;
        self.wait_serving(timeout).await
    }

    /// Stop, start again and wait until it serves (a new configuration takes effect).
    pub async fn restart(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.stop().await;
        self.start(timeout).await
    }

    /// Wait until this start of the office serves on its port (its own instance id answers);
    /// [`PortTaken`] when it exited because another process holds the port.
    pub async fn wait_serving(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                // Gone: nothing to stop.
                self.child = None;
                // Taken when it bound (its own exit code says so; another stack's port
                // probe may have let go since) or still taken now.
                let in_use = status.code() == Some(i32::from(lychd_runtime::cli::PORT_IN_USE_EXIT));
                if in_use || !port_free(self.port) {
                    return Err(anyhow::Error::new(PortTaken {
                        office: self.office,
                        port: self.port,
                    })
                    .context(format!("{} exited with {status}", self.label())));
                }
                bail!(
                    "{} exited with {status} before serving; see {}",
                    self.label(),
                    self.log.display()
                );
            }
            if serving(self.port, &self.instance).await {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} not serving after {}; see {}",
                    self.label(),
                    duration_text(timeout),
                    self.log.display()
                );
            }
            tokio::time::sleep(POLL_SERVING).await;
        }
    }

    /// Restart when a scheduled restart is due; report a crash and schedule its restart.
    fn check_and_restart(&mut self) {
        if let Some(at) = self.restart_at {
            if Instant::now() >= at {
                self.restart_at = None;
                match self.spawn() {
                    Ok(()) => println!("{} restarted", self.label()),
                    Err(e) => eprintln!("{} restart failed: {e:#}", self.label()),
                }
            }
            return;
        }
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if let Ok(Some(status)) = child.try_wait() {
            self.child = None;
            let delay = self.backoff.delay(self.started.elapsed());
            eprintln!(
                "{} exited ({status}); restarting in {} (see {})",
                self.label(),
                duration_text(delay),
                self.log.display()
            );
            self.restart_at = Some(Instant::now() + delay);
        }
    }

    /// SIGTERM, then a kill if it has not exited within [`STOP_GRACE`].
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Some(pid) = child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        match tokio::time::timeout(STOP_GRACE, child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => eprintln!("{} stopped with {status}", self.label()),
            _ => {
                eprintln!(
                    "{} did not stop in {}; killing",
                    self.label(),
                    duration_text(STOP_GRACE)
                );
                let _ = child.kill().await;
            }
        }
    }
}

/// Restart delays after a crash: 1 s, 2 s, 4 s … capped at 30 s; a run of more than a minute
/// starts the sequence again.
#[derive(Debug, Default)]
struct Backoff {
    failures: u32,
}

impl Backoff {
    const CAP: Duration = Duration::from_secs(30);
    const RESET_AFTER: Duration = Duration::from_secs(60);

    /// The delay before restarting an office that exited after running for `ran`.
    fn delay(&mut self, ran: Duration) -> Duration {
        if ran > Self::RESET_AFTER {
            self.failures = 0;
        }
        let delay = Duration::from_secs(1u64 << self.failures.min(5)).min(Self::CAP);
        self.failures = self.failures.saturating_add(1);
        delay
    }
}

/// Whether the process on `port` is the office started as `instance` and answers its health
/// check SERVING. Another process's answer (no instance id, or another one) is not.
async fn serving(port: u16, instance: &str) -> bool {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let Ok(mut endpoint) = tonic::transport::Endpoint::from_shared(loopback_url(port)) else {
        return false;
    };
    if let Some(tls) = super::tls::client() {
        let Ok(secure) = endpoint.tls_config(tls) else {
            return false;
        };
        endpoint = secure;
    }
    let Ok(channel) = endpoint.connect().await else {
        return false;
    };
    let Ok(answer) = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
    else {
        return false;
    };
    let named = answer
        .metadata()
        .get(lychd_runtime::health::INSTANCE_HEADER)
        .and_then(|v| v.to_str().ok());
    answer.get_ref().status == 1 && named == Some(instance)
}

/// Whether nothing listens on loopback `port` (it can be bound now).
fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(super::configuration::loopback(port)).is_ok()
}

/// Restart crashed offices with backoff until SIGINT or SIGTERM.
pub(super) async fn supervise(offices: &mut [Supervised]) {
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        eprintln!("lychd: cannot install signal handlers");
        return;
    };
    let mut tick = tokio::time::interval(CHECK_EVERY);
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

/// Stop every office, Ward last: the others may still ask it while draining. Within each
/// group the further replicas stop first, so a standby Orchestrator never takes the host over
/// from a first replica that is stopping.
pub(super) async fn stop_all(offices: &mut [Supervised]) {
    offices.sort_by_key(|o| (o.office == Office::Ward, o.replica == 0));
    for o in offices.iter_mut() {
        o.stop().await;
    }
}

/// The office's first replica among `offices`.
pub(super) fn find(offices: &mut [Supervised], office: Office) -> &mut Supervised {
    offices
        .iter_mut()
        .find(|o| o.office == office && o.replica == 0)
        .expect("invariant: every office is supervised")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use super::*;

    /// Tests that start processes run one at a time: a script written while another test
    /// forks could be held open by that child and fail to run ("text file busy").
    static PROCESSES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    /// An office whose binary is the shell script `body`, in `dir`.
    fn office_running(dir: &Path, office: Office, body: &str) -> Supervised {
        let binary = dir.join(format!("{office}.sh"));
        std::fs::write(&binary, format!("#!/bin/sh\n{body}\n")).expect("script");
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let port = lychd_pg::free_port().expect("port");
        Supervised::new(
            office,
            binary,
            dir.join(format!("{office}.toml")),
            dir.join(format!("{office}.log")),
            port,
        )
    }

    fn secs(s: &[u64]) -> Vec<Duration> {
        s.iter().copied().map(Duration::from_secs).collect()
    }

    #[test]
    fn restarts_back_off_from_one_second_doubling_to_thirty() {
        let mut backoff = Backoff::default();
        let quick = Duration::from_secs(2);
        let delays: Vec<Duration> = (0..8).map(|_| backoff.delay(quick)).collect();
        assert_eq!(delays, secs(&[1, 2, 4, 8, 16, 30, 30, 30]));
    }

    #[test]
    fn a_run_of_more_than_a_minute_starts_the_backoff_again() {
        let mut backoff = Backoff::default();
        for _ in 0..4 {
            backoff.delay(Duration::from_secs(1));
        }
        assert_eq!(
            backoff.delay(Duration::from_secs(60)),
            Duration::from_secs(16)
        );
        assert_eq!(
            backoff.delay(Duration::from_secs(61)),
            Duration::from_secs(1)
        );
        assert_eq!(
            backoff.delay(Duration::from_secs(1)),
            Duration::from_secs(2)
        );
    }

    #[tokio::test]
    async fn a_one_shot_command_gets_the_config_and_returns_its_output() {
        let _serial = PROCESSES.lock().await;
        let dir = tempfile::tempdir().expect("tmp");
        let archive = office_running(dir.path(), Office::Archive, r#"echo "$@""#);
        let out = archive.run_once("migrate").await.expect("runs");
        assert_eq!(
            out,
            format!("--config {} migrate\n", archive.config.display())
        );
    }

    #[tokio::test]
    async fn a_failed_one_shot_command_reports_its_standard_error() {
        let _serial = PROCESSES.lock().await;
        let dir = tempfile::tempdir().expect("tmp");
        let ward = office_running(dir.path(), Office::Ward, "echo refused >&2; exit 3");
        let err = ward.run_once("bootstrap").await.expect_err("fails");
        assert_eq!(format!("{err:#}"), "ward bootstrap failed: refused");
    }

    #[tokio::test]
    async fn an_office_that_exits_before_serving_is_reported_with_its_log() {
        let _serial = PROCESSES.lock().await;
        let dir = tempfile::tempdir().expect("tmp");
        let mut helmloop = office_running(
            dir.path(),
            Office::HelmLoop,
            r#"echo "cannot $*" >&2; exit 1"#,
        );
        let begun = Instant::now();
        let err = helmloop
            .start(Duration::from_secs(20))
            .await
            .expect_err("never serves");
        assert!(
            begun.elapsed() < Duration::from_secs(10),
            "reported at once"
        );
        let err = format!("{err:#}");
        assert!(err.starts_with("helmloop exited with"), "{err}");
        assert!(err.contains(&helmloop.log.display().to_string()), "{err}");
        let log = std::fs::read_to_string(&helmloop.log).expect("log");
        assert_eq!(
            log,
            format!("cannot --config {} serve\n", helmloop.config.display())
        );
    }

    /// Another process answering health SERVING on the office's port is not the office: the
    /// wait does not take it for this start, and when the office exits (it could not bind),
    /// the wait reports the port as taken so the stack chooses again.
    #[tokio::test]
    async fn another_process_serving_on_the_port_is_not_the_office() {
        let _serial = PROCESSES.lock().await;
        let dir = tempfile::tempdir().expect("tmp");
        let listener = tokio::net::TcpListener::bind(super::super::configuration::loopback(0))
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (_reporter, health) = tonic_health::server::health_reporter();
        let foreign = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(health)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        assert!(
            !serving(port, "anything").await,
            "an answer without this start's id"
        );
        // Starting for a while (never serving), then failing to bind.
        let mut ward = office_running(
            dir.path(),
            Office::Ward,
            "sleep 1; echo 'cannot bind' >&2; exit 1",
        );
        ward.port = port;
        let err = ward
            .start(Duration::from_secs(20))
            .await
            .expect_err("never its own answer");
        let taken = err.downcast_ref::<PortTaken>().expect("the port is taken");
        assert_eq!((taken.office, taken.port), (Office::Ward, port));
        foreign.abort();
    }

    #[tokio::test]
    async fn a_crashed_office_is_restarted_after_the_backoff() {
        let _serial = PROCESSES.lock().await;
        let dir = tempfile::tempdir().expect("tmp");
        let mut archive = office_running(dir.path(), Office::Archive, "echo crash >&2; exit 1");
        archive.spawn().expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(10);
        while archive.restart_at.is_none() {
            assert!(Instant::now() < deadline, "crash noticed");
            tokio::time::sleep(Duration::from_millis(20)).await;
            archive.check_and_restart();
        }
        assert!(archive.child.is_none());
        let wait = archive.restart_at.expect("scheduled") - Instant::now();
        assert!(
            wait <= Duration::from_secs(1) && wait > Duration::from_millis(500),
            "{wait:?}"
        );
        archive.check_and_restart();
        assert!(archive.child.is_none(), "not restarted before the delay");
        tokio::time::sleep(wait).await;
        archive.check_and_restart();
        assert!(archive.child.is_some(), "restarted after the delay");
        assert!(archive.restart_at.is_none());
        let status = archive
            .child
            .as_mut()
            .expect("child")
            .wait()
            .await
            .expect("wait");
        assert_eq!(status.code(), Some(1));
        let log = std::fs::read_to_string(&archive.log).expect("log");
        assert_eq!(log, "crash\ncrash\n", "both runs append to one log");
    }

    #[tokio::test]
    async fn offices_stop_on_sigterm_ward_last() {
        let _serial = PROCESSES.lock().await;
        let dir = tempfile::tempdir().expect("tmp");
        let order = dir.path().join("order");
        let mut offices: Vec<Supervised> = Office::ALL
            .into_iter()
            .map(|office| {
                office_running(
                    dir.path(),
                    office,
                    &format!(
                        "trap 'echo {office} >> {}; exit 0' TERM\nwhile :; do sleep 0.1; done",
                        order.display()
                    ),
                )
            })
            .collect();
        for o in &mut offices {
            o.spawn().expect("spawn");
        }
        // The shells install their traps before they first sleep.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let pids: Vec<u32> = offices
            .iter()
            .map(|o| o.child.as_ref().and_then(Child::id).expect("pid"))
            .collect();

        let begun = Instant::now();
        stop_all(&mut offices).await;

        assert!(
            begun.elapsed() < STOP_GRACE,
            "stopped on SIGTERM, not killed"
        );
        let stopped = std::fs::read_to_string(&order).expect("order");
        // Every office in the table's order, Ward last (the others ask it until they stop).
        let expected: String = Office::ALL
            .into_iter()
            .filter(|o| *o != Office::Ward)
            .chain([Office::Ward])
            .map(|o| format!("{}\n", o.name()))
            .collect();
        assert_eq!(stopped, expected);
        assert!(stopped.starts_with("dispatcher\n") && stopped.ends_with("ward\n"));
        for pid in pids {
            assert!(
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_err(),
                "{pid} is gone"
            );
        }
    }
}
