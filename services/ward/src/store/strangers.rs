//! Refusals of callers that authenticate nobody (an unknown, malformed, expired or revoked
//! token or credential, or a session bound elsewhere), counted per source and reason instead of
//! audited one row each: a stranger's flood costs memory bounded by [`MAX_KEYS`] and at most one
//! audit row per (source, reason) per [`INTERVAL`], and it never queues on the decision log, so
//! the decisions of principals who do authenticate keep their room there.
//!
//! Counts are written as `refusals.counted` audit rows (`source`, `reason`, `count`, `since`)
//! every [`INTERVAL`], when asked ([`Tally::flush`], before `ListAudit` answers) and when the
//! tally is dropped. A flush that fails (the database is stalled) keeps the counts for the next.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;
use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::sync::Notify;

use crate::error::Result;

/// How often counts are written.
pub const INTERVAL: Duration = Duration::from_secs(10);
/// Distinct (source, reason) keys held between writes; further sources count under `other`.
pub const MAX_KEYS: usize = 256;
/// The source that collects what does not fit in [`MAX_KEYS`].
pub const OVERFLOW: &str = "other";

#[derive(Default)]
struct Counts {
    since: Option<OffsetDateTime>,
    by: HashMap<(String, &'static str), u64>,
}

impl Counts {
    fn add(&mut self, source: &str, reason: &'static str, n: u64) {
        self.since.get_or_insert_with(OffsetDateTime::now_utc);
        let key = if self.by.len() < MAX_KEYS || self.by.contains_key(&(source.to_owned(), reason))
        {
            (source.to_owned(), reason)
        } else {
            (OVERFLOW.to_owned(), reason)
        };
        *self.by.entry(key).or_default() += n;
    }
}

struct Shared {
    counts: Mutex<Counts>,
    pool: PgPool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn flush(&self) -> Result<()> {
        let taken = std::mem::take(&mut *self.lock());
        if taken.by.is_empty() {
            return Ok(());
        }
        let since = taken.since.unwrap_or_else(OffsetDateTime::now_utc);
        let details: Vec<serde_json::Value> = taken
            .by
            .iter()
            .map(|((source, reason), count)| {
                json!({ "source": source, "reason": reason, "count": count, "since": since.unix_timestamp() })
            })
            .collect();
        let written = sqlx::query(
            "INSERT INTO ward.audit (event, detail)
             SELECT 'refusals.counted', d FROM unnest($1::jsonb[]) AS d",
        )
        .bind(&details)
        .execute(&self.pool)
        .await;
        if let Err(e) = written {
            // Kept for the next write: a stalled database loses no count.
            let mut counts = self.lock();
            for ((source, reason), n) in taken.by {
                counts.add(&source, reason, n);
            }
            return Err(e.into());
        }
        Ok(())
    }
}

/// The tally of one Ward process part (its gRPC service, or its own verifier).
pub struct Tally {
    shared: Arc<Shared>,
    dropped: Arc<Notify>,
}

impl Tally {
    /// A tally writing to `pool`, with its writer running until the tally is dropped (then it
    /// writes what is left).
    pub fn start(pool: PgPool) -> (Tally, tokio::task::JoinHandle<()>) {
        let shared = Arc::new(Shared {
            counts: Mutex::default(),
            pool,
        });
        let dropped = Arc::new(Notify::new());
        let writer = tokio::spawn(write_every_interval(shared.clone(), dropped.clone()));
        (Tally { shared, dropped }, writer)
    }

    /// Count one refusal of `source` for `reason`.
    pub fn count(&self, source: &str, reason: &'static str) {
        self.shared.lock().add(source, reason, 1);
    }

    /// Write the counts now.
    pub async fn flush(&self) -> Result<()> {
        self.shared.flush().await
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        self.dropped.notify_one();
    }
}

async fn write_every_interval(shared: Arc<Shared>, dropped: Arc<Notify>) {
    loop {
        let last = tokio::select! {
            () = tokio::time::sleep(INTERVAL) => false,
            () = dropped.notified() => true,
        };
        if let Err(e) = shared.flush().await {
            tracing::warn!(error = %e, "counted refusals not written yet");
        }
        if last {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_bounded_and_the_rest_counts_as_other() {
        let mut c = Counts::default();
        for i in 0..10_000 {
            c.add(
                &format!("10.0.{}.{}", i / 256, i % 256),
                "SESSION_UNKNOWN",
                1,
            );
        }
        assert_eq!(c.by.len(), MAX_KEYS + 1);
        assert_eq!(c.by.values().sum::<u64>(), 10_000);
        assert_eq!(
            c.by[&(OVERFLOW.to_owned(), "SESSION_UNKNOWN")],
            10_000 - MAX_KEYS as u64
        );
        // A source already held keeps its own count.
        c.add("10.0.0.0", "SESSION_UNKNOWN", 5);
        assert_eq!(c.by[&("10.0.0.0".to_owned(), "SESSION_UNKNOWN")], 6);
    }
}
