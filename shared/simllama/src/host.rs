//! A simulated host: animator *units*, each a [`SimLlama`] on its own fixed loopback port
//! whose readiness follows the unit (stopped: connection refused; started: every declared
//! model served, WARM; partially started: `/health` 503 "Loading model" forever), and a
//! control API over HTTP — what the Orchestrator's `simulated` actuator drives, and what
//! tests use to inject start/stop latency, failure, hang and partial start.
//!
//! Control API (JSON):
//! - `POST /units/{name}/start` — after the start latency: 200 `{"running":true}`; with
//!   `fail_start` 500 (the unit stays down); with `partial_start` 200 but the runtime never
//!   becomes ready; with `hang_start` the runtime comes up loading and the call never answers.
//! - `POST /units/{name}/stop` — after the stop latency: 200 `{"running":false}`; with
//!   `fail_stop` 500 (the unit keeps running).
//! - `POST /units/{name}/activate` — body `{"model":"<runtime model>"}`: runtime-native
//!   activation of a started-but-not-warm (router-mode, unloaded) runtime. After the activation
//!   latency: 200 and the model `loaded` (WARM); with `fail_activate` 500 and the model
//!   `unloaded` with `failed` (ERROR); with `hang_activate` the model stays `loading` and the
//!   call never answers. A stopped unit is 409 (nothing done), an unknown model 404.
//! - `POST /units/{name}/unload` — a running unit's runtime switches to router mode with every
//!   model `unloaded` (started but not warm: ACTIVATABLE for a dynamic animator).
//! - `GET /units` — `{"units":{"<name>":{"running":bool,"ready":bool,"starts":n,"stops":n,
//!   "activations":n,"endpoint":"http://…"}}}`.
//! - `PUT /units/{name}/faults` — body `{"start_latency_ms":…, "stop_latency_ms":…,
//!   "activate_latency_ms":…, "fail_start":…, "hang_start":…, "partial_start":…,
//!   "fail_stop":…, "fail_activate":…, "hang_activate":…}` (omitted: unchanged).
//! - `PUT /units/{name}/health` — body `{"status":200|503|code}`: `/health` of a running unit
//!   (no effect on a stopped one).
//! - `POST /units/{name}/force` — body `{"running":bool}`: start (ready) or stop the unit at
//!   once, ignoring faults (an operator's break-glass action).
//! - `PUT /units/{name}/memory` — body `{"memory_mib":n, "device":"gpu0"}` (each optional):
//!   the device memory the unit's runtime holds while it runs (what a GPU driver's
//!   per-process query would report) and the device it runs on.
//! - `PUT /devices/{name}` — body `{"memory_mib":n}`: declare a device's capacity. A start
//!   that would take a device past its capacity fails like an out-of-memory load: 500
//!   `{"error":"out of device memory"}`, the unit stays down.
//! - `GET /devices` — `{"devices":{"<name>":{"memory_mib":capacity,"used_mib":n}}}`.
//!
//! `GET /units` reports each unit's `memory_mib` (what it holds now: 0 while stopped) and
//! `device`.
//!
//! Unknown units are 404. The API carries logical unit names only (the animator names).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use self::devices::{Devices, device_call, used_on};
use crate::{RouterStatus, SimHealth, SimLlama, SimModel, json};

mod devices;

/// Injected behaviour of one unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnitFaults {
    pub start_latency: Duration,
    pub stop_latency: Duration,
    /// Start fails: 500, the unit stays down.
    pub fail_start: bool,
    /// Start hangs: the runtime comes up loading and the start call never answers.
    pub hang_start: bool,
    /// Start "succeeds" but the runtime never becomes ready (503 forever).
    pub partial_start: bool,
    /// Stop fails: 500, the unit keeps running.
    pub fail_stop: bool,
    pub activate_latency: Duration,
    /// Activation fails: 500, the model is `unloaded` with `failed` (ERROR).
    pub fail_activate: bool,
    /// Activation hangs: the model stays `loading` and the call never answers.
    pub hang_activate: bool,
}

