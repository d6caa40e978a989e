//! Model steps: the Dispatcher as a peer (`[peers.dispatcher]`, called with the runner's own
//! Ward session) and the runtime a lease names. A model step leases the capability of its
//! workflow's family, calls the OpenAI-style `POST /v1/chat/completions` of the endpoint the
//! lease names, and releases the lease; the runner never calls a runtime it holds no lease
//! for. Every call takes a fresh lease, and the Dispatcher asks Ward (`dispatcher:lease` for
//! the runner's principal) before it grants one: Ward is asked again before every model call.
//!
//! A cold capability (`HardwareTransitionRequired`, or `Unavailable` with `NOT_WARM`) is a
//! typed wait, not a failure. The answer's content is data: only its digest and its token
//! usage leave this module, never the text (nor the input) in a log or an error.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use lychd_proto::dispatcher::v1 as dpb;
use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
use lychd_runtime::client::{PeerChannel, peer_channel};
use lychd_runtime::server::ServeContext;

/// Largest runtime answer read.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;
/// How long a runtime call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a cold capability waits before it is asked again, when the Dispatcher gives no
/// estimate (and at least this long when it does).
pub const COLD_WAIT_MS: u64 = 2_000;

/// A lease held for one call.
#[derive(Debug, Clone)]
pub struct Held {
    pub lease_id: String,
    pub holder: String,
    pub endpoint: String,
    pub model: String,
}

/// Why a model step did not get an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Worth another attempt (transport, runtime error, a probe that could not decide).
    Transient,
    /// No attempt will help (no capability of the family, the runner may not lease, ...).
    Permanent,
}

/// The Dispatcher's answer to a lease request.
#[derive(Debug)]
pub enum Leased {
    Granted(Held),
    /// The capability is not WARM: wait this long, then ask again.
    Cold {
        wait_ms: u64,
    },
    Failed(Failure),
}

/// A model step's answer: its digest, the tokens it used, and whether its content is empty
/// (whitespace only): an empty answer is no `model_answer` evidence.
#[derive(Clone, PartialEq, Eq)]
pub struct Answer {
    pub digest: String,
    pub tokens: u64,
    pub empty: bool,
    /// The runtime's HTTP body as received (recorded for replay in the Runner's own schema;
    /// never logged).
    pub body: Bytes,
}

/// The Dispatcher peer (absent when not configured: every model step then fails permanently).
#[derive(Clone)]
pub struct Models {
    dispatcher: Option<DispatcherClient<PeerChannel>>,
}

fn family(name: &str) -> dpb::Family {
    match name {
        "chat" => dpb::Family::Chat,
        "vision" => dpb::Family::Vision,
        "embedding" => dpb::Family::Embedding,
        "stt" => dpb::Family::Stt,
        "tts" => dpb::Family::Tts,
        "tool_execution" => dpb::Family::ToolExecution,
        "rerank" => dpb::Family::Rerank,
        _ => dpb::Family::Unspecified,
    }
}

impl Models {
    pub fn new(ctx: &ServeContext) -> anyhow::Result<Models> {
        let dispatcher = match ctx.config.peers.get("dispatcher") {
            Some(peer) => Some(DispatcherClient::new(peer_channel(
                &peer.endpoint,
                ctx.outgoing.clone(),
            )?)),
            None => None,
        };
        Ok(Models { dispatcher })
    }

    /// The Dispatcher at `endpoint`, called with `outgoing`'s session.
    pub fn at(endpoint: &str, outgoing: lychd_runtime::client::Outgoing) -> anyhow::Result<Models> {
        Ok(Models {
            dispatcher: Some(DispatcherClient::new(peer_channel(endpoint, outgoing)?)),
        })
    }

    /// No Dispatcher (model steps fail permanently).
    pub fn none() -> Models {
        Models { dispatcher: None }
    }

