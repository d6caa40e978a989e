//! The one-shot host consumer (`lychd-orchestrator reactor consume`), started by a systemd
//! path unit when the inbox holds an intent. Under the lifecycle lock it first resolves what a
//! previous run left (an interrupted acquisition is rejected without effect; claimed work is
//! classified by readback, never applied again), then claims each published intent by rename,
//! reads it through a no-follow descriptor (regular, the producer's, `0600`, at most 64 KiB),
//! takes custody of a private copy with its digest, rechecks the intent independently (schema,
//! registry, configuration digest, the plan recomputed from its own readback, a compensation
//! only as the exact inverse of a forward it completed), marks it processing, applies it
//! through the `systemd` actuator and journals the result. An unrecovered containment declines
//! everything.

use std::path::Path;
use std::time::Duration;

use lychd_registry::conflict::ConflictGraph;
use lychd_registry::registry::Registry;
use tokio::time::Instant;

use super::{
    Class, Custody, MAX_INTENT_BYTES, Record, Spool, VERSION, WireIntent, inbox_name, publish,
    read_admissible, sha256_hex,
};
use crate::actuator::Applied;
use crate::actuator::lock::LifecycleLock;
use crate::actuator::systemd::{Report, Systemd};
use crate::config::Settings;
use crate::domain::host::{
    HostRefusal, Readback, classify, host_active, recheck_compensation, recheck_forward,
    recheck_scope, well_formed,
};
use crate::domain::intent::{Operation, TransitionIntent};

/// What one run did with one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The journal name (`<id>-<op>`, or with a unique suffix for a replay or a bad name).
    pub name: String,
    pub class: Class,
    pub reason: String,
}

/// The consumer of one spool.
pub struct Consumer {
    spool: Spool,
    registry: Registry,
    graph: ConflictGraph,
    systemd: Systemd,
    producer_uid: u32,
    job_timeout: Duration,
}

/// Why a run did nothing at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunRefusal {
    /// The lifecycle lock is held or unsafe (a no-effect refusal; the path unit runs again).
    Lock(&'static str),
}

fn me() -> u32 {
    nix::unistd::geteuid().as_raw()
}

fn class_of(outcome: Applied) -> Class {
    match outcome {
        Applied::Applied => Class::Completed,
        Applied::NoEffect => Class::Declined,
        Applied::Restored => Class::Restored,
        Applied::Uncertain | Applied::Contained => Class::Contained,
    }
}

impl Consumer {
    /// From the configuration's `[office.reactor]` and registry.
    pub fn new(settings: &Settings) -> Result<Consumer, String> {
        let r = settings
            .reactor
            .as_ref()
            .ok_or("office.reactor is not configured")?;
        let systemd = Systemd::new(&r.systemd.systemctl, &r.systemd.lock_file)
            .map_err(|e| format!("office.reactor.systemctl {e}"))?
            .with_sources(&settings.graph);
        Ok(Consumer {
            spool: Spool::open(&r.spool).map_err(|e| format!("office.reactor.spool {e}"))?,
            registry: settings.registry.clone(),
            graph: settings.graph.clone(),
            systemd,
            producer_uid: r.producer_uid,
            job_timeout: r.job_timeout,
        })
    }

    /// Resolve leftovers, then every published intent, under the lifecycle lock.
    pub async fn run(&self) -> Result<Vec<Summary>, RunRefusal> {
        let _lock = LifecycleLock::acquire(self.systemd.lock_file())
            .map_err(|e| RunRefusal::Lock(e.as_str()))?;
        let mut done = self.resolve_leftovers().await;
        let mut files: Vec<String> = list(&self.spool.inbox)
            .into_iter()
            .filter(|f| !f.starts_with('.'))
            .collect();
        files.sort();
        for file in files {
            if let Some(s) = self.claim(&file).await {
                done.push(s);
            }
        }
        Ok(done)
    }