struct Unit {
    addr: SocketAddr,
    /// While the unit is down: its port, bound but not listening. Connections are refused (a
    /// down runtime), and no other socket of this machine — another test's runtime, say — can
    /// take the port and answer for the unit.
    reserved: Option<tokio::net::TcpSocket>,
    models: Vec<String>,
    sim: Option<SimLlama>,
    ready: bool,
    faults: UnitFaults,
    starts: u64,
    stops: u64,
    activations: u64,
    /// Device memory its runtime holds while it runs, in MiB.
    memory_mib: u64,
    device: Option<String>,
}

impl Unit {
    /// What it holds now (0 while stopped).
    fn holds(&self) -> u64 {
        if self.sim.is_some() {
            self.memory_mib
        } else {
            0
        }
    }

    async fn up(&mut self, ready: bool) {
        if self.sim.is_none() {
            self.reserved = None;
            self.sim = Some(SimLlama::start_on(self.addr).await);
        }
        let sim = self.sim.as_ref().expect("invariant: just started");
        sim.set_models(self.models.iter().map(|m| SimModel::served(m)).collect());
        sim.set_health(if ready {
            SimHealth::Ok
        } else {
            SimHealth::Loading
        });
        self.ready = ready;
    }

    /// Router mode, every model `unloaded` (a running unit only).
    fn unload(&mut self) -> bool {
        let Some(sim) = &self.sim else { return false };
        sim.set_health(SimHealth::Ok);
        sim.set_models(
            self.models
                .iter()
                .map(|m| SimModel::router(m, RouterStatus::Unloaded))
                .collect(),
        );
        self.ready = false;
        true
    }

    /// Set one router-mode model's status (a running unit only).
    fn model_status(&mut self, model: &str, status: RouterStatus) {
        if let Some(sim) = &self.sim {
            sim.set_router_model(model, status);
            self.ready = status == RouterStatus::Loaded;
        }
    }

    async fn down(&mut self) {
        if let Some(mut sim) = self.sim.take() {
            sim.stop().await;
        }
        if self.reserved.is_none() {
            self.reserved = Some(reserve(self.addr));
        }
        self.ready = false;
    }
}

/// `addr` bound without listening (see [`Unit::reserved`]).
fn reserve(addr: SocketAddr) -> tokio::net::TcpSocket {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    // The runtime that just closed may leave connections in TIME_WAIT on the port.
    socket.set_reuseaddr(true).expect("SO_REUSEADDR");
    socket.bind(addr).expect("the unit's port is free again");
    socket
}

type Units = Arc<BTreeMap<String, Mutex<Unit>>>;

/// A running simulated host. Stops (every unit and the control API) when dropped.
pub struct SimHost {
    control: SocketAddr,
    units: Units,
    devices: Devices,
    task: Option<JoinHandle<()>>,
}

impl SimHost {
    /// Units `(name, models)`, each on its own free loopback port; those in `running` start
    /// ready, the others are stopped.
    pub async fn start(units: &[(&str, &[&str])], running: &[&str]) -> SimHost {
        Self::start_at("127.0.0.1:0".parse().expect("loopback"), units, running).await
    }

    /// [`SimHost::start`] with the control API on `control`.
    pub async fn start_at(
        control: SocketAddr,
        units: &[(&str, &[&str])],
        running: &[&str],
    ) -> SimHost {
        let mut map = BTreeMap::new();
        for (name, models) in units {
            // A free port, kept bound while the unit is down.
            let reserved = reserve("127.0.0.1:0".parse().expect("loopback"));
            let addr = reserved.local_addr().expect("bound address");
            let mut unit = Unit {
                addr,
                reserved: Some(reserved),
                models: models.iter().map(|m| (*m).to_owned()).collect(),
                sim: None,
                ready: false,
                faults: UnitFaults::default(),
                starts: 0,
                stops: 0,
                activations: 0,
                memory_mib: 0,
                device: None,
            };
            if running.contains(name) {
                unit.up(true).await;
            }
            map.insert((*name).to_owned(), Mutex::new(unit));
        }
        let units: Units = Arc::new(map);
        let devices: Devices = Arc::default();
        let listener = TcpListener::bind(control)
            .await
            .expect("simulated host control binds");
        let control = listener.local_addr().expect("bound address");
        let task = tokio::spawn(serve(listener, units.clone(), devices.clone()));
        SimHost {
            control,
            units,
            devices,
            task: Some(task),
        }
    }

