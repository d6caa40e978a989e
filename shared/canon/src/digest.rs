//! Record and binding digests (spec §2, resolutions §A).
//!
//! `sha256:` + 64 lowercase hex of SHA-256 over a domain prefix, one NUL byte,
//! then the canonical bytes. A record digest leaves out the top-level `digest`
//! member; a binding digest covers the value as it is. Verification is byte
//! equality of the rendered string.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

use crate::canon::{self, Omit};
use crate::error::C14nError;
use crate::parse::ParseOptions;
use crate::value::Value;

/// The two digest domains of HelmLoop v0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Domain {
    /// `HelmLoop/v0.1/Record`: the top-level `digest` member is left out.
    Record,
    /// `HelmLoop/v0.1/Binding`: the value as it is.
    Binding,
}

impl Domain {
    /// The domain prefix, without the NUL separator.
    pub const fn prefix(self) -> &'static str {
        match self {
            Domain::Record => "HelmLoop/v0.1/Record",
            Domain::Binding => "HelmLoop/v0.1/Binding",
        }
    }

    /// What the canonical bytes of this domain leave out.
    pub const fn omit(self) -> Omit {
        match self {
            Domain::Record => Omit::TopLevelDigest,
            Domain::Binding => Omit::Nothing,
        }
    }
}

/// A SHA-256 digest, rendered `sha256:<64 lowercase hex>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// Wraps raw digest bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Digest(bytes)
    }

    /// The raw digest bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The rendered form, `sha256:<hex>`.
    pub fn render(&self) -> String {
        self.rendered_str().as_str().to_owned()
    }

    /// The rendered bytes, on the stack (digests are rendered often).
    fn rendered(&self) -> [u8; RENDERED_LEN] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; RENDERED_LEN];
        out[..PREFIX.len()].copy_from_slice(PREFIX.as_bytes());
        for (pair, b) in out[PREFIX.len()..].chunks_exact_mut(2).zip(self.0) {
            pair[0] = HEX[usize::from(b >> 4)];
            pair[1] = HEX[usize::from(b & 0xF)];
        }
        out
    }

    fn rendered_str(&self) -> RenderedDigest {
        RenderedDigest(self.rendered())
    }

    /// Parses the rendered form; only `sha256:` + exactly 64 lowercase hex digits.
    pub fn parse(s: &str) -> Option<Digest> {
        let hex_part = s.strip_prefix(PREFIX)?.as_bytes();
        if hex_part.len() != 64 {
            return None;
        }
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let mut bytes = [0u8; 32];
        for (b, pair) in bytes.iter_mut().zip(hex_part.chunks_exact(2)) {
            *b = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        Some(Digest(bytes))
    }
}

const PREFIX: &str = "sha256:";
const RENDERED_LEN: usize = PREFIX.len() + 64;

/// A rendered digest on the stack; always ASCII.
struct RenderedDigest([u8; RENDERED_LEN]);

impl RenderedDigest {
    fn as_str(&self) -> &str {
        // Only ASCII prefix and hex digits are ever written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rendered_str().as_str())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Error parsing a rendered digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestSyntaxError;

impl fmt::Display for DigestSyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DIGEST_SYNTAX: expected sha256: followed by 64 lowercase hex digits")
    }
}

impl std::error::Error for DigestSyntaxError {}

impl FromStr for Digest {
    type Err = DigestSyntaxError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Digest::parse(s).ok_or(DigestSyntaxError)
    }
}

/// Digest of bytes that are already canonical (for `domain`: a record's bytes
/// must already lack the top-level `digest` member).
pub fn digest_canonical(domain: Domain, canonical: &[u8]) -> Digest {
    let mut h = Sha256::new();
    h.update(domain.prefix().as_bytes());
    h.update([0u8]);
    h.update(canonical);
    Digest(h.finalize().into())
}

/// The canonical bytes `domain` hashes for `value`.
pub fn canonical_for_domain(domain: Domain, value: &Value) -> Result<Vec<u8>, C14nError> {
    canon::to_canonical_vec_omit(value, domain.omit())
}

/// Digest of `value` in `domain`.
pub fn digest_value(domain: Domain, value: &Value) -> Result<Digest, C14nError> {
    Ok(digest_canonical(
        domain,
        &canonical_for_domain(domain, value)?,
    ))
}

