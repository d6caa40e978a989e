//! The Orchestrator over real processes: Ward, the Dispatcher and the Orchestrator as their
//! built binaries on one provisioned PostgreSQL database, simulated llama.cpp runtimes in the
//! test process, every call over gRPC with a Ward session.

mod common;
mod plan;
mod stream;
mod transition;
