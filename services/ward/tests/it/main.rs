//! Ward's store and LocalVerifier against a real PostgreSQL (one fresh database per test, as
//! the runtime role `lychd_ward_app`). gRPC-level and cross-office tests live with the auth
//! layer.

mod audit;
mod bootstrap;
mod common;
mod credentials;
mod decision_log;
mod decisions;
mod grpc;
mod race;
mod schema;
mod secrets;
mod verifier;
