//! The decision log: the audit records of decisions asked over the `Authorize` and
//! `Authenticate` RPCs (the hot path every office's every call goes through), appended by one
//! writer task per Ward office, in batches, behind the answer.
//!
//! Why not one insert per decision before answering: that doubled the database round trips of
//! a decision and spent a transaction id each (an office at 1,000 decisions/s would force a
//! wraparound vacuum every two days); a batch is one statement and one transaction.
//!
//! What it guarantees:
//! - A decision is answered only once its record is queued here; the queue is bounded, and
//!   while it is full (the writer is behind or the database is failing) decisions are refused
//!   (`UNAVAILABLE`, `DECISION_LOG_UNAVAILABLE`): Ward never answers a decision it cannot record.
//! - Records are written in the order they were queued, in batches of up to [`BATCH`] records
//!   or [`LINGER`] of waiting, with asynchronous commit (like every decision record before). A failed batch is kept and
//!   retried with backoff; nothing is dropped while the office runs.
//! - [`DecisionLog::flush`] returns once everything queued before it is committed (listing the
//!   audit flushes first, so a listing shows every decision answered before it was asked).
//! - At shutdown, once serving has drained and the office's services are dropped, the writer
//!   writes what remains and ends (the runtime awaits it within the grace period).
//! - Bounded in time: once the oldest record of the batch waiting for the database is older
//!   than the configured bound (the database reads but cannot write), new decisions are
//!   refused too (ADR 0004).
//! - What can be lost: records still queued when the process is killed — some tens of
//!   milliseconds of decisions, at most the age bound's worth while the database cannot write
//!   (ADR 0004 states it exactly). Each record carries an id given when it was queued and is
//!   written with `ON CONFLICT DO NOTHING`: a batch retried after an ambiguous commit is
//!   written once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::error::{Result, WardError};

/// Records held at most before decisions are refused.
pub const CAPACITY: usize = 8192;
/// Records written by one statement at most.
pub const BATCH: usize = 512;
/// How long the first record of a batch waits for others.
pub const LINGER: Duration = Duration::from_millis(10);

/// One record: what `audit::record` would append.
#[derive(Debug)]
pub struct Entry {
    pub event: &'static str,
    pub actor_id: Option<Uuid>,
    pub subject_id: Option<Uuid>,
    pub detail: Value,
}

enum Message {
    /// A record, when it was queued, and its id (written once whatever the retries).
    Entry(Entry, Instant, Uuid),
    Flush(oneshot::Sender<()>),
}

/// A handle on the writer (cheap to clone). The writer ends when every handle is dropped and
/// everything queued is written.
#[derive(Clone)]
pub struct DecisionLog {
    queue: mpsc::Sender<Message>,
    /// When the oldest record of the batch being written was queued (`None`: no batch is
    /// waiting for the database).
    oldest: Arc<Mutex<Option<Instant>>>,
    max_age: Duration,
}

/// How old the oldest unwritten record may grow before decisions are refused, by default.
pub const MAX_AGE: Duration = Duration::from_secs(10);

impl std::fmt::Debug for DecisionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DecisionLog")
    }
}

impl DecisionLog {
    /// Start the writer on `pool`; returns the handle and the writer task (await it at exit).
    pub fn start(pool: PgPool) -> (DecisionLog, tokio::task::JoinHandle<()>) {
        Self::start_with(pool, MAX_AGE)
    }

    /// [`DecisionLog::start`], refusing records once the oldest unwritten one is older than
    /// `max_age`.
    pub fn start_with(
        pool: PgPool,
        max_age: Duration,
    ) -> (DecisionLog, tokio::task::JoinHandle<()>) {
        let (queue, rx) = mpsc::channel(CAPACITY);
        let oldest = Arc::new(Mutex::new(None));
        (
            DecisionLog {
                queue,
                oldest: oldest.clone(),
                max_age,
            },
            tokio::spawn(write(pool, rx, oldest)),
        )
    }

    /// Queue `entry`, or refuse when the log cannot take it now: the queue is full, or the
    /// oldest record not yet written has waited longer than the bound (the database reads but
    /// does not write: read-only, wraparound protection, a locked audit table).
    pub fn record(&self, entry: Entry) -> Result<()> {
        let stale = self
            .oldest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|t| t.elapsed() > self.max_age);
        if stale {
            return Err(WardError::DecisionLogUnavailable);
        }
        self.queue
            .try_send(Message::Entry(entry, Instant::now(), Uuid::new_v4()))
            .map_err(|_| WardError::DecisionLogUnavailable)
    }

    /// How many records are queued and not yet taken by the writer, asked later (for a
    /// gauge); `None` once the writer has ended. Holds no handle that keeps the writer alive.
    pub fn depth_probe(&self) -> impl Fn() -> Option<usize> + Send + Sync + 'static {
        let queue = self.queue.downgrade();
        move || {
            let queue = queue.upgrade()?;
            Some(queue.max_capacity() - queue.capacity())
        }
    }

    /// Wait until everything queued before this call is committed.
    pub async fn flush(&self) -> Result<()> {
        let (done, written) = oneshot::channel();
        self.queue
            .send(Message::Flush(done))
            .await
            .map_err(|_| WardError::DecisionLogUnavailable)?;
        written.await.map_err(|_| WardError::DecisionLogUnavailable)
    }
}

