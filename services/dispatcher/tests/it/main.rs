//! Integration tests of the Dispatcher office: real PostgreSQL (test kit), real gRPC, real HTTP
//! to the simulated llama.cpp endpoint, Ward deciding every call.

mod admission;
mod auth;
mod common;
mod decision;
mod effect;
mod faults;
mod feed;
mod grammar;
mod hotpath;
mod idempotency;
mod input;
mod leases;
mod limits;
mod liveness;
mod metrics;
mod ordering;
mod ownership;
mod probe;
mod retention;
mod startup;
