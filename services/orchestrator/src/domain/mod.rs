//! Pure rules of the office: planning from observations (and placement by memory), the host's readback classification
//! and recheck, the generated unit graph, the transition phases and the rite's step table. No sqlx, no tonic, no clock, no I/O.
//! (The conflict graph itself is the shared registry crate's: `lychd_registry::conflict`.)

pub mod host;
pub mod intent;
pub mod memory;
pub mod phase;
pub mod plan;
pub mod rite;
pub mod units;
pub mod world;
