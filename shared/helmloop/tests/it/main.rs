//! Integration tests of the HelmLoop core (one test binary: link once).

mod adapters;
mod cli;
mod core_suite;
mod fuzz_corpus;
mod portability;
mod props;
mod records;
mod reduce_props;
mod structural;
mod vectors;

use std::path::PathBuf;

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file under `fixtures/helmloop/`.
pub fn fixture(rel: &str) -> PathBuf {
    repo_root().join("fixtures/helmloop").join(rel)
}

/// Reads a fixture file as bytes, failing loudly with the path.
pub fn read_fixture(rel: &str) -> Vec<u8> {
    let path = fixture(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", path.display()))
}
