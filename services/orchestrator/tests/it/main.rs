//! The Orchestrator over real processes: Ward, the Dispatcher and the Orchestrator as their
//! built binaries on one provisioned PostgreSQL database, the simulated host as its own process
//! (`lychd-simhost`, driven through its control API), every call over gRPC with a Ward session;
//! the `systemd` actuator and the host reactor against `lychd-fake-systemctl`.

mod activation;
mod cancel;
mod common;
mod gauge;
mod host;
mod lease;
mod memory;
mod metrics;
mod plan;
mod reactor;
mod resources;
mod retention;
mod stream;
mod systemd;
mod transition;