    /// Lease a capability of `family_name` (of `model`, when named) for `holder`, attempt
    /// `attempt_id` of `run_id`; `request_id` makes a retry of the same attempt get the same
    /// answer.
    pub async fn lease(
        &self,
        family_name: &str,
        model: Option<&str>,
        holder: &str,
        run_id: &str,
        attempt_id: &str,
        request_id: &str,
    ) -> Leased {
        let Some(mut client) = self.dispatcher.clone() else {
            tracing::warn!("a model step needs the dispatcher peer, which is not configured");
            return Leased::Failed(Failure::Permanent);
        };
        let answer = client
            .lease(dpb::LeaseRequest {
                demand: Some(dpb::Demand {
                    family: family(family_name) as i32,
                    model_id: model.unwrap_or_default().to_owned(),
                    ..Default::default()
                }),
                holder: holder.to_owned(),
                run_id: run_id.to_owned(),
                attempt_id: attempt_id.to_owned(),
                priority: 50,
                ttl_seconds: 0,
                request_id: request_id.to_owned(),
            })
            .await;
        let outcome = match answer {
            Ok(a) => a.into_inner().outcome,
            Err(status) => {
                tracing::warn!(code = ?status.code(), "lease request failed");
                return Leased::Failed(match status.code() {
                    tonic::Code::PermissionDenied
                    | tonic::Code::Unauthenticated
                    | tonic::Code::InvalidArgument => Failure::Permanent,
                    _ => Failure::Transient,
                });
            }
        };
        match outcome {
            Some(dpb::lease_response::Outcome::Granted(g)) => {
                let Some(route) = g.route else {
                    return Leased::Failed(Failure::Transient);
                };
                Leased::Granted(Held {
                    lease_id: g.lease_id,
                    holder: g.holder,
                    endpoint: route.endpoint,
                    model: route.model,
                })
            }
            Some(dpb::lease_response::Outcome::HardwareTransitionRequired(t)) => Leased::Cold {
                wait_ms: t
                    .ready_estimate_seconds
                    .map_or(COLD_WAIT_MS, |s| u64::from(s) * 1000)
                    .max(COLD_WAIT_MS),
            },
            Some(dpb::lease_response::Outcome::Unavailable(u)) => match u.reason.as_str() {
                "NOT_WARM" => Leased::Cold {
                    wait_ms: COLD_WAIT_MS,
                },
                "OBSERVED_ERROR" | "READINESS_UNKNOWN" | "PROBE_FAILED" => {
                    Leased::Failed(Failure::Transient)
                }
                _ => {
                    tracing::warn!(reason = %u.reason, "no capability for a model step");
                    Leased::Failed(Failure::Permanent)
                }
            },
            None => Leased::Failed(Failure::Transient),
        }
    }

    /// Give the lease back (a failure only logs: the lease expires by itself).
    pub async fn release(&self, held: &Held) {
        let Some(mut client) = self.dispatcher.clone() else {
            return;
        };
        if let Err(status) = client
            .release_lease(dpb::ReleaseLeaseRequest {
                lease_id: held.lease_id.clone(),
                holder: held.holder.clone(),
            })
            .await
        {
            tracing::warn!(code = ?status.code(), "releasing a model lease failed; it expires");
        }
    }

    /// Call the runtime `held` names: one chat completion of `input` (data, sent as the user
    /// message) for step `step` in verification round `round` (a repair round says so in the
    /// system message: `lychd runner step <step> (repair round <n>)`).
    pub async fn chat(
        &self,
        held: &Held,
        step: &str,
        round: usize,
        input: &[u8],
    ) -> Result<Answer, Failure> {
        let system = if round > 1 {
            format!("lychd runner step {step} (repair round {round})")
        } else {
            format!("lychd runner step {step}")
        };
        let body = serde_json::json!({
            "model": held.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": String::from_utf8_lossy(input)},
            ],
        })
        .to_string();
        let (status, answer) = tokio::time::timeout(CALL_TIMEOUT, post(&held.endpoint, body))
            .await
            .map_err(|_| Failure::Transient)??;
        if status != 200 {
            tracing::warn!(status, "the runtime refused a chat completion");
            return Err(Failure::Transient);
        }
        let read = crate::domain::answer::read(&answer).ok_or(Failure::Transient)?;
        Ok(Answer {
            digest: read.digest,
            tokens: read.tokens,
            empty: read.empty,
            body: answer,
        })
    }
}

/// `http://host:port[/prefix]` → (host, port, prefix).
fn split_endpoint(endpoint: &str) -> Option<(String, u16, String)> {
    let rest = endpoint.strip_prefix("http://")?;
    let (authority, prefix) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/').to_owned()),
        None => (rest, String::new()),
    };
    let (host, port) = authority.rsplit_once(':')?;
    Some((
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
        port.parse().ok()?,
        prefix,
    ))
}

/// POST `body` (JSON) to `{endpoint}/v1/chat/completions` on a fresh connection.
async fn post(endpoint: &str, body: String) -> Result<(u16, Bytes), Failure> {
    // Only plain http on the runtime's network (the Dispatcher's registry refuses others).
    let (host, port, prefix) = split_endpoint(endpoint).ok_or(Failure::Permanent)?;
    let stream = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|_| Failure::Transient)?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|_| Failure::Transient)?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let request = http::Request::post(format!("{prefix}/v1/chat/completions"))
        .header(http::header::HOST, format!("{host}:{port}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::USER_AGENT, "lychd-runner")
        .body(Full::new(Bytes::from(body)))
        .map_err(|_| Failure::Permanent)?;
    let result = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|_| Failure::Transient)?;
        let status = response.status().as_u16();
        let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|_| Failure::Transient)?
            .to_bytes();
        Ok((status, bytes))
    }
    .await;
    driver.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_split_into_host_port_and_prefix() {
        assert_eq!(
            split_endpoint("http://127.0.0.1:8080"),
            Some(("127.0.0.1".into(), 8080, String::new()))
        );
        assert_eq!(
            split_endpoint("http://[::1]:9/api/"),
            Some(("::1".into(), 9, "/api".into()))
        );
        assert_eq!(split_endpoint("https://h:1"), None);
        assert_eq!(split_endpoint("http://h"), None);
    }
}
