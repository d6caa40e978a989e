//! The lifecycle lock (LychD design rules §10 Privilege, "Decision: authority before
//! effect"): one non-blocking lock shared by direct systemd actuation and Host Reactor
//! consumption. The file is opened without following links, created `0600` when missing, and
//! must be a regular file owned by the caller with mode exactly `0600`; anything else, or
//! another holder, is a no-effect refusal.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg, OFlag};

/// Why the lock was not taken (nothing was done).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockRefusal {
    /// Another process holds it.
    Contended,
    /// A symbolic link, not a regular file, another owner, or a mode other than `0600`.
    Unsafe,
    /// It could not be opened or created.
    Unavailable,
}

impl LockRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            LockRefusal::Contended => "LOCK_CONTENDED",
            LockRefusal::Unsafe => "LOCK_UNSAFE",
            LockRefusal::Unavailable => "LOCK_UNAVAILABLE",
        }
    }
}

/// The held lock; released when dropped.
pub struct LifecycleLock {
    _held: Flock<File>,
}

impl LifecycleLock {
    /// Take the lock at `path` without blocking.
    pub fn acquire(path: &Path) -> Result<LifecycleLock, LockRefusal> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).bits())
            .open(path)
            .map_err(|e| match e.raw_os_error().map(Errno::from_raw) {
                // O_NOFOLLOW on a link: ELOOP; a directory: EISDIR; a FIFO/socket: ENXIO.
                Some(Errno::ELOOP | Errno::EISDIR | Errno::ENXIO) => LockRefusal::Unsafe,
                _ => LockRefusal::Unavailable,
            })?;
        let meta = file.metadata().map_err(|_| LockRefusal::Unavailable)?;
        if !meta.file_type().is_file()
            || meta.uid() != nix::unistd::geteuid().as_raw()
            || meta.mode() & 0o7777 != 0o600
        {
            return Err(LockRefusal::Unsafe);
        }
        let held = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
            if e == Errno::EWOULDBLOCK {
                LockRefusal::Contended
            } else {
                LockRefusal::Unavailable
            }
        })?;
        Ok(LifecycleLock { _held: held })
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_second_holder_is_refused_and_the_lock_is_released_on_drop() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("lifecycle.lock");
        let held = LifecycleLock::acquire(&path).expect("first");
        let mode = std::fs::metadata(&path)
            .expect("created")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o600, "created owner-only");
        assert_eq!(
            LifecycleLock::acquire(&path).err(),
            Some(LockRefusal::Contended)
        );
        drop(held);
        LifecycleLock::acquire(&path).expect("released");
    }

    #[test]
    fn a_symlinked_or_wrong_mode_lock_file_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let real = dir.path().join("real.lock");
        std::fs::write(&real, b"").expect("write");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let link = dir.path().join("link.lock");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert_eq!(
            LifecycleLock::acquire(&link).err(),
            Some(LockRefusal::Unsafe)
        );
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(
            LifecycleLock::acquire(&real).err(),
            Some(LockRefusal::Unsafe)
        );
        assert_eq!(
            LifecycleLock::acquire(dir.path()).err(),
            Some(LockRefusal::Unsafe)
        );
    }
}
