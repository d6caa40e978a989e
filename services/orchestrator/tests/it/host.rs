//! A fake host for the `systemd` actuator and the host reactor: `lychd-fake-systemctl` behind
//! a wrapper script (the configured `systemctl`), its programmed state and invocation log, a
//! lock file, a spool, the consumer's configuration, and a poller that starts the one-shot
//! consumer whenever the inbox holds a file — as the shipped path unit does.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lychd_orchestrator::domain::intent::{Operation, TransitionIntent};
use lychd_registry::conflict::ConflictGraph;
use serde_json::{Value, json};

/// The consumer binary (the office binary's `reactor consume`).
pub const OFFICE_BIN: &str = env!("CARGO_BIN_EXE_lychd-orchestrator");
const FAKE_BIN: &str = env!("CARGO_BIN_EXE_lychd-fake-systemctl");

pub const ID: &str = "0123456789abcdef0123456789abcdef";

pub struct FakeHost {
    pub dir: tempfile::TempDir,
    /// The `systemctl` to configure (a script running the fake with this host's state).
    pub systemctl: PathBuf,
    pub state: PathBuf,
    pub lock: PathBuf,
    pub spool: PathBuf,
}

fn target(a: &str) -> String {
    format!("lychd-animator-{a}.target")
}

fn service(a: &str) -> String {
    format!("lychd-animator-{a}.service")
}

/// The conflict graph of [`registry`]`(all)`.
pub fn graph_of(all: &[&str]) -> ConflictGraph {
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("o.toml");
    let reg = registry(all, |_| "http://127.0.0.1:9".into());
    std::fs::write(&p, format!("[office]\n{reg}")).expect("write");
    let cfg = lychd_runtime::config::OfficeConfig::load(
        lychd_runtime::Office::Orchestrator,
        Some(&p),
        Vec::new(),
    )
    .expect("config");
    lychd_orchestrator::config::load(&cfg)
        .expect("settings")
        .graph
}

