//! An office's own session: its service credential exchanged with Ward for a session token,
//! renewed before expiry in the background, presented on calls to other offices.

use std::sync::Arc;
use std::time::Duration;

use lychd_proto::ward::v1::ExchangeCredentialRequest;
use lychd_proto::ward::v1::ward_client::WardClient;
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::watch;
use tonic::transport::Channel;

/// The current session token, kept fresh by a background task.
#[derive(Clone)]
pub struct SessionSource {
    current: watch::Receiver<Option<Arc<SecretString>>>,
}

impl std::fmt::Debug for SessionSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionSource([redacted])")
    }
}

impl SessionSource {
    /// A fixed token (tests, tools holding a session already).
    pub fn fixed(token: SecretString) -> Self {
        let (_tx, rx) = watch::channel(Some(Arc::new(token)));
        // The sender is dropped: the value stays as it is.
        SessionSource { current: rx }
    }

    /// Exchange `credential` with Ward at `channel` now and again at two thirds of each
    /// session's lifetime; failures retry with backoff (1 s doubling to 30 s). Runs until the
    /// runtime stops.
    /// Exchange `credential` for sessions bound to `audiences` (Ward and the offices this one
    /// calls), renewed before they expire.
    pub fn start(channel: Channel, credential: SecretString, audiences: Vec<String>) -> Self {
        let (tx, rx) = watch::channel(None);
        tokio::spawn(renew(WardClient::new(channel), credential, audiences, tx));
        SessionSource { current: rx }
    }

    /// The current token, if one was obtained.
    pub fn current(&self) -> Option<Arc<SecretString>> {
        self.current.borrow().clone()
    }

    /// Wait until a token is available (or `timeout` passes).
    pub async fn ready(&self, timeout: Duration) -> bool {
        let mut rx = self.current.clone();
        tokio::time::timeout(timeout, rx.wait_for(Option::is_some))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

async fn renew(
    mut ward: WardClient<Channel>,
    credential: SecretString,
    audiences: Vec<String>,
    tx: watch::Sender<Option<Arc<SecretString>>>,
) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let mut request = tonic::Request::new(ExchangeCredentialRequest {
            ttl_seconds: 0,
            audiences: audiences.clone(),
        });
        match format!("Bearer {}", credential.expose_secret()).parse() {
            Ok(value) => {
                request.metadata_mut().insert("authorization", value);
            }
            Err(_) => {
                tracing::error!("service credential is not a valid header value; no session");
                return;
            }
        }
        match ward.exchange_credential(request).await {
            Ok(answer) => {
                let answer = answer.into_inner();
                let renew_in = renew_after(answer.lifetime_seconds);
                if tx
                    .send(Some(Arc::new(SecretString::from(answer.session_token))))
                    .is_err()
                {
                    return;
                }
                backoff = Duration::from_secs(1);
                tracing::debug!(renew_in_s = renew_in.as_secs(), "session obtained");
                tokio::time::sleep(renew_in).await;
            }
            Err(status) => {
                tracing::warn!(code = ?status.code(), retry_in_s = backoff.as_secs(), "cannot obtain a session from ward");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
}

/// When to renew a session that lasts `lifetime_seconds` from its exchange (Ward's answer, by
/// its database clock): at two thirds of it, at least 2 s on. The process clock is never
/// compared with `expires_at`, so a clock skewed from the database's cannot make an office
/// renew late (and lose its session) or in a loop.
pub fn renew_after(lifetime_seconds: u32) -> Duration {
    Duration::from_secs(u64::from(lifetime_seconds.max(3))) * 2 / 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_is_timed_by_the_lifetime_ward_measured() {
        assert_eq!(renew_after(3_600), Duration::from_secs(2_400));
        assert_eq!(renew_after(600), Duration::from_secs(400));
        // A session about to end (or an older Ward that sends no lifetime): soon, not never.
        assert_eq!(renew_after(0), Duration::from_secs(2));
        assert_eq!(renew_after(1), Duration::from_secs(2));
    }
}
