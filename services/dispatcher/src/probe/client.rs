//! The readiness HTTP client. One fresh connection per probe, its GETs in sequence on it, reset
//! (not lingering in TIME_WAIT) when the probe is done: no
//! proxy (the client never reads proxy settings — it connects to the declared host itself), no
//! redirects (a 3xx is answered as a status and refused by the adapters), no retries, a timeout
//! per GET and a bound on the response body.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::domain::registry::Endpoint;

/// Outcome of one GET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// Nothing listens at the endpoint: the runtime is down.
    Refused,
    Response {
        status: u16,
        body: Bytes,
    },
}

/// Why a GET failed; `code()` is safe to record and return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchError {
    Timeout,
    Connect,
    Protocol,
    TooLarge,
}

impl FetchError {
    pub fn code(self) -> &'static str {
        match self {
            FetchError::Timeout => "PROBE_TIMEOUT",
            FetchError::Connect => "PROBE_CONNECT_FAILED",
            FetchError::Protocol => "PROBE_PROTOCOL_ERROR",
            FetchError::TooLarge => "PROBE_RESPONSE_TOO_LARGE",
        }
    }
}

/// The client (cheap to clone; holds only its limits).
#[derive(Debug, Clone, Copy)]
pub struct HttpGet {
    pub timeout: Duration,
    pub max_bytes: usize,
}

/// Aborts the connection driver when the connection is dropped, however the call ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One fresh HTTP/1.1 connection to one endpoint, for the GETs of one probe: opened by the
/// first GET, reused by the next while the runtime keeps it open, closed when dropped. A GET
/// on a connection the runtime closed opens a new one (a new request, never a repeat of one
/// that was sent).
pub struct Connection<'a> {
    client: &'a HttpGet,
    ep: &'a Endpoint,
    open: Option<(SendRequest<Empty<Bytes>>, AbortOnDrop)>,
}

impl HttpGet {
    /// A connection to `ep` (nothing is opened until the first GET).
    pub fn connection<'a>(&'a self, ep: &'a Endpoint) -> Connection<'a> {
        Connection {
            client: self,
            ep,
            open: None,
        }
    }

    /// `GET {endpoint}{path}` on its own fresh connection, within the timeout.
    pub async fn get(&self, ep: &Endpoint, path: &str) -> Result<Fetched, FetchError> {
        self.connection(ep).get(path).await
    }
}

