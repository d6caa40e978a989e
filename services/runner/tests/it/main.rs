//! Integration tests of the Runner office: real PostgreSQL (test kit), real gRPC, Ward
//! deciding every call.

mod authority;
mod budgets;
mod calibration;
mod checkpoints;
mod common;
mod effect_cancel;
mod effect_compensation;
mod effect_deadline;
mod effect_endings;
mod effect_faults;
mod effect_rules;
mod effect_secrets;
mod effects;
mod fence;
mod input;
mod metrics;
mod migrations;
mod model;
mod recovery;
mod replay;
mod replicas;
mod retention;
mod rounds;
mod runs;
mod steps;
mod trace;
mod tree;
mod verification;
mod verified;
mod watch;
