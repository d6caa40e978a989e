//! SQL on the `runner` schema only, one module per aggregate. Every deciding statement states
//! its isolation level and lock order: `runs` (a run row is locked `FOR UPDATE`, then its
//! guarded update and its transition row follow, in one read-committed transaction); `leases`
//! (the runner lease: a claim is one `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED)`);
//! `recovery` (reviews and state-schema migrations: the run row locked first, as `runs`);
//! `transitions` (the transition row of a state commit, in its transaction); `provenance` (appended in the transaction of the commit that used the source); `effects`
//! (an effect's intent, outbox and append-only ledger: written in the transaction of the fenced
//! commit they belong to; the outbox claim is fenced on the run's lease generation); `replay` (a
//! run's whole record read in one read-only transaction); `releases` (an ended run's
//! pending consents to be released at Ward: marked in the ending's transaction, taken with
//! `FOR UPDATE SKIP LOCKED`); `compensations` (an ended run's compensations: marked by the
//! ending's statement, taken likewise; each intent written before its dispatch); `retention`
//! (finished run trees deleted in bounded batches through the owner's `runner.prune_runs`).

pub mod compensations;
pub mod effects;
pub mod feed;
pub mod leases;
pub mod metrics;
pub mod provenance;
pub mod recovery;
pub mod releases;
pub mod replay;
pub mod retention;
pub mod runs;
pub mod starts;
pub mod transitions;
pub mod tree;
