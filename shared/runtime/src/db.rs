//! PostgreSQL: one cluster, one schema per office, an owner role that migrates and a runtime
//! role limited to DML on its own schema.
//!
//! `provision_*` emit the superuser SQL that creates roles and schemas (used by `lychd dev`, the
//! test kit and `deploy/postgres/`); `migrate` runs an office's embedded migrations as its
//! owner; `check_ready` is what `serve` runs first, as the runtime role, to refuse starting on
//! pending migrations or on a role that can do more than DML.

use std::str::FromStr;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use crate::Office;

/// Connect options for `url` with the office schema first on the search path.
///
/// Prepared statements use their generic plan from the first execution: every statement an
/// office runs on its hot paths looks rows up by key, so a plan per parameter set buys nothing
/// and re-planning each execution was the larger part of the database's CPU per request.
pub fn connect_options(
    url: &str,
    password: Option<&SecretString>,
    office: Office,
) -> Result<PgConnectOptions, sqlx::Error> {
    let mut opts = PgConnectOptions::from_str(url)?
        .application_name(&office.binary())
        .options([
            ("search_path", office.schema()),
            ("plan_cache_mode", "force_generic_plan"),
        ]);
    if let Some(pw) = password {
        opts = opts.password(pw.expose_secret());
    }
    Ok(opts)
}

/// The session settings of every runtime connection of an office, added to `opts` (startup
/// parameters, so they hold from the first statement and for every transaction):
/// - `default_transaction_isolation = read committed`, pinned: guarded updates
///   (`UPDATE … WHERE state = …`) and the lock-then-read order of every store rely on each
///   statement seeing the latest committed rows, whatever the cluster's default is;
/// - `lock_timeout` and `idle_in_transaction_session_timeout` from `[database]`: lock time is
///   bounded everywhere, and a transaction left open by a stuck task cannot hold its locks.
pub fn session_options(
    opts: PgConnectOptions,
    db: &crate::config::DatabaseConfig,
) -> PgConnectOptions {
    let lock = format!("{}ms", db.lock_timeout_ms);
    let idle = format!("{}ms", db.idle_in_transaction_timeout_ms);
    opts.options([
        ("default_transaction_isolation", "read\\ committed"),
        ("lock_timeout", lock.as_str()),
        ("idle_in_transaction_session_timeout", idle.as_str()),
    ])
}

/// The office's pool. Connections are not pinged before each use (that would double the round
/// trips of every one-statement decision): a connection that broke while idle fails the one
/// statement sent on it with an error — never a success — and is discarded; the caller sees
/// `UNAVAILABLE`, and idle connections are recycled after a minute.
pub async fn pool(opts: PgConnectOptions, max_connections: u32) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .test_before_acquire(false)
        .idle_timeout(Duration::from_secs(60))
        .connect_with(opts)
        .await
}

/// SQL (run once per cluster, as a superuser) creating the office's two login roles.
pub fn provision_roles_sql(office: Office) -> String {
    let (owner, app) = (office.owner_role(), office.runtime_role());
    format!(
        "DO $$ BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{owner}') THEN
             CREATE ROLE {owner} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{app}') THEN
             CREATE ROLE {app} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
           END IF;
         END $$;"
    )
}

/// SQL (run as a superuser, connected to the office database) creating the office schema owned
/// by the owner role and giving the runtime role DML on what the owner creates there.
pub fn provision_schema_sql(office: Office) -> String {
    let (schema, owner, app) = (office.schema(), office.owner_role(), office.runtime_role());
    format!(
        "CREATE SCHEMA IF NOT EXISTS {schema} AUTHORIZATION {owner};
         REVOKE ALL ON SCHEMA {schema} FROM PUBLIC;
         GRANT USAGE ON SCHEMA {schema} TO {app};
         ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}
           GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {app};
         ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}
           GRANT USAGE, SELECT ON SEQUENCES TO {app};
         ALTER ROLE {owner} SET search_path = {schema};
         ALTER ROLE {app} SET search_path = {schema};"
    )
}

/// SQL (as a superuser, from any database) closing the database-wide doors: nobody creates
/// schemas or temporary tables. Not copied by `CREATE DATABASE … TEMPLATE`: run it per database.
pub fn provision_database_sql(database: &str) -> String {
    format!("REVOKE CREATE, TEMPORARY ON DATABASE \"{database}\" FROM PUBLIC;")
}

/// SQL (as a superuser, connected to the database): nobody creates in `public`.
pub const PROVISION_PUBLIC_SCHEMA_SQL: &str = "REVOKE CREATE ON SCHEMA public FROM PUBLIC;";

/// Every statement needed for all offices in one database.
pub fn provision_all_sql(database: &str) -> Vec<String> {
    let mut out = Vec::new();
    for office in Office::ALL {
        out.push(provision_roles_sql(office));
    }
    out.push(provision_database_sql(database));
    out.push(PROVISION_PUBLIC_SCHEMA_SQL.to_owned());
    for office in Office::ALL {
        out.push(provision_schema_sql(office));
    }
    out
}

/// Outcome of `migrate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateReport {
    pub applied_now: Vec<i64>,
    pub latest: i64,
}

