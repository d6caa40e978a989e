//! SQL on the `archive` schema only, one module per aggregate: `namespaces`, `notes`
//! (revisions, texts, lifecycle, intake bindings), `receipts`.
//!
//! Every Archive transaction is opened by [`begin`], which sets its own statement timeout (5 s)
//! and lock timeout (2 s) with `SET LOCAL` before any namespace work; the connection's
//! defaults are never changed. A timeout aborts the transaction: it is answered as an error
//! (`DATABASE_TIMEOUT`, `NAMESPACE_BUSY`), never as an empty result. Isolation is READ
//! COMMITTED; order comes from the namespace row, locked first by every operation
//! (`namespaces::lock`), then lifecycle rows by revision id, then texts.

pub mod namespaces;
pub mod notes;
pub mod receipts;
pub mod retention;

use sqlx::{PgPool, Postgres, Transaction};

/// Statement timeout of every Archive transaction.
pub const STATEMENT_TIMEOUT: &str = "5s";
/// Lock timeout of every Archive transaction.
pub const LOCK_TIMEOUT: &str = "2s";

pub type Tx = Transaction<'static, Postgres>;

/// A transaction with the Archive's local timeouts.
pub async fn begin(pool: &PgPool) -> Result<Tx, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true)",
    )
    .bind(STATEMENT_TIMEOUT)
    .bind(LOCK_TIMEOUT)
    .execute(&mut *tx)
    .await?;
    Ok(tx)
}
