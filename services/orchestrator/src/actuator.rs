//! The host mutation port: `apply(TransitionIntent)` (LychD design rules §23, "Host Mutation
//! Port and Privilege Boundary"). The intent carries logical animator identities only; the
//! actuator answers with a typed outcome. Here: the `simulated` actuator, which drives the
//! simulated host's control API (`lychd_simllama::SimHost`): stop each evictee, then start
//! each launch target, each call bounded by the transition's deadline. Behind the same port:
//! [`systemd`] (generated user units through an attested `systemctl`, under the lifecycle
//! [`lock`]) and the `host-reactor` producer (`reactor::producer`). Which one runs is chosen
//! at start (`service::startup`), so this port knows neither the configuration nor the spool.
//!
//! A second, distinct operation of the port: `activate(ActivationIntent)`, the runtime-native
//! activation of a `SOFT_SWAP` (§23 "Runtime-Started Convergence": the adapter loads the target
//! capability on its already-started runtime). An actuator that offers none says so
//! (`activates() == false`) and is never asked; the simulated one asks the simulated host.

pub mod lock;
pub mod systemd;

use std::collections::BTreeMap;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::domain::intent::{ActivationIntent, TransitionIntent};
/// What applying an intent did (defined with the rite's step table, which decides on it).
pub use crate::domain::rite::Applied;

/// The one port every actuator implements.
#[tonic::async_trait]
pub trait Actuator: Send + Sync + 'static {
    async fn apply(&self, intent: &TransitionIntent, deadline: Instant) -> Applied;

    /// Whether this actuator offers runtime-native activation ([`Actuator::activate`]).
    fn activates(&self) -> bool {
        false
    }

    /// Ask the target's already-started runtime to load the capability. `Applied`: the runtime
    /// accepted (readiness is verified separately); anything else after the call began is not
    /// a no-effect receipt (§23: the uncertainty boundary is crossed before the call begins).
    async fn activate(&self, _intent: &ActivationIntent, _deadline: Instant) -> Applied {
        Applied::NoEffect
    }
}

/// The simulated host's control API at `host:port`.
pub struct Simulated {
    authority: String,
    /// Capability key → the model name its runtime knows (the host boundary resolves the
    /// intent's logical identity; the intent never carries it).
    runtime_models: BTreeMap<String, String>,
}

impl Simulated {
    /// `endpoint`: `http://host:port` of the control API.
    pub fn new(endpoint: &str) -> Result<Simulated, &'static str> {
        let authority = endpoint
            .strip_prefix("http://")
            .ok_or("must be an http:// URL")?
            .trim_end_matches('/');
        if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
            return Err("must be http://host:port");
        }
        Ok(Simulated {
            authority: authority.to_owned(),
            runtime_models: BTreeMap::new(),
        })
    }

    /// The runtime model name of each capability key (from the registry).
    pub fn with_runtime_models(mut self, models: BTreeMap<String, String>) -> Simulated {
        self.runtime_models = models;
        self
    }

    /// POST `path`: the answer's status; `Err(true)` when not even a connection was made
    /// (nothing reached the host), `Err(false)` when the call failed or timed out after.
    async fn post(&self, path: &str, deadline: Instant) -> Result<u16, bool> {
        self.post_body(path, Bytes::new(), deadline).await
    }

    /// [`Simulated::post`] with a JSON body.
    async fn post_body(&self, path: &str, body: Bytes, deadline: Instant) -> Result<u16, bool> {
        self.call(hyper::Method::POST, path, body, deadline)
            .await
            .map(|(status, _)| status)
    }

    /// GET `path`: the answer's JSON when it is a 200 (`None` otherwise, or past `deadline`).
    pub(crate) async fn get_json(
        &self,
        path: &str,
        deadline: Instant,
    ) -> Option<serde_json::Value> {
        match self
            .call(hyper::Method::GET, path, Bytes::new(), deadline)
            .await
        {
            Ok((200, body)) => serde_json::from_slice(&body).ok(),
            _ => None,
        }
    }

    /// One call: the status and the body.
    async fn call(
        &self,
        method: hyper::Method,
        path: &str,
        body: Bytes,
        deadline: Instant,
    ) -> Result<(u16, Bytes), bool> {
        let Ok(Ok(stream)) =
            tokio::time::timeout_at(deadline, TcpStream::connect(&self.authority)).await
        else {
            return Err(true);
        };
        let call = async {
            let _ = stream.set_nodelay(true);
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .ok()?;
            let driver = tokio::spawn(conn);
            let req = Request::builder()
                .method(method)
                .uri(path)
                .header("host", &self.authority)
                .header("content-type", "application/json")
                .body(Full::new(body))
                .ok()?;
            let res = sender.send_request(req).await.ok()?;
            let status = res.status().as_u16();
            let body = res.into_body().collect().await.ok()?.to_bytes();
            driver.abort();
            Some((status, body))
        };
        tokio::time::timeout_at(deadline, call)
            .await
            .ok()
            .flatten()
            .ok_or(false)
    }
}

#[tonic::async_trait]
impl Actuator for Simulated {
    async fn apply(&self, intent: &TransitionIntent, deadline: Instant) -> Applied {
        let steps = intent
            .evict
            .iter()
            .map(|a| format!("/units/{a}/stop"))
            .chain(intent.launch.iter().map(|a| format!("/units/{a}/start")));
        for (i, path) in steps.enumerate() {
            match self.post(&path, deadline).await {
                Ok(200) => {}
                // The host refused the first step outright (not a failure of the step
                // itself), or was never reached: nothing was submitted.
                Ok(s) if i == 0 && s != 500 => return Applied::NoEffect,
                Err(true) if i == 0 => return Applied::NoEffect,
                _ => return Applied::Uncertain,
            }
        }
        Applied::Applied
    }

    fn activates(&self) -> bool {
        true
    }

    async fn activate(&self, intent: &ActivationIntent, deadline: Instant) -> Applied {
        let Some(model) = self.runtime_models.get(&intent.capability_key) else {
            // Nothing to ask for: refused before the call.
            return Applied::NoEffect;
        };
        let body = serde_json::json!({ "model": model }).to_string();
        let path = format!("/units/{}/activate", intent.target_animator);
        match self.post_body(&path, Bytes::from(body), deadline).await {
            Ok(200) => Applied::Applied,
            // Once the call began, nothing it answers is a no-effect receipt.
            _ => Applied::Uncertain,
        }
    }
}

/// No actuator configured: nothing is ever submitted (every hard transition is a verified
/// no-effect decline).
pub struct Unconfigured;

#[tonic::async_trait]
impl Actuator for Unconfigured {
    async fn apply(&self, _intent: &TransitionIntent, _deadline: Instant) -> Applied {
        Applied::NoEffect
    }
}
