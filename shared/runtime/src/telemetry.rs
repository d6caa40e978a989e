//! Logs and traces: `tracing` with JSON or pretty output on stderr, OTLP/gRPC span export when
//! an endpoint is configured (or `OTEL_EXPORTER_OTLP_ENDPOINT` is set), and W3C trace context
//! extracted from incoming and injected into outgoing gRPC calls.

use opentelemetry::global;
use opentelemetry::propagation::Extractor;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{LogFormat, TelemetryConfig};

/// Keeps the exporter alive; [`Telemetry::shutdown`] flushes pending spans.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Install the global subscriber. Must run inside a tokio runtime when OTLP is on (the
    /// exporter's channel lives there). Returns an error if a subscriber is already set.
    pub fn init(cfg: &TelemetryConfig, service_name: &str) -> anyhow::Result<Self> {
        global::set_text_map_propagator(TraceContextPropagator::new());
        let filter =
            EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(&cfg.filter))?;
        let fmt = match cfg.format {
            LogFormat::Json => tracing_subscriber::fmt::layer()
                .json()
                .with_current_span(true)
                .with_span_list(false)
                .with_writer(std::io::stderr)
                .boxed(),
            LogFormat::Pretty => tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .boxed(),
        };
        let provider = match otlp_endpoint(cfg) {
            Some(endpoint) => {
                use opentelemetry_otlp::WithExportConfig;
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .with_endpoint(endpoint)
                    .build()?;
                let resource = opentelemetry_sdk::Resource::builder()
                    .with_service_name(service_name.to_owned())
                    .build();
                Some(
                    SdkTracerProvider::builder()
                        .with_batch_exporter(exporter)
                        .with_resource(resource)
                        .build(),
                )
            }
            None => None,
        };
        let otel = provider
            .as_ref()
            .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer(service_name.to_owned())));
        tracing_subscriber::registry()
            .with(filter)
            .with(fmt)
            .with(otel)
            .try_init()?;
        Ok(Telemetry { provider })
    }

    /// Flush and stop the exporter (blocking work runs off the async threads).
    pub async fn shutdown(self) {
        if let Some(provider) = self.provider {
            let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        }
    }
}

/// The OTLP/gRPC collector: `telemetry.otlp_endpoint`, else `OTEL_EXPORTER_OTLP_ENDPOINT`;
/// none when neither is set (spans and metrics are then not pushed).
pub fn otlp_endpoint(cfg: &TelemetryConfig) -> Option<String> {
    cfg.otlp_endpoint
        .clone()
        .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok())
        .filter(|e| !e.is_empty())
}

/// The span of one incoming request, child of the caller's trace context when one was sent.
pub fn request_span<B>(request: &http::Request<B>) -> tracing::Span {
    let parent =
        global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(request.headers())));
    let request_id = request
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let span = tracing::info_span!(
        "grpc.request",
        otel.kind = "server",
        rpc.method = %request.uri().path(),
        request_id = %request_id,
    );
    let _ = span.set_parent(parent);
    span
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}
