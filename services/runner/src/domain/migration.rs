//! State-schema migrations (loop-contract v1 `checkpoint.migration`: "explicit state migration
//! with before/after digests and rollback rule"). A run is bound to the state-schema version
//! its state is written in (`runs.state_schema_version`, the checkpoint's
//! `versions.state_schema_version`); its state moves to another version only by a registered,
//! pure migration `from → to`, or by that migration's rollback `to → from`.
//!
//! - The **state** a migration transforms is the checkpoint body without what a commit
//!   stamps on it (`accepted_event_cursor`, `generation`, `versions`); its digest is sha256
//!   over its canonical JSON (HL-C14N-1).
//! - A migration's **rollback rule** is its inverse function, and the rollback is exact: the
//!   state it gives back must have the digest the forward migration recorded as `before`
//!   (the caller compares against its ledger), else the rollback is refused.
//! - A process **understands** the version it writes and every version a registered
//!   migration leads from or to. The step loop writes one version
//!   ([`Registry::writes`]); a run in another version is not driven (resume refuses it, no
//!   quarantine: nothing is corrupt) until it is migrated to that version.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::checkpoint::{Checkpoint, checksum};
use super::run::STATE_SCHEMA_VERSION;

/// A pure transformation of a state (`None`: the state is not of the expected shape).
pub type Transform = fn(&Value) -> Option<Value>;

/// A registered migration `from → to` and its rollback.
#[derive(Clone, Copy)]
pub struct Migration {
    pub name: &'static str,
    pub from: &'static str,
    pub to: &'static str,
    pub forward: Transform,
    /// The rollback rule's inverse (`to → from`).
    pub rollback: Transform,
    /// The rollback rule as recorded in the ledger.
    pub rollback_rule: &'static str,
}

/// Which way a migration is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Rollback,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Forward => "forward",
            Direction::Rollback => "rollback",
        }
    }
}

/// The migrations a process knows, and the state-schema version its step loop writes.
#[derive(Clone)]
pub struct Registry {
    writes: &'static str,
    migrations: Vec<Migration>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin()
    }
}

impl Registry {
    /// What the office ships: it writes [`STATE_SCHEMA_VERSION`] and knows no migration (there
    /// is one state-schema version so far).
    pub fn builtin() -> Registry {
        Registry {
            writes: STATE_SCHEMA_VERSION,
            migrations: Vec::new(),
        }
    }

    /// This registry with `m` registered.
    pub fn with(mut self, m: Migration) -> Registry {
        self.migrations.push(m);
        self
    }

    /// This registry writing `version` (a version it must understand).
    pub fn writing(mut self, version: &'static str) -> Registry {
        self.writes = version;
        self
    }

    /// The state-schema version the step loop writes.
    pub fn writes(&self) -> &'static str {
        self.writes
    }

    /// Whether a state in `version` is understood (written, or reachable by a migration).
    pub fn understands(&self, version: &str) -> bool {
        version == self.writes
            || self
                .migrations
                .iter()
                .any(|m| m.from == version || m.to == version)
    }

    /// The registered migration from `from` to `to` (forward, or a rollback).
    pub fn find(&self, from: &str, to: &str) -> Option<(Migration, Direction)> {
        self.migrations.iter().find_map(|m| {
            if m.from == from && m.to == to {
                Some((*m, Direction::Forward))
            } else if m.to == from && m.from == to {
                Some((*m, Direction::Rollback))
            } else {
                None
            }
        })
    }
}

/// What a commit stamps on a checkpoint body (not part of the state a migration transforms).
const STAMPED: [&str; 3] = ["accepted_event_cursor", "generation", "versions"];

/// The state of a checkpoint body (`None`: not a JSON object).
pub fn state_of(body: &[u8]) -> Option<Value> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let o = v.as_object_mut()?;
    for k in STAMPED {
        o.remove(k);
    }
    Some(v)
}

/// The state-schema version a checkpoint body names.
pub fn version_of(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    Some(
        v.get("versions")?
            .get("state_schema_version")?
            .as_str()?
            .to_owned(),
    )
}

fn canonical(v: &Value) -> Vec<u8> {
    // A `Value` always serializes, and serialized JSON canonicalizes.
    let raw = serde_json::to_vec(v).unwrap_or_default();
    lychd_canon::canonicalize(&raw).unwrap_or(raw)
}

/// The digest of a state (sha256 hex of its canonical JSON).
pub fn digest(state: &Value) -> String {
    hex::encode(Sha256::digest(canonical(state)))
}

/// A migration applied to a checkpoint body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    pub name: &'static str,
    pub direction: Direction,
    pub from: String,
    pub to: String,
    pub before_sha256: String,
    pub after_sha256: String,
    pub rollback_rule: &'static str,
    /// The checkpoint under `to`, at `version` and `generation`.
    pub checkpoint: Checkpoint,
}

/// Why a migration cannot be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No registered migration leads from the body's version to the one asked for.
    NoMigration,
    /// The body is not a checkpoint of ours, or the transform refused its shape.
    Malformed,
}

