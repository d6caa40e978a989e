//! What arrives on the wire, checked before any handler runs: the body of a call to a `lychd`
//! method must be exactly one uncompressed gRPC frame of at most `server.max_message_bytes`
//! whose bytes decode as the method's request message (the decoder generated from the
//! descriptor set, `lychd_proto::request_decoder`: the very decoding the server's codec does).
//!
//! Anything else — invalid UTF-8 in a string field, a wrong wire type, a truncated message or
//! frame, no frame, two frames, random bytes — is the caller's mistake: `INVALID_ARGUMENT`
//! `MESSAGE_UNDECODABLE` with a fixed message that names no field (the codec's own error is
//! `INTERNAL` and names internal fields). A message over the size cap is `RESOURCE_EXHAUSTED`
//! `MESSAGE_TOO_LARGE`. Both refusals carry [`lychd_auth::layer::Undecodable`] in the response
//! extensions, so the authentication layer (outside this one) answers a caller whose bearer
//! authenticates nobody `UNAUTHENTICATED` instead, on the methods that authenticate in their
//! handler too (ADR 0002). Health's requests are checked the same way (health is open: anyone
//! gets `MESSAGE_UNDECODABLE`); reflection passes untouched ([`decoder`]).
//!
//! The body is buffered (bounded by the cap) and handed on as it came; no request of a `lychd`
//! method streams from the client, so tonic would read it whole before the handler anyway.

use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full, Limited};
use tonic::body::Body;
use tower::{Layer, Service};

/// The refusals of a request that does not decode, in domain `lychd.wire`.
pub mod reasons {
    lychd_refusal::reasons! {
        /// the request body is not one well-formed message of the method's request type; nothing changed
        MESSAGE_UNDECODABLE = InvalidArgument;
        /// the request message is larger than the office accepts (`server.max_message_bytes`); nothing changed
        MESSAGE_TOO_LARGE = ResourceExhausted;
    }
}

/// `lychd.wire`'s refusals.
pub const REFUSALS: lychd_refusal::Refusals =
    lychd_refusal::Refusals::new("lychd.wire", reasons::OWN);

/// The gRPC frame header: a compression flag and a big-endian u32 length.
const FRAME_HEADER: usize = 5;

/// The message of a body that is exactly one uncompressed gRPC frame, if it is one.
pub fn single_frame(body: &[u8]) -> Option<&[u8]> {
    let (header, message) = body.split_at_checked(FRAME_HEADER)?;
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    (header[0] == 0 && usize::try_from(len).ok()? == message.len()).then_some(message)
}

/// The request decoder of the method at `path`: every `lychd` method's (generated from the
/// descriptor set) and gRPC health's `Check` and `Watch`; `None` for reflection, whose stream
/// tonic reads itself (a message that does not decode ends it, never with `INTERNAL`).
pub fn decoder(path: &str) -> Option<lychd_proto::RequestDecoder> {
    match path {
        "/grpc.health.v1.Health/Check" | "/grpc.health.v1.Health/Watch" => {
            Some(|b| <tonic_health::pb::HealthCheckRequest as prost::Message>::decode(b).map(drop))
        }
        _ => lychd_proto::request_decoder(path),
    }
}

/// The refusal of a request that did not decode, marked for the authentication layer.
fn refusal(reason: lychd_refusal::Reason) -> http::Response<Body> {
    let mut response = REFUSALS.refuse(reason).into_http();
    response
        .extensions_mut()
        .insert(lychd_auth::layer::Undecodable);
    response
}

/// The layer checking every `lychd` request body (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct WireLayer {
    max_message_bytes: usize,
}

impl WireLayer {
    pub fn new(max_message_bytes: usize) -> Self {
        WireLayer { max_message_bytes }
    }
}

impl<S> Layer<S> for WireLayer {
    type Service = WireService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        WireService {
            inner,
            max_message_bytes: self.max_message_bytes,
        }
    }
}

#[derive(Debug, Clone)]
pub struct WireService<S> {
    inner: S,
    max_message_bytes: usize,
}

impl<S> Service<http::Request<Body>> for WireService<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        // The clone that was driven to readiness serves this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let Some(decode) = decoder(request.uri().path()) else {
            return Box::pin(inner.call(request));
        };
        let limit = self.max_message_bytes.saturating_add(FRAME_HEADER);
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let bytes = match Limited::new(body, limit).collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                    return Ok(refusal(reasons::MESSAGE_TOO_LARGE));
                }
                // The body broke off: the caller went away or broke the stream; nobody reads this.
                Err(_) => {
                    return Ok(tonic::Status::cancelled("the request body broke off").into_http());
                }
            };
            match single_frame(&bytes).map(|message| decode(bytes.slice_ref(message))) {
                Some(Ok(())) => {}
                Some(Err(_)) | None => return Ok(refusal(reasons::MESSAGE_UNDECODABLE)),
            }
            inner
                .call(http::Request::from_parts(
                    parts,
                    Body::new(Full::new(bytes)),
                ))
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::single_frame;

    fn frame(flag: u8, message: &[u8]) -> Vec<u8> {
        let mut b = vec![flag];
        b.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
        b.extend_from_slice(message);
        b
    }

    #[test]
    fn exactly_one_uncompressed_frame_is_a_message() {
        assert_eq!(single_frame(&frame(0, b"abc")), Some(&b"abc"[..]));
        assert_eq!(single_frame(&frame(0, b"")), Some(&b""[..]));
        // compressed, truncated, trailing bytes, a second frame, no frame, a short header
        assert_eq!(single_frame(&frame(1, b"abc")), None);
        assert_eq!(single_frame(&frame(0, b"abc")[..6]), None);
        let mut trailing = frame(0, b"abc");
        trailing.push(0);
        assert_eq!(single_frame(&trailing), None);
        let mut two = frame(0, b"a");
        two.extend(frame(0, b"b"));
        assert_eq!(single_frame(&two), None);
        assert_eq!(single_frame(b""), None);
        assert_eq!(single_frame(&[0, 0, 0]), None);
    }
}
