//! Consent ("25. HitL"): what one exact proposed call binds, how its arguments are censored
//! and digested, and which classes of effect only a live human may settle. Pure: the store
//! applies these rules; nothing here reads a clock or a database.
//!
//! By concern: `settle` (classes, states, verdicts and who may settle or consume), `proposal`
//! (one proposed call, its identifiers and arguments), `censor` (what is kept of secret-like
//! arguments) and `binding` (the one definition of what a consent binds, and its digests).

pub mod binding;
pub mod censor;
pub mod proposal;
pub mod settle;

pub use binding::*;
pub use censor::*;
pub use proposal::*;
pub use settle::*;
