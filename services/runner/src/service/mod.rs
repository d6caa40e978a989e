//! The Runner office's use cases, one module per capability: each calls `store` and
//! `domain`, owns its transactions, and knows nothing of protobuf or tonic. `runs`: start,
//! read, list, cancel and the transitions of runs; `checkpoints`: inspection and quarantine;
//! `recovery`: the recovery review; `effects`: an effect's inspection and the operator's
//! resolution of an unknown outcome; `migrations`: state-schema migrations; `driver`: the step
//! loop; `watch`: the feed; `replay`: the deterministic replay of a finished run; `releases`: an ended run's pending
//! consents released at Ward; `compensations`: an ended run's confirmed effects compensated.

pub mod checkpoints;
pub mod compensations;
pub mod driver;
pub mod effects;
pub mod metrics;
pub mod migrations;
pub mod recovery;
pub mod releases;
pub mod replay;
pub mod retention;
pub mod runs;
pub mod watch;

use std::sync::Arc;

use sqlx::PgPool;

use crate::domain::fsm::Fsm;
use crate::domain::migration::Registry;

/// The office's state: the database pool (its own schema only), the control FSM it was
/// started with (checked at start-up) and the state-schema migrations it knows.
pub struct Service {
    pub pool: PgPool,
    pub fsm: Fsm,
    pub migrations: Registry,
}

impl Service {
    pub fn new(pool: PgPool, fsm: Fsm) -> Arc<Self> {
        Service::with_migrations(pool, fsm, Registry::builtin())
    }

    /// A service knowing `migrations` (tests register their own).
    pub fn with_migrations(pool: PgPool, fsm: Fsm, migrations: Registry) -> Arc<Self> {
        Arc::new(Service {
            pool,
            fsm,
            migrations,
        })
    }
}
