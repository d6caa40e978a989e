//! The one service builder every LychD office uses.
//!
//! An office binary is a few lines: it names its [`Office`], its embedded migrations and a
//! function that adds its gRPC service to the router; [`cli::main`] does the rest — config,
//! telemetry, the `migrate`, `serve` and `healthcheck` subcommands, PostgreSQL role checks,
//! health, reflection, the tower layer stack and graceful shutdown.
//!
//! Invariant: this crate knows no office's business rules and no office's tables; it only
//! knows each office's name, schema and role names.

pub mod auth;
pub mod cli;
pub mod client;
pub mod config;
pub mod db;
pub mod describe;
pub mod health;
pub mod server;
pub mod telemetry;

/// The one refusal vocabulary (`lychd-refusal`): reasons, catalogues, violations, database
/// failures.
pub use lychd_refusal as refusal;

/// The five offices. Each has its own schema, roles, default port and binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Office {
    Dispatcher,
    Orchestrator,
    Ward,
    Archive,
    HelmLoop,
}

impl Office {
    pub const ALL: [Office; 5] = [
        Office::Dispatcher,
        Office::Orchestrator,
        Office::Ward,
        Office::Archive,
        Office::HelmLoop,
    ];

    /// Lowercase name: schema name, config prefix, binary suffix.
    pub const fn name(self) -> &'static str {
        match self {
            Office::Dispatcher => "dispatcher",
            Office::Orchestrator => "orchestrator",
            Office::Ward => "ward",
            Office::Archive => "archive",
            Office::HelmLoop => "helmloop",
        }
    }

    pub fn from_name(name: &str) -> Option<Office> {
        Office::ALL.into_iter().find(|o| o.name() == name)
    }

    /// The fully qualified gRPC service name of the office's own API.
    pub const fn grpc_service(self) -> &'static str {
        match self {
            Office::Dispatcher => "lychd.dispatcher.v1.Dispatcher",
            Office::Orchestrator => "lychd.orchestrator.v1.Orchestrator",
            Office::Ward => "lychd.ward.v1.Ward",
            Office::Archive => "lychd.archive.v1.Archive",
            Office::HelmLoop => "lychd.helmloop.v1.HelmLoop",
        }
    }

    /// `ErrorInfo.domain` of the office's refusals.
    pub const fn domain(self) -> &'static str {
        match self {
            Office::Dispatcher => "lychd.dispatcher",
            Office::Orchestrator => "lychd.orchestrator",
            Office::Ward => "lychd.ward",
            Office::Archive => "lychd.archive",
            Office::HelmLoop => "lychd.helmloop",
        }
    }

    pub const fn default_port(self) -> u16 {
        match self {
            Office::Dispatcher => 50051,
            Office::Orchestrator => 50052,
            Office::Ward => 50053,
            Office::Archive => 50054,
            Office::HelmLoop => 50055,
        }
    }

    /// The PostgreSQL schema the office owns.
    pub const fn schema(self) -> &'static str {
        self.name()
    }

    /// Role that owns the schema and runs migrations.
    pub fn owner_role(self) -> String {
        format!("lychd_{}_owner", self.name())
    }

    /// Role the serving process uses: DML on its own schema, nothing else.
    pub fn runtime_role(self) -> String {
        format!("lychd_{}_app", self.name())
    }

    pub fn binary(self) -> String {
        format!("lychd-{}", self.name())
    }
}

impl std::fmt::Display for Office {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
