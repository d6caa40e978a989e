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
use futures::future::BoxFuture;
use lychd_auth::Verifier;
use lychd_auth::credentials::SessionSource;
use sqlx::PgPool;
use sqlx::migrate::Migrator;
use tokio::net::TcpListener;

use crate::Office;
use crate::auth::Authorizer;
use crate::client::Outgoing;
use crate::config::{OfficeConfig, Secrets, load_secret};
use crate::health::HealthState;
use crate::server::{Finishing, ServeContext, Start, Stopped, serve};
use crate::telemetry::Telemetry;

/// Ward's verifier from its pool, given the office's [`Finishing`] (what it holds back is
/// written there before the office exits).
pub type LocalVerifier = fn(PgPool, &Finishing) -> Arc<dyn Verifier>;

/// What an office binary hands to [`main`].
pub struct OfficeSpec {
    pub office: Office,
    /// The office's refusal catalogue (`docs/refusals.md` lists it).
    pub refusals: crate::refusal::Refusals,
    /// The actions the office enforces (its action catalogue; Ward decides each).
    pub actions: &'static [crate::auth::Action],
    pub migrator: &'static Migrator,
    pub start: Start,
    /// Ward answers authorization questions from its own tables; every other office leaves
    /// this `None` and asks Ward over gRPC (`peers.ward`). Given the office's [`Finishing`],
    /// so what the verifier holds back (its decision records) is written before the office exits.
    pub local_verifier: Option<LocalVerifier>,
    /// Methods that take a bearer but authenticate it themselves: Ward's ExchangeCredential,
    /// and handlers whose authorization authenticates the caller (it refuses an unknown session
    /// as `UNAUTHENTICATED`; on input that does not decode they authenticate before refusing
    /// it), so the layer does not ask Ward twice.
    pub self_authenticating: &'static [&'static str],
    /// Office-specific subcommands (e.g. `lychd-ward bootstrap`), run with the runtime pool
    /// after the same readiness checks as `serve`.
    pub commands: &'static [OfficeCommand],
}

/// An office-specific subcommand.
pub struct OfficeCommand {
    pub name: &'static str,
    pub about: &'static str,
    pub run: fn(Arc<OfficeConfig>, PgPool) -> BoxFuture<'static, ExitCode>,
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
    /// An office-specific command (see the office's documentation).
    #[command(external_subcommand)]
    Other(Vec<String>),
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
                    crate::tls::own_client(spec.office, &config.tls),
                )
                .await
            }
            Command::Migrate => run_migrate(&spec, config).await,
            Command::Serve => run_serve(&spec, config).await,
            Command::Other(args) => run_other(&spec, config, args).await,
        }
    })
}

