//! Secret files: written mode 0600, created new (an existing file is replaced only when asked),
//! generated from the operating system's randomness, and named as the Podman secrets the
//! Quadlet units mount (`deploy/quadlet/`), so `podman secret create <name> <dir>/<name>` is
//! all an operator does with them.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use lychd_runtime::Office;

/// The mode of every credential, password and token file the tool writes.
pub const SECRET_MODE: u32 = 0o600;

/// The PostgreSQL superuser's password (the PostgreSQL container's `POSTGRES_PASSWORD_FILE`).
pub const POSTGRES_PASSWORD: &str = "lychd-postgres-password";
/// The first operator's standing credential, from Ward's bootstrap.
pub const OPERATOR_CREDENTIAL: &str = "lychd-operator-credential";

/// `lychd-<office>-owner-password`: the owner role's password (migrations).
pub fn owner_password(office: Office) -> String {
    format!("lychd-{office}-owner-password")
}

/// `lychd-<office>-app-password`: the runtime role's password (`serve`).
pub fn app_password(office: Office) -> String {
    format!("lychd-{office}-app-password")
}

/// `lychd-<office>-credential`: the standing credential of the office's service principal.
pub fn credential(office: Office) -> String {
    format!("lychd-{office}-credential")
}

/// Every secret file name of a deployment's database: the superuser's and each office's two
/// role passwords.
pub fn password_names() -> Vec<String> {
    std::iter::once(POSTGRES_PASSWORD.to_owned())
        .chain(
            Office::ALL
                .into_iter()
                .flat_map(|o| [owner_password(o), app_password(o)]),
        )
        .collect()
}

/// Write a secret with [`SECRET_MODE`] (created new; an existing file is replaced).
pub fn write_secret(path: &Path, secret: &str) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(SECRET_MODE)
        .open(path)?;
    f.write_all(secret.as_bytes())?;
    Ok(())
}

/// 256 bits from the operating system's randomness, as 64 hexadecimal characters (safe in a
/// connection string and in SQL without quoting).
pub fn generate() -> anyhow::Result<String> {
    use rand::TryRngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| anyhow::anyhow!("the operating system's randomness: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The secret in `dir/name`, generated and written first when the file does not exist: an
/// existing secret is kept, so running a provisioning command again changes nothing.
/// Returns the path and whether it was created now.
pub fn ensure(dir: &Path, name: &str) -> anyhow::Result<(PathBuf, bool)> {
    let path = dir.join(name);
    if path.is_file() {
        return Ok((path, false));
    }
    write_secret(&path, &generate()?)?;
    Ok((path, true))
}

/// Read a secret file (trailing newlines dropped; an empty file is refused, naming the file
/// and never the content).
pub fn read(path: &Path) -> anyhow::Result<String> {
    let raw = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {}", path.display(), e.kind()))?;
    let value = raw.trim_end_matches(['\n', '\r']);
    anyhow::ensure!(!value.is_empty(), "{} is empty", path.display());
    Ok(value.to_owned())
}

/// Create `dir` (mode 0700) if missing.
pub fn private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
    }

    #[test]
    fn secrets_are_written_mode_0600_even_over_a_readable_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let credential = dir.path().join("ward.credential");
        write_secret(&credential, "credential").expect("write");
        assert_eq!(mode(&credential), 0o600);

        let token = dir.path().join("operator.token");
        std::fs::write(&token, "old session, readable by everyone").expect("old");
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_secret(&token, "new session").expect("write");
        assert_eq!(mode(&token), 0o600);
        assert_eq!(
            std::fs::read_to_string(&token).expect("read"),
            "new session"
        );
    }

    #[test]
    fn a_generated_secret_is_256_bits_of_hex_and_never_repeats() {
        let a = generate().expect("random");
        assert_eq!(a.len(), 64, "{}", a.len());
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, generate().expect("random"));
    }

    #[test]
    fn ensure_generates_once_and_keeps_what_exists() {
        let dir = tempfile::tempdir().expect("tmp");
        let (path, created) = ensure(dir.path(), "lychd-ward-app-password").expect("ensure");
        assert!(created);
        assert_eq!(mode(&path), 0o600);
        let first = read(&path).expect("read");
        let (again, created) = ensure(dir.path(), "lychd-ward-app-password").expect("again");
        assert_eq!(again, path);
        assert!(!created);
        assert_eq!(read(&path).expect("read"), first);
    }

    #[test]
    fn an_empty_secret_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("empty");
        std::fs::write(&path, "\n").expect("write");
        let e = read(&path).expect_err("empty").to_string();
        assert!(
            e.contains("empty") && e.contains(&path.display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn the_names_are_the_secrets_the_offices_configurations_read() {
        let names: BTreeSet<String> = password_names().into_iter().collect();
        assert_eq!(names.len(), 1 + 2 * Office::ALL.len());
        for office in Office::ALL {
            let cfg = lychd_runtime::config::OfficeConfig::load(
                office,
                Some(
                    &Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join(format!("../../deploy/config/{office}.toml")),
                ),
                Vec::new(),
            )
            .expect("example config");
            let file = |p: Option<PathBuf>| {
                p.and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            };
            assert_eq!(file(cfg.database.password_file), Some(app_password(office)));
            assert_eq!(
                file(cfg.database.migrate_password_file),
                Some(owner_password(office))
            );
            assert_eq!(file(cfg.auth.credential_file), Some(credential(office)));
            assert!(names.contains(&app_password(office)));
            assert!(names.contains(&owner_password(office)));
        }
    }
}
