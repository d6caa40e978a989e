//! The Orchestrator over real processes: Ward, the Dispatcher and the Orchestrator as their
//! built binaries on one provisioned PostgreSQL database, simulated llama.cpp runtimes in the
//! test process, every call over gRPC with a Ward session; the `systemd` actuator and the host
//! reactor against `lychd-fake-systemctl`.

mod common;
mod host;
mod plan;
mod reactor;
mod stream;
mod systemd;
mod transition;
