//! Consents: one row per exact proposed call (`ward.consents`).
//!
//! Every change is one guarded statement, so concurrency needs no lock of ours: the first
//! verdict wins (`… WHERE state = 'pending'`: a concurrent writer of the same row waits, then
//! finds it settled and changes nothing), an approval is consumed once (`… consumed_at IS NULL`),
//! and expiry is decided by the database clock. Pending consents past their TTL are settled as
//! `expired` (decided at the instant they expired) by [`expire_due`] before any consent is read
//! or changed, so nobody ever sees a pending consent whose time has passed.
//!
//! By concern: `record` (the row and its columns), `read` (reads and the feed of changes),
//! `propose` (recording a proposal, granted by a standing rule or pending) and `settle`
//! (verdicts, consumption, revocation, cancellation).

mod propose;
mod read;
mod record;
mod settle;

pub use propose::*;
pub use read::*;
pub use record::*;
pub use settle::*;
