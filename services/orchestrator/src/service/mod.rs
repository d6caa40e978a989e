//! The use cases of the office; they call the store, the Dispatcher (`observe`), the
//! actuator port and the pure domain, and know nothing of protobuf:
//!
//! - `preview`: observe and plan (binds nothing);
//! - `memory`: the footprints measured after a WARM and the usage book placement plans from;
//! - `containment`: list containments; prove a recorded world and recover;
//! - `lease`: the host lease (one orchestrator per host, fenced) and taking a host over;
//! - `resources`: transitions as resources (get, list, follow the feed of phases);
//! - `transition`: the transition engine (cohorts, arbiter, rite, soft activation,
//!   cancellation);
//! - `startup`: what runs before serving (the lease asked for, the host taken over when
//!   granted, the actuator chosen, the engine built).

pub mod containment;
pub mod lease;
pub mod memory;
pub mod metrics;
pub mod preview;
pub mod resources;
pub mod retention;
pub mod startup;
pub mod transition;
