//! Secrets: 256 bits from the operating system's random source, rendered as a prefix and 64
//! lowercase hex digits (`lwc_…` credentials, `lws_…` session tokens). Ward stores only their
//! SHA-256 digest; the secret itself is returned once and never logged.

use rand::TryRngCore;
use rand::rngs::OsRng;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest as _, Sha256};

/// Prefix of a credential secret (what `ExchangeCredential` takes as its bearer).
pub const CREDENTIAL_PREFIX: &str = "lwc_";
/// Prefix of a session token.
pub const SESSION_PREFIX: &str = "lws_";
/// Length of a rendered secret: prefix plus 64 hex digits.
pub const RENDERED_LEN: usize = 4 + 64;

/// SHA-256 of a secret's full rendered text: what Ward stores and looks up.
pub type Digest = [u8; 32];

/// A freshly minted secret and its digest. The secret is shown once (and redacted in `Debug`).
pub struct Minted {
    pub secret: SecretString,
    pub digest: Digest,
}

impl std::fmt::Debug for Minted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Minted([redacted])")
    }
}

/// The operating system gave no randomness; nothing can be issued.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no randomness from the operating system")]
pub struct NoRandomness;

fn mint(prefix: &str) -> Result<Minted, NoRandomness> {
    let mut bytes = [0u8; 32];
    OsRng.try_fill_bytes(&mut bytes).map_err(|_| NoRandomness)?;
    let secret = format!("{prefix}{}", hex::encode(bytes));
    let digest = digest(&secret);
    Ok(Minted {
        secret: SecretString::from(secret),
        digest,
    })
}

/// A new credential secret (`lwc_` + 64 hex).
pub fn mint_credential() -> Result<Minted, NoRandomness> {
    mint(CREDENTIAL_PREFIX)
}

/// A new session token (`lws_` + 64 hex).
pub fn mint_session() -> Result<Minted, NoRandomness> {
    mint(SESSION_PREFIX)
}

pub fn digest(secret: &str) -> Digest {
    Sha256::digest(secret.as_bytes()).into()
}

/// Whether `s` has the shape of a secret with `prefix` (a cheap check before any lookup; a
/// malformed token is unknown without asking the database).
pub fn well_formed(prefix: &str, s: &str) -> bool {
    s.len() == RENDERED_LEN
        && s.starts_with(prefix)
        && s[prefix.len()..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Convenience for callers holding a [`SecretString`].
pub fn digest_secret(secret: &SecretString) -> Digest {
    digest(secret.expose_secret())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_secrets_have_their_shape_and_digest() {
        let c = mint_credential().unwrap();
        let s = mint_session().unwrap();
        assert!(well_formed(CREDENTIAL_PREFIX, c.secret.expose_secret()));
        assert!(well_formed(SESSION_PREFIX, s.secret.expose_secret()));
        assert!(!well_formed(SESSION_PREFIX, c.secret.expose_secret()));
        assert!(!well_formed(CREDENTIAL_PREFIX, s.secret.expose_secret()));
        assert_eq!(c.digest, digest(c.secret.expose_secret()));
        assert_eq!(s.digest, digest_secret(&s.secret));
        assert_eq!(format!("{c:?}"), "Minted([redacted])");
        assert!(!format!("{c:?}").contains(c.secret.expose_secret()));
    }

    #[test]
    fn secrets_do_not_repeat() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            assert!(seen.insert(mint_session().unwrap().secret.expose_secret().to_owned()));
        }
    }

    #[test]
    fn shape_check() {
        let hex64 = "0123456789abcdef".repeat(4);
        assert!(well_formed("lws_", &format!("lws_{hex64}")));
        assert!(!well_formed(
            "lws_",
            &format!("lws_{}", hex64.to_uppercase())
        ));
        assert!(!well_formed("lws_", &format!("lws_{}", &hex64[1..])));
        assert!(!well_formed("lws_", &format!("lws_{hex64}0")));
        assert!(!well_formed("lws_", &format!("lwx_{hex64}")));
        assert!(!well_formed("lws_", &format!("lws_{}g", &hex64[1..])));
        assert!(!well_formed("lws_", ""));
        // Multi-byte text of the right byte length is not a token (and does not panic).
        assert!(!well_formed("lws_", &format!("lws_é{}", &hex64[2..])));
    }

    #[test]
    fn digest_is_sha256_of_the_rendered_text() {
        // SHA-256("abc")
        assert_eq!(
            hex::encode(digest("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
