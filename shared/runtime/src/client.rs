//! Calling other offices: a lazily connected channel plus an interceptor that presents this
//! office's credential and carries the current trace context.

use std::sync::Arc;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

use crate::telemetry::inject_current;

/// Adds `authorization: Bearer …` and W3C trace context to every outgoing call.
#[derive(Clone)]
pub struct Outgoing {
    authorization: Arc<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Outgoing([redacted])")
    }
}

impl Outgoing {
    pub fn new(token: &SecretString) -> Result<Self, InvalidCredential> {
        let mut value =
            tonic::metadata::MetadataValue::try_from(format!("Bearer {}", token.expose_secret()))
                .map_err(|_| InvalidCredential)?;
        value.set_sensitive(true);
        Ok(Outgoing {
            authorization: Arc::new(value),
        })
    }
}

#[derive(Debug, thiserror::Error)]
#[error("credential is not a valid header value")]
pub struct InvalidCredential;

impl tonic::service::Interceptor for Outgoing {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", (*self.authorization).clone());
        inject_current(request.metadata_mut());
        Ok(request)
    }
}

/// A channel to another office with this office's credential and trace propagation.
pub type PeerChannel = InterceptedService<Channel, Outgoing>;

/// Connects lazily: the first call dials; an unreachable peer fails that call, not start-up.
pub fn peer_channel(
    endpoint: &str,
    outgoing: Outgoing,
) -> Result<PeerChannel, tonic::transport::Error> {
    let channel = Endpoint::from_shared(endpoint.to_owned())?
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(30))
        .connect_lazy();
    Ok(InterceptedService::new(channel, outgoing))
}