    /// Mark recovered each containment whose recorded world (desired or prior) a fresh
    /// readback proves exactly; the others stay.
    pub async fn recover(&self) -> Result<Vec<Summary>, RunRefusal> {
        let _lock = LifecycleLock::acquire(self.systemd.lock_file())
            .map_err(|e| RunRefusal::Lock(e.as_str()))?;
        let mut done = Vec::new();
        for file in list(&self.spool.journal) {
            let Some(name) = file.strip_suffix(".contained.json") else {
                continue;
            };
            let proved = match self.custody_intent(name) {
                Some(intent) => {
                    let scope = intent.scope();
                    let until = Instant::now() + self.job_timeout;
                    match self.systemd.settled(&scope, until).await {
                        Some(w) => classify(&intent, &w) != Readback::Neither,
                        None => false,
                    }
                }
                None => false,
            };
            let renamed = proved
                && std::fs::rename(
                    self.spool.journal.join(&file),
                    self.spool.journal_file(name, "recovered"),
                )
                .is_ok();
            done.push(Summary {
                name: name.to_owned(),
                class: Class::Contained,
                reason: if renamed {
                    "RECOVERED"
                } else {
                    "WORLD_NOT_PROVEN"
                }
                .to_owned(),
            });
        }
        Ok(done)
    }

    /// An unrecovered containment marker exists.
    fn fenced(&self) -> bool {
        list(&self.spool.journal)
            .iter()
            .any(|f| f.ends_with(".contained.json"))
    }

    fn record(
        &self,
        name: &str,
        class: Class,
        reason: &str,
        sha: Option<&str>,
        observed: Option<Vec<String>>,
    ) -> Summary {
        let record = Record {
            version: VERSION,
            name: name.to_owned(),
            class: class.as_str().to_owned(),
            reason: reason.to_owned(),
            sha256: sha.map(str::to_owned),
            observed_active: observed,
        };
        let bytes = serde_json::to_vec(&record).unwrap_or_default();
        let file = format!("{name}.{}.json", class.as_str());
        if let Err(e) = publish(
            &self.spool.journal,
            &file,
            &bytes,
            class == Class::Processing,
        ) {
            eprintln!(
                "lychd-orchestrator reactor: journaling {name} failed: {}",
                e.kind()
            );
        }
        Summary {
            name: name.to_owned(),
            class,
            reason: reason.to_owned(),
        }
    }

    /// Journal a terminal class and retire the transient files of `name`.
    fn finish(
        &self,
        name: &str,
        class: Class,
        reason: &str,
        sha: Option<&str>,
        observed: Option<Vec<String>>,
    ) -> Summary {
        let s = self.record(name, class, reason, sha, observed);
        let _ = std::fs::remove_file(self.spool.journal_file(name, "acquiring"));
        let _ = std::fs::remove_file(self.spool.journal_file(name, "processing"));
        s
    }

    /// The host's custody copy of `name`, when its companion proves it.
    fn custody_intent(&self, name: &str) -> Option<TransitionIntent> {
        let custody = read_admissible(
            &self.spool.journal_file(name, "custody"),
            Some(me()),
            MAX_INTENT_BYTES,
        )
        .ok()?;
        let custody: Custody = serde_json::from_slice(&custody).ok()?;
        let bytes = read_admissible(
            &self.spool.journal_file(name, "intent"),
            Some(me()),
            MAX_INTENT_BYTES,
        )
        .ok()?;
        if custody.version != VERSION
            || custody.name != name
            || custody.bytes != bytes.len() as u64
            || custody.sha256 != sha256_hex(&bytes)
        {
            return None;
        }
        serde_json::from_slice::<WireIntent>(&bytes).ok()?.typed()
    }

    async fn resolve_leftovers(&self) -> Vec<Summary> {
        let mut done = Vec::new();
        let files = list(&self.spool.journal);
        for file in &files {
            if let Some(name) = file.strip_suffix(".processing.json") {
                done.push(self.resolve_processing(name).await);
            }
        }
        for file in &files {
            if let Some(name) = file.strip_suffix(".acquiring.json")
                && !files.contains(&format!("{name}.processing.json"))
            {
                // Claimed, never admitted: no effect was authorized.
                done.push(self.finish(
                    name,
                    Class::Rejected,
                    "INTERRUPTED_ACQUISITION",
                    None,
                    None,
                ));
            }
        }
        done
    }

    /// Claimed work a previous run left: classify by readback; never apply again.
    async fn resolve_processing(&self, name: &str) -> Summary {
        let Some(intent) = self.custody_intent(name) else {
            return self.finish(name, Class::Contained, "CUSTODY_MISMATCH", None, None);
        };
        let scope = intent.scope();
        let world = self
            .systemd
            .settled(&scope, Instant::now() + self.job_timeout)
            .await;
        let observed = world.as_ref().and_then(|w| host_active(&scope, w));
        let (class, reason) = match world.map(|w| classify(&intent, &w)) {
            Some(Readback::Desired) => (Class::Completed, "RESOLVED_DESIRED"),
            Some(Readback::Prior) if intent.operation == Operation::Forward => {
                (Class::Restored, "RESOLVED_PRIOR")
            }
            _ => (Class::Contained, "RESOLVED_NEITHER"),
        };
        let sha = std::fs::read(self.spool.journal_file(name, "intent"))
            .ok()
            .map(|b| sha256_hex(&b));
        self.finish(name, class, reason, sha.as_deref(), observed)
    }

