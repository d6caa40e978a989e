//! Ward's rules, pure: kinds, secrets, lifetimes, decisions, consent, preauthorization,
//! proposals, promotion and paging (`grammar` re-exports `lychd_auth::grammar`).
//!
//! Invariant: no sqlx, no tonic, no clock, no I/O (secret generation reads the operating
//! system's random source, nothing else). Everything here is unit-tested exhaustively.

pub mod consent;
pub mod decision;
pub mod grammar;
pub mod kinds;
pub mod lifetime;
pub mod owner_records;
pub mod paging;
pub mod preauth;
pub mod promotion;
pub mod proposal;
pub mod secret;

// Bad input is collected in `lychd_runtime::refusal::Violations` while a request is decoded
// (`grpc/convert.rs`); these modules answer `Result<_, &'static str>` with a fixed description
// so a refusal never echoes the refused value.
