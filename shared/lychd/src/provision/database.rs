//! The database a deployment's offices share: created if missing, every office's owner and
//! runtime roles and schema in it (`lychd_runtime::db::provision_all_sql`, the statements of
//! `deploy/postgres/provision.sql`), and each role's password set from its secret file —
//! generated first when the file does not exist. Run as a PostgreSQL superuser; running it
//! again changes nothing but re-applies the passwords in the files (which is how a role's
//! password is rotated: replace its file, run it again, restart the office).

use std::path::{Path, PathBuf};

use anyhow::Context;
use lychd_runtime::Office;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use super::secrets;

/// Serializes provisioning across processes (roles are cluster-wide); the same key as the
/// test kit's provisioning, so the two never interleave on one cluster.
const PROVISION_LOCK: i64 = 7373;

/// What [`provision`] did with each secret file.
#[derive(Debug)]
pub struct Provisioned {
    /// Each role's password file, and whether it was generated now.
    pub passwords: Vec<(PathBuf, bool)>,
    pub created_database: bool,
}

/// Provision `database` through `superuser` (connected to any existing database, normally
/// `postgres`); with `secrets_dir`, every role gets the password of its file there.
pub async fn provision(
    superuser: &PgConnectOptions,
    database: &str,
    secrets_dir: Option<&Path>,
) -> anyhow::Result<Provisioned> {
    let mut admin = PgConnection::connect_with(superuser)
        .await
        .context("connect to postgres as the superuser")?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(PROVISION_LOCK)
        .execute(&mut admin)
        .await?;
    let result = provision_locked(&mut admin, superuser, database, secrets_dir).await;
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(PROVISION_LOCK)
        .execute(&mut admin)
        .await?;
    admin.close().await?;
    result
}

async fn provision_locked(
    admin: &mut PgConnection,
    superuser: &PgConnectOptions,
    database: &str,
    secrets_dir: Option<&Path>,
) -> anyhow::Result<Provisioned> {
    anyhow::ensure!(
        !database.is_empty()
            && database
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_'),
        "database name `{database}`: letters, digits and `_` only"
    );
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(database)
            .fetch_one(&mut *admin)
            .await?;
    if !exists {
        sqlx::raw_sql(&format!("CREATE DATABASE \"{database}\""))
            .execute(&mut *admin)
            .await?;
    }
    let mut conn = PgConnection::connect_with(&superuser.clone().database(database))
        .await
        .with_context(|| format!("connect to database `{database}` as the superuser"))?;
    for sql in lychd_runtime::db::provision_all_sql(database) {
        sqlx::raw_sql(&sql).execute(&mut conn).await?;
    }
    let mut passwords = Vec::new();
    if let Some(dir) = secrets_dir {
        secrets::private_dir(dir)?;
        for office in Office::ALL {
            for (role, name) in [
                (office.owner_role(), secrets::owner_password(office)),
                (office.runtime_role(), secrets::app_password(office)),
            ] {
                let (path, created) = secrets::ensure(dir, &name)?;
                set_password(&mut conn, &role, &secrets::read(&path)?)
                    .await
                    .with_context(|| format!("set the password of role {role}"))?;
                passwords.push((path, created));
            }
        }
    }
    conn.close().await?;
    Ok(Provisioned {
        passwords,
        created_database: !exists,
    })
}

/// `ALTER ROLE … PASSWORD` (PostgreSQL keeps only its SCRAM verifier). The password is quoted
/// as an SQL literal; role names come from `Office` and are plain identifiers.
async fn set_password(conn: &mut PgConnection, role: &str, password: &str) -> anyhow::Result<()> {
    let literal = password.replace('\'', "''");
    sqlx::raw_sql(&format!("ALTER ROLE {role} PASSWORD '{literal}'"))
        .execute(conn)
        .await?;
    Ok(())
}
