//! The stack's PostgreSQL: persisted under `<state>/pg` or a throwaway one, started unless it
//! already runs there, provisioned for every office, stopped at the end.

use std::path::{Path, PathBuf};

use anyhow::Context;
use lychd_pg::{Cluster, Durability, PgError};
use sqlx::postgres::PgConnectOptions;

use super::configuration::{DATABASE, loopback};

/// A running cluster, stopped (and a throwaway one removed) by [`Postgres::stop`].
pub(super) struct Postgres {
    cluster: Cluster,
    place: Place,
    port: u16,
}

impl Postgres {
    /// The cluster under `persisted`, or with `ephemeral` a throwaway one; started on
    /// `wanted_port` (0: a free port) unless it already runs.
    /// With `tls`, a cluster started here serves that certificate (`ssl = on`); one already
    /// running is used as it is.
    pub fn start(
        persisted: &Path,
        ephemeral: bool,
        wanted_port: u16,
        tls: Option<lychd_runtime::devca::Issued>,
    ) -> anyhow::Result<Self> {
        let place = if ephemeral {
            Place::throwaway()?
        } else {
            Place::persisted(persisted)
        };
        let cluster = Cluster::new(&place.base).map_err(pg)?;
        let port = match cluster.running_port() {
            Some(port) => {
                println!(
                    "postgres  already running on {} ({})",
                    loopback(port),
                    place.base.display()
                );
                port
            }
            None => {
                cluster.init().map_err(pg)?;
                if let Some(tls) = &tls {
                    cluster
                        .enable_tls(&tls.cert_pem, &tls.key_pem)
                        .map_err(pg)?;
                }
                let port = listen_port(wanted_port)?;
                cluster.start(port, place.durability).map_err(pg)?;
                println!("postgres  {}  ({})", loopback(port), place.base.display());
                port
            }
        };
        Ok(Postgres {
            cluster,
            place,
            port,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The database, and every office's roles and schema in it, each role with the password
    /// of its file under `secrets` (`lychd provision database`'s code).
    pub async fn provision(&self, secrets: &Path) -> anyhow::Result<()> {
        let superuser = PgConnectOptions::new()
            .host("127.0.0.1")
            .port(self.port)
            .username("postgres")
            .database("postgres")
            .application_name("lychd");
        crate::provision::database::provision(&superuser, DATABASE, Some(secrets))
            .await
            .context("provisioning")?;
        Ok(())
    }

    pub fn stop(self) {
        println!("stopping postgres");
        if let Err(e) = self.cluster.stop() {
            eprintln!("lychd: {e}");
        }
        self.place.discard();
    }
}

fn pg(e: PgError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// `wanted`, or a free port for 0.
fn listen_port(wanted: u16) -> anyhow::Result<u16> {
    Ok(if wanted == 0 {
        lychd_pg::free_port()?
    } else {
        wanted
    })
}

/// Where a cluster lives and how it runs.
#[derive(Debug)]
struct Place {
    base: PathBuf,
    durability: Durability,
}

impl Place {
    fn persisted(base: &Path) -> Self {
        Place {
            base: base.to_owned(),
            durability: Durability::Durable,
        }
    }

    /// A directory of this process under the system's temporary directory.
    fn throwaway() -> std::io::Result<Self> {
        let base = std::env::temp_dir().join(format!("lychd-dev-{}", std::process::id()));
        std::fs::create_dir_all(&base)?;
        Ok(Place {
            base,
            durability: Durability::Throwaway,
        })
    }

    /// Remove a throwaway cluster; a persisted one stays.
    fn discard(self) {
        if self.durability == Durability::Throwaway {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persisted_cluster_is_durable_and_outlives_the_stack() {
        let state = tempfile::tempdir().expect("tmp");
        let base = state.path().join("pg");
        std::fs::create_dir_all(base.join("data")).expect("data dir");
        let place = Place::persisted(&base);
        assert_eq!(place.base, base);
        assert_eq!(place.durability, Durability::Durable);
        place.discard();
        assert!(base.join("data").is_dir());
    }

    #[test]
    fn a_throwaway_cluster_lives_in_a_temporary_directory_removed_at_the_end() {
        let place = Place::throwaway().expect("throwaway");
        let base = place.base.clone();
        assert!(base.starts_with(std::env::temp_dir()), "{base:?}");
        assert!(base.is_dir());
        assert_eq!(place.durability, Durability::Throwaway);
        std::fs::write(base.join("postgres.log"), "log").expect("file");
        place.discard();
        assert!(!base.exists());
    }

    #[test]
    fn the_port_asked_for_is_kept_and_zero_takes_a_free_one() {
        assert_eq!(listen_port(54321).expect("port"), 54321);
        let port = listen_port(0).expect("port");
        assert_ne!(port, 0);
        std::net::TcpListener::bind(loopback(port)).expect("the chosen port is free");
    }
}
