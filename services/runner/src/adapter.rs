//! The HTTP effect adapter (`http`, version `lychd.runner.adapter.http/1`): the only part of
//! the Runner that holds the effect credential (read once from the file `[office]
//! effect_credential_file` names, never from the environment, never logged or recorded) and the
//! only one that talks to an external system.
//!
//! - **Deliver**: `POST <destination>` with the canonical action as the JSON body, the headers
//!   `Idempotency-Key: <key>` and `Authorization: Bearer <credential>`. A 2xx answer is applied
//!   (its body is the receipt: its sha256 is the receipt digest); a 4xx other than 408 and 429
//!   is a definite refusal; 429 and 503 say "not applied, try later"; a refused connection
//!   never sent anything; any other answer, a timeout or a dropped connection after the
//!   request was written is **unknown**.
//! - **Status** (reconciliation): `GET <destination>` with the same `Idempotency-Key`: 200 is
//!   applied (the same receipt), 404 is not applied, anything else unknown.
//!
//! Every exchange is bounded (`[office] effect_timeout_ms`); no redirect is followed, no proxy
//! used, nothing retried here (the driver decides).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use secrecy::{ExposeSecret, SecretString};

use crate::domain::effect::{Delivery, receipt_digest};

/// Largest answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The adapter (its credential, when configured, and its timeout).
#[derive(Clone)]
pub struct HttpAdapter {
    credential: Option<SecretString>,
    timeout: Duration,
}

impl std::fmt::Debug for HttpAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpAdapter")
            .field(
                "credential",
                &self.credential.as_ref().map(|_| "[redacted]"),
            )
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// What an exchange came to before classification.
enum Sent {
    /// The connection was refused: nothing was sent.
    Nothing,
    /// The request may have been sent, and no full answer came back.
    Lost,
    Answer(u16, Bytes),
}

impl HttpAdapter {
    pub fn new(credential: Option<SecretString>, timeout: Duration) -> HttpAdapter {
        HttpAdapter {
            credential,
            timeout,
        }
    }

    /// Deliver `action` to `destination` under `key`.
    pub async fn deliver(&self, destination: &str, key: &str, action: &[u8]) -> Delivery {
        let body = Full::new(Bytes::copy_from_slice(action));
        match self
            .exchange(http::Method::POST, destination, key, body)
            .await
        {
            Sent::Nothing => Delivery::NotApplied,
            Sent::Lost => Delivery::Unknown,
            Sent::Answer(status, body) => match status {
                200..=299 => Delivery::Applied {
                    receipt_digest: receipt_digest(&body),
                },
                429 | 503 => Delivery::NotApplied,
                408 => Delivery::Unknown,
                400..=499 => Delivery::Rejected { status },
                _ => Delivery::Unknown,
            },
        }
    }

    /// Ask `destination` whether the effect under `key` was applied.
    pub async fn status(&self, destination: &str, key: &str) -> Delivery {
        let body = Full::new(Bytes::new());
        match self
            .exchange(http::Method::GET, destination, key, body)
            .await
        {
            Sent::Answer(200, body) => Delivery::Applied {
                receipt_digest: receipt_digest(&body),
            },
            Sent::Answer(404, _) => Delivery::NotApplied,
            _ => Delivery::Unknown,
        }
    }

    async fn exchange(
        &self,
        method: http::Method,
        destination: &str,
        key: &str,
        body: Full<Bytes>,
    ) -> Sent {
        let Some((host, port, path)) = split(destination) else {
            return Sent::Nothing;
        };
        let connect = tokio::time::timeout(
            self.timeout,
            tokio::net::TcpStream::connect((host.as_str(), port)),
        )
        .await;
        let stream = match connect {
            Ok(Ok(s)) => s,
            // Refused or unreachable: no byte of the request left.
            Ok(Err(_)) | Err(_) => return Sent::Nothing,
        };
        let _ = stream.set_nodelay(true);
        let Ok((mut sender, conn)) =
            hyper::client::conn::http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream)).await
        else {
            return Sent::Nothing;
        };
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, format!("{host}:{port}"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::USER_AGENT, "lychd-runner-effect")
            .header("idempotency-key", key);
        if let Some(c) = &self.credential {
            let Ok(mut value) =
                http::HeaderValue::from_str(&format!("Bearer {}", c.expose_secret()))
            else {
                driver.abort();
                return Sent::Nothing;
            };
            value.set_sensitive(true);
            request = request.header(http::header::AUTHORIZATION, value);
        }
        let Ok(request) = request.body(body) else {
            driver.abort();
            return Sent::Nothing;
        };
        let answer = tokio::time::timeout(self.timeout, async {
            let response = sender.send_request(request).await.ok()?;
            let status = response.status().as_u16();
            let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .ok()?
                .to_bytes();
            Some((status, bytes))
        })
        .await;
        driver.abort();
        match answer {
            Ok(Some((status, bytes))) => Sent::Answer(status, bytes),
            _ => Sent::Lost,
        }
    }
}

/// `http://host:port/path` → (host, port, path).
fn split(url: &str) -> Option<(String, u16, String)> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_owned()),
        None => (rest, "/".to_owned()),
    };
    let (host, port) = authority.rsplit_once(':')?;
    Some((host.to_owned(), port.parse().ok()?, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credential_never_prints() {
        let a = HttpAdapter::new(
            Some(SecretString::from("s3cr3t-effect-credential")),
            Duration::from_secs(1),
        );
        assert!(!format!("{a:?}").contains("s3cr3t"));
    }

    #[test]
    fn destinations_split() {
        assert_eq!(
            split("http://127.0.0.1:9/a/b"),
            Some(("127.0.0.1".into(), 9, "/a/b".into()))
        );
        assert_eq!(split("http://h:1"), Some(("h".into(), 1, "/".into())));
        assert_eq!(split("https://h:1/"), None);
    }
}
