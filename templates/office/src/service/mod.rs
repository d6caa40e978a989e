//! The {{Office}} office's use cases, one module per capability as they arrive: each calls
//! `store` and `domain`, owns its transactions, and knows nothing of protobuf or tonic.

use std::sync::Arc;

use sqlx::PgPool;

/// The office's state: the database pool (its own schema only).
pub struct Service {
    pub pool: PgPool,
}

impl Service {
    pub fn new(pool: PgPool) -> Arc<Self> {
        Arc::new(Service { pool })
    }
}
