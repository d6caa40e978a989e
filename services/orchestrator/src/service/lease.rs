//! One Orchestrator per host, fenced (issue 25, point 2): the host lease of this process —
//! taken with one guarded statement, renewed every third of its TTL by the keeper task,
//! given up on a graceful stop — and what taking a host over means: the restart path (every
//! armed runtime guard and every interrupted transition contained, every unsettled transition
//! given its final phase), run under the new generation before anything is actuated.
//!
//! Invariant: this process records or actuates only while it holds the lease, at the
//! generation a transition was started under: every write is fenced by the database
//! ([`store::lease::fenced`]), and every effect is preceded by [`HostLease::valid`], which
//! also requires the last renewal to be younger than the TTL by this process's own
//! (monotonic) clock. A lapse is a loss: the generation it held is never used again; the
//! keeper competes for the lease afresh (a new generation, the take-over path again).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lychd_runtime::health::HealthState;
use sqlx::PgPool;
use time::OffsetDateTime;
use tokio::time::Instant;

use crate::config::Settings;
use crate::store;
pub use crate::store::lease::Fence;

/// Where this process stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// It holds the lease: it records and actuates.
    Holding,
    /// Another process holds it (or nobody yet): this one serves reads and waits for a lapse.
    Standby,
    /// It held the lease and lost it (taken over, or lapsed): nothing more is actuated under
    /// that generation; it waits for a lapse like a standby.
    Lost,
}

impl Standing {
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::Holding => "HOLDING",
            Standing::Standby => "STANDBY",
            Standing::Lost => "LOST",
        }
    }
}

/// What `Describe` says of the lease.
#[derive(Debug, Clone)]
pub struct LeaseView {
    pub host_id: String,
    pub standing: Standing,
    /// This process's holder id.
    pub this_holder: String,
    /// The recorded holder and generation (absent: no process ever took it).
    pub holder: Option<String>,
    pub generation: Option<i64>,
    pub expires_at: Option<OffsetDateTime>,
}

struct State {
    standing: Standing,
    /// The generation held (`Holding`) or last held.
    generation: Option<i64>,
    /// The monotonic instant the lease is good until: the start of its last renewal + TTL.
    valid_until: Option<Instant>,
}

/// The host lease of one office process.
pub struct HostLease {
    host_id: String,
    holder: String,
    ttl: Duration,
    pool: PgPool,
    health: Option<(HealthState, &'static str)>,
    state: Mutex<State>,
}

/// This process's holder id: the supervisor's instance id when given, and a random part.
fn holder_id() -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    match lychd_runtime::health::instance_from_env() {
        Ok(Some(instance)) => format!("{instance}-{}", &random[..12]),
        _ => format!("pid{}-{random}", std::process::id()),
    }
}

/// Take the host over under `fence`: what a restart always did — armed runtime guards and
/// interrupted transitions contained, unsettled transitions given their final phase.
pub async fn take_over(pool: &PgPool, fence: &Fence) -> Result<(), sqlx::Error> {
    let guarded = store::contain_guarded(pool, fence).await?;
    let contained = store::contain_interrupted(pool, fence).await?;
    let settled = store::resources::settle_interrupted(pool, fence).await?;
    if guarded + contained + settled > 0 {
        tracing::warn!(
            guarded,
            contained,
            settled,
            generation = fence.generation,
            "host taken over: transitions with an armed runtime guard and interrupted ones contained, unsettled ones settled"
        );
    }
    Ok(())
}

