//! Pure rules of the office: key grammar, registry validation, candidate order, the decision
//! table, probe totality and lease rules. No sqlx, no tonic, no clock, no I/O.

pub mod decision;
pub mod demand;
pub mod key;
pub mod lease;
pub mod observation;
pub mod registry;
