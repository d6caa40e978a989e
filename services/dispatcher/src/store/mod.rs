//! SQL on the `dispatcher` schema only, one module per aggregate. Every deciding statement
//! states its isolation level and lock order; authority-deciding times are the database's.

pub mod admission;
pub mod leases;
pub mod observations;
