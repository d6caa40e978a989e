//! `lychd dev --ephemeral`: the whole stack comes up healthy, the endpoints file is right, and
//! Ctrl-C stops everything cleanly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lychd_runtime::Office;
use lychd_testkit::bin_path;
use nix::sys::signal::Signal;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

#[tokio::test(flavor = "multi_thread")]
async fn dev_stack_comes_up_and_stops_cleanly() {
    let state = tempfile::tempdir().expect("tmp");
    let base_port = lychd_pg::free_port().expect("port");
    let mut child = tokio::process::Command::new(bin_path("lychd"))
        .args([
            "dev",
            "--ephemeral",
            "--no-build",
            "--base-port",
            &base_port.to_string(),
            "--state-dir",
        ])
        .arg(state.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start lychd dev");

    let endpoints_file = state.path().join("dev/endpoints.json");
    let deadline = Instant::now() + Duration::from_secs(90);
    while !endpoints_file.is_file() {
        if let Ok(Some(status)) = child.try_wait() {
            let out = child.wait_with_output().await.expect("output");
            panic!(
                "lychd dev exited early ({status}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            Instant::now() < deadline,
            "endpoints.json not written within 90 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let endpoints: BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(&endpoints_file).expect("read"))
            .expect("json object of strings");
    let names: Vec<&str> = endpoints.keys().map(String::as_str).collect();
    let mut expected: Vec<&str> = Office::ALL.iter().map(|o| o.name()).collect();
    expected.sort();
    assert_eq!(names, expected);
    for (name, addr) in &endpoints {
        assert!(
            addr.starts_with("127.0.0.1:"),
            "{name} listens on loopback: {addr}"
        );
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        let status = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect("health");
        assert_eq!(status.get_ref().status, 1, "{name} SERVING");
    }
    let token = state.path().join("dev/operator.token");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&token)
            .expect("token")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().expect("pid") as i32),
        Signal::SIGINT,
    )
    .expect("ctrl-c");
    let out = tokio::time::timeout(Duration::from_secs(40), child.wait_with_output())
        .await
        .expect("stops within 40 s")
        .expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {}: {stderr}", out.status);
    assert!(
        stdout.contains("grpcurl -plaintext"),
        "prints a grpcurl example: {stdout}"
    );
    assert!(stdout.contains("stopping postgres"), "{stdout}");
    assert!(
        !stderr.contains("stopped with"),
        "every office exits 0: {stderr}"
    );
    assert!(
        !endpoints_file.exists(),
        "endpoints file removed on clean stop"
    );
    for addr in endpoints.values() {
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "{addr} still listening"
        );
    }
}
