//! A simulated llama.cpp-compatible HTTP endpoint (`llama-server`): `GET /health` and
//! `GET /v1/models` (also `/models`), in single-model or router mode, driven by the test (or
//! by `lychd dev`) so that the real readiness probes are what gets exercised.
//!
//! Single-model mode: `/health` is 200 `{"status":"ok"}` (or 503 "Loading model"), and
//! `/v1/models` lists the served models with no status. Router mode: every listed model carries
//! `status.value` (`loaded`, `loading`, `downloading`, `unloaded`, `sleeping`) and `failed`
//! after a failed load. Anything can be overridden: a raw inventory answer, a delay (for
//! timeouts), a redirect, or stopping the listener (connection refused).
//!
//! [`SimHost`] (module `host`) puts several of them behind animator *units* with start/stop
//! latency, failure, hang and partial start, and a control API over HTTP: the simulated host
//! the Orchestrator's `simulated` actuator drives; [`SimHostProcess`] (module `process`) runs it
//! as its own process (`lychd-simhost`) and drives it through that API.

pub mod host;
pub mod process;

pub use host::{SimHost, UnitFaults};
pub use process::SimHostProcess;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// What `/health` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimHealth {
    /// 200 `{"status":"ok"}`.
    Ok,
    /// 503, llama.cpp's "Loading model".
    Loading,
    /// Any other status.
    Status(u16),
}

/// Router-mode status of one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterStatus {
    Loaded,
    Loading,
    Downloading,
    Unloaded,
    /// `unloaded` with `failed: true`.
    Failed,
    Sleeping,
}

impl RouterStatus {
    fn value(self) -> &'static str {
        match self {
            RouterStatus::Loaded => "loaded",
            RouterStatus::Loading => "loading",
            RouterStatus::Downloading => "downloading",
            RouterStatus::Unloaded | RouterStatus::Failed => "unloaded",
            RouterStatus::Sleeping => "sleeping",
        }
    }
}

/// One inventory entry (router mode when `status` is set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimModel {
    pub id: String,
    pub status: Option<RouterStatus>,
}

impl SimModel {
    /// A single-mode entry (served, no status).
    pub fn served(id: &str) -> Self {
        SimModel {
            id: id.into(),
            status: None,
        }
    }

    /// A router-mode entry.
    pub fn router(id: &str, status: RouterStatus) -> Self {
        SimModel {
            id: id.into(),
            status: Some(status),
        }
    }
}

#[derive(Debug, Clone)]
struct State {
    health: SimHealth,
    models: Vec<SimModel>,
    raw_inventory: Option<(u16, String)>,
    delay: Duration,
    redirect: bool,
}

/// A running simulated endpoint. Stops when dropped.
pub struct SimLlama {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    requests: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
    task: Option<JoinHandle<()>>,
}

impl SimLlama {
    /// Serve on a free loopback port: healthy, listing nothing.
    pub async fn start() -> SimLlama {
        Self::start_on("127.0.0.1:0".parse().expect("loopback address")).await
    }

    /// Serve a single model (healthy, listed, so a probe sees it WARM).
    pub async fn serving(model: &str) -> SimLlama {
        let s = Self::start().await;
        s.set_models(vec![SimModel::served(model)]);
        s
    }

