//! The host-reactor spool (LychD design rules §10 Privilege, "The physical transaction";
//! §23 "Host Mutation Port"): the Orchestrator (producer) publishes one bounded typed JSON
//! intent into an owner-only inbox; a one-shot host consumer claims it by rename, takes
//! custody of a no-follow copy, rechecks everything, applies through the `systemd` actuator
//! and journals one result class. The producer only reads the journal.
//!
//! Layout of a spool directory `S` (both directories owner-only, `0700`):
//!
//! | file | written by | meaning |
//! | --- | --- | --- |
//! | `S/inbox/<id>-<op>.json` | producer (link from a private temp file: atomic, never replacing) | a published intent |
//! | `S/journal/<name>.acquiring.json` | consumer (rename from the inbox) | claimed, no custody yet |
//! | `S/journal/<name>.intent.json` | consumer | its private `0600` copy of the claimed bytes |
//! | `S/journal/<name>.custody.json` | consumer | the copy's length and SHA-256 |
//! | `S/journal/<name>.processing.json` | consumer | claimed work without a terminal observation |
//! | `S/journal/<name>.<class>.json` | consumer | `completed`, `declined`, `restored`, `contained` or `rejected` |
//! | `S/journal/<name>.recovered.json` | `reactor recover` | a containment an operator resolved |
//!
//! `<name>` is `<32-hex id>-forward` or `<32-hex id>-compensation`.

pub mod cli;
pub mod consumer;
pub mod producer;

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::intent::{Operation, TransitionIntent, is_transition_id};

/// Largest accepted intent, in bytes.
pub const MAX_INTENT_BYTES: u64 = 64 * 1024;
/// The protocol version of every spool file.
pub const VERSION: u32 = 1;

/// A journal result class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The exact desired world observed.
    Completed,
    /// Preconditions failed before any effect.
    Declined,
    /// The exact prior world observed after a failure.
    Restored,
    /// Claimed work not yet classified (a marker, never terminal).
    Processing,
    /// Neither world proved: fences every later intent until recovered.
    Contained,
    /// An invalid delivery; not a physical outcome.
    Rejected,
}

impl Class {
    pub const TERMINAL: [Class; 5] = [
        Class::Completed,
        Class::Declined,
        Class::Restored,
        Class::Contained,
        Class::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Completed => "completed",
            Class::Declined => "declined",
            Class::Restored => "restored",
            Class::Processing => "processing",
            Class::Contained => "contained",
            Class::Rejected => "rejected",
        }
    }
}

/// The delivery name of an intent: `<id>-<operation>`.
pub fn delivery_name(intent: &TransitionIntent) -> String {
    format!("{}-{}", intent.id, intent.operation.as_str())
}

/// Whether `file` is `<name>.json` for a well-formed delivery name; the name.
pub fn inbox_name(file: &str) -> Option<&str> {
    let name = file.strip_suffix(".json")?;
    let (id, op) = name.split_once('-')?;
    (is_transition_id(id) && matches!(op, "forward" | "compensation")).then_some(name)
}

/// The intent on the wire: closed (`deny_unknown_fields`), logical identities only.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireIntent {
    pub version: u32,
    pub id: String,
    pub operation: String,
    pub config_digest: String,
    pub target_animator: String,
    pub capability_key: String,
    pub evict: Vec<String>,
    pub launch: Vec<String>,
    pub expected_active: Vec<String>,
}

impl From<&TransitionIntent> for WireIntent {
    fn from(i: &TransitionIntent) -> Self {
        WireIntent {
            version: VERSION,
            id: i.id.clone(),
            operation: i.operation.as_str().to_owned(),
            config_digest: i.config_digest.clone(),
            target_animator: i.target_animator.clone(),
            capability_key: i.capability_key.clone(),
            evict: i.evict.clone(),
            launch: i.launch.clone(),
            expected_active: i.expected_active.clone(),
        }
    }
}

