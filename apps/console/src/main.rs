//! `lychd-console serve` (the operators' console) and `lychd-console healthcheck`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "lychd-console",
    version,
    about = "The LychD operators' console (a web page over the offices; no authority of its own)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the console.
    Serve {
        /// Where to listen (loopback by default; port 0 picks a free one).
        #[arg(long, env = "LYCHD_CONSOLE_LISTEN", default_value = "127.0.0.1:50080")]
        listen: SocketAddr,
        /// Ward's endpoint.
        #[arg(
            long,
            env = "LYCHD_CONSOLE_WARD",
            default_value = "http://127.0.0.1:50053"
        )]
        ward: String,
        /// The Orchestrator's endpoint (transitions and containments pages).
        #[arg(long, env = "LYCHD_CONSOLE_ORCHESTRATOR")]
        orchestrator: Option<String>,
        /// The Dispatcher's endpoint (leases page).
        #[arg(long, env = "LYCHD_CONSOLE_DISPATCHER")]
        dispatcher: Option<String>,
        /// The Runner's endpoint (runs pages).
        #[arg(long, env = "LYCHD_CONSOLE_RUNNER")]
        runner: Option<String>,
        /// Mark the session cookie `Secure` (set when browsers reach the console over TLS).
        #[arg(long, env = "LYCHD_CONSOLE_SECURE_COOKIE")]
        secure_cookie: bool,
        /// Sign-in attempts per client address per minute (all clients together: ten times it).
        #[arg(long, default_value_t = 10)]
        signin_per_minute: u32,
        /// Write the bound address to this file once listening.
        #[arg(long)]
        address_file: Option<PathBuf>,
        /// The CA (PEM) verifying the offices' certificates, for `https://` endpoints
        /// (server-only TLS: the console presents no client certificate).
        #[arg(long, env = "LYCHD_CONSOLE_CA_FILE")]
        ca_file: Option<PathBuf>,
    },
    /// Exit 0 when the console at `--url` answers its liveness page.
    Healthcheck {
        #[arg(long, default_value = "127.0.0.1:50080")]
        address: SocketAddr,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lychd-console: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve {
                listen,
                ward,
                orchestrator,
                dispatcher,
                runner,
                secure_cookie,
                signin_per_minute,
                address_file,
                ca_file,
            } => {
                let config = lychd_console::Config {
                    listen,
                    ward,
                    orchestrator,
                    dispatcher,
                    runner,
                    secure_cookie,
                    signin_per_minute,
                    address_file,
                    ca_file,
                };
                lychd_console::serve(config, shutdown()).await
            }
            Command::Healthcheck { address } => healthcheck(address).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lychd-console: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn shutdown() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return futures::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

async fn healthcheck(address: SocketAddr) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::time::timeout(
        std::time::Duration::from_secs(3),
        tokio::net::TcpStream::connect(address),
    )
    .await??;
    stream
        .write_all(b"GET /healthz HTTP/1.0\r\nHost: console\r\n\r\n")
        .await?;
    let mut answer = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(3),
        stream.read_to_end(&mut answer),
    )
    .await??;
    if answer.starts_with(b"HTTP/1.0 200") || answer.starts_with(b"HTTP/1.1 200") {
        Ok(())
    } else {
        anyhow::bail!("the console at {address} is not healthy")
    }
}