/// Record digest of `value` (top-level `digest` member left out).
pub fn record_digest(value: &Value) -> Result<Digest, C14nError> {
    digest_value(Domain::Record, value)
}

/// Binding digest of `value`.
pub fn binding_digest(value: &Value) -> Result<Digest, C14nError> {
    digest_value(Domain::Binding, value)
}

/// Binding and record digests of `value` from a single canonical
/// serialization into `scratch`: the record-domain bytes are the binding
/// bytes without the top-level `digest` member, so they are hashed in two
/// slices instead of being serialized again.
#[doc(hidden)]
pub fn binding_and_record_digest(
    value: &Value,
    scratch: &mut Vec<u8>,
) -> Result<(Digest, Digest), C14nError> {
    let omitted = canon::write_canonical_marking_digest(value, scratch)?;
    let binding = digest_canonical(Domain::Binding, scratch);
    let record = match omitted {
        None => digest_canonical(Domain::Record, scratch),
        Some(r) => {
            let mut h = Sha256::new();
            h.update(Domain::Record.prefix().as_bytes());
            h.update([0u8]);
            h.update(&scratch[..r.start]);
            h.update(&scratch[r.end..]);
            Digest(h.finalize().into())
        }
    };
    Ok((binding, record))
}

/// Digest of JSON text in `domain`: strict parse, canonicalize, hash (streaming,
/// no tree is built).
pub fn digest_json(domain: Domain, input: &[u8]) -> Result<Digest, C14nError> {
    digest_json_with(domain, input, ParseOptions::default())
}

/// [`digest_json`] with explicit parse options.
pub fn digest_json_with(
    domain: Domain,
    input: &[u8],
    options: ParseOptions,
) -> Result<Digest, C14nError> {
    let mut h = Sha256::new();
    h.update(domain.prefix().as_bytes());
    h.update([0u8]);
    canon::canonicalize_chunks(input, options, domain.omit(), |chunk| h.update(chunk))?;
    Ok(Digest(h.finalize().into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendering_round_trips_and_is_strict() {
        let d = digest_canonical(Domain::Binding, b"{}");
        let s = d.render();
        assert!(s.starts_with("sha256:") && s.len() == 71);
        assert_eq!(Digest::parse(&s), Some(d));
        assert_eq!(Digest::parse(&s.to_uppercase()), None);
        assert_eq!(Digest::parse(&s[..70]), None);
        assert_eq!(Digest::parse(&s.replacen("sha256:", "sha512:", 1)), None);
        let bytes: [u8; 32] = std::array::from_fn(|i| (i * 37 + 5) as u8);
        let d = Digest::from_bytes(bytes);
        assert_eq!(d.render(), format!("sha256:{}", hex::encode(bytes)));
        assert_eq!(Digest::parse(&d.render()), Some(d));
        for bad in ["g", "G", "A", "F", " ", "\u{e9}"] {
            let mut t = d.render();
            t.replace_range(70..71, bad);
            assert_eq!(Digest::parse(&t), None, "{t}");
        }
    }

    #[test]
    fn one_serialization_gives_both_digests() {
        let cases = [
            r#"{"digest":"x"}"#,
            r#"{"digest":"x","z":1}"#,
            r#"{"a":1,"digest":"x"}"#,
            r#"{"a":[1,{"digest":"n"}],"digest":{"q":2},"id":"r"}"#,
            r#"{"a":1,"b":2}"#,
            r#"{"Digest":1,"digests":2}"#,
            r#"{}"#,
            r#"[{"digest":"x"}]"#,
            r#""digest""#,
            r#"7"#,
        ];
        let mut scratch = Vec::new();
        for text in cases {
            let v = crate::parse::parse(text.as_bytes()).unwrap();
            let (b, r) = binding_and_record_digest(&v, &mut scratch).unwrap();
            assert_eq!(b, binding_digest(&v).unwrap(), "{text}");
            assert_eq!(r, record_digest(&v).unwrap(), "{text}");
        }
    }

    #[test]
    fn domains_differ() {
        assert_ne!(
            digest_canonical(Domain::Record, b"{}"),
            digest_canonical(Domain::Binding, b"{}")
        );
    }
}