impl FakeHost {
    /// Animators `all` (as [`registry`] declares them) with their generated units loaded from
    /// a unit directory; `active` running.
    pub fn new(all: &[&str], active: &[&str]) -> FakeHost {
        let dir = tempfile::tempdir().expect("tmp");
        let unit_dir = dir.path().join("units");
        for f in lychd_orchestrator::domain::units::generate(&graph_of(all)) {
            let path = unit_dir.join(&f.path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("unit dir");
            std::fs::write(&path, &f.text).expect("unit");
        }
        let state = dir.path().join("systemd.json");
        let systemctl = dir.path().join("systemctl");
        std::fs::write(
            &systemctl,
            format!(
                "#!/bin/sh\nexec '{FAKE_BIN}' --state '{}' \"$@\"\n",
                state.display()
            ),
        )
        .expect("script");
        std::fs::set_permissions(&systemctl, std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let mut units = serde_json::Map::new();
        for a in all {
            let s = if active.contains(a) {
                "active"
            } else {
                "inactive"
            };
            units.insert(target(a), json!(s));
            units.insert(service(a), json!(s));
        }
        let host = FakeHost {
            lock: dir.path().join("lifecycle.lock"),
            spool: dir.path().join("spool"),
            systemctl,
            state,
            dir,
        };
        host.write(&json!({ "units": units, "unit_dir": unit_dir }));
        host
    }

    fn write(&self, v: &Value) {
        std::fs::write(&self.state, serde_json::to_vec_pretty(v).expect("json")).expect("state");
    }

    /// Change the programmed state.
    pub fn program(&self, f: impl FnOnce(&mut Value)) {
        let mut v: Value =
            serde_json::from_slice(&std::fs::read(&self.state).expect("state")).expect("json");
        f(&mut v);
        self.write(&v);
    }

    /// Mirror unit starts and stops onto a simulated host's control API (`http://host:port`).
    pub fn mirror(&self, control_endpoint: &str) {
        let authority = control_endpoint
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        self.program(|v| v["simhost"] = json!(authority));
    }

    /// Every invocation so far (arguments after `--user`).
    pub fn log(&self) -> Vec<String> {
        let mut p = self.state.clone().into_os_string();
        p.push(".log");
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The mutating invocations (`start`, `stop`) so far.
    pub fn mutations(&self) -> Vec<String> {
        self.log()
            .into_iter()
            .filter(|l| l.starts_with("start") || l.starts_with("stop"))
            .collect()
    }

    /// Animators whose target is active now.
    pub fn active(&self) -> Vec<String> {
        let v: Value =
            serde_json::from_slice(&std::fs::read(&self.state).expect("state")).expect("json");
        let mut out: Vec<String> = v["units"]
            .as_object()
            .expect("units")
            .iter()
            .filter(|(u, s)| u.ends_with(".target") && *s == "active")
            .map(|(u, _)| {
                u.trim_start_matches("lychd-animator-")
                    .trim_end_matches(".target")
                    .to_owned()
            })
            .collect();
        out.sort();
        out
    }

    /// The unit directory the fake reports sources from.
    pub fn unit_dir(&self) -> PathBuf {
        self.dir.path().join("units")
    }

    pub fn inbox(&self) -> PathBuf {
        self.spool.join("inbox")
    }

    pub fn journal(&self) -> PathBuf {
        self.spool.join("journal")
    }

    /// Journal file names, sorted.
    pub fn journal_files(&self) -> Vec<String> {
        names(&self.journal())
    }

    /// The consumer's configuration: `registry` (the `[[office.animators]]` and
    /// `[[office.capabilities]]` text) and `[office.reactor]`.
    pub fn consumer_config(&self, registry: &str, producer_uid: Option<u32>) -> PathBuf {
        let path = self
            .dir
            .path()
            .join(format!("reactor-{}.toml", producer_uid.unwrap_or(0)));
        let uid = producer_uid
            .map(|u| format!("producer_uid = {u}\n"))
            .unwrap_or_default();
        std::fs::write(
            &path,
            format!(
                "[office.reactor]\nspool = \"{}\"\nsystemctl = \"{}\"\nlock_file = \"{}\"\njob_timeout_ms = 10000\n{uid}\n{registry}",
                self.spool.display(),
                self.systemctl.display(),
                self.lock.display()
            ),
        )
        .expect("config");
        path
    }
}

/// File names in `dir`, sorted (none when missing).
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Dedicated animators with conflicts omitted (pairwise in conflict), each serving
/// `<name>:chat:m`, at `endpoints` (or a closed port).
pub fn registry(animators: &[&str], endpoint: impl Fn(&str) -> String) -> String {
    let mut r = String::new();
    for a in animators {
        r.push_str(&format!(
            "[[office.animators]]\nname = \"{a}\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"{}\"\ndedicated = true\n\n",
            endpoint(a)
        ));
    }
    for a in animators {
        r.push_str(&format!(
            "[[office.capabilities]]\nanimator = \"{a}\"\nfamily = \"chat\"\nmodel_id = \"m\"\n\n"
        ));
    }
    r
}

/// Run the consumer once: its exit status and its summary lines.
pub async fn consume(config: &Path) -> (i32, Vec<String>) {
    run(config, "consume").await
}

pub async fn run(config: &Path, verb: &str) -> (i32, Vec<String>) {
    let out = tokio::process::Command::new(OFFICE_BIN)
        .args(["reactor", verb, "--config"])
        .arg(config)
        .output()
        .await
        .expect("consumer runs");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    (out.status.code().unwrap_or(-1), lines)
}

/// A path unit: start the consumer whenever the inbox holds a published file (until stopped
/// or dropped).
pub struct PathUnit {
    task: Option<tokio::task::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl PathUnit {
    pub fn start(inbox: PathBuf, config: PathBuf) -> PathUnit {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            while !flag.load(Ordering::SeqCst) {
                if names(&inbox).iter().any(|n| !n.starts_with('.')) {
                    let _ = consume(&config).await;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        PathUnit {
            task: Some(task),
            stop,
        }
    }

    /// Stop after the running consumer (if any) exits.
    pub async fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for PathUnit {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// The forward intent of a swap to `a`, evicting `b` (the digest given).
pub fn swap_a_evicting_b(digest: &str) -> TransitionIntent {
    TransitionIntent {
        id: ID.into(),
        operation: Operation::Forward,
        config_digest: digest.into(),
        target_animator: "a".into(),
        capability_key: "a:chat:m".into(),
        evict: vec!["b".into()],
        launch: vec!["a".into()],
        expected_active: vec!["b".into()],
    }
}
