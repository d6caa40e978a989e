//! The Archive's metrics (issue 30 item 2): how long a recall took, from the request to its
//! answer (waiting for the namespace included), by outcome.

use std::sync::OnceLock;
use std::time::Instant;

use lychd_runtime::Office;
use lychd_runtime::metrics::{Histogram, KeyValue};

use super::Recollection;
use crate::error::Result;

/// Record one recall: `recalled` (a new receipt), `replayed` (its request id's kept receipt) or
/// `refused`.
pub fn recalled(started: Instant, recollection: &Result<Recollection>) {
    static DURATION: OnceLock<Histogram<f64>> = OnceLock::new();
    let outcome = match recollection {
        Ok(r) if r.replayed => "replayed",
        Ok(_) => "recalled",
        Err(_) => "refused",
    };
    DURATION
        .get_or_init(|| {
            lychd_runtime::metrics::seconds_histogram(
                &lychd_runtime::metrics::meter(Office::Archive),
                "lychd.archive.recall.duration",
                "time to answer one recall (waiting for its namespace included), by outcome",
            )
        })
        .record(
            started.elapsed().as_secs_f64(),
            &[KeyValue::new("outcome", outcome)],
        );
}
