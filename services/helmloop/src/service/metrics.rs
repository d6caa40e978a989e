//! HelmLoop's metrics (issue 30 item 2): reductions by disposition.

use std::sync::OnceLock;

use lychd_runtime::Office;
use lychd_runtime::metrics::{Counter, KeyValue};

use super::Reduced;
use crate::error::Result;

/// Count one reduction that produced a result (`PASS`, `HOLD` or `REJECT`); `source`: `inline`
/// (the input given) or `stored` (the records stored for a subject and revision).
pub fn reduced(reduced: &Result<Reduced>, source: &'static str) {
    static REDUCTIONS: OnceLock<Counter<u64>> = OnceLock::new();
    let Ok(reduced) = reduced else {
        return;
    };
    REDUCTIONS
        .get_or_init(|| {
            lychd_runtime::metrics::meter(Office::HelmLoop)
                .u64_counter("lychd.helmloop.reductions")
                .with_unit("{reduction}")
                .with_description(
                    "reductions that produced a disposition, by disposition and source",
                )
                .build()
        })
        .add(
            1,
            &[
                KeyValue::new("disposition", reduced.summary.disposition.clone()),
                KeyValue::new("source", source),
            ],
        );
}
