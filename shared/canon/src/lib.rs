//! HelmLoop v0.1 canonical JSON and digests: the strict HL-C14N-1 parser, the
//! value model, canonical serialization and the record and binding digests
//! (resolutions §A, spec §6). The HelmLoop core (`lychd-helmloop`) builds its
//! schema bundle, validation and reducer on this crate and re-exports all of
//! it; a crate that only parses, canonicalizes or digests depends on this one
//! alone.
//!
//! Pure: no I/O, no clock, no async runtime; it never panics on input.
//!
//! Citations in this crate: "spec §N" is HelmLoop Protocol v0.1 §N,
//! "resolutions §X" is HelmLoop resolutions §X (see `docs/sources.md`).
//!
//! ```
//! use lychd_canon::{Domain, canonicalize, digest_json};
//! let canonical = canonicalize(br#"{"b": 1, "a": [true, null]}"#).unwrap();
//! assert_eq!(canonical, br#"{"a":[true,null],"b":1}"#);
//! let d = digest_json(Domain::Record, br#"{"digest": "x", "a": 1}"#).unwrap();
//! assert_eq!(d, digest_json(Domain::Record, br#"{"a":1}"#).unwrap());
//! ```

pub mod canon;
pub mod digest;
pub mod error;
pub mod parse;
mod text;
pub mod utf16;
pub mod value;

pub use canon::{
    DIGEST_MEMBER, Omit, canonicalize, canonicalize_into, canonicalize_with, to_canonical_string,
    to_canonical_vec, to_canonical_vec_omit, to_canonical_vec_records,
};
pub use digest::{
    Digest, DigestSyntaxError, Domain, binding_digest, canonical_for_domain, digest_canonical,
    digest_json, digest_json_with, digest_value, record_digest,
};
pub use error::{C14nError, ErrorCode};
pub use parse::{DEFAULT_MAX_BYTES, ParseOptions, RecordRoots, parse, parse_records, parse_with};
pub use text::is_nfc;
pub use utf16::cmp_utf16;
pub use value::{MAX_DEPTH, MAX_SAFE_INTEGER, Map, Value};
