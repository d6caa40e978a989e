//! A start request's identity: its request id (idempotent per principal) and the digest of
//! what it asked for (the same id with another digest is a conflict, never another run).

use sha2::{Digest, Sha256};

use super::budgets::Budgets;

/// The state-schema version a run's state is written in (loop-contract v1's
/// `state_schema_version`); resuming under another one needs an explicit migration.
pub const STATE_SCHEMA_VERSION: &str = "0.1.0";
/// Most bytes of a run's input (data, never control).
pub const MAX_INPUT_BYTES: usize = 64 * 1024;

/// A request id: 1 to 128 of `A-Z a-z 0-9 . _ : -`.
pub fn request_id_ok(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}

/// sha256 hex of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The digest of a start request: its workflow and input digests and its budgets.
pub fn request_digest(workflow_sha256: &str, input_sha256: &str, budgets: &Budgets) -> String {
    sha256(
        format!(
            "lychd.runner.start/v1\nworkflow={workflow_sha256}\ninput={input_sha256}\n{}",
            budgets.canonical()
        )
        .as_bytes(),
    )
}

/// The digest of a start request that also names a timeout or a parent: the plain
/// [`request_digest`] when it names neither, so a request without them keeps its digest.
pub fn request_digest_with(
    plain: String,
    timeout_seconds: Option<u32>,
    parent: Option<&str>,
) -> String {
    if timeout_seconds.is_none() && parent.is_none() {
        return plain;
    }
    sha256(
        format!(
            "{plain}\ntimeout_seconds={}\nparent={}",
            timeout_seconds.unwrap_or(0),
            parent.unwrap_or("")
        )
        .as_bytes(),
    )
}

/// Why a requested timeout is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadTimeout {
    Negative,
    AboveWall,
}

/// The timeout of a request (`timeout_seconds`, 0: none): at least 1 s and at most the run's
/// `max_wall_seconds` (a deadline past the wall budget could never be reached).
pub fn timeout(requested: i64, max_wall_seconds: u64) -> Result<Option<u32>, BadTimeout> {
    match requested {
        0 => Ok(None),
        t if t < 0 => Err(BadTimeout::Negative),
        t if u64::try_from(t).map_or(true, |t| t > max_wall_seconds) => Err(BadTimeout::AboveWall),
        t => Ok(u32::try_from(t).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_and_digests() {
        assert!(request_id_ok("run-1:a.b_c"));
        for bad in ["", "has space", "é", &"x".repeat(129)] {
            assert!(!request_id_ok(bad), "{bad:?}");
        }
        let b = Budgets::contract();
        let d = request_digest("w", "i", &b);
        assert_eq!(d, request_digest("w", "i", &b));
        assert_ne!(d, request_digest("w", "j", &b));
        let mut other = b;
        other.0[0] = 1;
        assert_ne!(d, request_digest("w", "i", &other));
        assert_eq!(request_digest_with(d.clone(), None, None), d);
        assert_ne!(request_digest_with(d.clone(), Some(5), None), d);
        assert_ne!(
            request_digest_with(d.clone(), Some(5), None),
            request_digest_with(d.clone(), Some(6), None)
        );
        assert_ne!(
            request_digest_with(d.clone(), None, Some("p")),
            request_digest_with(d, None, Some("q"))
        );
    }

    #[test]
    fn timeouts_are_bounded_by_the_wall_budget() {
        assert_eq!(timeout(0, 600), Ok(None));
        assert_eq!(timeout(1, 600), Ok(Some(1)));
        assert_eq!(timeout(600, 600), Ok(Some(600)));
        assert_eq!(timeout(11, 10), Err(BadTimeout::AboveWall));
        assert_eq!(timeout(-1, 600), Err(BadTimeout::Negative));
        assert_eq!(timeout(i64::MAX, 600), Err(BadTimeout::AboveWall));
        assert_eq!(timeout(i64::MIN, 600), Err(BadTimeout::Negative));
    }
}
