//! Batched resolution: the questions that arrive together are answered by ONE resolving
//! statement (issue 31).
//!
//! One worker task per [`Resolver`] takes the first question waiting, then — once one of
//! [`IN_FLIGHT`] statement slots is free — every question queued behind it, up to [`MAX_ASKS`],
//! and answers them all in one statement on one connection, binding equal questions once (the
//! asking office's own `ward:decide` question rides with each of its questions). There is no
//! timed window: a quiet office's lone question finds a free slot and is sent at once; under
//! load the questions that arrive while the slots are busy form the next batch. A question
//! waits at most for the statements in flight before it (each bounded by the pool's and the
//! database's timeouts).
//!
//! Freshness is unchanged: a question joins a batch only after it was asked, and the batch's
//! statement starts after it joined, so its READ COMMITTED snapshot sees every revocation whose
//! commit returned before the question was asked. Nothing is cached.
//!
//! The worker's statements run on connections of their own ([`generic_plans`]), which plan the
//! resolving statement once per connection instead of once per statement.
//!
//! When a batch's statement fails, each caller resolves its own questions alone on a
//! connection of its own and meets its own outcome (a database that is down is down for it
//! too), so one failure is never fanned out as a guess.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::PgPool;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::{Row, Sent, run};
use crate::error::Result;

/// Statements resolving batches at once, at most. One: every question that arrives while a
/// statement is in flight joins the next one, so decisions asked a fraction of a millisecond
/// apart share a statement (issue 31, second round: with 4 slots the Dispatcher's decisions
/// went almost one per statement, 1.3 questions each; with one slot a lease + release cost
/// about 15 % less CPU and `Authorize` at c=32 a third less — ADR 0006). The wait it adds is
/// at most one statement's time (a resolving statement takes no lock).
pub const IN_FLIGHT: usize = 1;
/// Questions answered by one statement, at most.
pub const MAX_ASKS: usize = 256;
/// Callers queued for the worker, at most (a full queue holds callers back: backpressure).
const QUEUE: usize = 1024;

/// One caller's questions and where their answers go: the rows, or the questions back when
/// the batch's statement failed.
struct Job {
    sent: Vec<Sent>,
    reply: oneshot::Sender<std::result::Result<Vec<Option<Row>>, Vec<Sent>>>,
}

/// How much batching happened (for tests and benchmarks).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    /// Resolving statements sent by the worker.
    pub statements: u64,
    /// Questions those statements answered.
    pub asks: u64,
    /// Distinct questions those statements bound (equal questions of a batch are bound once).
    pub bound: u64,
}

#[derive(Default)]
struct Counters {
    statements: AtomicU64,
    asks: AtomicU64,
    bound: AtomicU64,
}

/// A handle on a batching worker (cheap to clone). The worker ends when every handle is
/// dropped; it holds nothing that needs writing at shutdown.
#[derive(Clone)]
pub struct Resolver {
    pool: PgPool,
    /// The worker's own connections ([`generic_plans`]).
    plans: PgPool,
    queue: mpsc::Sender<Job>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Resolver")
    }
}

