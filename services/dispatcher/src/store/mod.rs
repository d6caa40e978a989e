//! SQL on the `dispatcher` schema only, one module per aggregate. Every deciding statement
//! states its isolation level and lock order; authority-deciding times are the database's.

/// The one definition of a live lease, over the `leases` row aliased `l`: not released and not
/// expired by the database clock. Every statement that decides or reports liveness (renew,
/// release, listing, the state of a read, the drain count) uses it, as this macro in `concat!`
/// or as [`leases::LIVE`] in `format!`; nothing else in `store/` spells the rule out
/// (`tests/it/leases.rs` holds both).
macro_rules! live {
    () => {
        "(l.released_at IS NULL AND l.expires_at > now())"
    };
}

pub mod admission;
pub mod leases;
pub mod metrics;
pub mod observations;
pub mod retention;
