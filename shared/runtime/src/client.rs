//! Calling other offices: a lazily connected channel plus an interceptor that presents this
//! office's current Ward session and carries the current trace context.

use std::time::Duration;

use lychd_auth::credentials::SessionSource;
use secrecy::ExposeSecret;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Status};

/// Adds `authorization: Bearer <session>` (when this office has one) and W3C trace context to
/// every outgoing call; carries the TLS of this office's calls to `https://` peers.
#[derive(Clone, Debug, Default)]
pub struct Outgoing {
    session: Option<SessionSource>,
    tls: Option<ClientTlsConfig>,
}

impl Outgoing {
    pub fn new(session: Option<SessionSource>) -> Self {
        Outgoing { session, tls: None }
    }

    /// Calls to `https://` peers use `tls` (the CA of `[tls]`, this office's certificate).
    pub fn with_tls(mut self, tls: Option<ClientTlsConfig>) -> Self {
        self.tls = tls;
        self
    }

    pub fn tls(&self) -> Option<&ClientTlsConfig> {
        self.tls.as_ref()
    }

    pub fn session(&self) -> Option<&SessionSource> {
        self.session.as_ref()
    }
}

impl tonic::service::Interceptor for Outgoing {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(token) = self.session.as_ref().and_then(SessionSource::current) {
            let mut value = format!("Bearer {}", token.expose_secret())
                .parse::<tonic::metadata::MetadataValue<_>>()
                .map_err(|_| Status::internal("session token is not a header value"))?;
            value.set_sensitive(true);
            request.metadata_mut().insert("authorization", value);
        }
        lychd_auth::inject_trace(request.metadata_mut());
        Ok(request)
    }
}

/// A channel to another office with this office's session and trace propagation.
pub type PeerChannel = InterceptedService<Channel, Outgoing>;

/// A lazily connecting channel: the first call dials; an unreachable peer fails that call, not
/// start-up.
pub fn channel(endpoint: &str) -> Result<Channel, tonic::transport::Error> {
    channel_tls(endpoint, None)
}

/// [`channel`] over TLS when `endpoint` is `https://` and `tls` is given (the peer's
/// certificate is verified for the endpoint's host name).
pub fn channel_tls(
    endpoint: &str,
    tls: Option<&ClientTlsConfig>,
) -> Result<Channel, tonic::transport::Error> {
    let mut endpoint = Endpoint::from_shared(endpoint.to_owned())?
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(30));
    if let Some(tls) = tls.filter(|_| endpoint.uri().scheme_str() == Some("https")) {
        endpoint = endpoint.tls_config(tls.clone())?;
    }
    Ok(endpoint.connect_lazy())
}

pub fn peer_channel(
    endpoint: &str,
    outgoing: Outgoing,
) -> Result<PeerChannel, tonic::transport::Error> {
    let channel = channel_tls(endpoint, outgoing.tls())?;
    Ok(InterceptedService::new(channel, outgoing))
}
