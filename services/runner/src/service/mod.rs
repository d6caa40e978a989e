//! The Runner office's use cases, one module per capability: each calls `store` and
//! `domain`, owns its transactions, and knows nothing of protobuf or tonic. `runs`: start,
//! read, list, cancel and the transitions of runs.

pub mod checkpoints;
pub mod driver;
pub mod runs;
pub mod watch;

use std::sync::Arc;

use sqlx::PgPool;

use crate::domain::fsm::Fsm;

/// The office's state: the database pool (its own schema only) and the control FSM it was
/// started with (checked at start-up).
pub struct Service {
    pub pool: PgPool,
    pub fsm: Fsm,
}

impl Service {
    pub fn new(pool: PgPool, fsm: Fsm) -> Arc<Self> {
        Arc::new(Service { pool, fsm })
    }
}
