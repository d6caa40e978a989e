//! Names and keys: the closed slug grammar, families, and capability keys — the shared
//! registry crate's (`lychd-registry`), so the Dispatcher and the Orchestrator read one grammar.

pub use lychd_registry::key::*;
