//! The office's use cases, composing the pure rules (`domain`), the probes and the store, one
//! module per capability: `lease` (issue a lease, keep and replay its answer), `leases` (renew,
//! release, read), `observe` (fresh probes), `admission` (close, reopen, drain) and `events`
//! (the dispatch-event stream). Handlers in `grpc` decode, authorize, call these and encode;
//! the stored shapes they read are re-exported here, so no handler names the store.
//!
//! Authority at the effect: a use case that writes after awaited preparation (a lease after
//! its probe) takes a [`Recheck`] from the handler — Ward asked again — and awaits it
//! immediately before the write; a refusal there writes nothing of the caller's (the probe's
//! observation, a fact about the runtime, is still recorded). Long-lived streams await it
//! every `stream_recheck_interval`.

mod admission;
mod events;
mod lease;
mod leases;
pub mod metrics;
mod observe;
pub mod retention;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use sqlx::PgPool;

use crate::config::Settings;
use crate::error::Result;
use crate::store::{admission as admission_store, observations};
use lychd_runtime::streams::StreamLimit;

pub use crate::store::admission::{AdmissionRow, Closed, Closure, Reopened};
pub use crate::store::leases::{Cursor, EventRow, Filter, LeaseRow, Lookup};
pub use crate::store::observations::Cached;
pub use lease::{Granted, LeaseCommand, LeaseOutcome, Prepared};
pub use observe::AnimatorObserved;

/// Asks Ward again whether the caller is still allowed what its first decision allowed (the
/// gRPC layer builds it from the caller's request; an `Err` is the refusal to answer with,
/// [`DispatcherError::Refused`]). Awaited immediately before an effect, never after.
pub type Recheck = Arc<dyn Fn() -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// The office's state: settings (with the registry), the database pool and the places of
/// open event streams.
pub struct Service {
    pub settings: Settings,
    pub pool: PgPool,
    streams: StreamLimit,
    /// The gauges read from the office's schema, polled while the service lives.
    _gauges: Option<lychd_runtime::metrics::Polled>,
}

impl Service {
    pub fn new(settings: Settings, pool: PgPool) -> Arc<Self> {
        let streams = StreamLimit::new(settings.stream_limit, settings.stream_share);
        Arc::new(Service {
            settings,
            _gauges: metrics::start(pool.clone()),
            pool,
            streams,
        })
    }

    /// Every cached observation and every declared animator's admission state.
    pub async fn snapshot(&self) -> Result<(BTreeMap<String, Cached>, Vec<AdmissionRow>)> {
        let cached = observations::all(&self.pool).await?;
        let states = admission_store::states(&self.pool, &self.animator_names()).await?;
        Ok((cached, states))
    }

    /// Every declared animator has an admission row (at start).
    pub async fn ensure_admission(&self) -> Result<()> {
        admission_store::ensure(&self.pool, &self.animator_names()).await
    }

    fn animator_names(&self) -> Vec<String> {
        self.settings
            .registry
            .animators()
            .map(|a| a.name.clone())
            .collect()
    }
}
