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
pub mod devca;
pub mod feed;
pub mod health;
pub mod metrics;
pub mod paging;
pub mod retention;
pub mod server;
pub mod streams;
pub mod telemetry;
pub mod tls;
pub mod tls_config;
pub mod wire;

/// The one refusal vocabulary (`lychd-refusal`): reasons, catalogues, violations, database
/// failures.
pub use lychd_refusal as refusal;

/// Declares the offices from one table, so an office is added by one line here (the enum, its
/// `ALL` entry and every per-office constant cannot disagree).
macro_rules! offices {
    ($( $variant:ident => $name:literal, $service:literal, $port:literal; )*) => {
        /// The offices (`ALL`). Each has its own schema, roles, default port and binary.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Office {
            $($variant),*
        }

        impl Office {
            pub const ALL: [Office; [$($name),*].len()] = [$(Office::$variant),*];

            /// Lowercase name: schema name, config prefix, binary suffix.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Office::$variant => $name),*
                }
            }

            /// The fully qualified gRPC service name of the office's own API.
            pub const fn grpc_service(self) -> &'static str {
                match self {
                    $(Office::$variant => concat!("lychd.", $name, ".v1.", $service)),*
                }
            }

            /// `ErrorInfo.domain` of the office's refusals.
            pub const fn domain(self) -> &'static str {
                match self {
                    $(Office::$variant => concat!("lychd.", $name)),*
                }
            }

            pub const fn default_port(self) -> u16 {
                match self {
                    $(Office::$variant => $port),*
                }
            }
        }
    };
}

offices! {
    Dispatcher => "dispatcher", "Dispatcher", 50051;
    Orchestrator => "orchestrator", "Orchestrator", 50052;
    Ward => "ward", "Ward", 50053;
    Archive => "archive", "Archive", 50054;
    HelmLoop => "helmloop", "HelmLoop", 50055;
    Runner => "runner", "Runner", 50056;
}

impl Office {
    pub fn from_name(name: &str) -> Option<Office> {
        Office::ALL.into_iter().find(|o| o.name() == name)
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

#[cfg(test)]
mod tests {
    use super::Office;

    #[test]
    fn offices_have_distinct_names_ports_and_services() {
        let mut names: Vec<_> = Office::ALL.iter().map(|o| o.name()).collect();
        let mut ports: Vec<_> = Office::ALL.iter().map(|o| o.default_port()).collect();
        names.sort();
        names.dedup();
        ports.sort();
        ports.dedup();
        assert_eq!(
            (names.len(), ports.len()),
            (Office::ALL.len(), Office::ALL.len())
        );
        assert_eq!(
            Office::HelmLoop.grpc_service(),
            "lychd.helmloop.v1.HelmLoop"
        );
        assert_eq!(Office::Ward.domain(), "lychd.ward");
        for o in Office::ALL {
            assert_eq!(Office::from_name(o.name()), Some(o));
        }
    }
}
