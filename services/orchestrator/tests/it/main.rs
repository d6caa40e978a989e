//! The Orchestrator over real processes: Ward, the Dispatcher and the Orchestrator as their
//! built binaries on one provisioned PostgreSQL database, the simulated host as its own process
//! (`lychd-simhost`, driven through its control API), every call over gRPC with a Ward session.

mod activation;
mod cancel;
mod common;
mod plan;
mod stream;
mod transition;
