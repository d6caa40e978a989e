//! The metrics layer of every office's server: each RPC counted by service, method and gRPC
//! code (`lychd.rpc.server.requests`), each refusal that carries an `ErrorInfo` counted by its
//! domain and reason (`lychd.rpc.server.refusals`: the house's refusal reasons, whichever
//! layer or handler refused), and its latency in seconds (`lychd.rpc.server.duration`).
//!
//! When an RPC ends: when its gRPC status is known — at the response headers for a refusal
//! answered at once (trailers-only), else at the trailers that end the response body (so a
//! server stream's latency is its whole length). A body dropped before its trailers (the
//! caller went away) counts as `CANCELLED`; a response without any status as `UNKNOWN`.
//! Methods are labelled only when they are known (an office's methods, health, reflection):
//! any other path is `unknown`, so a caller cannot grow the label set.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use http_body::Frame;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};
use tonic::body::Body;
use tonic_types::StatusExt;
use tower::{Layer, Service};

use super::code_name;

struct Instruments {
    requests: Counter<u64>,
    refusals: Counter<u64>,
    duration: Histogram<f64>,
}

/// The layer (see the module documentation).
#[derive(Clone)]
pub struct MetricsLayer {
    instruments: Arc<Instruments>,
}

impl MetricsLayer {
    pub fn new(meter: &Meter) -> Self {
        MetricsLayer {
            instruments: Arc::new(Instruments {
                requests: meter
                    .u64_counter("lychd.rpc.server.requests")
                    .with_unit("{request}")
                    .with_description("RPCs answered, by service, method and gRPC code")
                    .build(),
                refusals: meter
                    .u64_counter("lychd.rpc.server.refusals")
                    .with_unit("{refusal}")
                    .with_description("refusals answered, by method, ErrorInfo domain and reason")
                    .build(),
                duration: super::seconds_histogram(
                    meter,
                    "lychd.rpc.server.duration",
                    "time from a request's arrival to its gRPC status, by service, method and code",
                ),
            }),
        }
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = MetricsService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        MetricsService {
            inner,
            instruments: self.instruments.clone(),
        }
    }
}

#[derive(Clone)]
pub struct MetricsService<S> {
    inner: S,
    instruments: Arc<Instruments>,
}

/// `(service, method)` of a known path; `("unknown", "unknown")` otherwise.
fn method_of(path: &str) -> (&str, &str) {
    let known = crate::wire::decoder(path).is_some()
        || path == "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
        || path == "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
    match path.strip_prefix('/').and_then(|p| p.split_once('/')) {
        Some(pair) if known => pair,
        _ => ("unknown", "unknown"),
    }
}

/// One RPC in flight, recorded once.
struct Call {
    instruments: Arc<Instruments>,
    started: Instant,
    service: String,
    method: String,
}

impl Call {
    fn finish(self, status: Option<tonic::Status>) {
        let code = status.as_ref().map_or(tonic::Code::Unknown, |s| s.code());
        let attributes = [
            KeyValue::new("rpc.service", self.service.clone()),
            KeyValue::new("rpc.method", self.method.clone()),
            KeyValue::new("rpc.grpc.code", code_name(code)),
        ];
        self.instruments.requests.add(1, &attributes);
        self.instruments
            .duration
            .record(self.started.elapsed().as_secs_f64(), &attributes);
        if let Some(info) = status.as_ref().and_then(|s| s.get_details_error_info()) {
            self.instruments.refusals.add(
                1,
                &[
                    KeyValue::new("rpc.service", self.service),
                    KeyValue::new("rpc.method", self.method),
                    KeyValue::new("error.domain", info.domain),
                    KeyValue::new("error.reason", info.reason),
                ],
            );
        }
    }
}

impl<S> Service<http::Request<Body>> for MetricsService<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let (service, method) = method_of(request.uri().path());
        let call = Call {
            instruments: self.instruments.clone(),
            started: Instant::now(),
            service: service.to_owned(),
            method: method.to_owned(),
        };
        let answer = self.inner.call(request);
        Box::pin(async move {
            match answer.await {
                Ok(response) => {
                    if let Some(status) = tonic::Status::from_header_map(response.headers()) {
                        call.finish(Some(status));
                        return Ok(response);
                    }
                    Ok(response.map(|body| {
                        Body::new(Observed {
                            body,
                            call: Some(call),
                        })
                    }))
                }
                Err(e) => {
                    call.finish(None);
                    Err(e)
                }
            }
        })
    }
}

/// A response body that records its call at its trailers (or when dropped without them).
struct Observed {
    body: Body,
    call: Option<Call>,
}

impl Drop for Observed {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            call.finish(Some(tonic::Status::cancelled("")));
        }
    }
}

impl http_body::Body for Observed {
    type Data = <Body as http_body::Body>::Data;
    type Error = <Body as http_body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref()
                    && let Some(call) = self.call.take()
                {
                    call.finish(tonic::Status::from_header_map(trailers));
                }
            }
            Poll::Ready(Some(Err(_))) | Poll::Ready(None) => {
                if let Some(call) = self.call.take() {
                    call.finish(None);
                }
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::method_of;

    #[test]
    fn only_known_methods_are_labelled() {
        assert_eq!(
            method_of("/grpc.health.v1.Health/Check"),
            ("grpc.health.v1.Health", "Check")
        );
        assert_eq!(
            method_of("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"),
            (
                "grpc.reflection.v1alpha.ServerReflection",
                "ServerReflectionInfo"
            )
        );
        assert_eq!(method_of("/lychd.x.v1.Nope/Guess"), ("unknown", "unknown"));
        assert_eq!(method_of("/"), ("unknown", "unknown"));
    }
}
