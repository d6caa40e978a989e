//! Proposal history: proposals (`ward.proposals`) and their append-only record sequences
//! (`ward.proposal_records`).
//!
//! Sequence numbers are assigned by the appending statement itself: one statement bumps the
//! proposal's record counter (a row lock: concurrent appends to one proposal queue) and inserts
//! the record with the new value, so a failed insert gives the number back and the sequence is
//! 1, 2, 3… without gaps or duplicates. A consent's judgment is appended by the statement that
//! settles it (the `consents_judged` trigger), so the judgment history commits with the state.
//!
//! Lock order, in every transaction that touches both: the consent first, then the proposal
//! (as a verdict does: it updates the consent, then its trigger the proposal).
//!
//! By concern: `row` (the proposal as stored), `history` (its records) and `lifecycle`
//! (creation, closing, reads).

mod history;
mod lifecycle;
mod row;

pub use history::*;
pub use lifecycle::*;
pub use row::*;