/// Apply the office's embedded migrations as its owner role. Idempotent; concurrent runs are
/// serialized by sqlx's advisory lock. The runtime role keeps read-only access to the ledger.
pub async fn migrate(
    pool: &PgPool,
    office: Office,
    migrator: &Migrator,
) -> Result<MigrateReport, DbError> {
    let before = applied_versions(pool).await.unwrap_or_default();
    migrator
        .run(pool)
        .await
        .map_err(|e| DbError::Migrate(e.to_string()))?;
    let after = applied_versions(pool).await?;
    sqlx::query(&format!(
        "REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON {}._sqlx_migrations FROM {}",
        office.schema(),
        office.runtime_role()
    ))
    .execute(pool)
    .await?;
    let applied_now = after
        .iter()
        .filter(|v| !before.contains(v))
        .copied()
        .collect();
    Ok(MigrateReport {
        applied_now,
        latest: after.iter().copied().max().unwrap_or(0),
    })
}

async fn applied_versions(pool: &PgPool) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
        .fetch_all(pool)
        .await
}

/// Why `serve` refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("database unreachable or refused the runtime role: {0}")]
    Connect(#[from] sqlx::Error),
    #[error("schema `{schema}` is not migrated: run `{binary} migrate` first")]
    NotMigrated {
        schema: &'static str,
        binary: String,
    },
    #[error("{count} migration(s) pending (next: {next}): run `{binary} migrate` first")]
    Pending {
        count: usize,
        next: i64,
        binary: String,
    },
    #[error(
        "migration {version} applied in the database differs from this build (checksum mismatch)"
    )]
    Drifted { version: i64 },
    #[error("database has migration {version} that this build does not know: upgrade the binary")]
    Unknown { version: i64 },
    #[error("runtime role `{role}` has more than DML on its schema: {problems}")]
    RoleTooPowerful { role: String, problems: String },
    #[error("migration failed: {0}")]
    Migrate(String),
}

/// Run by `serve` as the runtime role: refuses pending or drifted migrations and a role that can
/// do DDL, reach another office's schema, or bypass privileges. Returns the latest version.
pub async fn check_ready(
    pool: &PgPool,
    office: Office,
    migrator: &Migrator,
) -> Result<i64, DbError> {
    check_role(pool, office).await?;
    let rows: Vec<(i64, Vec<u8>, bool)> = match sqlx::query_as(
        "SELECT version, checksum, success FROM _sqlx_migrations ORDER BY version",
    )
    .fetch_all(pool)
    .await
    {
        Ok(rows) => rows,
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P01") => {
            return Err(DbError::NotMigrated {
                schema: office.schema(),
                binary: office.binary(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let embedded: Vec<_> = migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .collect();
    for (version, checksum, success) in &rows {
        match embedded.iter().find(|m| m.version == *version) {
            None => return Err(DbError::Unknown { version: *version }),
            Some(m) if *success && m.checksum.as_ref() != checksum.as_slice() => {
                return Err(DbError::Drifted { version: *version });
            }
            Some(_) => {}
        }
    }
    let pending: Vec<i64> = embedded
        .iter()
        .filter(|m| !rows.iter().any(|(v, _, ok)| *v == m.version && *ok))
        .map(|m| m.version)
        .collect();
    if let Some(next) = pending.first() {
        return Err(DbError::Pending {
            count: pending.len(),
            next: *next,
            binary: office.binary(),
        });
    }
    Ok(rows.iter().filter(|r| r.2).map(|r| r.0).max().unwrap_or(0))
}

const ROLE_CHECK_SQL: &str = "
SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls,
       has_database_privilege(current_user, current_database(), 'CREATE') AS db_create,
       has_database_privilege(current_user, current_database(), 'TEMP') AS db_temp,
       COALESCE((SELECT string_agg(n.nspname, ',' ORDER BY n.nspname) FROM pg_namespace n
         WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
           AND (has_schema_privilege(current_user, n.nspname, 'CREATE')
                OR pg_has_role(current_user, n.nspowner, 'USAGE'))), '') AS ddl_schemas,
       COALESCE((SELECT string_agg(n.nspname, ',' ORDER BY n.nspname) FROM pg_namespace n
         WHERE n.nspname = ANY($2) AND n.nspname <> $1
           AND has_schema_privilege(current_user, n.nspname, 'USAGE')), '') AS foreign_schemas
FROM pg_roles r WHERE r.rolname = current_user";

/// Refuse a runtime role that can do DDL anywhere or use another office's schema.
pub async fn check_role(pool: &PgPool, office: Office) -> Result<(), DbError> {
    let offices: Vec<String> = Office::ALL.iter().map(|o| o.schema().to_owned()).collect();
    let row: (bool, bool, bool, bool, bool, bool, String, String) = sqlx::query_as(ROLE_CHECK_SQL)
        .bind(office.schema())
        .bind(&offices)
        .fetch_one(pool)
        .await?;
    let (sup, createrole, createdb, bypassrls, db_create, db_temp, ddl_schemas, foreign) = row;
    let mut problems = Vec::new();
    for (flag, what) in [
        (sup, "is superuser"),
        (createrole, "can create roles"),
        (createdb, "can create databases"),
        (bypassrls, "bypasses row security"),
        (db_create, "can create schemas in the database"),
        (db_temp, "can create temporary tables"),
    ] {
        if flag {
            problems.push(what.to_owned());
        }
    }
    if !ddl_schemas.is_empty() {
        problems.push(format!("can create objects in schema(s) {ddl_schemas}"));
    }
    if !foreign.is_empty() {
        problems.push(format!("can use other office schema(s) {foreign}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        let role: String = sqlx::query_scalar("SELECT current_user::text")
            .fetch_one(pool)
            .await?;
        Err(DbError::RoleTooPowerful {
            role,
            problems: problems.join("; "),
        })
    }
}

/// Latest applied migration version (0 if none), as seen by the runtime role.
pub async fn schema_version(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT COALESCE(MAX(version), 0)::bigint FROM _sqlx_migrations WHERE success",
    )
    .fetch_one(pool)
    .await
}
