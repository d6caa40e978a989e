//! The `[office]` section of the Orchestrator's configuration: the animator registry — the
//! same `[[office.animators]]` and `[[office.capabilities]]` declarations the Dispatcher reads,
//! parsed and validated by the one shared registry (`lychd-registry`) — compiled into the
//! conflict graph. Validated once at start; every error names the file and the field and
//! refuses start-up (exit 2).
//!
//! `types` declares the section and the settings; `load` reads and validates them (`gauge`:
//! the `[office.gauge]` part).

mod gauge;
mod load;
mod types;

pub use load::{load, runtime_models};
pub use types::*;
