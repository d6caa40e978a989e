//! Pure rules of the office: planning from observations, the host's readback classification
//! and recheck, the generated unit graph. No sqlx, no tonic, no clock, no I/O.
//! (The conflict graph itself is the shared registry crate's: `lychd_registry::conflict`.)

pub mod host;
pub mod intent;
pub mod phase;
pub mod plan;
pub mod units;
