//! What placement by memory plans from, kept by the office: the footprints measured through
//! the [`Gauge`] once an animator became WARM (persisted in `footprints`, loaded at start) and
//! the usage book — per animator, the priority of the last request for one of its
//! capabilities and a counter of when (process-local: nothing reads a clock for it; an
//! animator not asked for since the start is the least recently used).

use std::sync::{Arc, Mutex};

use sqlx::PgPool;

use crate::domain::memory::{FootprintKey, Memory, Usage};
use crate::gauge::Gauge;
use crate::store;

/// The footprints and usage the planner reads (a snapshot per plan).
pub struct MemoryBook {
    state: Mutex<(Memory, u64)>,
    gauge: Arc<dyn Gauge>,
    pool: PgPool,
}

impl MemoryBook {
    /// Load the measured footprints.
    pub async fn load(pool: PgPool, gauge: Arc<dyn Gauge>) -> Result<MemoryBook, sqlx::Error> {
        let mut memory = Memory::default();
        memory.measured = store::memory::footprints(&pool)
            .await?
            .into_iter()
            .collect();
        Ok(MemoryBook {
            state: Mutex::new((memory, 0)),
            gauge,
            pool,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, (Memory, u64)> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What a plan reads now.
    pub fn snapshot(&self) -> Memory {
        self.state().0.clone()
    }

    /// Whether `key` has a measurement.
    pub fn measured(&self, key: &FootprintKey) -> bool {
        self.state().0.measured.contains_key(key)
    }

    /// A request for one of `animator`'s capabilities at `priority`: the most recent use.
    pub fn touch(&self, animator: &str, priority: u8) {
        let mut st = self.state();
        st.1 += 1;
        let recency = st.1;
        st.0.usage
            .insert(animator.to_owned(), Usage { priority, recency });
    }

    /// Measure `key`'s footprint (its animator just became WARM for it) and keep it. A gauge
    /// that cannot measure keeps the previous value (or the declared estimate); a write that
    /// fails keeps the value for this process only (logged).
    pub async fn measure(&self, key: FootprintKey) {
        let Some(mib) = self.gauge.measure(&key.animator).await else {
            return;
        };
        if let Err(e) = store::memory::record(&self.pool, &key, mib).await {
            tracing::warn!(error = %e, "recording a measured footprint failed");
        }
        tracing::info!(
            animator = %key.animator,
            model = %key.model_id,
            context_tokens = key.context_tokens,
            memory_mib = mib,
            "footprint measured"
        );
        self.state().0.measured.insert(key, mib);
    }
}
