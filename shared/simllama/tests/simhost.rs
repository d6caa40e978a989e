//! `lychd-simhost` as its own process, driven through its control API: units start and stop,
//! a running unit's runtime can be unloaded (router mode) and activated again with latency and
//! failure faults, and the host exits by itself when its parent's pipe closes.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use lychd_simllama::{SimHealth, SimHostProcess, UnitFaults};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_lychd-simhost");

/// `GET path` of a runtime: (status, body).
async fn get(endpoint: &str, path: &str) -> (u16, String) {
    let authority = endpoint.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(authority)
        .await
        .expect("the runtime listens");
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nhost: {authority}\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, body)
}

#[tokio::test]
async fn units_start_stop_unload_and_activate_through_the_control_api() {
    let host = SimHostProcess::spawn(
        Path::new(BIN),
        &[("a", &["m"][..]), ("b", &["m"][..])],
        &["b"],
    )
    .await
    .expect("serves");
    assert!(host.ready("b").await && !host.running("a").await);
    let b = host.endpoint("b").await;
    assert_eq!(get(&b, "/health").await.0, 200);
    // Unloaded: router mode, the model listed `unloaded`; then activated after its latency.
    host.unload("b").await;
    assert!(host.running("b").await && !host.ready("b").await);
    let (_, models) = get(&b, "/v1/models").await;
    assert!(models.contains(r#""value":"unloaded""#), "{models}");
    host.set_faults(
        "b",
        UnitFaults {
            activate_latency: Duration::from_millis(100),
            ..UnitFaults::default()
        },
    )
    .await;
    assert_eq!(host.activate("b", "m").await, 200);
    assert!(host.ready("b").await);
    let (_, models) = get(&b, "/v1/models").await;
    assert!(models.contains(r#""value":"loaded""#), "{models}");
    assert_eq!(host.activations("b").await, 1);
    // A failed activation leaves the model failed; an unknown model or a stopped unit is refused.
    host.unload("b").await;
    host.set_faults(
        "b",
        UnitFaults {
            fail_activate: true,
            ..UnitFaults::default()
        },
    )
    .await;
    assert_eq!(host.activate("b", "m").await, 500);
    let (_, models) = get(&b, "/v1/models").await;
    assert!(models.contains(r#""failed":true"#), "{models}");
    assert_eq!(host.activate("b", "other").await, 404);
    assert_eq!(host.activate("a", "m").await, 409);
    // Health and break-glass start/stop.
    host.force("a", true).await;
    host.set_health("a", SimHealth::Loading).await;
    assert_eq!(get(&host.endpoint("a").await, "/health").await.0, 503);
    host.force("a", false).await;
    assert!(!host.running("a").await);
    assert_eq!(
        host.counts("a").await,
        (0, 0),
        "forcing is not a start or stop job"
    );
    host.stop().await;
}

#[tokio::test]
async fn a_start_past_the_device_capacity_fails_as_out_of_memory() {
    let host = SimHostProcess::spawn(
        Path::new(BIN),
        &[("a", &["m"][..]), ("b", &["m"][..])],
        &["a"],
    )
    .await
    .expect("serves");
    host.set_device("gpu0", 6000).await;
    host.set_memory("a", 4000, "gpu0").await;
    host.set_memory("b", 3000, "gpu0").await;
    assert_eq!(host.device_used("gpu0").await, 4000);
    assert_eq!(host.start("b").await, 500, "4,000 + 3,000 > 6,000");
    assert!(!host.running("b").await);
    host.force("a", false).await;
    assert_eq!(
        host.device_used("gpu0").await,
        0,
        "a stopped unit holds nothing"
    );
    assert_eq!(host.start("b").await, 200);
    assert!(host.ready("b").await);
    assert_eq!(host.device_used("gpu0").await, 3000);
    host.stop().await;
}

#[tokio::test]
async fn the_host_exits_when_its_parents_pipe_closes() {
    let mut child = tokio::process::Command::new(BIN)
        .args(["--parent-pipe", "--unit", "a=m", "--running", "a"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .await
        .expect("endpoints line");
    let v: serde_json::Value = serde_json::from_str(&line).expect("json");
    let a = v["units"]["a"].as_str().expect("a's endpoint").to_owned();
    assert_eq!(get(&a, "/health").await.0, 200);
    drop(child.stdin.take());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits within 10 s")
        .expect("status");
    assert!(status.success(), "{status}");
    assert!(
        tokio::net::TcpStream::connect(a.trim_start_matches("http://"))
            .await
            .is_err(),
        "its runtimes are gone"
    );
}
