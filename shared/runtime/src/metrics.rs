//! Metrics (issue 30 item 2): one OpenTelemetry `SdkMeterProvider` per office process, read
//! two ways — pushed over OTLP/gRPC when an endpoint is configured (`telemetry.otlp_endpoint`
//! or `OTEL_EXPORTER_OTLP_ENDPOINT`, as traces are), and pulled by Prometheus from a small
//! HTTP listener (`[metrics] listen`, `GET /metrics`, text exposition 0.0.4, written by
//! [`exposition`] from the SDK's own reader: no Prometheus client crate).
//!
//! What is measured: every RPC by the one tower layer of [`layer`] (requests by method and
//! gRPC code, refusals by their `ErrorInfo` reason, latency histograms in seconds), and each
//! office's own instruments on the global meter ([`meter`]); gauges that need the database are
//! fed by [`polled`]: one bounded query per office every `refresh_seconds`, never per scrape.
//!
//! The scrape endpoint is unauthenticated (Prometheus scrapes carry no Ward session): it
//! exposes counts and latencies only — no principal, token, object, payload or note text is
//! ever an attribute — and it binds loopback by default; a non-loopback `listen` is refused
//! unless `allow_non_loopback = true` says the operator put it behind their own network
//! policy. The names and units are the table in `docs/operations.md`.

mod exposition;
pub mod layer;
mod listener;
pub mod polled;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{ManualReader, Pipeline, SdkMeterProvider, Temporality};
use serde::{Deserialize, Serialize};

pub use layer::MetricsLayer;
/// What an office's own instruments are made of (offices need no OpenTelemetry dependency).
pub use opentelemetry::KeyValue;
pub use opentelemetry::metrics::{Counter, Histogram, Meter};
pub use polled::{Gauge, Polled, Reading};

use crate::Office;

/// `[metrics]`: the scrape endpoint, the database gauges' refresh and the OTLP push interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// false: no provider, no listener, no database gauges (every instrument is a no-op).
    pub enabled: bool,
    /// Where the Prometheus scrape endpoint listens (`GET /metrics`).
    pub listen: SocketAddr,
    /// A non-loopback `listen` is refused unless this says the exposure is intended.
    pub allow_non_loopback: bool,
    /// How often the gauges read from the office's own schema are refreshed, in seconds.
    pub refresh_seconds: u64,
    /// How often metrics are pushed over OTLP when an endpoint is configured, in seconds.
    pub otlp_interval_seconds: u64,
}

impl MetricsConfig {
    /// Loopback, on the office's gRPC port + 1000 (Dispatcher 51051 … Runner 51056).
    pub fn defaults(office: Office) -> Self {
        MetricsConfig {
            enabled: true,
            listen: SocketAddr::from(([127, 0, 0, 1], office.default_port() + 1000)),
            allow_non_loopback: false,
            refresh_seconds: 15,
            otlp_interval_seconds: 60,
        }
    }

    /// The first bad field (its path under `metrics.`) and why.
    pub fn problem(&self) -> Option<(&'static str, &'static str)> {
        if !self.listen.ip().is_loopback() && !self.allow_non_loopback {
            return Some((
                "metrics.listen",
                "is not a loopback address: the scrape endpoint is unauthenticated; set metrics.allow_non_loopback = true to expose it",
            ));
        }
        if !(1..=3600).contains(&self.refresh_seconds) {
            return Some(("metrics.refresh_seconds", "must be between 1 and 3600"));
        }
        if !(1..=3600).contains(&self.otlp_interval_seconds) {
            return Some((
                "metrics.otlp_interval_seconds",
                "must be between 1 and 3600",
            ));
        }
        None
    }

    pub fn refresh(&self) -> Duration {
        Duration::from_secs(self.refresh_seconds)
    }
}

/// The refresh interval of database gauges once [`Metrics::start`] ran in this process (the
/// office serves with metrics on); `None` otherwise (in-process tests: nothing is polled).
static INSTALLED: OnceLock<Duration> = OnceLock::new();