/// Apply the registered migration from `body`'s state-schema version to `to`, making the
/// checkpoint of `version` under `generation`.
pub fn migrate(
    registry: &Registry,
    body: &[u8],
    to: &str,
    version: i64,
    generation: i64,
) -> Result<Migrated, Refused> {
    let from = version_of(body).ok_or(Refused::Malformed)?;
    let (m, direction) = registry.find(&from, to).ok_or(Refused::NoMigration)?;
    let before = state_of(body).ok_or(Refused::Malformed)?;
    let transform = match direction {
        Direction::Forward => m.forward,
        Direction::Rollback => m.rollback,
    };
    let after = transform(&before).ok_or(Refused::Malformed)?;
    let Some(Value::Object(mut versions)) = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("versions").cloned())
    else {
        return Err(Refused::Malformed);
    };
    versions.insert("state_schema_version".into(), json!(to));
    let mut whole = after.clone();
    let o = whole.as_object_mut().ok_or(Refused::Malformed)?;
    o.insert("accepted_event_cursor".into(), json!(version));
    o.insert("generation".into(), json!(generation));
    o.insert("versions".into(), Value::Object(versions));
    let body = canonical(&whole);
    let checksum = checksum(&body);
    Ok(Migrated {
        name: m.name,
        direction,
        from,
        to: to.to_owned(),
        before_sha256: digest(&before),
        after_sha256: digest(&after),
        rollback_rule: m.rollback_rule,
        checkpoint: Checkpoint { body, checksum },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::budgets::Budgets;
    use crate::domain::checkpoint::{Envelope, Snapshot, progress_of, verifies};
    use crate::domain::progress::Progress;

    fn add_notes(s: &Value) -> Option<Value> {
        let mut s = s.clone();
        s.as_object_mut()?.insert("notes".into(), json!([]));
        Some(s)
    }

    fn drop_notes(s: &Value) -> Option<Value> {
        let mut s = s.clone();
        s.as_object_mut()?.remove("notes")?;
        Some(s)
    }

    const NOTES: Migration = Migration {
        name: "add-notes",
        from: "0.1.0",
        to: "0.1.1",
        forward: add_notes,
        rollback: drop_notes,
        rollback_rule: "inverse: remove `notes`; exact (digest equals the forward's before)",
    };

    fn body() -> Vec<u8> {
        let p = Progress::default();
        Snapshot {
            run_id: "r",
            version: 3,
            generation: 2,
            state: "PLAN",
            budgets: Budgets::contract(),
            interrupt_pending: false,
            progress: &p,
            envelope: Envelope {
                workflow_name: "w",
                workflow_version: "0.1.0",
                workflow_sha256: "a",
                state_schema_version: "0.1.0",
                fsm_sha256: "f",
            },
        }
        .checkpoint()
        .body
    }

    #[test]
    fn the_builtin_registry_understands_only_the_version_it_writes() {
        let r = Registry::builtin();
        assert_eq!(r.writes(), STATE_SCHEMA_VERSION);
        assert!(r.understands("0.1.0"));
        assert!(!r.understands("0.1.1"));
        assert_eq!(
            migrate(&r, &body(), "0.1.1", 4, 2).map(|_| ()),
            Err(Refused::NoMigration)
        );
        let r = r.with(NOTES);
        assert!(r.understands("0.1.1"));
        assert!(!r.understands("0.2.0"));
    }

    #[test]
    fn a_migration_and_its_rollback_record_digests_and_round_trip_exactly() {
        let r = Registry::builtin().with(NOTES);
        let b = body();
        let fwd = migrate(&r, &b, "0.1.1", 4, 2).expect("forward");
        assert_eq!(fwd.direction, Direction::Forward);
        assert_eq!((fwd.from.as_str(), fwd.to.as_str()), ("0.1.0", "0.1.1"));
        assert_eq!(fwd.before_sha256, digest(&state_of(&b).expect("state")));
        assert_ne!(fwd.before_sha256, fwd.after_sha256);
        assert!(verifies(&fwd.checkpoint.body, &fwd.checkpoint.checksum));
        assert_eq!(version_of(&fwd.checkpoint.body).as_deref(), Some("0.1.1"));
        let v: Value = serde_json::from_slice(&fwd.checkpoint.body).expect("json");
        assert_eq!(v["notes"], json!([]));
        assert_eq!(v["accepted_event_cursor"], 4);
        // The progress survives the migration.
        assert_eq!(progress_of(&fwd.checkpoint.body), progress_of(&b));
        let back = migrate(&r, &fwd.checkpoint.body, "0.1.0", 5, 2).expect("rollback");
        assert_eq!(back.direction, Direction::Rollback);
        assert_eq!(back.before_sha256, fwd.after_sha256);
        assert_eq!(back.after_sha256, fwd.before_sha256, "exact rollback");
        assert_eq!(
            migrate(&r, b"[1]", "0.1.1", 4, 2).map(|_| ()),
            Err(Refused::Malformed)
        );
    }
}
