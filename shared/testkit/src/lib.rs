//! Test kit: a PostgreSQL cluster shared by every test process of a run, a fresh database per
//! test, in-process offices (`spawn_office(lychd_<office>::spec())`), and a sandbox of offices
//! as real processes.
//!
//! The kit links no office crate: a test names the offices it needs by their `spec()`, so
//! building one office's tests compiles no other office. The Ward deciding for an in-process
//! office is the built `lychd-ward` binary (`cargo build --workspace --bins`, as `.ci/run` does
//! before the tests); Ward's own migrations are read from its `migrations/` directory. A test
//! database holds every office's roles and schema, and the migrations of the offices the test
//! asked for: [`test_db`] Ward's, [`test_db_for`] those of the given specs, [`spawn_office`]
//! Ward's and the spawned office's. Each such set has its own migrated template database, named
//! after the digest of its migrations. The [`Sandbox`] runs the built binaries, which migrate
//! their own schemas as operators do.
//!
//! Database source, in order: `LYCHD_TEST_DATABASE_URL` (a superuser URL of a cluster you run);
//! `LYCHD_TEST_CONTAINERS=1` (a PostgreSQL container started with the `testcontainers` crate
//! through the Docker-compatible socket `DOCKER_HOST` names, e.g. podman's; shared by every
//! test process like the local cluster: [`container_name`]); otherwise a cluster started from the machine's PostgreSQL binaries
//! under `target/lychd-test-pg/`, shared through a lock file and reused by later runs
//! (`LYCHD_TEST_PG_DURABILITY=durable`: a second one with production durability, under
//! `target/lychd-test-pg-durable/`, for benches).
//! A missing PostgreSQL fails the test with the install command; nothing is skipped.

pub mod backup;
pub mod bench;
mod container;
pub use container::{LABEL as CONTAINER_LABEL, container_name};
mod fault;
pub use fault::{FaultProxy, Router};
/// How the test kit's local cluster commits ([`durability`]).
pub use lychd_pg::Durability;
mod pg;
mod process;
pub mod refusal;
/// The simulated llama.cpp runtime (its own crate, so `lychd dev` uses it too).
pub use lychd_simllama as simllama;
/// The simulated external system of the Runner's effects (programmable faults, counts applied
/// effects per idempotency key and per action).
pub use lychd_simllama::effect as simeffect;
mod spawn;
/// Independent completion verification beside a test's offices: HelmLoop, Ward delivering
/// owner records to it, and an accountable owner.
pub mod verify;

pub use pg::{
    DURABILITY_ENV, TestDb, cluster_dir, collect_garbage, durability, stop_durable_cluster,
    test_db, test_db_for, test_db_unmigrated,
};
pub use process::{
    OfficeProcess, Sandbox, SandboxBuilder, bin_path, grpcurl, run_office, wait_answering,
    wait_serving,
};
pub use spawn::{Spawned, channel_with, spawn_office, spawn_office_with, unassign};

/// A random bearer credential for one test stack.
pub fn random_token() -> String {
    use std::fmt::Write;
    let mut s = String::from("lychd-test-");
    for b in uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .chain(uuid::Uuid::new_v4().as_bytes())
    {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The workspace `target/` directory (from `CARGO_TARGET_DIR` or the test binary's location).
pub fn target_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return std::path::PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("invariant: a test binary knows its own path");
    // target/<profile>/deps/<test-binary>
    exe.ancestors()
        .nth(3)
        .expect("invariant: test binaries live under target/<profile>/deps")
        .to_owned()
}