    /// Declare `device` with `memory_mib` of capacity.
    pub async fn set_device(&self, device: &str, memory_mib: u64) {
        self.devices
            .lock()
            .await
            .insert(device.to_owned(), memory_mib);
    }

    /// The memory `unit`'s runtime holds while it runs, and its device.
    pub async fn set_memory(&self, unit: &str, memory_mib: u64, device: Option<&str>) {
        let mut u = self.unit(unit).lock().await;
        u.memory_mib = memory_mib;
        u.device = device.map(str::to_owned);
    }

    /// Memory the running units on `device` hold now.
    pub async fn device_used(&self, device: &str) -> u64 {
        used_on(&self.units, device, "").await
    }

    /// `http://127.0.0.1:<port>` of the control API.
    pub fn control_endpoint(&self) -> String {
        format!("http://{}", self.control)
    }

    /// The llama.cpp endpoint of `unit`.
    pub async fn endpoint(&self, unit: &str) -> String {
        format!("http://{}", self.unit(unit).lock().await.addr)
    }

    fn unit(&self, name: &str) -> &Mutex<Unit> {
        self.units.get(name).expect("a declared unit")
    }

    pub async fn set_faults(&self, unit: &str, faults: UnitFaults) {
        self.unit(unit).lock().await.faults = faults;
    }

    /// Whether the unit's runtime is listening.
    pub async fn running(&self, unit: &str) -> bool {
        self.unit(unit).lock().await.sim.is_some()
    }

    /// Whether it serves its models (WARM).
    pub async fn ready(&self, unit: &str) -> bool {
        self.unit(unit).lock().await.ready
    }

    /// (starts, stops) asked of the unit so far.
    pub async fn counts(&self, unit: &str) -> (u64, u64) {
        let u = self.unit(unit).lock().await;
        (u.starts, u.stops)
    }

    /// Set `/health` of a running unit (e.g. 503 loading, or an error status); no effect on a
    /// stopped one.
    pub async fn set_health(&self, unit: &str, health: SimHealth) {
        let mut u = self.unit(unit).lock().await;
        if let Some(sim) = &u.sim {
            sim.set_health(health);
            u.ready = health == SimHealth::Ok;
        }
    }

    /// (starts, stops, activations) asked of the unit so far.
    pub async fn all_counts(&self, unit: &str) -> (u64, u64, u64) {
        let u = self.unit(unit).lock().await;
        (u.starts, u.stops, u.activations)
    }

    /// A running unit's runtime in router mode with every model unloaded (see the module).
    pub async fn unload(&self, unit: &str) {
        self.unit(unit).lock().await.unload();
    }

    /// Start or stop a unit directly (as an operator's break-glass action would).
    pub async fn force(&self, unit: &str, running: bool) {
        let mut u = self.unit(unit).lock().await;
        if running {
            u.up(true).await;
        } else {
            u.down().await;
        }
    }
}