    /// Serve on `addr` (to come back on the same port after [`SimLlama::stop`]).
    pub async fn start_on(addr: SocketAddr) -> SimLlama {
        let listener = TcpListener::bind(addr).await.expect("simllama binds");
        let addr = listener.local_addr().expect("bound address");
        let state = Arc::new(Mutex::new(State {
            health: SimHealth::Ok,
            models: Vec::new(),
            raw_inventory: None,
            delay: Duration::ZERO,
            redirect: false,
        }));
        let requests = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(accept(
            listener,
            state.clone(),
            requests.clone(),
            connections.clone(),
        ));
        SimLlama {
            addr,
            state,
            requests,
            connections,
            task: Some(task),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn with(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.state.lock().expect("simllama state lock"));
    }

    pub fn set_health(&self, health: SimHealth) {
        self.with(|s| s.health = health);
    }

    /// Replace the inventory (entries may repeat: that is how a duplicate is simulated).
    pub fn set_models(&self, models: Vec<SimModel>) {
        self.with(|s| s.models = models);
    }

    /// Set (or add) one router-mode model's status.
    pub fn set_router_model(&self, id: &str, status: RouterStatus) {
        self.with(|s| match s.models.iter_mut().find(|m| m.id == id) {
            Some(m) => m.status = Some(status),
            None => s.models.push(SimModel::router(id, status)),
        });
    }

    /// Answer `/v1/models` with exactly this status and body (None: the simulated inventory).
    pub fn set_raw_inventory(&self, raw: Option<(u16, String)>) {
        self.with(|s| s.raw_inventory = raw);
    }

    /// Wait this long before answering any request.
    pub fn set_delay(&self, delay: Duration) {
        self.with(|s| s.delay = delay);
    }

    /// Answer every request with `302 Location: http://127.0.0.1:9/`.
    pub fn set_redirect(&self, on: bool) {
        self.with(|s| s.redirect = on);
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// Stop listening; once this returns, connections are refused.
    pub async fn stop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = t.await;
        }
    }
}

impl Drop for SimLlama {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

async fn accept(
    listener: TcpListener,
    state: Arc<Mutex<State>>,
    requests: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        connections.fetch_add(1, Ordering::SeqCst);
        // Answer without waiting for the peer's ACK of a previous segment (Nagle).
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let requests = requests.clone();
        conns.spawn(async move {
            let service = service_fn(move |req| {
                let state = state.clone();
                let requests = requests.clone();
                async move { Ok::<_, Infallible>(answer(req, &state, &requests).await) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        // Reap finished connections; aborting `accept` drops the set and every connection.
        while conns.try_join_next().is_some() {}
    }
}

fn json(status: u16, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("invariant: a status and a body make a response")
}

async fn answer(
    req: Request<Incoming>,
    state: &Mutex<State>,
    requests: &AtomicU64,
) -> Response<Full<Bytes>> {
    let s = state.lock().expect("simllama state lock").clone();
    if !s.delay.is_zero() {
        tokio::time::sleep(s.delay).await;
    }
    requests.fetch_add(1, Ordering::SeqCst);
    if s.redirect {
        return Response::builder()
            .status(StatusCode::FOUND)
            .header("location", "http://127.0.0.1:9/")
            .body(Full::new(Bytes::new()))
            .expect("invariant: a redirect is a response");
    }
    match req.uri().path() {
        "/health" => match s.health {
            SimHealth::Ok => json(200, r#"{"status":"ok"}"#.into()),
            SimHealth::Loading => json(
                503,
                r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#
                    .into(),
            ),
            SimHealth::Status(code) => json(
                code,
                format!(
                    r#"{{"error":{{"code":{code},"message":"simulated","type":"server_error"}}}}"#
                ),
            ),
        },
        "/v1/models" | "/models" => {
            if let Some((status, body)) = s.raw_inventory {
                return json(status, body);
            }
            let data: Vec<serde_json::Value> = s
                .models
                .iter()
                .map(|m| {
                    let mut v = serde_json::json!({
                        "id": m.id, "object": "model", "owned_by": "llamacpp", "created": 0
                    });
                    if let Some(st) = m.status {
                        let mut status = serde_json::json!({ "value": st.value() });
                        if st == RouterStatus::Failed {
                            status["failed"] = serde_json::Value::Bool(true);
                            status["exit_code"] = serde_json::json!(1);
                        }
                        v["status"] = status;
                    }
                    v
                })
                .collect();
            json(
                200,
                serde_json::json!({ "object": "list", "data": data }).to_string(),
            )
        }
        _ => json(
            404,
            r#"{"error":{"code":404,"message":"not found"}}"#.into(),
        ),
    }
}
