//! Following a run's transitions as they commit: the shared feed's gap rule
//! (`lychd_runtime::feed`) over `run_transitions`, so a watcher resuming from a cursor misses
//! no committed transition.

use lychd_runtime::feed::Cursor;

use super::Service;
use super::runs::TransitionRow;
use crate::error::RunnerError;
use crate::store::feed;
use uuid::Uuid;

/// Feed rows read per query.
const BATCH: i64 = 256;

impl Service {
    /// The next transitions of run `id` after `cursor`, in order, advancing it (a number whose
    /// writer may still commit is held back); also whether a full batch was read (read again at
    /// once).
    pub async fn follow(
        &self,
        id: Uuid,
        cursor: &mut Cursor,
    ) -> Result<(Vec<TransitionRow>, bool), RunnerError> {
        let rows = feed::feed_after(&self.pool, id, cursor.delivered, BATCH).await?;
        let full = rows.len() as i64 == BATCH;
        let mut out = Vec::new();
        for r in rows {
            if !cursor.admit(r.transition.sequence, &r.seen) {
                return Ok((out, false));
            }
            if r.visible {
                out.push(r.transition);
            }
        }
        Ok((out, full))
    }

    /// Whether `state` ends a run (no transition leaves it).
    pub fn is_terminal(&self, state: &str) -> bool {
        self.fsm.is_terminal(state)
    }
}
