//! HelmLoop v0.1 core: the strict HL-C14N-1 canonical JSON profile, record and
//! binding digests (from `lychd-canon`, re-exported here), the executable
//! schema bundle, document validation and the reducer.
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

// Canonical JSON and digests live in `lychd-canon`; imported here under their
// module names so the reducer, schema and validation modules keep their paths.
use lychd_canon::{canon, digest, error, utf16, value};

pub mod adapter;
pub mod conformance;
pub mod portability;
pub mod reduce;
pub mod schema;
mod structural;
pub mod time;
pub mod validate;

pub use lychd_canon::{
    C14nError, DEFAULT_MAX_BYTES, DIGEST_MEMBER, Digest, DigestSyntaxError, Domain, ErrorCode,
    MAX_DEPTH, MAX_SAFE_INTEGER, Map, Omit, ParseOptions, RecordRoots, Value, binding_digest,
    canonical_for_domain, canonicalize, canonicalize_into, canonicalize_with, cmp_utf16,
    digest_canonical, digest_json, digest_json_with, digest_value, is_nfc, parse, parse_records,
    parse_with, record_digest, to_canonical_string, to_canonical_vec, to_canonical_vec_omit,
    to_canonical_vec_records,
};
pub use reduce::{EvaluationInput, ReductionResult, policy_digest, reduce, reduce_bytes};

/// Protocol version of the records and inputs this crate handles.
pub const PROTOCOL_VERSION: &str = "0.1";

/// Name of the canonical profile.
pub const CANONICAL_PROFILE: &str = "HL-C14N-1";
