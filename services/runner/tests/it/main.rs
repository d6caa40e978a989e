//! Integration tests of the Runner office: real PostgreSQL (test kit), real gRPC, Ward
//! deciding every call.

mod authority;
mod budgets;
mod checkpoints;
mod common;
mod fence;
mod input;
mod migrations;
mod model;
mod recovery;
mod replay;
mod replicas;
mod rounds;
mod runs;
mod steps;
mod trace;
mod tree;
mod watch;
