//! The `systemd` actuator (LychD design rules §10 Privilege, "The physical transaction"; §23
//! "Host Mutation Port"): the generated animator targets through one attested absolute
//! `systemctl --user`, under the lifecycle lock.
//!
//! Under the lock: the `systemctl` identity is unchanged since start; no relevant job is
//! pending; the generated targets are loaded and the active set among the intent's animators
//! is exactly its expected pre-world (else a no-effect refusal). Then one stop transaction for
//! the evictees and one start transaction for the launch targets, each `--job-mode=fail`; then
//! a terminal readback, whatever the exit status: the desired world is success, the exact
//! pre-world is a restoration, anything else gets exactly one bounded inverse transaction
//! (for a forward intent) and, failing that, containment.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::time::Instant;

use super::lock::LifecycleLock;
use super::{Actuator, Applied};
use crate::domain::host::{
    HostWorld, Readback, classify, combine, host_active, service_unit, target_unit,
};
use crate::domain::intent::{Operation, TransitionIntent};
use lychd_registry::conflict::ConflictGraph;

/// Bound of one read-only `systemctl` query (`show`, `list-jobs`).
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a readback waits for relevant jobs to settle.
const SETTLE_STEP: Duration = Duration::from_millis(25);
/// Most bytes read from one `systemctl` answer.
const MAX_ANSWER: usize = 1 << 20;

/// What one application did and why (the reactor journals the reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub outcome: Applied,
    /// A stable word: empty on success, else why (`PENDING_JOB`, `STALE_PRE_WORLD`, …).
    pub reason: &'static str,
    /// The last active set read back among the intent's animators (when one was read).
    pub observed_active: Option<Vec<String>>,
}

impl Report {
    fn new(outcome: Applied, reason: &'static str, observed_active: Option<Vec<String>>) -> Self {
        Report {
            outcome,
            reason,
            observed_active,
        }
    }
}

/// The attested `systemctl` and the lock file.
pub struct Systemd {
    systemctl: PathBuf,
    identity: (u64, u64),
    lock_file: PathBuf,
    /// The generated unit sources (path relative to the unit directory → text), when the
    /// loaded ones are attested against them.
    sources: Option<std::collections::BTreeMap<String, String>>,
}

/// Attest a host tool: an absolute path resolving to an executable regular file owned by root
/// or by the caller, writable by neither group nor others. Its resolved path, device and inode
/// are pinned.
fn attest(path: &Path) -> Result<(PathBuf, (u64, u64)), &'static str> {
    if !path.is_absolute() {
        return Err("must be an absolute path");
    }
    let resolved = std::fs::canonicalize(path).map_err(|_| "does not resolve to a file")?;
    let meta = std::fs::symlink_metadata(&resolved).map_err(|_| "cannot be read")?;
    let uid = nix::unistd::geteuid().as_raw();
    if !meta.file_type().is_file() {
        return Err("must be a regular file");
    }
    if meta.mode() & 0o111 == 0 {
        return Err("must be executable");
    }
    if meta.mode() & 0o022 != 0 {
        return Err("must not be group- or other-writable");
    }
    if meta.uid() != 0 && meta.uid() != uid {
        return Err("must be owned by root or by the caller");
    }
    Ok((resolved, (meta.dev(), meta.ino())))
}

/// A `systemctl` call that did not run to an exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallFailure {
    /// It could not be started: nothing reached systemd.
    Spawn,
    /// It did not finish in time (killed) or its output could not be read.
    Unfinished,
}

