//! A simulated llama.cpp-compatible HTTP endpoint (`llama-server`): `GET /health` and
//! `GET /v1/models` (also `/models`), in single-model or router mode, driven by the test (or
//! by `lychd dev`) so that the real readiness probes are what gets exercised; and an
//! OpenAI-style `POST /v1/chat/completions` (also `/chat/completions`) with deterministic
//! answers and `usage` token counts ([`chat_answer`]), so a model step can be exercised.
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

pub mod effect;
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
    chats: Arc<AtomicU64>,
    received: Arc<Mutex<Vec<String>>>,
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
        let chats = Arc::new(AtomicU64::new(0));
        let received = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(accept(
            listener,
            state.clone(),
            Counters {
                requests: requests.clone(),
                connections: connections.clone(),
                chats: chats.clone(),
                received: received.clone(),
            },
        ));
        SimLlama {
            addr,
            state,
            requests,
            connections,
            chats,
            received,
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

    /// Every chat request received so far: its headers and body, as text (what a model step
    /// was given).
    pub fn received(&self) -> Vec<String> {
        self.received
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// Chat completions answered so far (200 answers only).
    pub fn chats(&self) -> u64 {
        self.chats.load(Ordering::SeqCst)
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

#[derive(Clone)]
struct Counters {
    requests: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
    chats: Arc<AtomicU64>,
    /// Every chat request received: its headers and body, as text.
    received: Arc<Mutex<Vec<String>>>,
}

async fn accept(listener: TcpListener, state: Arc<Mutex<State>>, counters: Counters) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        counters.connections.fetch_add(1, Ordering::SeqCst);
        // Answer without waiting for the peer's ACK of a previous segment (Nagle).
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let counters = counters.clone();
        conns.spawn(async move {
            let service = service_fn(move |req| {
                let state = state.clone();
                let counters = counters.clone();
                async move { Ok::<_, Infallible>(answer(req, &state, &counters).await) }
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
    counters: &Counters,
) -> Response<Full<Bytes>> {
    let s = state.lock().expect("simllama state lock").clone();
    if !s.delay.is_zero() {
        tokio::time::sleep(s.delay).await;
    }
    counters.requests.fetch_add(1, Ordering::SeqCst);
    if s.redirect {
        return Response::builder()
            .status(StatusCode::FOUND)
            .header("location", "http://127.0.0.1:9/")
            .body(Full::new(Bytes::new()))
            .expect("invariant: a redirect is a response");
    }
    match req.uri().path() {
        "/v1/chat/completions" | "/chat/completions" if req.method() == hyper::Method::POST => {
            let answer = chat(req, &s, &counters.received).await;
            if answer.status() == StatusCode::OK {
                counters.chats.fetch_add(1, Ordering::SeqCst);
            }
            answer
        }
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

/// Largest chat request body read (larger is 413).
const MAX_CHAT_BYTES: usize = 1024 * 1024;

/// `POST /v1/chat/completions`: a served model (healthy, listed, and loaded in router mode)
/// answers [`chat_answer`]; another model is 404, a runtime not ready 503, a bad body 400.
async fn chat(
    req: Request<Incoming>,
    s: &State,
    received: &Mutex<Vec<String>>,
) -> Response<Full<Bytes>> {
    let headers = format!("{:?}", req.headers());
    use http_body_util::BodyExt;
    let error = |code: u16, message: &str| {
        json(
            code,
            serde_json::json!({"error": {"code": code, "message": message}}).to_string(),
        )
    };
    if s.health != SimHealth::Ok {
        return error(503, "Loading model");
    }
    let body = match http_body_util::Limited::new(req.into_body(), MAX_CHAT_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => return error(413, "request too large"),
    };
    received
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(format!("{headers}\n{}", String::from_utf8_lossy(&body)));
    let Ok(request) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return error(400, "body is not JSON");
    };
    let (Some(model), Some(messages)) = (
        request.get("model").and_then(|m| m.as_str()),
        request.get("messages").and_then(|m| m.as_array()),
    ) else {
        return error(400, "model and messages are required");
    };
    let served = s
        .models
        .iter()
        .any(|m| m.id == model && matches!(m.status, None | Some(RouterStatus::Loaded)));
    if !served {
        return error(404, "model not found");
    }
    let texts: Vec<&str> = messages
        .iter()
        .filter_map(|m| m.get("content").and_then(|c| c.as_str()))
        .collect();
    json(200, chat_answer(model, &texts).to_string())
}

/// A message holding this marker makes the answer empty (content `""`, no completion token).
pub const EMPTY_MARKER: &str = "[simllama:empty]";
/// A message holding `[simllama:empty-unless:TEXT]` makes the answer empty unless another
/// message holds `TEXT` (e.g. the runner's `(repair round 2)`): a step that answers only on a
/// later round.
pub const EMPTY_UNLESS_PREFIX: &str = "[simllama:empty-unless:";
/// A message holding `[simllama:empty-if:TEXT]` makes the answer empty when another message
/// is exactly `TEXT` (e.g. the runner's first-round `lychd runner step beta`): one step of
/// several answers empty, in one round.
pub const EMPTY_IF_PREFIX: &str = "[simllama:empty-if:";

/// The `TEXT` of every `[<prefix>TEXT]` marker in `t`.
fn markers<'a>(t: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    t.match_indices(prefix).filter_map(move |(at, _)| {
        let rest = &t[at + prefix.len()..];
        rest.find(']').map(|end| &rest[..end])
    })
}

/// Whether a request of `texts` gets an empty answer (see [`EMPTY_MARKER`],
/// [`EMPTY_UNLESS_PREFIX`] and [`EMPTY_IF_PREFIX`]).
pub fn answers_empty(texts: &[&str]) -> bool {
    let others = |i: usize| texts.iter().enumerate().filter(move |(j, _)| *j != i);
    texts.iter().enumerate().any(|(i, t)| {
        t.contains(EMPTY_MARKER)
            || markers(t, EMPTY_UNLESS_PREFIX)
                .any(|wanted| !others(i).any(|(_, o)| o.contains(wanted)))
            || markers(t, EMPTY_IF_PREFIX).any(|exact| others(i).any(|(_, o)| *o == exact))
    })
}

/// The deterministic answer of a chat completion of `model` over messages with `texts`: the
/// same request always gets the same content and `usage` (prompt tokens: one per 4 bytes of
/// the messages, at least one each; completion tokens: one per word of the answer). A request
/// [`answers_empty`] gets the content `""`.
pub fn chat_answer(model: &str, texts: &[&str]) -> serde_json::Value {
    // FNV-1a over the model and every message: a stable fingerprint of the request.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in model
        .bytes()
        .chain(texts.iter().flat_map(|t| t.bytes().chain([0u8])))
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let content = if answers_empty(texts) {
        String::new()
    } else {
        format!("simulated answer {h:016x} from {model}")
    };
    let prompt: u64 = texts
        .iter()
        .map(|t| (t.len() as u64).div_ceil(4).max(1))
        .sum();
    let completion = content.split_whitespace().count() as u64;
    serde_json::json!({
        "id": format!("chatcmpl-{h:016x}"),
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
        }],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    })
}