async fn write(pool: PgPool, mut rx: mpsc::Receiver<Message>, oldest: Arc<Mutex<Option<Instant>>>) {
    let set_oldest = |at: Option<Instant>| {
        *oldest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = at;
    };
    let mut entries = Vec::with_capacity(BATCH);
    let mut first_queued = None;
    let mut flushed = Vec::new();
    while let Some(first) = rx.recv().await {
        // Collect a batch: until it is full, a flush is asked for, the queue closes, or the
        // first record has waited `LINGER` (so a quiet office still writes one statement per
        // few records, not one per decision).
        let deadline = tokio::time::Instant::now() + LINGER;
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Entry(e, queued, id) => {
                    first_queued.get_or_insert(queued);
                    entries.push((id, e));
                }
                Message::Flush(done) => {
                    flushed.push(done);
                    break;
                }
            }
            if entries.len() < BATCH {
                next = tokio::time::timeout_at(deadline, rx.recv())
                    .await
                    .ok()
                    .flatten();
            }
        }
        set_oldest(first_queued.take());
        // One time for the batch, whatever its retries: the audit is partitioned by time and
        // its record ids are unique with their time, so a retry must carry the same one.
        let at = time::OffsetDateTime::now_utc();
        let mut backoff = Duration::from_millis(50);
        let mut retry = false;
        while let Err(e) = insert(&pool, &entries, at, retry).await {
            retry = true;
            // The error names no record content (sqlx errors carry no parameters).
            tracing::warn!(error = %e, records = entries.len(), "decision log write failed; retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
        set_oldest(None);
        entries.clear();
        for done in flushed.drain(..) {
            let _ = done.send(());
        }
    }
}

/// The batch insert. Its first attempt is a plain insert: every record id is fresh
/// (`Uuid::new_v4` when it was queued), so nothing can conflict yet, and PostgreSQL's
/// speculative insertion (`ON CONFLICT`: an arbiter-index probe and a confirmation WAL record
/// per row, about a fifth of a record's insert, issue 31) is paid only by a retry, which may
/// find the rows of an attempt whose commit was ambiguous.
const INSERT_SQL: &str =
    "INSERT INTO ward.audit (record_id, at, event, actor_id, subject_id, detail)
     SELECT t.record_id, $6, t.event, t.actor_id, t.subject_id, t.detail::jsonb
       FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit,
            unnest($5::uuid[], $1::text[], $2::uuid[], $3::uuid[], $4::text[])
                WITH ORDINALITY AS t (record_id, event, actor_id, subject_id, detail, n)
      ORDER BY t.n";
/// A retry of [`INSERT_SQL`]: each record once, whatever an earlier attempt committed.
const RETRY_SQL: &str = concat!(
    "INSERT INTO ward.audit (record_id, at, event, actor_id, subject_id, detail)
     SELECT t.record_id, $6, t.event, t.actor_id, t.subject_id, t.detail::jsonb
       FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit,
            unnest($5::uuid[], $1::text[], $2::uuid[], $3::uuid[], $4::text[])
                WITH ORDINALITY AS t (record_id, event, actor_id, subject_id, detail, n)
      ORDER BY t.n",
    "\n     ON CONFLICT (record_id, at) DO NOTHING"
);

/// One statement, one transaction (asynchronous commit), in queue order; `retry`: an earlier
/// attempt of the same batch failed (and may have committed).
async fn insert(
    pool: &PgPool,
    entries: &[(Uuid, Entry)],
    at: time::OffsetDateTime,
    retry: bool,
) -> std::result::Result<(), sqlx::Error> {
    if entries.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = entries.iter().map(|(id, _)| *id).collect();
    let events: Vec<&str> = entries.iter().map(|(_, e)| e.event).collect();
    let actors: Vec<Option<Uuid>> = entries.iter().map(|(_, e)| e.actor_id).collect();
    let subjects: Vec<Option<Uuid>> = entries.iter().map(|(_, e)| e.subject_id).collect();
    let details: Vec<String> = entries.iter().map(|(_, e)| e.detail.to_string()).collect();
    sqlx::query(if retry { RETRY_SQL } else { INSERT_SQL })
        .bind(events)
        .bind(actors)
        .bind(subjects)
        .bind(details)
        .bind(ids)
        .bind(at)
        .execute(pool)
        .await?;
    Ok(())
}