impl WireIntent {
    /// The typed intent, or `None` for another version or operation word.
    pub fn typed(self) -> Option<TransitionIntent> {
        let operation = match self.operation.as_str() {
            "forward" => Operation::Forward,
            "compensation" => Operation::Compensation,
            _ => return None,
        };
        (self.version == VERSION).then_some(TransitionIntent {
            id: self.id,
            operation,
            config_digest: self.config_digest,
            target_animator: self.target_animator,
            capability_key: self.capability_key,
            evict: self.evict,
            launch: self.launch,
            expected_active: self.expected_active,
        })
    }
}

/// A journal record (processing marker or result).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub version: u32,
    pub name: String,
    pub class: String,
    /// A stable word: why (empty on success).
    pub reason: String,
    /// The SHA-256 of the custody copy, when custody was taken.
    pub sha256: Option<String>,
    /// The active set read back among the intent's animators, when one was read.
    pub observed_active: Option<Vec<String>>,
}

/// The custody companion of a claimed intent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Custody {
    pub version: u32,
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The two directories of a spool.
#[derive(Debug, Clone)]
pub struct Spool {
    pub inbox: PathBuf,
    pub journal: PathBuf,
}

/// Create `dir` owner-only when missing; it must be a real directory owned by the caller and,
/// when `private`, one that neither group nor others may use.
fn owner_only_dir(dir: &Path, private: bool) -> Result<(), String> {
    if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(dir)
        && e.kind() != std::io::ErrorKind::AlreadyExists
    {
        return Err(format!("{}: cannot be created", dir.display()));
    }
    let meta =
        std::fs::symlink_metadata(dir).map_err(|_| format!("{}: unreadable", dir.display()))?;
    if !meta.file_type().is_dir() {
        return Err(format!(
            "{}: must be a directory, not a link",
            dir.display()
        ));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(format!("{}: must be owned by the caller", dir.display()));
    }
    if private && meta.mode() & 0o077 != 0 {
        return Err(format!("{}: must be owner-only (0700)", dir.display()));
    }
    Ok(())
}

impl Spool {
    /// Open (creating when missing) the spool at `root` (the caller's own directory; the
    /// inbox and the journal in it owner-only).
    pub fn open(root: &Path) -> Result<Spool, String> {
        owner_only_dir(root, false)?;
        let spool = Spool {
            inbox: root.join("inbox"),
            journal: root.join("journal"),
        };
        owner_only_dir(&spool.inbox, true)?;
        owner_only_dir(&spool.journal, true)?;
        Ok(spool)
    }

    pub fn journal_file(&self, name: &str, suffix: &str) -> PathBuf {
        self.journal.join(format!("{name}.{suffix}.json"))
    }

    /// The terminal class journaled for `name`, if any.
    pub fn terminal(&self, name: &str) -> Option<Class> {
        Class::TERMINAL.into_iter().find(|c| {
            std::fs::symlink_metadata(self.journal_file(name, c.as_str()))
                .is_ok_and(|m| m.file_type().is_file())
        })
    }

    /// Whether anything of `name` is in the journal already (a replay).
    pub fn known(&self, name: &str) -> bool {
        ["intent", "custody", "processing", "recovered"]
            .into_iter()
            .any(|s| std::fs::symlink_metadata(self.journal_file(name, s)).is_ok())
            || self.terminal(name).is_some()
    }
}

/// Write `bytes` to a new private `0600` file in `dir` and give it `name` atomically:
/// replacing an existing `name` when `replace`, else failing with `AlreadyExists`.
pub fn publish(dir: &Path, name: &str, bytes: &[u8], replace: bool) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC).bits())
        .open(&tmp)?;
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    drop(f);
    let placed = written.and_then(|()| {
        if replace {
            std::fs::rename(&tmp, dir.join(name))
        } else {
            std::fs::hard_link(&tmp, dir.join(name))
        }
    });
    let _ = std::fs::remove_file(&tmp);
    placed?;
    File::open(dir)?.sync_all()
}

/// Why a claimed file is not admissible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inadmissible {
    Symlink,
    NotRegular,
    WrongOwner,
    WrongMode,
    Oversize,
    Unreadable,
}