impl Drop for SimHost {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

async fn serve(listener: TcpListener, units: Units, devices: Devices) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let units = units.clone();
        let devices = devices.clone();
        conns.spawn(async move {
            let service = service_fn(move |req| {
                let units = units.clone();
                let devices = devices.clone();
                async move { Ok::<_, Infallible>(control(req, &units, &devices).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        while conns.try_join_next().is_some() {}
    }
}

fn state_json(u: &Unit) -> serde_json::Value {
    serde_json::json!({
        "running": u.sim.is_some(), "ready": u.ready, "starts": u.starts, "stops": u.stops,
        "activations": u.activations, "endpoint": format!("http://{}", u.addr),
        "memory_mib": u.holds(), "device": u.device
    })
}

async fn control(
    req: Request<Incoming>,
    units: &Units,
    devices: &Devices,
) -> Response<Full<Bytes>> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    if path.starts_with("/devices") {
        return device_call(req, units, devices, &path).await;
    }
    if method == Method::GET && path == "/units" {
        let mut all = serde_json::Map::new();
        for (name, u) in units.iter() {
            all.insert(name.clone(), state_json(&*u.lock().await));
        }
        return json(200, serde_json::json!({ "units": all }).to_string());
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let [prefix, name, verb] = parts.as_slice() else {
        return json(404, r#"{"error":"not found"}"#.into());
    };
    if *prefix != "units" {
        return json(404, r#"{"error":"not found"}"#.into());
    }
    let Some(unit) = units.get(*name) else {
        return json(404, r#"{"error":"unknown unit"}"#.into());
    };
    let unit: &Mutex<Unit> = unit;
    match (method, *verb) {
        // A job runs to its end in its own task, as a host's would: a client that hangs up
        // (or is killed) does not cancel it.
        (Method::POST, "start") => {
            let units = units.clone();
            let devices = devices.clone();
            let name = (*name).to_owned();
            let job = tokio::spawn(async move {
                let unit = &units[&name];
                let faults = {
                    let mut u = unit.lock().await;
                    u.starts += 1;
                    u.faults
                };
                tokio::time::sleep(faults.start_latency).await;
                // A load past the device's capacity fails as out of memory would.
                let (device, need) = {
                    let u = unit.lock().await;
                    (u.device.clone(), u.memory_mib)
                };
                if let Some(d) = device {
                    let cap = devices.lock().await.get(&d).copied();
                    if let Some(cap) = cap
                        && used_on(&units, &d, &name).await + need > cap
                    {
                        return Some(json(500, r#"{"error":"out of device memory"}"#.into()));
                    }
                }
                let mut u = unit.lock().await;
                if faults.fail_start {
                    return Some(json(500, r#"{"error":"start failed"}"#.into()));
                }
                if faults.hang_start {
                    u.up(false).await;
                    return None;
                }
                u.up(!faults.partial_start).await;
                Some(json(200, state_json(&u).to_string()))
            });
            match job.await {
                Ok(Some(answer)) => answer,
                // A hung start never answers.
                Ok(None) => std::future::pending().await,
                Err(_) => json(500, r#"{"error":"job failed"}"#.into()),
            }
        }
        (Method::POST, "stop") => {
            let units = units.clone();
            let name = (*name).to_owned();
            let job = tokio::spawn(async move {
                let unit = &units[&name];
                let faults = {
                    let mut u = unit.lock().await;
                    u.stops += 1;
                    u.faults
                };
                tokio::time::sleep(faults.stop_latency).await;
                let mut u = unit.lock().await;
                if faults.fail_stop {
                    return json(500, r#"{"error":"stop failed"}"#.into());
                }
                u.down().await;
                json(200, state_json(&u).to_string())
            });
            job.await
                .unwrap_or_else(|_| json(500, r#"{"error":"job failed"}"#.into()))
        }
        (Method::PUT, "faults") => {
            let Some(v) = body_json(req).await else {
                return json(400, r#"{"error":"body is not JSON"}"#.into());
            };
            let mut u = unit.lock().await;
            let f = &mut u.faults;
            let ms = |k: &str, d: Duration| {
                v.get(k)
                    .and_then(serde_json::Value::as_u64)
                    .map(Duration::from_millis)
                    .unwrap_or(d)
            };
            let flag =
                |k: &str, d: bool| v.get(k).and_then(serde_json::Value::as_bool).unwrap_or(d);
            f.start_latency = ms("start_latency_ms", f.start_latency);
            f.stop_latency = ms("stop_latency_ms", f.stop_latency);
            f.fail_start = flag("fail_start", f.fail_start);
            f.hang_start = flag("hang_start", f.hang_start);
            f.partial_start = flag("partial_start", f.partial_start);
            f.fail_stop = flag("fail_stop", f.fail_stop);
            f.activate_latency = ms("activate_latency_ms", f.activate_latency);
            f.fail_activate = flag("fail_activate", f.fail_activate);
            f.hang_activate = flag("hang_activate", f.hang_activate);
            json(200, state_json(&u).to_string())
        }
        (Method::POST, "activate") => {
            let Some(v) = body_json(req).await else {
                return json(400, r#"{"error":"body is not JSON"}"#.into());
            };
            let Some(model) = v.get("model").and_then(serde_json::Value::as_str) else {
                return json(400, r#"{"error":"model missing"}"#.into());
            };
            let model = model.to_owned();
            let units = units.clone();
            let name = (*name).to_owned();
            let job = tokio::spawn(async move {
                let unit = &units[&name];
                let faults = {
                    let mut u = unit.lock().await;
                    if u.sim.is_none() {
                        return Some(json(409, r#"{"error":"unit not running"}"#.into()));
                    }
                    if !u.models.contains(&model) {
                        return Some(json(404, r#"{"error":"unknown model"}"#.into()));
                    }
                    u.activations += 1;
                    u.model_status(&model, RouterStatus::Loading);
                    u.faults
                };
                tokio::time::sleep(faults.activate_latency).await;
                let mut u = unit.lock().await;
                if faults.hang_activate {
                    return None;
                }
                if faults.fail_activate {
                    u.model_status(&model, RouterStatus::Failed);
                    return Some(json(500, r#"{"error":"load failed"}"#.into()));
                }
                u.model_status(&model, RouterStatus::Loaded);
                Some(json(200, state_json(&u).to_string()))
            });
            match job.await {
                Ok(Some(answer)) => answer,
                Ok(None) => std::future::pending().await,
                Err(_) => json(500, r#"{"error":"job failed"}"#.into()),
            }
        }
        (Method::POST, "unload") => {
            let mut u = unit.lock().await;
            if !u.unload() {
                return json(409, r#"{"error":"unit not running"}"#.into());
            }
            json(200, state_json(&u).to_string())
        }
        (Method::PUT, "health") => {
            let Some(v) = body_json(req).await else {
                return json(400, r#"{"error":"body is not JSON"}"#.into());
            };
            let Some(code) = v
                .get("status")
                .and_then(serde_json::Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
            else {
                return json(400, r#"{"error":"status missing"}"#.into());
            };
            let health = match code {
                200 => SimHealth::Ok,
                503 => SimHealth::Loading,
                c => SimHealth::Status(c),
            };
            let mut u = unit.lock().await;
            if let Some(sim) = &u.sim {
                sim.set_health(health);
                u.ready = health == SimHealth::Ok;
            }
            json(200, state_json(&u).to_string())
        }
        (Method::PUT, "memory") => {
            let Some(v) = body_json(req).await else {
                return json(400, r#"{"error":"body is not JSON"}"#.into());
            };
            let mut u = unit.lock().await;
            if let Some(m) = v.get("memory_mib").and_then(serde_json::Value::as_u64) {
                u.memory_mib = m;
            }
            if let Some(d) = v.get("device").and_then(serde_json::Value::as_str) {
                u.device = Some(d.to_owned());
            }
            json(200, state_json(&u).to_string())
        }
        (Method::POST, "force") => {
            let Some(running) = body_json(req)
                .await
                .and_then(|v| v.get("running").and_then(serde_json::Value::as_bool))
            else {
                return json(400, r#"{"error":"running missing"}"#.into());
            };
            let mut u = unit.lock().await;
            if running {
                u.up(true).await;
            } else {
                u.down().await;
            }
            json(200, state_json(&u).to_string())
        }
        _ => json(404, r#"{"error":"not found"}"#.into()),
    }
}

async fn body_json(req: Request<Incoming>) -> Option<serde_json::Value> {
    let body = req.into_body().collect().await.ok()?;
    serde_json::from_slice(&body.to_bytes()).ok()
}
