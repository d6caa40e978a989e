//! `lychd provision`: setting a deployment up, one idempotent command per step, each writing
//! its secrets as files named after the Podman secrets the Quadlet units mount
//! (`deploy/README.md` walks through them). `lychd dev` runs the same code
//! ([`database::provision`], [`ward::bootstrap`], [`enroll::enroll`]).
//!
//! 1. `secrets`: every database password file (the superuser's and each office's two roles),
//!    generated where missing.
//! 2. `database`: as the superuser, the database, every office's roles and schema, and each
//!    role's password from its file.
//! 3. `bootstrap`: Ward's first operator (its credential file) and, through a temporary Ward
//!    on loopback, every office's service principal, grants and credential file.
//! 4. `enroll`: the same enrollment against a running Ward (after an upgrade adds an office
//!    or grant, or to issue a credential whose file was removed).

pub mod database;
pub mod enroll;
pub mod secrets;
pub mod ward;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use clap::Subcommand;
use sqlx::postgres::PgConnectOptions;

/// How long a temporary Ward has to serve.
const WARD_START: Duration = Duration::from_secs(30);

#[derive(Subcommand, Debug)]
pub enum ProvisionCommand {
    /// Generate every database password file missing in DIR (kept when present).
    Secrets {
        /// Where the secret files go (created mode 0700).
        #[arg(long)]
        dir: PathBuf,
    },
    /// As the PostgreSQL superuser: the database, every office's roles and schema, and each
    /// role's password from its file in --secrets-dir (generated when missing).
    Database {
        /// The superuser's connection, e.g. postgres://postgres@lychd-postgres:5432/postgres.
        #[arg(long)]
        url: String,
        /// The superuser's password file (default: <secrets-dir>/lychd-postgres-password if
        /// it exists, else none).
        #[arg(long)]
        password_file: Option<PathBuf>,
        /// The database the offices share.
        #[arg(long, default_value = "lychd")]
        database: String,
        /// Where the role password files are.
        #[arg(long)]
        secrets_dir: PathBuf,
    },
    /// Ward's first operator (credential file lychd-operator-credential) and every office's
    /// service principal, grants and credential file, through a temporary Ward on loopback.
    /// Run before Ward serves; migrations applied first.
    Bootstrap {
        /// Ward's configuration (its database settings are used; its credential is not).
        #[arg(long)]
        config: PathBuf,
        /// Where the credential files go.
        #[arg(long)]
        secrets_dir: PathBuf,
        /// The Ward binary (default: lychd-ward next to this binary).
        #[arg(long)]
        ward_bin: Option<PathBuf>,
    },
    /// Enroll every office's service principal with its grants, and issue each credential
    /// whose file is missing, at a running Ward with the operator's credential.
    Enroll {
        /// Ward's gRPC endpoint.
        #[arg(long, default_value = "http://127.0.0.1:50053")]
        ward: String,
        /// Where the credential files are (the operator's is read from there).
        #[arg(long)]
        secrets_dir: PathBuf,
    },
}

pub async fn run(command: ProvisionCommand) -> anyhow::Result<()> {
    match command {
        ProvisionCommand::Secrets { dir } => {
            secrets::private_dir(&dir)?;
            for name in secrets::password_names() {
                let (path, created) = secrets::ensure(&dir, &name)?;
                report(&path, created);
            }
            Ok(())
        }
        ProvisionCommand::Database {
            url,
            password_file,
            database,
            secrets_dir,
        } => {
            let mut superuser = PgConnectOptions::from_str(&url)
                .context("--url is not a PostgreSQL connection string")?
                .application_name("lychd-provision");
            let password_file = password_file
                .or_else(|| Some(secrets_dir.join(secrets::POSTGRES_PASSWORD)))
                .filter(|p| p.is_file());
            if let Some(file) = password_file {
                superuser = superuser.password(&secrets::read(&file)?);
            }
            let done = database::provision(&superuser, &database, Some(&secrets_dir)).await?;
            println!(
                "database `{database}` {}; every office's roles and schema provisioned",
                if done.created_database {
                    "created"
                } else {
                    "exists"
                }
            );
            for (path, created) in &done.passwords {
                report(path, *created);
            }
            Ok(())
        }
        ProvisionCommand::Bootstrap {
            config,
            secrets_dir,
            ward_bin,
        } => {
            let ward_bin = match ward_bin {
                Some(b) => b,
                None => sibling("lychd-ward")?,
            };
            secrets::private_dir(&secrets_dir)?;
            let mut temporary = ward::TemporaryWard::prepare(&config)?;
            let operator = secrets_dir.join(secrets::OPERATOR_CREDENTIAL);
            let created = ward::bootstrap(&ward_bin, &temporary.config, &operator).await?;
            report(&operator, created);
            let served = temporary.serve(&ward_bin, WARD_START).await;
            let result = match served {
                Ok(()) => enroll_at(&temporary.endpoint, &secrets_dir).await,
                Err(e) => Err(e),
            };
            temporary.stop().await;
            result
        }
        ProvisionCommand::Enroll { ward, secrets_dir } => enroll_at(&ward, &secrets_dir).await,
    }
}

async fn enroll_at(endpoint: &str, secrets_dir: &Path) -> anyhow::Result<()> {
    let operator = secrets::read(&secrets_dir.join(secrets::OPERATOR_CREDENTIAL))?;
    let channel = lychd_runtime::client::channel(endpoint)
        .with_context(|| format!("ward endpoint {endpoint}"))?;
    let done = enroll::enroll(channel, &operator, |office| {
        secrets_dir.join(secrets::credential(office))
    })
    .await?;
    for (office, path, created) in &done.credentials {
        if !created {
            println!("{office}: principal and grants in place");
        }
        report(path, *created);
    }
    Ok(())
}

/// A binary next to this one.
fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .context("this binary has no directory")?
        .join(name);
    anyhow::ensure!(
        bin.is_file(),
        "{} not found (give its path with --ward-bin)",
        bin.display()
    );
    Ok(bin)
}

/// One line per secret file: where it is and whether it was written now (never its content).
fn report(path: &Path, created: bool) {
    let what = if created { "written" } else { "kept" };
    println!("{what:8} {}", path.display());
}