async fn healthcheck(
    addr: SocketAddr,
    timeout: Duration,
    tls: Result<Option<tonic::transport::ClientTlsConfig>, String>,
) -> ExitCode {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let tls = match tls {
        Ok(tls) => tls,
        Err(msg) => {
            eprintln!("healthcheck: {msg}");
            return ExitCode::from(2);
        }
    };
    let check = async {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut endpoint =
            tonic::transport::Endpoint::from_shared(format!("{scheme}://{addr}")).ok()?;
        if let Some(tls) = tls {
            endpoint = endpoint.tls_config(tls).ok()?;
        }
        let channel = endpoint.connect().await.ok()?;
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
    let metrics = match crate::metrics::Metrics::start(
        &config.metrics,
        office,
        crate::telemetry::otlp_endpoint(&config.telemetry).as_deref(),
    )
    .await
    {
        Ok(m) => m,
        Err(e) => {
            eprintln!(
                "lychd-{office}: refusing to serve: cannot bind metrics.listen {}: {e}",
                config.metrics.listen
            );
            telemetry.shutdown().await;
            return ExitCode::from(if e.kind() == std::io::ErrorKind::AddrInUse {
                PORT_IN_USE_EXIT
            } else {
                1
            });
        }
    };
    let code = serve_until_signal(spec, config, secrets).await;
    if let Some(metrics) = metrics {
        metrics.shutdown().await;
    }
    telemetry.shutdown().await;
    code
}

/// Connect as the runtime role and run the same checks as `serve`.
async fn ready_pool(
    spec: &OfficeSpec,
    config: &OfficeConfig,
    secrets: &Secrets,
) -> Result<PgPool, String> {
    let opts = crate::db::connect_options(
        &config.database.url,
        secrets.db_password.as_ref(),
        spec.office,
    )
    .map_err(|e| format!("database.url: {e}"))?;
    let opts = crate::db::session_options(opts, &config.database);
    let pool = crate::db::pool(opts, config.database.max_connections)
        .await
        .map_err(|e| format!("database unreachable: {e}"))?;
    crate::db::check_ready(&pool, spec.office, spec.migrator)
        .await
        .map_err(|e| e.to_string())?;
    Ok(pool)
}

async fn run_other(spec: &OfficeSpec, config: OfficeConfig, args: Vec<String>) -> ExitCode {
    let office = spec.office;
    let Some(command) = args
        .first()
        .and_then(|name| spec.commands.iter().find(|c| c.name == name))
    else {
        let known: Vec<&str> = spec.commands.iter().map(|c| c.name).collect();
        eprintln!(
            "lychd-{office}: unknown command `{}`; commands: serve, migrate, healthcheck{}",
            args.first().map(String::as_str).unwrap_or(""),
            known.iter().map(|k| format!(", {k}")).collect::<String>()
        );
        return ExitCode::from(2);
    };
    if args.len() > 1 {
        eprintln!(
            "lychd-{office}: `{}` takes no arguments ({})",
            command.name, command.about
        );
        return ExitCode::from(2);
    }
    let secrets = match load_secrets(office, &config) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let pool = match ready_pool(spec, &config, &secrets).await {
        Ok(p) => p,
        Err(msg) => {
            eprintln!("lychd-{office}: refusing to run `{}`: {msg}", command.name);
            return ExitCode::from(1);
        }
    };
    let code = (command.run)(Arc::new(config), pool.clone()).await;
    pool.close().await;
    code
}

/// The verifier (Ward's own tables, or Ward over gRPC) and the outgoing session.
async fn authorization(
    spec: &OfficeSpec,
    config: &OfficeConfig,
    secrets: &Secrets,
    pool: &PgPool,
    bound: std::net::SocketAddr,
    finishing: &Finishing,
    tls: &crate::tls::Material,
) -> Result<(Arc<dyn Verifier>, Outgoing), String> {
    let client_tls = tls.client();
    let ward_channel = config
        .peers
        .get("ward")
        .map(|p| {
            crate::client::channel_tls(&p.endpoint, client_tls.as_ref())
                .map_err(|e| format!("peers.ward.endpoint: {e}"))
        })
        .transpose()?;
    // This office's own sessions are presented to Ward and to the peers it calls, and nowhere
    // else — and to the office itself: an office that executes an effect asks Ward whether its
    // own principal may, immediately before it (the Runner's effect permission), which Ward
    // answers only for a session that names the asking office.
    let mut audiences: Vec<String> = std::iter::once(Office::Ward.name().to_owned())
        .chain(config.peers.keys().cloned())
        .collect();
    if !audiences.iter().any(|a| a == spec.office.name()) {
        audiences.push(spec.office.name().to_owned());
    }
    if let Some(local) = spec.local_verifier {
        // Ward: decisions from its own tables. With a credential it presents a session to the
        // offices it calls, exchanged with itself once serving (at `peers.ward` if given, else
        // at the address it is bound to).
        let session = match &secrets.credential {
            Some(credential) => {
                let channel = match ward_channel {
                    Some(c) => c,
                    None => own_channel(spec.office, bound, config)?,
                };
                Some(SessionSource::start(channel, credential.clone(), audiences))
            }
            None => None,
        };
        let outgoing = Outgoing::new(session).with_tls(client_tls);
        return Ok((local(pool.clone(), finishing), outgoing));
    }
    let channel =
        ward_channel.ok_or("peers.ward is required: every office asks Ward for decisions")?;
    let credential = secrets
        .credential
        .clone()
        .ok_or("auth.credential_file is required: the office needs its own session with Ward")?;
    let session = SessionSource::start(channel.clone(), credential, audiences);
    if !session.ready(Duration::from_secs(30)).await {
        return Err(
            "no session from ward within 30 s (is ward up, and the credential valid?)".into(),
        );
    }
    let verifier = Arc::new(lychd_auth::ward::WardVerifier::new(
        channel,
        session.clone(),
    ));
    Ok((verifier, Outgoing::new(Some(session)).with_tls(client_tls)))
}

/// A channel to the office itself at the address it is bound to (over TLS, verifying its own
/// certificate's office name, when it serves TLS).
fn own_channel(
    office: Office,
    bound: SocketAddr,
    config: &OfficeConfig,
) -> Result<tonic::transport::Channel, String> {
    let tls = crate::tls::own_client(office, &config.tls)?;
    let mut endpoint = own_endpoint(bound);
    if tls.is_some() {
        endpoint = endpoint.replacen("http://", "https://", 1);
    }
    crate::client::channel_tls(&endpoint, tls.as_ref()).map_err(|e| format!("server.listen: {e}"))
}

/// Where an office reaches itself: the address it is bound to, loopback when it listens on
/// every address.
fn own_endpoint(listen: std::net::SocketAddr) -> String {
    let ip = match listen.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    format!("http://{}", std::net::SocketAddr::new(ip, listen.port()))
}

/// The exit code of an office whose listen address another process holds (its supervisor,
/// `lychd dev`, chooses the ports again: the holder may have let go by the time it looks).
pub const PORT_IN_USE_EXIT: u8 = 3;

async fn serve_until_signal(spec: &OfficeSpec, config: OfficeConfig, secrets: Secrets) -> ExitCode {
    let office = spec.office;
    let refuse = |msg: String| {
        tracing::error!(office = %office, "{msg}");
        eprintln!("lychd-{office}: refusing to serve: {msg}");
        ExitCode::from(1)
    };
    let instance = match crate::health::instance_from_env() {
        Ok(i) => i,
        Err(msg) => {
            eprintln!("lychd-{office}: {msg}");
            return ExitCode::from(2);
        }
    };
    let tls = match crate::tls::Material::load(&config.tls) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("lychd-{office}: {e}");
            return ExitCode::from(2);
        }
    };
    let pool = match ready_pool(spec, &config, &secrets).await {
        Ok(p) => p,
        Err(msg) => return refuse(msg),
    };
    let listener = match TcpListener::bind(config.server.listen).await {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            refuse(format!("cannot bind {}: {e}", config.server.listen));
            return ExitCode::from(PORT_IN_USE_EXIT);
        }
        Err(e) => return refuse(format!("cannot bind {}: {e}", config.server.listen)),
    };
    let bound = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => return refuse(format!("bound address of {}: {e}", config.server.listen)),
    };
    let finishing = Finishing::default();
    let (verifier, outgoing) =
        match authorization(spec, &config, &secrets, &pool, bound, &finishing, &tls).await {
            Ok(v) => v,
            Err(msg) => return refuse(msg),
        };
    tracing::info!(office = %office, addr = %bound, "listening");
    let ctx = ServeContext {
        office,
        config: Arc::new(config),
        pool: pool.clone(),
        authorizer: Authorizer::new(office.name(), verifier)
            .with_peer_check(crate::tls::peer_check(tls.mutual())),
        outgoing,
        health: HealthState::new(&[office.grpc_service()]).with_instance(instance.as_deref()),
        self_authenticating: spec.self_authenticating,
        finishing,
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