impl Systemd {
    /// Attest `systemctl`; the lock file is checked at every application.
    pub fn new(systemctl: &Path, lock_file: &Path) -> Result<Systemd, &'static str> {
        let (systemctl, identity) = attest(systemctl)?;
        if !lock_file.is_absolute() {
            return Err("the lock file must be an absolute path");
        }
        Ok(Systemd {
            systemctl,
            identity,
            lock_file: lock_file.to_owned(),
            sources: None,
        })
    }

    /// Attest, before every application, that each animator's loaded target and its
    /// service's drop-in are byte for byte the ones generated from `graph`.
    pub fn with_sources(mut self, graph: &ConflictGraph) -> Systemd {
        self.sources = Some(
            crate::domain::units::generate(graph)
                .into_iter()
                .map(|f| (f.path, f.text))
                .collect(),
        );
        self
    }

    pub fn lock_file(&self) -> &Path {
        &self.lock_file
    }

    fn unchanged(&self) -> bool {
        std::fs::symlink_metadata(&self.systemctl)
            .is_ok_and(|m| m.file_type().is_file() && (m.dev(), m.ino()) == self.identity)
    }

    async fn run(&self, args: &[String], until: Instant) -> Result<(i32, String), CallFailure> {
        let child = tokio::process::Command::new(&self.systemctl)
            .arg("--user")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|_| CallFailure::Spawn)?;
        let out = tokio::time::timeout_at(until, child.wait_with_output())
            .await
            .map_err(|_| CallFailure::Unfinished)?
            .map_err(|_| CallFailure::Unfinished)?;
        let mut stdout = out.stdout;
        stdout.truncate(MAX_ANSWER);
        let code = out.status.code().unwrap_or(-1);
        Ok((code, String::from_utf8_lossy(&stdout).into_owned()))
    }

    /// Whether a job is queued or running for any unit of `scope`; `None` when unreadable.
    pub async fn pending_jobs(&self, scope: &[String]) -> Option<bool> {
        let units: Vec<String> = scope
            .iter()
            .flat_map(|a| [target_unit(a), service_unit(a)])
            .collect();
        let args = ["list-jobs", "--no-legend", "--no-pager"].map(String::from);
        let (code, out) = self.run(&args, Instant::now() + QUERY_TIMEOUT).await.ok()?;
        if code != 0 {
            return None;
        }
        Some(out.lines().any(|line| {
            let mut it = line.split_whitespace();
            let numbered = it.next().is_some_and(|j| j.parse::<u64>().is_ok());
            numbered && it.next().is_some_and(|u| units.iter().any(|x| x == u))
        }))
    }

    /// Read what systemd reports for each animator of `scope` (target and service); `None`
    /// when the answer could not be read.
    pub async fn readback(&self, scope: &[String]) -> Option<HostWorld> {
        let mut args = vec![
            "show".to_owned(),
            "--property=Id,LoadState,ActiveState".to_owned(),
            "--".to_owned(),
        ];
        for a in scope {
            args.push(target_unit(a));
            args.push(service_unit(a));
        }
        let (code, out) = self.run(&args, Instant::now() + QUERY_TIMEOUT).await.ok()?;
        if code != 0 {
            return None;
        }
        let mut units = std::collections::BTreeMap::new();
        for block in out.split("\n\n") {
            let (mut id, mut load, mut active) = (None, None, None);
            for line in block.lines() {
                match line.split_once('=') {
                    Some(("Id", v)) => id = Some(v),
                    Some(("LoadState", v)) => load = Some(v),
                    Some(("ActiveState", v)) => active = Some(v),
                    _ => {}
                }
            }
            if let (Some(id), Some(load), Some(active)) = (id, load, active) {
                units.insert(id.to_owned(), (load.to_owned(), active.to_owned()));
            }
        }
        let get = |u: &str| units.get(u).map(|(l, a)| (l.as_str(), a.as_str()));
        Some(
            scope
                .iter()
                .map(|a| {
                    let state = combine(get(&target_unit(a)), get(&service_unit(a)));
                    (a.clone(), state)
                })
                .collect(),
        )
    }

    /// With generated sources: whether each animator of `scope` has its generated target
    /// loaded from a file with exactly the generated text, and its service the generated
    /// drop-in (`FragmentPath`, `DropInPaths`). Without: true.
    async fn sources_attested(&self, scope: &[String]) -> bool {
        let Some(sources) = &self.sources else {
            return true;
        };
        let mut args = vec![
            "show".to_owned(),
            "--property=Id,FragmentPath,DropInPaths".to_owned(),
            "--".to_owned(),
        ];
        for a in scope {
            args.push(target_unit(a));
            args.push(service_unit(a));
        }
        let Ok((0, out)) = self.run(&args, Instant::now() + QUERY_TIMEOUT).await else {
            return false;
        };
        let mut shown = std::collections::BTreeMap::new();
        for block in out.split("\n\n") {
            let (mut id, mut fragment, mut dropins) = (None, "", "");
            for line in block.lines() {
                match line.split_once('=') {
                    Some(("Id", v)) => id = Some(v),
                    Some(("FragmentPath", v)) => fragment = v,
                    Some(("DropInPaths", v)) => dropins = v,
                    _ => {}
                }
            }
            if let Some(id) = id {
                shown.insert(id.to_owned(), (fragment.to_owned(), dropins.to_owned()));
            }
        }
        let same = |path: &str, want: &str| {
            !path.is_empty()
                && std::fs::metadata(path)
                    .is_ok_and(|m| m.is_file() && m.len() <= MAX_ANSWER as u64)
                && std::fs::read(path).is_ok_and(|b| b == want.as_bytes())
        };
        scope.iter().all(|a| {
            let (target, service) = (target_unit(a), service_unit(a));
            let drop_in = format!("{service}.d/10-lychd-animator.conf");
            let (Some(want_target), Some(want_drop_in)) =
                (sources.get(&target), sources.get(&drop_in))
            else {
                return false;
            };
            let target_ok = shown
                .get(&target)
                .is_some_and(|(fragment, _)| same(fragment, want_target));
            let drop_in_ok = shown.get(&service).is_some_and(|(_, dropins)| {
                dropins
                    .split_whitespace()
                    .any(|p| p.ends_with(&format!("/{drop_in}")) && same(p, want_drop_in))
            });
            target_ok && drop_in_ok
        })
    }

    /// A readback once no relevant job is pending (polled until `until`, at least the query
    /// bound from now); `None` while jobs remain or when unreadable.
    pub async fn settled(&self, scope: &[String], until: Instant) -> Option<HostWorld> {
        let until = until.max(Instant::now() + QUERY_TIMEOUT / 2);
        loop {
            match self.pending_jobs(scope).await {
                Some(false) => return self.readback(scope).await,
                _ if Instant::now() >= until => return None,
                _ => tokio::time::sleep(SETTLE_STEP).await,
            }
        }
    }

    /// One stop transaction for the evictees, then one start transaction for the launch
    /// targets. Exit statuses prove nothing: after a stop that did not exit 0, the start is
    /// submitted only when a readback shows every evictee stopped. Whether any call reached
    /// systemd.
    async fn transact(&self, intent: &TransitionIntent, until: Instant) -> bool {
        let mut reached = false;
        for (verb, set) in [("stop", &intent.evict), ("start", &intent.launch)] {
            if set.is_empty() {
                continue;
            }
            let mut args = vec![
                verb.to_owned(),
                "--job-mode=fail".to_owned(),
                "--".to_owned(),
            ];
            args.extend(set.iter().map(|a| target_unit(a)));
            match self.run(&args, until).await {
                Ok((0, _)) => reached = true,
                Ok(_) if verb == "stop" => {
                    reached = true;
                    let stopped = self
                        .settled(set, until)
                        .await
                        .and_then(|w| host_active(set, &w))
                        .is_some_and(|a| a.is_empty());
                    if !stopped {
                        return true;
                    }
                }
                Ok(_) | Err(CallFailure::Unfinished) => return true,
                Err(CallFailure::Spawn) => return reached,
            }
        }
        reached
    }

    /// Apply `intent`; the caller holds the lifecycle lock.
    pub async fn apply_locked(&self, intent: &TransitionIntent, deadline: Instant) -> Report {
        let budget = deadline.saturating_duration_since(Instant::now());
        if !self.unchanged() {
            return Report::new(Applied::NoEffect, "SYSTEMCTL_CHANGED", None);
        }
        let scope = intent.scope();
        match self.pending_jobs(&scope).await {
            Some(false) => {}
            Some(true) => return Report::new(Applied::NoEffect, "PENDING_JOB", None),
            None => return Report::new(Applied::NoEffect, "READBACK_FAILED", None),
        }
        if !self.sources_attested(&scope).await {
            return Report::new(Applied::NoEffect, "TOPOLOGY_NOT_ATTESTED", None);
        }
        let Some(before) = self.readback(&scope).await else {
            return Report::new(Applied::NoEffect, "READBACK_FAILED", None);
        };
        let Some(active) = host_active(&scope, &before) else {
            return Report::new(Applied::NoEffect, "TOPOLOGY_NOT_LOADED", None);
        };
        if active != intent.expected_active {
            return Report::new(Applied::NoEffect, "STALE_PRE_WORLD", Some(active));
        }
        if !self.transact(intent, deadline).await {
            // Nothing could be started: systemd was never asked.
            return Report::new(Applied::NoEffect, "SYSTEMCTL_UNAVAILABLE", Some(active));
        }
        let after = self.settled(&scope, deadline).await;
        let observed = after.as_ref().and_then(|w| host_active(&scope, w));
        let class = after
            .as_ref()
            .map_or(Readback::Neither, |w| classify(intent, w));
        match (class, intent.operation) {
            (Readback::Desired, _) => Report::new(Applied::Applied, "", observed),
            (Readback::Prior, Operation::Forward) => {
                Report::new(Applied::Restored, "PRIOR_OBSERVED", observed)
            }
            (Readback::Prior, Operation::Compensation) => {
                Report::new(Applied::Contained, "COMPENSATION_NOT_APPLIED", observed)
            }
            (Readback::Neither, Operation::Compensation) => {
                Report::new(Applied::Contained, "NEITHER_WORLD", observed)
            }
            (Readback::Neither, Operation::Forward) => {
                // Exactly one bounded inverse, under a fresh budget of the same length.
                let inverse = intent.compensation();
                let until = Instant::now() + budget;
                self.transact(&inverse, until).await;
                let after = self.settled(&scope, until).await;
                let observed = after.as_ref().and_then(|w| host_active(&scope, w));
                match after.as_ref().map(|w| classify(&inverse, w)) {
                    Some(Readback::Desired) => {
                        Report::new(Applied::Restored, "INVERSE_RESTORED", observed)
                    }
                    _ => Report::new(Applied::Contained, "INVERSE_FAILED", observed),
                }
            }
        }
    }

    /// Take the lifecycle lock (a no-effect refusal when contended or unsafe) and apply.
    pub async fn apply_report(&self, intent: &TransitionIntent, deadline: Instant) -> Report {
        let lock = match LifecycleLock::acquire(&self.lock_file) {
            Ok(l) => l,
            Err(e) => return Report::new(Applied::NoEffect, e.as_str(), None),
        };
        let report = self.apply_locked(intent, deadline).await;
        drop(lock);
        report
    }
}

#[tonic::async_trait]
impl Actuator for Systemd {
    async fn apply(&self, intent: &TransitionIntent, deadline: Instant) -> Applied {
        let report = self.apply_report(intent, deadline).await;
        tracing::info!(
            transition_id = %intent.id,
            operation = intent.operation.as_str(),
            outcome = report.outcome.as_str(),
            reason = report.reason,
            "systemd actuator"
        );
        report.outcome
    }
}
