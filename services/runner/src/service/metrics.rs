//! The Runner's gauges (issue 30 item 2): its own schema's readings (`store/metrics.rs`)
//! polled by the runtime every `[metrics] refresh_seconds`.

use lychd_runtime::Office;
use lychd_runtime::metrics::Polled;
use sqlx::PgPool;

use crate::store::metrics::{GAUGES, read};

/// Start polling (none when metrics are off in this process); stops when dropped.
pub fn start(pool: PgPool) -> Option<Polled> {
    Polled::start(Office::Runner, pool, GAUGES, read)
}
