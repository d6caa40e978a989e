//! The simulated host as a child process (`lychd-simhost`) and a client of its control API:
//! what `lychd dev` runs and what tests that inject host faults drive, so the host survives —
//! or dies — independently of the process that talks to it. The client's methods mirror
//! [`crate::SimHost`]'s (they panic on a failed control call: a test's assertion).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::{SimHealth, UnitFaults};

/// How long the child has to print its endpoints.
const READY: Duration = Duration::from_secs(20);

/// A running `lychd-simhost` child. Killed when dropped; it also exits on its own when the
/// parent that spawned it is gone (`--parent-pipe`).
pub struct SimHostProcess {
    child: Child,
    /// `host:port` of the control API.
    control: String,
    units: BTreeMap<String, String>,
}

/// One control call: (status, JSON body).
async fn call(
    authority: &str,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> Result<(u16, serde_json::Value), String> {
    let stream = TcpStream::connect(authority)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let driver = tokio::spawn(conn);
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", authority)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("request: {e}"))?;
    let res = sender
        .send_request(req)
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = res.status().as_u16();
    let bytes = res
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    driver.abort();
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    Ok((status, json))
}

impl SimHostProcess {
    /// Spawn `binary` (`lychd-simhost`) with units `(name, models)`; those in `running` start
    /// ready. Waits for its endpoints line.
    pub async fn spawn(
        binary: &Path,
        units: &[(&str, &[&str])],
        running: &[&str],
    ) -> std::io::Result<SimHostProcess> {
        Self::spawn_placed(binary, units, running, &[], &[]).await
    }

    /// [`SimHostProcess::spawn`] with simulated GPUs `(device, capacity MiB)` and what units
    /// hold on them while they run `(unit, MiB, device)`, set before the host answers.
    pub async fn spawn_placed(
        binary: &Path,
        units: &[(&str, &[&str])],
        running: &[&str],
        devices: &[(&str, u64)],
        memory: &[(&str, u64, &str)],
    ) -> std::io::Result<SimHostProcess> {
        let mut cmd = Command::new(binary);
        cmd.arg("--parent-pipe");
        for (device, capacity) in devices {
            cmd.arg("--device").arg(format!("{device}={capacity}"));
        }
        for (unit, held, device) in memory {
            cmd.arg("--memory").arg(format!("{unit}={held}@{device}"));
        }
        for (name, models) in units {
            cmd.arg("--unit")
                .arg(format!("{name}={}", models.join(",")));
        }
        for r in running {
            cmd.arg("--running").arg(r);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().expect("invariant: stdout is piped");
        let mut line = String::new();
        let read = tokio::time::timeout(READY, BufReader::new(stdout).read_line(&mut line)).await;
        let bad = |what: &str| std::io::Error::other(format!("lychd-simhost {what}"));
        match read {
            Ok(Ok(n)) if n > 0 => {}
            Ok(_) => return Err(bad("exited before it served")),
            Err(_) => return Err(bad("did not serve in time")),
        }
        let v: serde_json::Value =
            serde_json::from_str(&line).map_err(|_| bad("printed no endpoints"))?;
        let control = v["control"]
            .as_str()
            .and_then(|c| c.strip_prefix("http://"))
            .ok_or_else(|| bad("printed no control endpoint"))?
            .to_owned();
        let units = v["units"]
            .as_object()
            .ok_or_else(|| bad("printed no units"))?
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect();
        Ok(SimHostProcess {
            child,
            control,
            units,
        })
    }

    /// `http://127.0.0.1:<port>` of the control API.
    pub fn control_endpoint(&self) -> String {
        format!("http://{}", self.control)
    }

    /// The llama.cpp endpoint of `unit`.
    pub async fn endpoint(&self, unit: &str) -> String {
        self.units.get(unit).expect("a declared unit").clone()
    }

    /// Stop the child (SIGKILL) and reap it.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }

    async fn control(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let (status, json) = call(&self.control, method, path, body)
            .await
            .unwrap_or_else(|e| panic!("simulated host control {method} {path}: {e}"));
        assert_eq!(
            status, 200,
            "simulated host control {method} {path}: {json}"
        );
        json
    }

    async fn unit_state(&self, unit: &str) -> serde_json::Value {
        let all = self.control("GET", "/units", None).await;
        all["units"][unit].clone()
    }

    pub async fn set_faults(&self, unit: &str, f: UnitFaults) {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.control(
            "PUT",
            &format!("/units/{unit}/faults"),
            Some(serde_json::json!({
                "start_latency_ms": ms(f.start_latency),
                "stop_latency_ms": ms(f.stop_latency),
                "activate_latency_ms": ms(f.activate_latency),
                "fail_start": f.fail_start,
                "hang_start": f.hang_start,
                "partial_start": f.partial_start,
                "fail_stop": f.fail_stop,
                "fail_activate": f.fail_activate,
                "hang_activate": f.hang_activate,
            })),
        )
        .await;
    }

    /// Whether the unit's runtime is listening.
    pub async fn running(&self, unit: &str) -> bool {
        self.unit_state(unit).await["running"] == true
    }

    /// Whether it serves its models (WARM).
    pub async fn ready(&self, unit: &str) -> bool {
        self.unit_state(unit).await["ready"] == true
    }

    /// (starts, stops) asked of the unit so far.
    pub async fn counts(&self, unit: &str) -> (u64, u64) {
        let u = self.unit_state(unit).await;
        (
            u["starts"].as_u64().unwrap_or_default(),
            u["stops"].as_u64().unwrap_or_default(),
        )
    }

    /// Activations asked of the unit so far.
    pub async fn activations(&self, unit: &str) -> u64 {
        self.unit_state(unit).await["activations"]
            .as_u64()
            .unwrap_or_default()
    }

    /// Set `/health` of a running unit.
    pub async fn set_health(&self, unit: &str, health: SimHealth) {
        let status = match health {
            SimHealth::Ok => 200,
            SimHealth::Loading => 503,
            SimHealth::Status(c) => c,
        };
        self.control(
            "PUT",
            &format!("/units/{unit}/health"),
            Some(serde_json::json!({ "status": status })),
        )
        .await;
    }

    /// Start (ready) or stop a unit at once.
    pub async fn force(&self, unit: &str, running: bool) {
        self.control(
            "POST",
            &format!("/units/{unit}/force"),
            Some(serde_json::json!({ "running": running })),
        )
        .await;
    }

    /// Ask the unit's runtime to load `model` (as the `simulated` actuator does): the status
    /// answered.
    pub async fn activate(&self, unit: &str, model: &str) -> u16 {
        let path = format!("/units/{unit}/activate");
        let body = serde_json::json!({ "model": model });
        call(&self.control, "POST", &path, Some(body))
            .await
            .unwrap_or_else(|e| panic!("simulated host control POST {path}: {e}"))
            .0
    }

    /// A running unit's runtime in router mode with every model unloaded.
    pub async fn unload(&self, unit: &str) {
        self.control("POST", &format!("/units/{unit}/unload"), None)
            .await;
    }

    /// Ask the unit to start (as the `simulated` actuator does): the status answered.
    pub async fn start(&self, unit: &str) -> u16 {
        let path = format!("/units/{unit}/start");
        call(&self.control, "POST", &path, None)
            .await
            .unwrap_or_else(|e| panic!("simulated host control POST {path}: {e}"))
            .0
    }

    /// Declare `device` with `memory_mib` of capacity (a start past it fails out of memory).
    pub async fn set_device(&self, device: &str, memory_mib: u64) {
        self.control(
            "PUT",
            &format!("/devices/{device}"),
            Some(serde_json::json!({ "memory_mib": memory_mib })),
        )
        .await;
    }

    /// What `unit`'s runtime holds on `device` while it runs.
    pub async fn set_memory(&self, unit: &str, memory_mib: u64, device: &str) {
        self.control(
            "PUT",
            &format!("/units/{unit}/memory"),
            Some(serde_json::json!({ "memory_mib": memory_mib, "device": device })),
        )
        .await;
    }

    /// Memory the running units on `device` hold now.
    pub async fn device_used(&self, device: &str) -> u64 {
        self.control("GET", "/devices", None).await["devices"][device]["used_mib"]
            .as_u64()
            .unwrap_or_default()
    }
}
