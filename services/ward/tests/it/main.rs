//! Ward against a real PostgreSQL, one fresh database per test: the store, the decision log
//! and `LocalVerifier` as the runtime role `lychd_ward_app` (one module per concern, sharing
//! `common`), and in `grpc` the handlers over real gRPC (an in-process Ward on port 0). Another
//! office asking Ward is tested with that office (`services/dispatcher/tests/it/auth.rs`);
//! authority across offices running as real processes in `tests/e2e/authority.rs`.

mod audit;
mod batch;
mod bootstrap;
mod boundaries;
mod common;
mod consent;
mod credentials;
mod decision_log;
mod decisions;
mod faults;
mod grpc;
mod metrics;
mod preauth;
mod promotion;
mod proposals;
mod race;
mod retention;
mod schema;
mod secrets;
mod streams;
mod verifier;
