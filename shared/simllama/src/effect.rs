//! A simulated external system for the Runner's effects (an HTTP server on loopback), with
//! programmable faults. It applies a `POST` once per `Idempotency-Key` (a second delivery of
//! the same key answers the same receipt and applies nothing), answers `GET` with the same key
//! by the receipt (200) or 404, and counts what it applied — per key and per action body — so a
//! test can assert that no effect was applied twice, whatever key it came under.
//!
//! Faults, each consumed by one `POST` in the order queued:
//! - [`Fault::CommitThenDrop`]: apply, then close the connection without an answer;
//! - [`Fault::Duplicate`]: apply, then answer 503 (the caller delivers the same key again);
//! - [`Fault::Slow`]: apply, then answer after a delay (a caller with a shorter timeout loses
//!   the answer);
//! - [`Fault::Transient`]: 503 without applying; [`Fault::Permanent`]: 422 without applying.
//!
//! [`SimEffect::break_status`] makes every status query answer 500 (an outcome nobody can
//! tell). Credentials seen in `Authorization` headers are kept for the secret-isolation test.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// A programmed fault (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    CommitThenDrop,
    Duplicate,
    Slow(Duration),
    Transient,
    Permanent,
}

#[derive(Default)]
struct State {
    faults: VecDeque<Fault>,
    /// Key → receipt body (applied once).
    applied: BTreeMap<String, Vec<u8>>,
    /// Action body → times applied (under any key).
    by_action: BTreeMap<Vec<u8>, u32>,
    /// Key → deliveries received.
    deliveries: BTreeMap<String, u32>,
    authorizations: Vec<String>,
    status_broken: bool,
    status_queries: u32,
}

/// The simulated system.
pub struct SimEffect {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SimEffect {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(s: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SimEffect {
    /// Serve on a free loopback port.
    pub async fn start() -> SimEffect {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("simeffect binds");
        let addr = listener.local_addr().expect("bound address");
        let state = Arc::new(Mutex::new(State::default()));
        let task = tokio::spawn(accept(listener, state.clone()));
        SimEffect { addr, state, task }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Queue `fault` for the next `POST` not yet faulted.
    pub fn fault(&self, fault: Fault) {
        lock(&self.state).faults.push_back(fault);
    }

    /// Every status query answers 500 from now on.
    pub fn break_status(&self) {
        lock(&self.state).status_broken = true;
    }

    /// How many distinct keys were applied.
    pub fn applied(&self) -> usize {
        lock(&self.state).applied.len()
    }

    /// Effects applied more than once (the same action body under any key, counted beyond
    /// its first application): 0 when nothing was duplicated.
    pub fn duplicates(&self) -> u32 {
        lock(&self.state)
            .by_action
            .values()
            .map(|n| n.saturating_sub(1))
            .sum()
    }

    /// Deliveries (`POST`s) received, over every key.
    pub fn deliveries(&self) -> u32 {
        lock(&self.state).deliveries.values().sum()
    }

    /// Status queries received.
    pub fn status_queries(&self) -> u32 {
        lock(&self.state).status_queries
    }

    /// The receipt body of `key`, if applied.
    pub fn receipt(&self, key: &str) -> Option<Vec<u8>> {
        lock(&self.state).applied.get(key).cloned()
    }

    /// The keys applied.
    pub fn keys(&self) -> Vec<String> {
        lock(&self.state).applied.keys().cloned().collect()
    }

    /// Every `Authorization` header value received.
    pub fn authorizations(&self) -> Vec<String> {
        lock(&self.state).authorizations.clone()
    }
}

async fn accept(listener: TcpListener, state: Arc<Mutex<State>>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(req, state.clone()));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r
}

/// An error ends the connection without an answer (the dropped response).
async fn handle(
    req: Request<Incoming>,
    state: Arc<Mutex<State>>,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if let Some(a) = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        lock(&state).authorizations.push(a.to_owned());
    }
    if key.is_empty() {
        return Ok(answer(
            StatusCode::BAD_REQUEST,
            b"no idempotency key".to_vec(),
        ));
    }
    if req.method() == hyper::Method::GET {
        let mut s = lock(&state);
        s.status_queries += 1;
        if s.status_broken {
            return Ok(answer(StatusCode::INTERNAL_SERVER_ERROR, Vec::new()));
        }
        return Ok(match s.applied.get(&key) {
            Some(receipt) => answer(StatusCode::OK, receipt.clone()),
            None => answer(StatusCode::NOT_FOUND, Vec::new()),
        });
    }
    if req.method() != hyper::Method::POST {
        return Ok(answer(StatusCode::METHOD_NOT_ALLOWED, Vec::new()));
    }
    let body = req
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes()
        .to_vec();
    let fault = {
        let mut s = lock(&state);
        *s.deliveries.entry(key.clone()).or_default() += 1;
        s.faults.pop_front()
    };
    match fault {
        Some(Fault::Transient) => return Ok(answer(StatusCode::SERVICE_UNAVAILABLE, Vec::new())),
        Some(Fault::Permanent) => {
            return Ok(answer(StatusCode::UNPROCESSABLE_ENTITY, Vec::new()));
        }
        _ => {}
    }
    let receipt = {
        let mut s = lock(&state);
        let n = s.applied.len() + 1;
        if !s.applied.contains_key(&key) {
            let receipt = format!("{{\"receipt\":{n},\"key\":\"{key}\"}}").into_bytes();
            s.applied.insert(key.clone(), receipt);
            *s.by_action.entry(body).or_default() += 1;
        }
        s.applied.get(&key).cloned().unwrap_or_default()
    };
    if let Some(Fault::Slow(d)) = fault {
        tokio::time::sleep(d).await;
    }
    match fault {
        Some(Fault::CommitThenDrop) => Err(std::io::Error::other("dropped after commit")),
        Some(Fault::Duplicate) => Ok(answer(StatusCode::SERVICE_UNAVAILABLE, Vec::new())),
        _ => Ok(answer(StatusCode::OK, receipt)),
    }
}
