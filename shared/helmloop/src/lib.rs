//! HelmLoop v0.1 core: the strict HL-C14N-1 canonical JSON profile, record and
//! binding digests, the executable schema bundle and document validation.
//!
//! Pure: no I/O, no clock, no async runtime; it never panics on input. The
//! `helmloop` binary in this crate is the only place that touches files.
//!
//! Citations in this crate: "spec §N" is HelmLoop Protocol v0.1 §N,
//! "resolutions §X" is HelmLoop resolutions §X (see `docs/sources.md`).
//!
//! ```
//! use lychd_helmloop::{Domain, canonicalize, digest_json};
//! let canonical = canonicalize(br#"{"b": 1, "a": [true, null]}"#).unwrap();
//! assert_eq!(canonical, br#"{"a":[true,null],"b":1}"#);
//! let d = digest_json(Domain::Record, br#"{"digest": "x", "a": 1}"#).unwrap();
//! assert_eq!(d, digest_json(Domain::Record, br#"{"a":1}"#).unwrap());
//! ```

pub mod adapter;
mod canon;
pub mod conformance;
mod digest;
mod error;
mod parse;
pub mod portability;
pub mod reduce;
pub mod schema;
mod structural;
mod utf16;
pub mod validate;
mod value;

pub use canon::{
    DIGEST_MEMBER, Omit, canonicalize, canonicalize_into, canonicalize_with, to_canonical_string,
    to_canonical_vec, to_canonical_vec_omit, to_canonical_vec_records,
};
pub use digest::{
    Digest, DigestSyntaxError, Domain, binding_digest, canonical_for_domain, digest_canonical,
    digest_json, digest_json_with, digest_value, record_digest,
};
pub use error::{C14nError, ErrorCode};
pub use parse::{
    DEFAULT_MAX_BYTES, MAX_DEPTH, ParseOptions, RecordRoots, is_nfc, parse, parse_records,
    parse_with,
};
pub use reduce::{EvaluationInput, ReductionResult, policy_digest, reduce, reduce_bytes};
pub use utf16::cmp_utf16;
pub use value::{MAX_SAFE_INTEGER, Map, Value};

/// Protocol version of the records and inputs this crate handles.
pub const PROTOCOL_VERSION: &str = "0.1";

/// Name of the canonical profile.
pub const CANONICAL_PROFILE: &str = "HL-C14N-1";