    /// Claim, take custody, recheck, apply, journal one inbox file.
    async fn claim(&self, file: &str) -> Option<Summary> {
        let unique = || uuid::Uuid::new_v4().simple().to_string();
        let (name, problem) = match inbox_name(file) {
            Some(n) if self.spool.known(n) => (format!("{n}.{}", unique()), Some("REPLAY")),
            Some(n) => (n.to_owned(), None),
            None => (format!("invalid.{}", unique()), Some("MALFORMED_NAME")),
        };
        let acquiring = self.spool.journal_file(&name, "acquiring");
        // Claim by rename; a producer's retraction may have won the race.
        std::fs::rename(self.spool.inbox.join(file), &acquiring).ok()?;
        if let Some(reason) = problem {
            return Some(self.finish(&name, Class::Rejected, reason, None, None));
        }
        let bytes = match read_admissible(&acquiring, Some(self.producer_uid), MAX_INTENT_BYTES) {
            Ok(b) => b,
            Err(r) => return Some(self.finish(&name, Class::Rejected, r.as_str(), None, None)),
        };
        // Custody: a private copy and its digest, both durable before anything else.
        let sha = sha256_hex(&bytes);
        let custody = Custody {
            version: VERSION,
            name: name.clone(),
            bytes: bytes.len() as u64,
            sha256: sha.clone(),
        };
        let custody = serde_json::to_vec(&custody).unwrap_or_default();
        if publish(
            &self.spool.journal,
            &format!("{name}.intent.json"),
            &bytes,
            false,
        )
        .is_err()
            || publish(
                &self.spool.journal,
                &format!("{name}.custody.json"),
                &custody,
                false,
            )
            .is_err()
        {
            return Some(self.finish(&name, Class::Rejected, "CUSTODY_FAILED", None, None));
        }
        let sha = Some(sha.as_str());
        let Some(intent) = serde_json::from_slice::<WireIntent>(&bytes)
            .ok()
            .and_then(WireIntent::typed)
        else {
            return Some(self.finish(&name, Class::Rejected, "MALFORMED", sha, None));
        };
        if super::delivery_name(&intent) != name {
            return Some(self.finish(&name, Class::Rejected, "NAME_MISMATCH", sha, None));
        }
        if self.fenced() {
            return Some(self.finish(&name, Class::Declined, "CONTAINED", sha, None));
        }
        if let Err(r) = self.recheck(&intent).await {
            let class = match r {
                HostRefusal::StaleGeneration | HostRefusal::StaleWorld => Class::Declined,
                HostRefusal::Malformed | HostRefusal::ForgedCompensation => Class::Rejected,
            };
            return Some(self.finish(&name, class, r.as_str(), sha, None));
        }
        // Admitted: processing authorizes the effect, then the producer's bytes go.
        self.record(&name, Class::Processing, "", sha, None);
        let _ = std::fs::remove_file(&acquiring);
        let Report {
            outcome,
            reason,
            observed_active,
        } = self
            .systemd
            .apply_locked(&intent, Instant::now() + self.job_timeout)
            .await;
        Some(self.finish(&name, class_of(outcome), reason, sha, observed_active))
    }

    async fn recheck(&self, intent: &TransitionIntent) -> Result<(), HostRefusal> {
        well_formed(&self.registry, &self.graph, intent)?;
        match intent.operation {
            Operation::Forward => {
                let scope = recheck_scope(&self.graph, intent);
                let world = self
                    .systemd
                    .readback(&scope)
                    .await
                    .ok_or(HostRefusal::StaleWorld)?;
                recheck_forward(&self.registry, &self.graph, intent, &world)
            }
            Operation::Compensation => {
                let forward_name = format!("{}-forward", intent.id);
                let completed = self.spool.terminal(&forward_name) == Some(Class::Completed);
                let forward = completed
                    .then(|| self.custody_intent(&forward_name))
                    .flatten();
                recheck_compensation(&self.graph, intent, forward.as_ref())
            }
        }
    }
}

/// File names in `dir` (none when unreadable).
fn list(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}
