//! Pure rules of the office: planning from observations. No sqlx, no tonic, no clock, no I/O.
//! (The conflict graph itself is the shared registry crate's: `lychd_registry::conflict`.)

pub mod intent;
pub mod phase;
pub mod plan;
