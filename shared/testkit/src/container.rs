//! `LYCHD_TEST_CONTAINERS=1`: the suite's PostgreSQL in a container, started through the
//! `testcontainers` crate against a Docker-compatible engine socket (`DOCKER_HOST`; here
//! podman's, `podman system service`).
//!
//! Like the local cluster, one container serves every test process of a run: whoever holds the
//! lock file starts it (or finds it) and the others reuse it (`ReuseDirective::Always`, found by
//! its name, which is derived from the `target/` directory so two checkouts never share one).
//! It stays up for later runs; `.ci/run` removes it (label [`LABEL`]) when its phase ends.
//! Its port is published on 127.0.0.1 only; it runs with the throwaway durability settings of
//! the local cluster and trust authentication (the test kit's URLs carry no password).

use std::io::Write;
use std::time::Duration;

use fs4::fs_std::FileExt;
use sha2::{Digest, Sha256};
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{GenericImage, ImageExt, ReuseDirective};

/// The image the shipped PostgreSQL unit names (deploy/quadlet/lychd-postgres.container).
pub const IMAGE: &str = "docker.io/library/postgres";
pub const TAG: &str = "15-bookworm";
/// Every test-kit container carries this label (its value: the `target/` directory).
pub const LABEL: &str = "org.lychd.testkit";

/// The container's name for this `target/` directory.
pub fn container_name() -> String {
    let digest = Sha256::digest(crate::target_dir().to_string_lossy().as_bytes());
    format!("lychd-test-pg-{}", hex::encode(&digest[..6]))
}

/// Start (or find) the shared PostgreSQL container; its published loopback port.
pub(crate) fn start() -> Result<u16, String> {
    if std::env::var_os("DOCKER_HOST").is_none()
        && !std::path::Path::new("/var/run/docker.sock").exists()
    {
        return Err("LYCHD_TEST_CONTAINERS=1 needs a Docker-compatible engine socket: start one \
                    (`podman system service --time=0 unix:///run/lychd-podman.sock &`) and set \
                    DOCKER_HOST=unix:///run/lychd-podman.sock (deploy/README.md, \"Tests in containers\")"
            .into());
    }
    std::fs::create_dir_all(crate::target_dir()).map_err(|e| e.to_string())?;
    let lock_path = crate::target_dir().join("lychd-test-pg-container.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    lock.lock_exclusive()
        .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
    // The kit's callers are sync (a `OnceLock` initialiser, possibly inside a runtime): the
    // container is started on a runtime of its own, on a thread of its own.
    let started = std::thread::spawn(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(start_locked())
    })
    .join()
    .map_err(|_| "the container starter panicked".to_owned())?;
    if let Ok(port) = &started {
        let _ = writeln!(&lock, "{port}");
    }
    let _ = FileExt::unlock(&lock);
    started
}

async fn start_locked() -> Result<u16, String> {
    let host_port = lychd_pg::free_port().map_err(|e| e.to_string())?;
    let name = container_name();
    let container = GenericImage::new(IMAGE, TAG)
        .with_wait_for(WaitFor::message_on_stderr(
            "database system is ready to accept connections",
        ))
        .with_container_name(&name)
        .with_label(LABEL, crate::target_dir().to_string_lossy())
        .with_reuse(ReuseDirective::Always)
        .with_env_var("POSTGRES_HOST_AUTH_METHOD", "trust")
        .with_mapped_port(host_port, 5432.tcp())
        // Published on loopback only (testcontainers binds every interface by default).
        .with_host_config_modifier(|config| {
            for bindings in config.port_bindings.iter_mut().flat_map(|m| m.values_mut()) {
                for binding in bindings.iter_mut().flatten() {
                    binding.host_ip = Some("127.0.0.1".into());
                }
            }
        })
        // The local cluster's settings (lychd_pg::Cluster::start, throwaway durability).
        .with_cmd([
            "postgres",
            "-c",
            "max_connections=400",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ])
        .with_startup_timeout(Duration::from_secs(120))
        .start()
        .await
        .map_err(|e| {
            format!(
                "start the PostgreSQL container {name} ({IMAGE}:{TAG}) through DOCKER_HOST: {e} \
                 (no registry? build the local base images: deploy/dev/base-images.sh)"
            )
        })?;
    let port = container
        .get_host_port_ipv4(5432.tcp())
        .await
        .map_err(|e| format!("port of {name}: {e}"))?;
    // A reused container was found running, not waited for: wait until it accepts the superuser.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match lychd_pg::superuser_connection(port, "postgres").await {
            Ok(_) => break,
            Err(e) if std::time::Instant::now() > deadline => {
                return Err(format!("container {name} on 127.0.0.1:{port}: {e}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    // Reused: dropping the handle leaves the container running for the other test processes.
    drop(container);
    Ok(port)
}
