//! The SHA-256 digests the Archive binds: a note's content, an intake request, a query, a
//! recall request and a recalled note's projection. Each input field is length-prefixed, so
//! no two different requests share an encoding.

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// 32 bytes.
pub type Sha = [u8; 32];

struct Fields(Sha256);

impl Fields {
    fn new(tag: &str) -> Self {
        let mut f = Fields(Sha256::new());
        f.bytes(tag.as_bytes());
        f
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.update((b.len() as u64).to_be_bytes());
        self.0.update(b);
        self
    }
    fn int(&mut self, n: i64) -> &mut Self {
        self.bytes(&n.to_be_bytes())
    }
    fn done(self) -> Sha {
        self.0.finalize().into()
    }
}

/// The digest of a note's text (its UTF-8 bytes, unprefixed: a plain SHA-256 an operator can
/// compute with `sha256sum`).
pub fn content(text: &str) -> Sha {
    Sha256::digest(text.as_bytes()).into()
}

/// The digest of a query (plain SHA-256 of its UTF-8 bytes).
pub fn query(text: &str) -> Sha {
    Sha256::digest(text.as_bytes()).into()
}

/// What an intake request is, beyond its request id: a replay under the same id must equal it.
pub struct IntakeMaterial<'a> {
    pub source_key: &'a str,
    pub source_revision: &'a str,
    pub content: &'a Sha,
    pub producer: &'a str,
    pub classification: &'a str,
    /// Observation time, Unix nanoseconds.
    pub observed_at_ns: i128,
}

pub fn intake(m: &IntakeMaterial<'_>) -> Sha {
    let mut f = Fields::new("lychd.archive.intake.v1");
    f.bytes(m.source_key.as_bytes())
        .bytes(m.source_revision.as_bytes())
        .bytes(m.content)
        .bytes(m.producer.as_bytes())
        .bytes(m.classification.as_bytes())
        .bytes(&m.observed_at_ns.to_be_bytes());
    f.done()
}

/// A recall request beyond its request id (the query by its digest).
pub fn recall(query: &Sha, purpose: &str, max_results: u32, max_chars: u32) -> Sha {
    let mut f = Fields::new("lychd.archive.recall.v1");
    f.bytes(query)
        .bytes(purpose.as_bytes())
        .int(i64::from(max_results))
        .int(i64::from(max_chars));
    f.done()
}

/// The projection a receipt binds for one selected note: its revision, lifecycle version and
/// exact text. Resolution recomputes it; any difference is a change.
pub fn projection(revision: Uuid, version: i64, text: &str) -> Sha {
    let mut f = Fields::new("lychd.archive.projection.v1");
    f.bytes(revision.as_bytes())
        .int(version)
        .bytes(text.as_bytes());
    f.done()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_plain_sha256() {
        assert_eq!(
            hex::encode(content("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn every_field_counts_and_boundaries_cannot_shift() {
        let c = content("x");
        let m = |k, r, p| IntakeMaterial {
            source_key: k,
            source_revision: r,
            content: &c,
            producer: p,
            classification: "public",
            observed_at_ns: 1,
        };
        assert_ne!(intake(&m("ab", "c", "p")), intake(&m("a", "bc", "p")));
        assert_eq!(intake(&m("a", "b", "p")), intake(&m("a", "b", "p")));
        assert_ne!(intake(&m("a", "b", "p")), intake(&m("a", "b", "q")));
        let q = query("cats");
        assert_ne!(recall(&q, "answer", 5, 10), recall(&q, "answer", 5, 11));
        let id = Uuid::nil();
        assert_ne!(projection(id, 2, "t"), projection(id, 3, "t"));
        assert_ne!(projection(id, 2, "t"), projection(id, 2, "u"));
    }
}
