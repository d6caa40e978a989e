//! `lychd`: the operator tool. `lychd dev` brings the whole system up on one machine —
//! PostgreSQL from the machine's binaries, roles and migrations for every office, each office
//! as a supervised child process on loopback — and stops it all on Ctrl-C. `lychd provision`
//! sets a deployment up, one idempotent step per command, with the same code.

mod dev;
mod provision;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(version, about = "LychD operator tool")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the whole stack locally until Ctrl-C.
    Dev(DevArgs),
    /// Set a deployment up: database roles and passwords, Ward's bootstrap, every office's
    /// service principal and credential (each step idempotent; see deploy/README.md).
    #[command(subcommand)]
    Provision(provision::ProvisionCommand),
}

#[derive(clap::Args, Debug, Clone)]
pub struct DevArgs {
    /// Throwaway PostgreSQL in a temporary directory, removed at exit.
    #[arg(long)]
    pub ephemeral: bool,
    /// State directory (PostgreSQL data, configs, logs, credential, endpoints.json).
    #[arg(long, default_value = ".lychd")]
    pub state_dir: PathBuf,
    /// First office port; offices take consecutive ports from here (a busy one is replaced by a free one).
    #[arg(long, default_value_t = 50051)]
    pub base_port: u16,
    /// PostgreSQL port (0: a free port).
    #[arg(long, default_value_t = 0)]
    pub pg_port: u16,
    /// Do not rebuild the office binaries even when run through cargo.
    #[arg(long)]
    pub no_build: bool,
    /// Run every office as this many replicas against the one PostgreSQL (1 to 4), each on its
    /// own port (listed in `dev/replicas.json` and printed); the Orchestrator's further
    /// replicas are standbys fenced by its host lease.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=4))]
    pub replicas: u8,
    /// Run the whole stack over TLS: a throwaway CA and per-office certificates in
    /// `<state>/dev/tls`, mutual TLS between offices, PostgreSQL verified (`verify-full`; a
    /// cluster this start starts), the console over TLS; grpcurl with `-cacert`.
    #[arg(long)]
    pub tls: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lychd: cannot start async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Dev(args) => dev::run(args).await,
            Command::Provision(command) => provision::run(command).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lychd: {e:#}");
            ExitCode::from(1)
        }
    }
}
