//! Gauges read from an office's own schema: one query (the office's, in its `store/`) run by a
//! background task every `[metrics] refresh_seconds`, at most one at a time and within
//! [`QUERY_TIMEOUT`]; its readings are held in memory and observed by the gauges at each
//! collection. A scrape storm therefore never reaches PostgreSQL: the database sees one query
//! per office per interval, whatever the scrapers do. A query that fails or times out clears
//! the readings (a gauge with no reading is absent, never stale) and is logged; the next round
//! tries again. Nothing is polled unless the office serves with metrics on ([`super::Metrics`]).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use opentelemetry::KeyValue;
use opentelemetry::metrics::ObservableGauge;
use sqlx::PgPool;

use crate::Office;

/// The longest one round's query may take.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// A gauge an office declares: OpenTelemetry name, description and unit.
#[derive(Debug, Clone, Copy)]
pub struct Gauge {
    pub name: &'static str,
    pub description: &'static str,
    pub unit: &'static str,
}

/// One value of one gauge, with its attributes.
#[derive(Debug, Clone)]
pub struct Reading {
    pub gauge: &'static str,
    pub attributes: Vec<KeyValue>,
    pub value: f64,
}

impl Reading {
    pub fn new(gauge: &'static str, value: f64) -> Self {
        Reading {
            gauge,
            attributes: Vec::new(),
            value,
        }
    }

    pub fn with(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.attributes.push(KeyValue::new(key, value.into()));
        self
    }
}

/// The office's query: every reading of every gauge it declared, from its own schema.
pub type Query = fn(PgPool) -> BoxFuture<'static, Result<Vec<Reading>, sqlx::Error>>;

/// The running poller; stops when dropped (hold it as long as the office serves).
pub struct Polled {
    task: tokio::task::JoinHandle<()>,
    _gauges: Vec<ObservableGauge<f64>>,
}

impl Drop for Polled {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Polled {
    /// Declare `gauges` on the office's meter and start polling `query` (a first round at
    /// once). `None` when metrics are not on in this process.
    pub fn start(
        office: Office,
        pool: PgPool,
        gauges: &'static [Gauge],
        query: Query,
    ) -> Option<Polled> {
        let refresh = *super::INSTALLED.get()?;
        let readings: Arc<RwLock<Vec<Reading>>> = Arc::default();
        let meter = super::meter(office);
        let declared = gauges
            .iter()
            .map(|gauge| {
                let readings = readings.clone();
                let name = gauge.name;
                meter
                    .f64_observable_gauge(name)
                    .with_description(gauge.description)
                    .with_unit(gauge.unit)
                    .with_callback(move |observer| {
                        let held = readings.read().unwrap_or_else(|p| p.into_inner());
                        for r in held.iter().filter(|r| r.gauge == name) {
                            observer.observe(r.value, &r.attributes);
                        }
                    })
                    .build()
            })
            .collect();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(refresh);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let fresh = match tokio::time::timeout(QUERY_TIMEOUT, query(pool.clone())).await {
                    Ok(Ok(fresh)) => fresh,
                    Ok(Err(e)) => {
                        tracing::warn!(office = %office, error = %e, "metrics gauges not refreshed");
                        Vec::new()
                    }
                    Err(_) => {
                        tracing::warn!(office = %office, "metrics gauges not refreshed: query timed out");
                        Vec::new()
                    }
                };
                *readings.write().unwrap_or_else(|p| p.into_inner()) = fresh;
            }
        });
        Some(Polled {
            task,
            _gauges: declared,
        })
    }
}
