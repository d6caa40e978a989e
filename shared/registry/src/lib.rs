//! The animator registry every office that reads animator declarations shares: the key and
//! slug grammar (`key`), the declarations validated as one set (`registry`), the devices and
//! footprints of placement by memory (`memory`) and the compiled conflict graph with its
//! digest (`conflict`). One parser and one validator, so the
//! Dispatcher (which grants on these animators) and the Orchestrator (which converges them)
//! can never disagree about what is declared.
//!
//! **Invariant:** pure — no I/O, no clock, no tonic, no sqlx. Sources: LychD design rules §8
//! Containers ("Current unit graph") and §23 Orchestrator ("Current conflict policy").

pub mod conflict;
pub mod device;
pub mod fixtures;
pub mod key;
pub mod memory;
pub mod registry;
