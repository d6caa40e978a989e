//! Ward's metrics (issue 30 item 2): the consent gauges of its own schema
//! (`store/metrics.rs`), polled by the runtime; how long each decision took; how many decision
//! records wait in each decision log's queue.

use std::sync::OnceLock;
use std::time::Instant;

use lychd_runtime::Office;
use lychd_runtime::metrics::{Histogram, KeyValue, Polled};
use sqlx::PgPool;

use crate::store::decision_log::DecisionLog;
use crate::store::metrics::{GAUGES, read};

/// Start polling (none when metrics are off in this process); stops when dropped.
pub fn start(pool: PgPool) -> Option<Polled> {
    Polled::start(Office::Ward, pool, GAUGES, read)
}

/// Record one authorization decision's latency, from the question to its answer; `asked`:
/// `rpc` (another office asked over `Authorize`) or `local` (Ward's own API).
pub fn decided(asked: &'static str, started: Instant) {
    static DURATION: OnceLock<Histogram<f64>> = OnceLock::new();
    DURATION
        .get_or_init(|| {
            lychd_runtime::metrics::seconds_histogram(
                &lychd_runtime::metrics::meter(Office::Ward),
                "lychd.ward.decision.duration",
                "time to decide one authorization question (resolution, rules and its queued record)",
            )
        })
        .record(
            started.elapsed().as_secs_f64(),
            &[KeyValue::new("asked", asked)],
        );
}

/// Observe how many records wait in `log`'s queue (`log_name`: `rpc` or `local`); the gauge
/// holds no handle that would keep the writer alive.
pub fn observe_queue(log: &DecisionLog, log_name: &'static str) {
    let depth = log.depth_probe();
    let _ = lychd_runtime::metrics::meter(Office::Ward)
        .u64_observable_gauge("lychd.ward.decision_log.queued")
        .with_unit("{record}")
        .with_description("decision records queued and not yet taken by the writer, by log")
        .with_callback(move |observer| {
            if let Some(n) = depth() {
                observer.observe(n as u64, &[KeyValue::new("log", log_name)]);
            }
        })
        .build();
}
