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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::metrics::{Metrics, MetricsConfig};

    static QUERIES: AtomicUsize = AtomicUsize::new(0);

    static GAUGES: &[Gauge] = &[Gauge {
        name: "lychd.test.polled",
        description: "a polled reading",
        unit: "{thing}",
    }];

    static FAILING: &[Gauge] = &[Gauge {
        name: "lychd.test.failing",
        description: "a reading whose query fails",
        unit: "{thing}",
    }];

    fn counted(_pool: PgPool) -> BoxFuture<'static, Result<Vec<Reading>, sqlx::Error>> {
        let n = QUERIES.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move {
            Ok(vec![
                Reading::new("lychd.test.polled", n as f64).with("k", "v"),
            ])
        })
    }

    fn failing(_pool: PgPool) -> BoxFuture<'static, Result<Vec<Reading>, sqlx::Error>> {
        Box::pin(async { Err(sqlx::Error::PoolTimedOut) })
    }

    async fn get(addr: std::net::SocketAddr, request: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("read");
        answer
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_scrape_storm_reads_memory_and_the_database_once_per_interval() {
        let cfg = MetricsConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            refresh_seconds: 3600,
            ..MetricsConfig::defaults(Office::Archive)
        };
        let metrics = Metrics::start(&cfg, Office::Archive, None)
            .await
            .expect("bind")
            .expect("enabled");
        let addr = metrics.addr().expect("listening");
        // Never connected: neither query touches a database.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("lazy pool");
        let _polled = Polled::start(Office::Archive, pool.clone(), GAUGES, counted).expect("on");
        let _failing = Polled::start(Office::Archive, pool, FAILING, failing).expect("on");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while QUERIES.load(Ordering::SeqCst) == 0 {
            assert!(std::time::Instant::now() < deadline, "no first round");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let scrape = "GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        let storm = (0..200).map(|_| get(addr, scrape));
        for answer in futures::future::join_all(storm).await {
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            assert!(
                answer.contains("\nlychd_test_polled{k=\"v\"} 1\n"),
                "the first round's reading: {answer}"
            );
            assert!(
                !answer.contains("lychd_test_failing"),
                "a failed query leaves its gauge absent: {answer}"
            );
        }
        assert_eq!(QUERIES.load(Ordering::SeqCst), 1, "200 scrapes, one query");
        let missing = get(
            addr,
            "GET /other HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let posted = get(
            addr,
            "POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(posted.starts_with("HTTP/1.1 405"), "{posted}");
        metrics.shutdown().await;
        // The listener's task is aborted; its socket closes once the runtime drops it.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while tokio::net::TcpStream::connect(addr).await.is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "the endpoint stops with the office"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
