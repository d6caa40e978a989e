//! Namespaces: the row every operation locks first.

use sqlx::PgConnection;

/// A namespace's binding.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Namespace {
    pub name: String,
    pub owner: String,
    pub policy_revision: i64,
}

/// How an operation holds the namespace: mutations exclusively, recall, resolution and reads
/// shared (they run together, never with a mutation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Share,
    Update,
}

/// Lock the namespace row; `None` when there is none.
pub async fn lock(
    conn: &mut PgConnection,
    name: &str,
    mode: Mode,
) -> Result<Option<Namespace>, sqlx::Error> {
    let sql = match mode {
        Mode::Share => {
            "SELECT name, owner, policy_revision FROM archive.namespaces WHERE name = $1 FOR SHARE"
        }
        Mode::Update => {
            "SELECT name, owner, policy_revision FROM archive.namespaces WHERE name = $1 FOR UPDATE"
        }
    };
    sqlx::query_as(sql).bind(name).fetch_optional(conn).await
}

/// Create the namespace unless it exists (its first intake), bound to `owner` and `policy`.
pub async fn ensure(
    conn: &mut PgConnection,
    name: &str,
    owner: &str,
    policy: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO archive.namespaces (name, owner, policy_revision) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO NOTHING",
    )
    .bind(name)
    .bind(owner)
    .bind(policy)
    .execute(conn)
    .await?;
    Ok(())
}
