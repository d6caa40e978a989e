//! SQL on the `runner` schema only, one module per aggregate. Every deciding statement states
//! its isolation level and lock order: `runs` (a run row is locked `FOR UPDATE`, then its
//! guarded update and its transition row follow, in one read-committed transaction).

pub mod feed;
pub mod runs;