impl HostLease {
    /// The lease of `settings.host_id` for a new holder id; `health` (the office's service
    /// name) answers NOT_SERVING unless it holds.
    pub fn new(
        settings: &Settings,
        pool: PgPool,
        health: Option<(HealthState, &'static str)>,
    ) -> Arc<Self> {
        let lease = Arc::new(HostLease {
            host_id: settings.host_id.clone(),
            holder: holder_id(),
            ttl: settings.host_lease_ttl,
            pool,
            health,
            state: Mutex::new(State {
                standing: Standing::Standby,
                generation: None,
                valid_until: None,
            }),
        });
        lease.publish(Standing::Standby);
        lease
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn publish(&self, standing: Standing) {
        if let Some((health, service)) = &self.health {
            health.hold_back(service, standing != Standing::Holding);
        }
    }

    fn fence_at(&self, generation: i64) -> Fence {
        Fence {
            host_id: self.host_id.clone(),
            holder: self.holder.clone(),
            generation,
        }
    }

    /// The fence of a write or transition started now; `None` unless this process holds.
    pub fn fence(&self) -> Option<Fence> {
        let s = self.state();
        match (s.standing, s.generation) {
            (Standing::Holding, Some(g)) if s.valid_until.is_some_and(|t| Instant::now() < t) => {
                Some(self.fence_at(g))
            }
            _ => None,
        }
    }

    /// Whether an effect may follow under `fence`: this process holds the lease at its
    /// generation and its last renewal is younger than the TTL.
    pub fn valid(&self, fence: &Fence) -> bool {
        self.fence()
            .is_some_and(|f| f.generation == fence.generation)
    }

    pub fn standing(&self) -> Standing {
        self.state().standing
    }

    /// A write under `fence` was refused by the database (not held there): the generation is
    /// lost at once — nothing more is actuated under it.
    pub fn refused(&self, fence: &Fence) {
        self.lose(fence.generation, "a fenced write was refused");
    }

    fn lose(&self, generation: i64, why: &str) {
        let mut s = self.state();
        if s.standing == Standing::Holding && s.generation == Some(generation) {
            s.standing = Standing::Lost;
            s.valid_until = None;
            drop(s);
            tracing::error!(
                generation,
                why,
                "host lease lost: nothing more is actuated under its generation"
            );
            self.publish(Standing::Lost);
        }
    }

    /// Try to take the lease and, when taken, the host over; `true` when this process holds.
    pub async fn acquire(&self) -> Result<bool, sqlx::Error> {
        let sent = Instant::now();
        let Some(generation) =
            store::lease::acquire(&self.pool, &self.host_id, &self.holder, self.ttl).await?
        else {
            return Ok(false);
        };
        let fence = self.fence_at(generation);
        if let Err(e) = take_over(&self.pool, &fence).await {
            // Not held until the host is taken over: let it lapse now for the next attempt.
            let _ = store::lease::release(&self.pool, &fence).await;
            return Err(e);
        }
        {
            let mut s = self.state();
            s.standing = Standing::Holding;
            s.generation = Some(generation);
            s.valid_until = Some(sent + self.ttl);
        }
        tracing::info!(host = %self.host_id, generation, "host lease taken");
        self.publish(Standing::Holding);
        Ok(true)
    }

    async fn renew(&self) {
        let Some(fence) = self.fence() else {
            let generation = self.state().generation;
            if self.standing() == Standing::Holding
                && let Some(g) = generation
            {
                self.lose(g, "not renewed within its ttl");
            }
            return;
        };
        let sent = Instant::now();
        match store::lease::renew(&self.pool, &fence, self.ttl).await {
            Ok(true) => {
                let mut s = self.state();
                if s.standing == Standing::Holding && s.generation == Some(fence.generation) {
                    s.valid_until = Some(sent + self.ttl);
                }
            }
            Ok(false) => self.lose(fence.generation, "taken over"),
            Err(e) => tracing::warn!(error = %e, "renewing the host lease failed"),
        }
    }

    /// Keep the lease until shutdown: renew it while held, compete for it otherwise; on a
    /// graceful stop let it lapse at once.
    pub async fn keep(self: Arc<Self>) {
        // The holder renews every third of the TTL; a standby asks at least every second, so
        // a lease released by a graceful stop is taken at once.
        let renew_every = self.ttl / 3;
        let ask_every = renew_every.min(Duration::from_secs(1));
        let drained = self.health.as_ref().map(|(h, _)| h.clone());
        let stop = async move {
            match drained {
                Some(h) => h.drained().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => break,
                () = tokio::time::sleep(if self.standing() == Standing::Holding {
                    renew_every
                } else {
                    ask_every
                }) => {}
            }
            if self.standing() == Standing::Holding {
                self.renew().await;
            } else if let Err(e) = self.acquire().await {
                tracing::warn!(error = %e, "taking the host lease failed");
            }
        }
        let held = self.fence();
        {
            let mut s = self.state();
            if s.standing == Standing::Holding {
                s.standing = Standing::Lost;
                s.valid_until = None;
            }
        }
        if let Some(fence) = held
            && let Err(e) = store::lease::release(&self.pool, &fence).await
        {
            tracing::warn!(error = %e, "releasing the host lease failed");
        }
    }

    /// The lease as `Describe` shows it (the record read now).
    pub async fn view(&self) -> Result<LeaseView, sqlx::Error> {
        let row = store::lease::current(&self.pool, &self.host_id).await?;
        Ok(LeaseView {
            host_id: self.host_id.clone(),
            standing: self.standing(),
            this_holder: self.holder.clone(),
            holder: row.as_ref().map(|r| r.holder.clone()),
            generation: row.as_ref().map(|r| r.generation),
            expires_at: row.map(|r| r.expires_at),
        })
    }
}