impl Connection<'_> {
    /// `GET {endpoint}{path}` within the client's timeout.
    pub async fn get(&mut self, path: &str) -> Result<Fetched, FetchError> {
        let timeout = self.client.timeout;
        match tokio::time::timeout(timeout, self.get_inner(path)).await {
            Ok(r) => r,
            Err(_) => {
                // A half-done exchange leaves the connection unusable.
                self.open = None;
                Err(FetchError::Timeout)
            }
        }
    }

    async fn get_inner(&mut self, path: &str) -> Result<Fetched, FetchError> {
        let ep = self.ep;
        if ep.https {
            // Configuration refuses probing https endpoints; never fall back to plain text.
            return Err(FetchError::Connect);
        }
        if let Some((sender, _)) = &mut self.open
            && sender.ready().await.is_err()
        {
            self.open = None;
        }
        let sender = match &mut self.open {
            Some((sender, _)) => sender,
            None => {
                let stream = match TcpStream::connect((ep.host.as_str(), ep.port)).await {
                    Ok(s) => s,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                        return Ok(Fetched::Refused);
                    }
                    Err(_) => return Err(FetchError::Connect),
                };
                let _ = stream.set_nodelay(true);
                // Closed by an abortive close (RST) when the probe drops it — every response it
                // wanted is read by then — so probes leave no TIME_WAIT behind: at hundreds of
                // probes a second, TIME_WAIT sockets would exhaust the ephemeral ports towards
                // one runtime within a minute (the practice of load-balancer health checks).
                let _ = stream.set_zero_linger();
                let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|_| FetchError::Protocol)?;
                let driver = AbortOnDrop(tokio::spawn(async move {
                    let _ = conn.await;
                }));
                &mut self.open.insert((sender, driver)).0
            }
        };
        let host = if ep.host.contains(':') {
            format!("[{}]:{}", ep.host, ep.port)
        } else {
            format!("{}:{}", ep.host, ep.port)
        };
        let request = http::Request::get(format!("{}{}", ep.prefix, path))
            .header(http::header::HOST, host)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::USER_AGENT, "lychd-dispatcher-probe")
            .body(Empty::<Bytes>::new())
            .map_err(|_| FetchError::Protocol)?;
        let response = sender.send_request(request).await.map_err(|_| {
            self.open = None;
            FetchError::Protocol
        })?;
        let status = response.status().as_u16();
        let declared = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let max_bytes = self.client.max_bytes;
        if declared.is_some_and(|len| len > max_bytes as u64) {
            // The body is not read: this connection is done.
            self.open = None;
            return Err(FetchError::TooLarge);
        }
        let body = Limited::new(response.into_body(), max_bytes)
            .collect()
            .await
            .map_err(|e| {
                self.open = None;
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
                {
                    FetchError::TooLarge
                } else {
                    FetchError::Protocol
                }
            })?
            .to_bytes();
        Ok(Fetched::Response { status, body })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::domain::registry::parse_endpoint;

    const CHILD: &str = "LYCHD_TEST_PROXY_CHILD_TARGET";
    const NAME: &str = "probe::client::tests::ambient_proxy_settings_are_ignored";

    /// Run in a child process whose proxy variables point at a listener that must never see a
    /// connection (the environment is process-wide, so it is set only in the child).
    #[tokio::test]
    async fn ambient_proxy_settings_are_ignored() {
        if let Ok(target) = std::env::var(CHILD) {
            let ep = parse_endpoint(&target).expect("endpoint");
            let client = HttpGet {
                timeout: Duration::from_secs(5),
                max_bytes: 4096,
            };
            let got = client.get(&ep, "/health").await;
            assert!(
                matches!(got, Ok(Fetched::Response { status: 200, .. })),
                "{got:?}"
            );
            return;
        }
        let sim = lychd_testkit::simllama::SimLlama::start().await;
        let proxy = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let proxy_url = format!("http://{}", proxy.local_addr().expect("addr"));
        let out = tokio::process::Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD, sim.endpoint())
            .env("HTTP_PROXY", &proxy_url)
            .env("http_proxy", &proxy_url)
            .env("ALL_PROXY", &proxy_url)
            .env("all_proxy", &proxy_url)
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .output()
            .await
            .expect("child runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}"
        );
        let accepted = tokio::time::timeout(Duration::from_millis(100), proxy.accept()).await;
        assert!(accepted.is_err(), "the proxy saw a connection");
        assert_eq!(sim.requests(), 1, "the runtime was asked directly");
    }

    #[tokio::test]
    async fn redirects_are_answered_not_followed_and_bodies_are_bounded() {
        let sim = lychd_testkit::simllama::SimLlama::start().await;
        let ep = parse_endpoint(&sim.endpoint()).expect("endpoint");
        let client = HttpGet {
            timeout: Duration::from_secs(5),
            max_bytes: 1024,
        };
        sim.set_redirect(true);
        let got = client.get(&ep, "/health").await.expect("answer");
        assert!(matches!(got, Fetched::Response { status: 302, .. }));
        assert_eq!(sim.requests(), 1, "one request, no follow-up, no retry");
        sim.set_redirect(false);
        sim.set_raw_inventory(Some((200, "x".repeat(2048))));
        assert_eq!(
            client.get(&ep, "/v1/models").await,
            Err(FetchError::TooLarge)
        );
        let mut sim = sim;
        sim.stop().await;
        assert_eq!(client.get(&ep, "/health").await, Ok(Fetched::Refused));
    }
}