impl Resolver {
    /// Start the worker on connections like `pool`'s (needs a tokio runtime).
    pub fn start(pool: PgPool) -> Resolver {
        let (queue, jobs) = mpsc::channel(QUEUE);
        let counters = Arc::new(Counters::default());
        let plans = generic_plans(&pool);
        tokio::spawn(work(
            Pools {
                office: pool.clone(),
                plans: plans.clone(),
            },
            jobs,
            counters.clone(),
        ));
        Resolver {
            pool,
            plans,
            queue,
            counters,
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn batching(&self) -> Batching {
        Batching {
            statements: self.counters.statements.load(Ordering::Relaxed),
            asks: self.counters.asks.load(Ordering::Relaxed),
            bound: self.counters.bound.load(Ordering::Relaxed),
        }
    }

    /// How the worker's connections planned the resolving statement so far: (generic plans,
    /// custom plans), from `pg_prepared_statements` of the connection it asks on (for tests and
    /// benchmarks; with one statement in flight the worker has one connection).
    pub async fn plans(&self) -> Result<(i64, i64)> {
        let mut conn = self.plans.acquire().await?;
        let counts = sqlx::query_as(
            "SELECT coalesce(sum(generic_plans), 0)::bigint, coalesce(sum(custom_plans), 0)::bigint
               FROM pg_prepared_statements WHERE statement = $1",
        )
        .bind(super::RESOLVE_SQL)
        .fetch_one(&mut *conn)
        .await?;
        Ok(counts)
    }

    /// The row of every question, in order, from one batch's statement; alone when the batch
    /// failed or the worker is gone.
    pub(super) async fn resolve(&self, sent: Vec<Sent>) -> Result<Vec<Option<Row>>> {
        let (reply, answer) = oneshot::channel();
        let sent = match self.queue.send(Job { sent, reply }).await {
            Err(mpsc::error::SendError(job)) => job.sent,
            Ok(()) => match answer.await {
                Ok(Ok(rows)) => return Ok(rows),
                Ok(Err(sent)) => sent,
                // The batch task ended without answering (the runtime is shutting down).
                Err(_) => return Err(sqlx::Error::PoolClosed.into()),
            },
        };
        let mut conn = self.pool.acquire().await?;
        Ok(run(&mut conn, &sent).await?.0)
    }
}

/// The worker's own connections: `pool`'s settings (the same server, role, timeouts and TLS),
/// at most [`IN_FLIGHT`] of them, connected when first needed, with
/// `plan_cache_mode = force_generic_plan`.
///
/// Why (issue 31, third round): the resolving statement's parameters are arrays, whose length
/// the generic plan cannot know (it assumes ten rows), so PostgreSQL's plan cache judged the
/// generic plan dearer than a custom one and planned the statement afresh on every execution —
/// `pg_prepared_statements` showed 0 generic and 2,020 custom plans after 2,020 executions, and
/// planning took about four times as long as executing (0.32 ms against 0.08 ms). Both plans are
/// the same index nested loop (`unnest` → the session by digest → its credential and principal
/// by key → the live assignment by `assignments_live`) whatever the batch's length, so the
/// generic one is kept. Only the resolving statement runs on these connections; every other
/// statement of Ward keeps the plan cache's own choice on the office's pool.
fn generic_plans(pool: &PgPool) -> PgPool {
    let connect = (*pool.connect_options())
        .clone()
        .options([("plan_cache_mode", "force_generic_plan")]);
    pool.options()
        .clone()
        .max_connections(u32::try_from(IN_FLIGHT).unwrap_or(1))
        .min_connections(0)
        .connect_lazy_with(connect)
}

/// The office's pool and the worker's own connections ([`generic_plans`]).
#[derive(Clone)]
struct Pools {
    office: PgPool,
    plans: PgPool,
}

async fn work(pools: Pools, mut jobs: mpsc::Receiver<Job>, counters: Arc<Counters>) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(first) = jobs.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        // Everything that queued while the slots were busy joins this batch.
        let mut asks = first.sent.len();
        let mut batch = vec![first];
        while asks < MAX_ASKS {
            match jobs.try_recv() {
                Ok(job) => {
                    asks += job.sent.len();
                    batch.push(job);
                }
                Err(_) => break,
            }
        }
        counters.statements.fetch_add(1, Ordering::Relaxed);
        counters.asks.fetch_add(asks as u64, Ordering::Relaxed);
        let (pools, counters) = (pools.clone(), counters.clone());
        tokio::spawn(async move {
            settle(&pools, batch, &counters).await;
            drop(slot);
        });
    }
}

/// Answer every job of `batch` from one statement, or hand each its questions back.
async fn settle(pools: &Pools, batch: Vec<Job>, counters: &Counters) {
    let mut replies = Vec::with_capacity(batch.len());
    let mut all = Vec::new();
    for job in batch {
        replies.push((job.reply, job.sent.len()));
        all.extend(job.sent);
    }
    // Once the office's pool is closed (the office is stopping, or its database is gone), its
    // worker's connections close too and no batch is answered: each caller meets the closed
    // pool alone, as it would without a worker.
    if pools.office.is_closed() {
        pools.plans.close().await;
    }
    let rows = match pools.plans.acquire().await {
        Ok(mut conn) => run(&mut conn, &all).await,
        Err(e) => Err(e.into()),
    };
    match rows {
        Ok((rows, bound)) => {
            counters.bound.fetch_add(bound as u64, Ordering::Relaxed);
            let mut rows = rows.into_iter();
            for (reply, n) in replies {
                // A caller that went away needs no answer.
                let _ = reply.send(Ok(rows.by_ref().take(n).collect()));
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, questions = all.len(), "a batch of decisions failed: each is resolved alone");
            let mut all = all.into_iter();
            for (reply, n) in replies {
                let _ = reply.send(Err(all.by_ref().take(n).collect()));
            }
        }
    }
}