impl Inadmissible {
    pub fn as_str(self) -> &'static str {
        match self {
            Inadmissible::Symlink => "SYMLINK",
            Inadmissible::NotRegular => "NOT_REGULAR",
            Inadmissible::WrongOwner => "WRONG_OWNER",
            Inadmissible::WrongMode => "WRONG_MODE",
            Inadmissible::Oversize => "OVERSIZE",
            Inadmissible::Unreadable => "UNREADABLE",
        }
    }
}

/// Read `path` through a no-follow descriptor: a regular file owned by `owner` (when given),
/// mode `0600`, at most `max` bytes.
pub fn read_admissible(path: &Path, owner: Option<u32>, max: u64) -> Result<Vec<u8>, Inadmissible> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).bits())
        .open(path)
        .map_err(|e| match e.raw_os_error().map(Errno::from_raw) {
            Some(Errno::ELOOP) => Inadmissible::Symlink,
            Some(Errno::ENXIO | Errno::EISDIR) => Inadmissible::NotRegular,
            _ => Inadmissible::Unreadable,
        })?;
    let meta = f.metadata().map_err(|_| Inadmissible::Unreadable)?;
    if !meta.file_type().is_file() {
        return Err(Inadmissible::NotRegular);
    }
    if owner.is_some_and(|o| meta.uid() != o) {
        return Err(Inadmissible::WrongOwner);
    }
    if meta.mode() & 0o7777 != 0o600 {
        return Err(Inadmissible::WrongMode);
    }
    if meta.len() > max {
        return Err(Inadmissible::Oversize);
    }
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| Inadmissible::Unreadable)?;
    if bytes.len() as u64 > max {
        return Err(Inadmissible::Oversize);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_delivery_names_are_claimable() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            inbox_name(&format!("{id}-forward.json")),
            Some(&*format!("{id}-forward"))
        );
        assert!(inbox_name(&format!("{id}-compensation.json")).is_some());
        assert!(inbox_name(&format!("{id}-other.json")).is_none());
        assert!(inbox_name(&format!(".{id}-forward.json.tmp")).is_none());
        assert!(inbox_name("x-forward.json").is_none());
    }

    #[test]
    fn a_spool_is_created_owner_only_and_an_open_inbox_or_a_linked_journal_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("spool");
        let spool = Spool::open(&root).expect("created");
        let mode = std::fs::metadata(&spool.inbox)
            .expect("inbox")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::set_permissions(&spool.inbox, std::fs::Permissions::from_mode(0o733))
            .expect("chmod");
        let e = Spool::open(&root).expect_err("open inbox");
        assert!(e.contains("owner-only"), "{e}");
        std::fs::set_permissions(&spool.inbox, std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        std::fs::remove_dir(&spool.journal).expect("rmdir");
        std::os::unix::fs::symlink(dir.path(), &spool.journal).expect("link");
        let e = Spool::open(&root).expect_err("linked journal");
        assert!(e.contains("not a link"), "{e}");
    }

    #[test]
    fn publication_never_replaces_and_reads_refuse_links_and_wrong_modes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tmp");
        publish(dir.path(), "a.json", b"{}", false).expect("first");
        let again = publish(dir.path(), "a.json", b"[]", false).expect_err("no replace");
        assert_eq!(again.kind(), std::io::ErrorKind::AlreadyExists);
        let path = dir.path().join("a.json");
        assert_eq!(read_admissible(&path, None, 10).expect("ok"), b"{}");
        assert_eq!(read_admissible(&path, None, 1), Err(Inadmissible::Oversize));
        let me = nix::unistd::geteuid().as_raw();
        assert_eq!(
            read_admissible(&path, Some(me.wrapping_add(1)), 10),
            Err(Inadmissible::WrongOwner)
        );
        let link = dir.path().join("l.json");
        std::os::unix::fs::symlink(&path, &link).expect("link");
        assert_eq!(read_admissible(&link, None, 10), Err(Inadmissible::Symlink));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(
            read_admissible(&path, None, 10),
            Err(Inadmissible::WrongMode)
        );
        // Leftover temp files are never left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 2);
    }
}
