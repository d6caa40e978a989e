//! Integration tests of the Dispatcher office: real PostgreSQL (test kit), real gRPC, real HTTP
//! to the simulated llama.cpp endpoint, Ward deciding every call.

mod admission;
mod auth;
mod common;
mod decision;
mod grammar;
mod input;
mod leases;
mod ordering;
mod probe;
mod startup;