/// The meter an office records its own instruments on (the global provider's; a no-op until
/// [`Metrics::start`] installed it).
pub fn meter(office: Office) -> Meter {
    opentelemetry::global::meter(office.name())
}

/// The reader the scrape endpoint collects from, shared with the provider.
#[derive(Debug, Clone)]
pub(crate) struct Scrape(Arc<ManualReader>);

impl MetricReader for Scrape {
    fn register_pipeline(&self, pipeline: std::sync::Weak<Pipeline>) {
        self.0.register_pipeline(pipeline)
    }
    fn collect(
        &self,
        rm: &mut opentelemetry_sdk::metrics::data::ResourceMetrics,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: opentelemetry_sdk::metrics::InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

impl Scrape {
    pub(crate) fn new() -> Self {
        Scrape(Arc::new(ManualReader::builder().build()))
    }

    /// Everything measured so far, in the text exposition format.
    pub(crate) fn render(&self) -> String {
        let mut rm = opentelemetry_sdk::metrics::data::ResourceMetrics::default();
        match self.collect(&mut rm) {
            Ok(()) => exposition::render(&rm),
            Err(e) => {
                tracing::warn!(error = %e, "metrics collection failed");
                String::new()
            }
        }
    }
}

/// The office's metrics: its provider (installed as the global one) and its scrape listener.
pub struct Metrics {
    provider: SdkMeterProvider,
    listener: Option<listener::Listener>,
}

impl Metrics {
    /// Build the provider (with OTLP push when `otlp_endpoint` is given), install it globally
    /// and bind the scrape endpoint. `Ok(None)` when `[metrics] enabled = false`. Must run
    /// inside a tokio runtime. An error is a bind failure of `listen` (its kind says whether
    /// another process holds the port).
    pub async fn start(
        cfg: &MetricsConfig,
        office: Office,
        otlp_endpoint: Option<&str>,
    ) -> Result<Option<Metrics>, std::io::Error> {
        if !cfg.enabled {
            return Ok(None);
        }
        let scrape = Scrape::new();
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(office.binary())
            .build();
        let mut builder = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(scrape.clone());
        if let Some(endpoint) = otlp_endpoint {
            use opentelemetry_otlp::WithExportConfig;
            match opentelemetry_otlp::MetricExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .build()
            {
                Ok(exporter) => {
                    let reader = opentelemetry_sdk::metrics::PeriodicReader::builder(exporter)
                        .with_interval(Duration::from_secs(cfg.otlp_interval_seconds))
                        .build();
                    builder = builder.with_reader(reader);
                }
                Err(e) => tracing::warn!(error = %e, "otlp metrics exporter not built"),
            }
        }
        let listener = listener::Listener::bind(cfg.listen, scrape).await?;
        let provider = builder.build();
        opentelemetry::global::set_meter_provider(provider.clone());
        let _ = INSTALLED.set(cfg.refresh());
        tracing::info!(office = %office, addr = %listener.addr, "metrics scrape endpoint listening");
        Ok(Some(Metrics {
            provider,
            listener: Some(listener),
        }))
    }

    /// Where the scrape endpoint listens.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().map(|l| l.addr)
    }

    /// Stop the listener and push what is pending over OTLP (blocking work off the async threads).
    pub async fn shutdown(mut self) {
        drop(self.listener.take());
        let provider = self.provider;
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }
}

/// The name of a gRPC code as the metrics carry it (`INVALID_ARGUMENT`).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Latency buckets, in seconds, of every duration histogram (1 ms … 30 s).
pub const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A duration histogram in seconds with [`SECONDS_BUCKETS`].
pub fn seconds_histogram(
    meter: &Meter,
    name: &'static str,
    description: &'static str,
) -> opentelemetry::metrics::Histogram<f64> {
    meter
        .f64_histogram(name)
        .with_description(description)
        .with_unit("s")
        .with_boundaries(SECONDS_BUCKETS.to_vec())
        .build()
}
