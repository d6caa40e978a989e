//! The command line of every office binary: `lychd-<office> [--config FILE] serve|migrate|healthcheck`.
//!
//! Exit codes: 0 success; 1 refused or failed at run time (pending migrations, role too
//! powerful, database down, not SERVING); 2 bad usage or configuration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use sqlx::migrate::Migrator;
use tokio::net::TcpListener;

use crate::Office;
use crate::auth::Authenticator;
use crate::client::Outgoing;
use crate::config::{OfficeConfig, Secrets, load_secret};
use crate::health::HealthState;
use crate::server::{ServeContext, Start, Stopped, serve};
use crate::telemetry::Telemetry;

/// What an office binary hands to [`main`].
pub struct OfficeSpec {
    pub office: Office,
    pub migrator: &'static Migrator,
    pub start: Start,
}

#[derive(Parser, Debug)]
#[command(version, about = "A LychD office")]
struct Cli {
    /// TOML configuration file (default: none — defaults plus `LYCHD_<OFFICE>__…` environment).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the office's gRPC API (refuses to start on pending migrations or an over-powered role).
    Serve,
    /// Apply the office's embedded migrations as its owner role (idempotent).
    Migrate,
    /// Exit 0 only if the office's gRPC health reports SERVING.
    Healthcheck {
        /// Address to check (default: `server.listen` from the configuration).
        #[arg(long)]
        addr: Option<SocketAddr>,
        /// Give up after this many milliseconds.
        #[arg(long, default_value_t = 3000)]
        timeout_ms: u64,
    },
}

/// Run an office binary. Never returns an error past this point: every failure is a message on
/// stderr (or a log event) and an exit code.
pub fn main(spec: OfficeSpec) -> ExitCode {
    let cli = Cli::parse();
    let config_path = cli.config.clone().or_else(|| {
        std::env::var_os(format!(
            "LYCHD_{}_CONFIG",
            spec.office.name().to_ascii_uppercase()
        ))
        .map(PathBuf::from)
    });
    let config = match OfficeConfig::load(spec.office, config_path.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("lychd-{}: {e}", spec.office);
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lychd-{}: cannot start async runtime: {e}", spec.office);
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Healthcheck { addr, timeout_ms } => {
                healthcheck(
                    addr.unwrap_or(config.server.listen),
                    Duration::from_millis(timeout_ms),
                )
                .await
            }
            Command::Migrate => run_migrate(&spec, config).await,
            Command::Serve => run_serve(&spec, config).await,
        }
    })
}

async fn healthcheck(addr: SocketAddr, timeout: Duration) -> ExitCode {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let check = async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .ok()?
            .connect()
            .await
            .ok()?;
        let mut client = HealthClient::new(channel);
        let status = client
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .ok()?;
        Some(status.into_inner().status)
    };
    match tokio::time::timeout(timeout, check).await {
        Ok(Some(s)) if s == ServingStatus::Serving as i32 => {
            println!("SERVING");
            ExitCode::SUCCESS
        }
        Ok(Some(s)) => {
            let name = ServingStatus::try_from(s)
                .map(|s| s.as_str_name())
                .unwrap_or("UNKNOWN");
            println!("{name}");
            ExitCode::from(1)
        }
        _ => {
            println!("UNREACHABLE");
            ExitCode::from(1)
        }
    }
}

fn load_secrets(office: Office, config: &OfficeConfig) -> Result<Secrets, ExitCode> {
    Secrets::load(config).map_err(|e| {
        eprintln!("lychd-{office}: {e}");
        ExitCode::from(2)
    })
}

