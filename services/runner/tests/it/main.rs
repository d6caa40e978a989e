//! Integration tests of the Runner office: real PostgreSQL (test kit), real gRPC, Ward
//! deciding every call.

mod authority;
mod budgets;
mod checkpoints;
mod common;
mod fence;
mod input;
mod model;
mod replicas;
mod rounds;
mod runs;
mod steps;
mod tree;
mod watch;