async fn run_migrate(spec: &OfficeSpec, config: OfficeConfig) -> ExitCode {
    let office = spec.office;
    let password = match config
        .database
        .migrate_password_file
        .as_deref()
        .map(|p| load_secret("database.migrate_password_file", p))
        .transpose()
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("lychd-{office}: {e}");
            return ExitCode::from(2);
        }
    };
    let result = async {
        let opts =
            crate::db::connect_options(&config.database.migrate_url, password.as_ref(), office)?;
        let pool = crate::db::pool(opts, 1).await?;
        let report = crate::db::migrate(&pool, office, spec.migrator).await?;
        pool.close().await;
        Ok::<_, anyhow::Error>(report)
    }
    .await;
    match result {
        Ok(report) if report.applied_now.is_empty() => {
            println!(
                "lychd-{office}: schema `{}` up to date at version {}",
                office.schema(),
                report.latest
            );
            ExitCode::SUCCESS
        }
        Ok(report) => {
            println!(
                "lychd-{office}: applied {} migration(s) to schema `{}`; now at version {}",
                report.applied_now.len(),
                office.schema(),
                report.latest
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lychd-{office}: migrate failed: {e}");
            ExitCode::from(1)
        }
    }
}

async fn run_serve(spec: &OfficeSpec, config: OfficeConfig) -> ExitCode {
    let office = spec.office;
    let secrets = match load_secrets(office, &config) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let telemetry = match Telemetry::init(&config.telemetry, &office.binary()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("lychd-{office}: telemetry: {e}");
            return ExitCode::from(2);
        }
    };
    let code = serve_until_signal(spec, config, secrets).await;
    telemetry.shutdown().await;
    code
}

async fn serve_until_signal(spec: &OfficeSpec, config: OfficeConfig, secrets: Secrets) -> ExitCode {
    let office = spec.office;
    let refuse = |msg: String| {
        tracing::error!(office = %office, "{msg}");
        eprintln!("lychd-{office}: refusing to serve: {msg}");
        ExitCode::from(1)
    };
    let opts = match crate::db::connect_options(
        &config.database.url,
        secrets.db_password.as_ref(),
        office,
    ) {
        Ok(o) => o,
        Err(e) => return refuse(format!("database.url: {e}")),
    };
    let pool = match crate::db::pool(opts, config.database.max_connections).await {
        Ok(p) => p,
        Err(e) => return refuse(format!("database unreachable: {e}")),
    };
    if let Err(e) = crate::db::check_ready(&pool, office, spec.migrator).await {
        return refuse(e.to_string());
    }
    let outgoing = match Outgoing::new(&secrets.token) {
        Ok(o) => o,
        Err(e) => return refuse(format!("auth.token_file: {e}")),
    };
    let listener = match TcpListener::bind(config.server.listen).await {
        Ok(l) => l,
        Err(e) => return refuse(format!("cannot bind {}: {e}", config.server.listen)),
    };
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    tracing::info!(office = %office, addr = %addr, "listening");
    let ctx = ServeContext {
        office,
        config: Arc::new(config),
        pool: pool.clone(),
        authenticator: Authenticator::new(&secrets.token),
        outgoing,
        health: HealthState::new(&[office.grpc_service()]),
    };
    let routes = match (spec.start)(ctx.clone()).await {
        Ok(routes) => routes,
        Err(e) => {
            let code = if e.downcast_ref::<crate::config::ConfigError>().is_some() {
                2
            } else {
                1
            };
            tracing::error!(office = %office, error = %e, "start-up refused");
            eprintln!("lychd-{office}: refusing to serve: {e}");
            pool.close().await;
            return ExitCode::from(code);
        }
    };
    let result = serve(ctx, listener, routes, first_signal()).await;
    pool.close().await;
    match result {
        Ok(Stopped::Drained) => {
            tracing::info!(office = %office, "stopped: drained");
            ExitCode::SUCCESS
        }
        Ok(Stopped::GraceExpired) => ExitCode::from(1),
        Err(e) => {
            tracing::error!(office = %office, error = %e, "server failed");
            ExitCode::from(1)
        }
    }
}

/// Resolves on the first SIGTERM or SIGINT; a second one exits the process at once.
async fn first_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers; only a kill stops this process");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        eprintln!("second signal: exiting now");
        std::process::exit(130);
    });
}
