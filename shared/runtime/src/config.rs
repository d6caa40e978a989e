//! Office configuration: defaults → TOML file → `LYCHD_<OFFICE>__SECTION__FIELD` environment
//! overrides, then one `validate()`. Unknown fields are rejected; errors name the file (or the
//! environment variable) and the field. Secrets are only ever given by reference (a file path,
//! typically `/run/secrets/<name>`) and are held in a redacting wrapper once loaded.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use crate::Office;

/// Everything an office needs to run. Later office-specific sections are added here as
/// optional tables so one file shape serves every office.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfficeConfig {
    pub server: ServerConfig,
    pub database: DatabaseConfig,
    pub telemetry: TelemetryConfig,
    pub auth: AuthConfig,
    /// TLS of the server and of the calls to `https://` peers (`crate::tls`); none: plaintext.
    #[serde(default)]
    pub tls: crate::tls_config::TlsConfig,
    /// Offices this office calls, by office name.
    #[serde(default)]
    pub peers: BTreeMap<String, PeerConfig>,
    /// The office's own settings (`[office]`), read with [`OfficeConfig::office_section`] by
    /// the office, which rejects unknown fields there too.
    #[serde(default)]
    pub office: toml::Table,
    /// The office's retention job (`[retention]`), read with
    /// [`crate::retention::Settings::load`] against the office's own rules.
    #[serde(default)]
    pub retention: toml::Table,
    /// The metrics provider, scrape endpoint and database gauges (`[metrics]`).
    pub metrics: crate::metrics::MetricsConfig,
    /// The file this configuration came from (for error messages).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Address the gRPC server binds (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Largest encoded request or response message, in bytes.
    pub max_message_bytes: usize,
    /// Deadline for one request, in milliseconds (a shorter `grpc-timeout` from the caller wins).
    pub request_timeout_ms: u64,
    /// Requests served at once across all connections; further requests wait.
    pub concurrency_limit: usize,
    /// How long in-flight requests may take to finish after a shutdown signal.
    pub shutdown_grace_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// Connection URL of the office's runtime role (DML on its own schema only). No password
    /// here: give it by reference in `password_file`.
    pub url: String,
    pub password_file: Option<PathBuf>,
    /// Connection URL of the office's owner role, used only by `migrate`.
    pub migrate_url: String,
    pub migrate_password_file: Option<PathBuf>,
    pub max_connections: u32,
    /// `lock_timeout` of every runtime session, in milliseconds: no statement waits longer for a
    /// row, table or advisory lock (`LOCK_TIMEOUT`, nothing changed). 0 turns it off.
    pub lock_timeout_ms: u32,
    /// `idle_in_transaction_session_timeout` of every runtime session, in milliseconds: a
    /// session that sits this long inside an open transaction is ended by PostgreSQL (its locks
    /// released, the transaction rolled back). 0 turns it off.
    pub idle_in_transaction_timeout_ms: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Json,
    Pretty,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    pub format: LogFormat,
    /// `tracing` filter directive, e.g. `info,lychd_runtime=debug` (`RUST_LOG` wins if set).
    pub filter: String,
    /// OTLP/gRPC collector endpoint; when absent `OTEL_EXPORTER_OTLP_ENDPOINT` is honoured,
    /// and when neither is set no spans are exported.
    pub otlp_endpoint: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// File holding this office's standing service credential, exchanged with Ward for the
    /// session it presents to other offices (and to Ward when it asks for decisions). Required
    /// for every office but Ward.
    pub credential_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// gRPC endpoint of the peer office, e.g. `http://127.0.0.1:50053`.
    pub endpoint: String,
}

impl OfficeConfig {
    /// The defaults for an office on one machine (loopback, local PostgreSQL on 5432).
    pub fn defaults(office: Office) -> Self {
        let name = office.name();
        OfficeConfig {
            server: ServerConfig {
                listen: SocketAddr::from(([127, 0, 0, 1], office.default_port())),
                max_message_bytes: 4 * 1024 * 1024,
                request_timeout_ms: 30_000,
                concurrency_limit: 256,
                shutdown_grace_ms: 10_000,
            },
            database: DatabaseConfig {
                url: format!("postgres://{}@127.0.0.1:5432/lychd", office.runtime_role()),
                password_file: None,
                migrate_url: format!("postgres://{}@127.0.0.1:5432/lychd", office.owner_role()),
                migrate_password_file: None,
                max_connections: 8,
                lock_timeout_ms: 5_000,
                idle_in_transaction_timeout_ms: 10_000,
            },
            telemetry: TelemetryConfig {
                format: LogFormat::Json,
                filter: format!("info,lychd_{name}=info"),
                otlp_endpoint: None,
            },
            auth: AuthConfig {
                credential_file: None,
            },
            tls: crate::tls_config::TlsConfig::default(),
            peers: BTreeMap::new(),
            office: toml::Table::new(),
            retention: toml::Table::new(),
            metrics: crate::metrics::MetricsConfig::defaults(office),
            source: None,
        }
    }

    /// Load: defaults, then the TOML file (if any), then `LYCHD_<OFFICE>__…` from `env`.
    pub fn load(
        office: Office,
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let prefix = format!("LYCHD_{}__", office.name().to_ascii_uppercase());
        let mut fig = Figment::from(Serialized::defaults(Self::defaults(office)));
        if let Some(path) = file {
            if !path.is_file() {
                return Err(ConfigError::Invalid {
                    origin: path.display().to_string(),
                    field: String::new(),
                    message: "config file not found".into(),
                });
            }
            fig = fig.merge(Toml::file_exact(path));
        }
        // Only our prefix is read; `LYCHD_WARD__SERVER__LISTEN` → `server.listen`.
        let vars: Vec<(String, String)> = env
            .into_iter()
            .filter_map(|(k, v)| {
                k.strip_prefix(&prefix)
                    .map(|rest| (rest.to_ascii_lowercase(), v))
            })
            .collect();
        let fig = fig.merge(EnvPairs {
            prefix: prefix.clone(),
            vars,
        });
        let mut cfg: OfficeConfig = fig
            .extract()
            .map_err(|e| ConfigError::from_figment(e, file, &prefix))?;
        cfg.source = file.map(Path::to_owned);
        cfg.validate(file)?;
        Ok(cfg)
    }

    /// Checks that serde cannot express. Errors name the field.
    pub fn validate(&self, file: Option<&Path>) -> Result<(), ConfigError> {
        let bad = |field: &str, message: &str| ConfigError::Invalid {
            origin: file
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "defaults/environment".into()),
            field: field.into(),
            message: message.into(),
        };
        if self.server.max_message_bytes < 1024 || self.server.max_message_bytes > 64 * 1024 * 1024
        {
            return Err(bad(
                "server.max_message_bytes",
                "must be between 1024 and 67108864",
            ));
        }
        if self.server.concurrency_limit == 0 {
            return Err(bad("server.concurrency_limit", "must be at least 1"));
        }
        if self.server.request_timeout_ms == 0 {
            return Err(bad("server.request_timeout_ms", "must be at least 1"));
        }
        if self.database.max_connections == 0 {
            return Err(bad("database.max_connections", "must be at least 1"));
        }
        for (field, url) in [
            ("database.url", &self.database.url),
            ("database.migrate_url", &self.database.migrate_url),
        ] {
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                return Err(bad(field, "must be a postgres:// URL"));
            }
            if url_has_password(url) {
                return Err(bad(
                    field,
                    "must not contain a password; give it by reference in the *_password_file field",
                ));
            }
        }
        if let Some((field, message)) = self.metrics.problem() {
            return Err(bad(field, message));
        }
        for (name, peer) in &self.peers {
            if Office::from_name(name).is_none() {
                return Err(bad(&format!("peers.{name}"), "unknown office name"));
            }
            if !(peer.endpoint.starts_with("http://") || peer.endpoint.starts_with("https://")) {
                return Err(bad(
                    &format!("peers.{name}.endpoint"),
                    "must be an http:// or https:// URL",
                ));
            }
        }
        let peers = self
            .peers
            .iter()
            .map(|(n, p)| (n.as_str(), p.endpoint.as_str()));
        if let Err((field, message)) = self.tls.validate(self.server.listen, peers) {
            return Err(bad(&field, &message));
        }
        Ok(())
    }

    /// Deserialize the office's own `[office]` section; errors name the file and the field.
    pub fn office_section<T: serde::de::DeserializeOwned>(&self) -> Result<T, ConfigError> {
        serde_path_to_error::deserialize(toml::Value::Table(self.office.clone())).map_err(|e| {
            let path = e.path().to_string();
            self.invalid(
                if path == "." {
                    "office".into()
                } else {
                    format!("office.{path}")
                },
                e.into_inner().to_string(),
            )
        })
    }

    /// Where this configuration came from, as its errors name it (the file, or
    /// `configuration`).
    pub fn origin(&self) -> String {
        self.source
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "configuration".into())
    }

    /// A bad field of this configuration (`field` is its whole path, `office.stream_limit`),
    /// naming where the configuration came from: how every office reports a bad setting.
    pub fn invalid(&self, field: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            origin: self.origin(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// A bad field of `[office]` (`field` relative to it: `stream_limit`).
    pub fn invalid_office(&self, field: &str, message: &str) -> ConfigError {
        self.invalid(format!("office.{field}"), message)
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.server.request_timeout_ms)
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.server.shutdown_grace_ms)
    }
}

fn url_has_password(url: &str) -> bool {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    match authority.rsplit_once('@') {
        Some((userinfo, _)) => userinfo.contains(':'),
        None => false,
    }
}

/// A figment provider over explicit environment pairs (already stripped of the prefix and
/// lowercased), so callers and tests decide which environment is read.
struct EnvPairs {
    prefix: String,
    vars: Vec<(String, String)>,
}

impl figment::Provider for EnvPairs {
    fn metadata(&self) -> figment::Metadata {
        figment::Metadata::named(format!("environment {}*", self.prefix))
    }

    fn data(
        &self,
    ) -> Result<figment::value::Map<figment::Profile, figment::value::Dict>, figment::Error> {
        use figment::value::{Dict, Value};
        let mut dict = Dict::new();
        for (key, raw) in &self.vars {
            let value: Value = raw.parse().unwrap_or_else(|_| Value::from(raw.clone()));
            let nested = key.rsplit("__").fold(value, |acc, part| {
                let mut d = Dict::new();
                d.insert(part.to_string(), acc);
                d.into()
            });
            if let Value::Dict(_, d) = nested {
                merge_dict(&mut dict, d);
            }
        }
        Ok(figment::Profile::Default.collect(dict))
    }
}

fn merge_dict(into: &mut figment::value::Dict, from: figment::value::Dict) {
    use figment::value::Value;
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(Value::Dict(_, a)), Value::Dict(_, b)) => merge_dict(a, b),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

/// A configuration error. Display names the source (file or environment) and the field; it
/// never includes a secret value.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration in {origin}: field `{field}`: {message}")]
    Invalid {
        origin: String,
        field: String,
        message: String,
    },
    #[error("cannot read secret `{field}` from {path}: {reason}")]
    Secret {
        field: String,
        path: String,
        reason: String,
    },
}

impl ConfigError {
    fn from_figment(err: figment::Error, file: Option<&Path>, env_prefix: &str) -> Self {
        let mut field = err.path.join(".");
        if let figment::error::Kind::UnknownField(name, _) = &err.kind {
            field = if field.is_empty() {
                name.clone()
            } else {
                format!("{field}.{name}")
            };
        }
        let source = err
            .metadata
            .as_ref()
            .map(|m| match &m.source {
                Some(figment::Source::File(p)) => p.display().to_string(),
                _ if m.name.starts_with("environment") => {
                    format!(
                        "environment variable {env_prefix}{}",
                        field.replace('.', "__").to_ascii_uppercase()
                    )
                }
                _ => m.name.to_string(),
            })
            .or_else(|| file.map(|p| p.display().to_string()))
            .unwrap_or_else(|| "configuration".into());
        ConfigError::Invalid {
            origin: source,
            field,
            message: err.kind.to_string(),
        }
    }
}

/// Read a secret given by reference. Trailing newlines are dropped; the value never appears in
/// `Debug`, logs or errors.
pub fn load_secret(field: &str, path: &Path) -> Result<SecretString, ConfigError> {
    let err = |reason: String| ConfigError::Secret {
        field: field.into(),
        path: path.display().to_string(),
        reason,
    };
    let raw = std::fs::read_to_string(path).map_err(|e| err(e.kind().to_string()))?;
    let value = raw.trim_end_matches(['\n', '\r']);
    if value.is_empty() {
        return Err(err("file is empty".into()));
    }
    Ok(SecretString::from(value.to_owned()))
}

/// Secrets `serve` needs, loaded once at start (`migrate` needs only the owner password).
pub struct Secrets {
    pub credential: Option<SecretString>,
    pub db_password: Option<SecretString>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field(
                "credential",
                &self.credential.as_ref().map(|_| "[redacted]"),
            )
            .field(
                "db_password",
                &self.db_password.as_ref().map(|_| "[redacted]"),
            )
            .finish()
    }
}

impl Secrets {
    pub fn load(cfg: &OfficeConfig) -> Result<Self, ConfigError> {
        let credential = cfg
            .auth
            .credential_file
            .as_deref()
            .map(|p| load_secret("auth.credential_file", p))
            .transpose()?;
        let db_password = cfg
            .database
            .password_file
            .as_deref()
            .map(|p| load_secret("database.password_file", p))
            .transpose()?;
        Ok(Secrets {
            credential,
            db_password,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        p
    }

    fn no_env() -> Vec<(String, String)> {
        Vec::new()
    }

    #[test]
    fn metrics_listen_off_loopback_is_refused_unless_allowed() {
        let vars = |extra: &[(&str, &str)]| {
            let mut v = vec![(
                "LYCHD_WARD__METRICS__LISTEN".to_owned(),
                "0.0.0.0:9464".to_owned(),
            )];
            v.extend(
                extra
                    .iter()
                    .map(|(k, x)| ((*k).to_owned(), (*x).to_owned())),
            );
            v
        };
        match OfficeConfig::load(Office::Ward, None, vars(&[])) {
            Err(ConfigError::Invalid { field, .. }) => assert_eq!(field, "metrics.listen"),
            other => panic!("refused: {other:?}"),
        }
        let allowed = OfficeConfig::load(
            Office::Ward,
            None,
            vars(&[("LYCHD_WARD__METRICS__ALLOW_NON_LOOPBACK", "true")]),
        )
        .expect("allowed");
        assert_eq!(allowed.metrics.listen.port(), 9464);
        let defaults = OfficeConfig::defaults(Office::Ward).metrics;
        assert!(defaults.listen.ip().is_loopback() && defaults.enabled);
        match OfficeConfig::load(
            Office::Ward,
            None,
            vec![(
                "LYCHD_WARD__METRICS__REFRESH_SECONDS".to_owned(),
                "0".to_owned(),
            )],
        ) {
            Err(ConfigError::Invalid { field, .. }) => {
                assert_eq!(field, "metrics.refresh_seconds")
            }
            other => panic!("refused: {other:?}"),
        }
    }

    #[test]
    fn example_configs_load() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config");
        for office in Office::ALL {
            let file = root.join(format!("{office}.toml"));
            let cfg =
                OfficeConfig::load(office, Some(&file), no_env()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(cfg.server.listen.port(), office.default_port(), "{office}");
            assert_eq!(
                cfg.metrics.listen.port(),
                crate::metrics::MetricsConfig::defaults(office)
                    .listen
                    .port(),
                "{office}: the metrics port the Quadlet publishes"
            );
            assert!(
                cfg.database.url.contains(&office.runtime_role()),
                "{office}"
            );
            assert!(
                cfg.database.migrate_url.contains(&office.owner_role()),
                "{office}"
            );
            assert!(cfg.auth.credential_file.is_some(), "{office}");
            if office != Office::Ward {
                assert!(
                    cfg.peers.contains_key("ward"),
                    "{office} must know where ward is"
                );
            }
            assert!(
                cfg.peers.keys().all(|p| p != office.name()),
                "{office} lists itself as a peer"
            );
        }
    }

    #[test]
    fn deploy_provisioning_sql_matches_the_code() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/postgres/provision.sql");
        let expected = format!(
            "-- Generated from lychd_runtime::db::provision_all_sql(\"lychd\"); a test keeps it equal.\n\
             -- Run once as a superuser connected to database `lychd`, then give each role a password\n\
             -- (\\password lychd_<office>_owner / lychd_<office>_app) and store them as Podman secrets.\n\n{}\n",
            crate::db::provision_all_sql("lychd").join("\n\n")
        );
        if std::env::var_os("LYCHD_BLESS").is_some() {
            std::fs::write(&path, &expected).expect("bless");
        }
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            actual == expected,
            "{} is stale: rerun this test with LYCHD_BLESS=1",
            path.display()
        );
    }

    #[test]
    fn office_section_errors_name_file_and_field() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)] // read through Debug only
        struct Registry {
            animators: Vec<Animator>,
        }
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)] // read through Debug only
        struct Animator {
            name: String,
        }
        let dir = tempfile::tempdir().expect("tmp");
        let ok = write(
            dir.path(),
            "ok.toml",
            "[[office.animators]]\nname = \"a\"\n",
        );
        let cfg = OfficeConfig::load(Office::Dispatcher, Some(&ok), no_env()).expect("loads");
        let registry: Registry = cfg.office_section().expect("section");
        assert_eq!(registry.animators[0].name, "a");

        let bad = write(
            dir.path(),
            "bad.toml",
            "[[office.animators]]\nname = \"a\"\nport = 3\n",
        );
        let cfg = OfficeConfig::load(Office::Dispatcher, Some(&bad), no_env()).expect("loads");
        let text = cfg
            .office_section::<Registry>()
            .expect_err("unknown")
            .to_string();
        assert!(
            text.contains(&bad.display().to_string()) && text.contains("office.animators[0]"),
            "{text}"
        );
    }

    #[test]
    fn unknown_field_names_file_and_field() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = write(
            dir.path(),
            "ward.toml",
            "[database]\nurl = \"postgres://a@h/db\"\npool_size = 3\n",
        );
        let err =
            OfficeConfig::load(Office::Ward, Some(&file), no_env()).expect_err("unknown field");
        let text = err.to_string();
        assert!(text.contains(&file.display().to_string()), "{text}");
        assert!(text.contains("database.pool_size"), "{text}");
    }

    #[test]
    fn unknown_section_names_file_and_field() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = write(
            dir.path(),
            "ward.toml",
            "[servr]\nlisten = \"127.0.0.1:1\"\n",
        );
        let text = OfficeConfig::load(Office::Ward, Some(&file), no_env())
            .expect_err("unknown")
            .to_string();
        assert!(
            text.contains(&file.display().to_string()) && text.contains("servr"),
            "{text}"
        );
    }

    #[test]
    fn wrong_type_names_field() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = write(
            dir.path(),
            "ward.toml",
            "[server]\nconcurrency_limit = \"many\"\n",
        );
        let text = OfficeConfig::load(Office::Ward, Some(&file), no_env())
            .expect_err("type")
            .to_string();
        assert!(
            text.contains("server.concurrency_limit") && text.contains(&file.display().to_string()),
            "{text}"
        );
    }

    #[test]
    fn environment_override_wins_over_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = write(
            dir.path(),
            "ward.toml",
            "[server]\nlisten = \"127.0.0.1:1111\"\nconcurrency_limit = 5\n",
        );
        let env = vec![
            (
                "LYCHD_WARD__SERVER__LISTEN".to_owned(),
                "127.0.0.1:2222".to_owned(),
            ),
            (
                "LYCHD_WARD__SERVER__CONCURRENCY_LIMIT".to_owned(),
                "7".to_owned(),
            ),
            // Another office's variables are not read.
            (
                "LYCHD_ARCHIVE__SERVER__LISTEN".to_owned(),
                "127.0.0.1:3333".to_owned(),
            ),
        ];
        let cfg = OfficeConfig::load(Office::Ward, Some(&file), env).expect("loads");
        assert_eq!(cfg.server.listen.port(), 2222);
        assert_eq!(cfg.server.concurrency_limit, 7);
    }

    #[test]
    fn unknown_environment_field_names_the_variable() {
        let env = vec![("LYCHD_WARD__SERVER__LISSEN".to_owned(), "x".to_owned())];
        let text = OfficeConfig::load(Office::Ward, None, env)
            .expect_err("unknown")
            .to_string();
        assert!(text.contains("LYCHD_WARD__SERVER__LISSEN"), "{text}");
    }

    #[test]
    fn file_values_override_defaults_and_peers_are_validated() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = write(
            dir.path(),
            "d.toml",
            "[peers.wardd]\nendpoint = \"http://127.0.0.1:1\"\n",
        );
        let text = OfficeConfig::load(Office::Dispatcher, Some(&file), no_env())
            .expect_err("bad peer")
            .to_string();
        assert!(
            text.contains("peers.wardd") && text.contains("unknown office"),
            "{text}"
        );
    }

    #[test]
    fn inline_database_password_is_refused() {
        let env = vec![(
            "LYCHD_WARD__DATABASE__URL".to_owned(),
            "postgres://u:hunter2@h/db".to_owned(),
        )];
        let text = OfficeConfig::load(Office::Ward, None, env)
            .expect_err("password")
            .to_string();
        assert!(
            text.contains("database.url") && text.contains("password_file"),
            "{text}"
        );
        assert!(
            !text.contains("hunter2"),
            "error echoes the password: {text}"
        );
    }

    #[test]
    fn missing_config_file_is_an_error_naming_it() {
        let text = OfficeConfig::load(
            Office::Ward,
            Some(Path::new("/nonexistent/ward.toml")),
            no_env(),
        )
        .expect_err("missing")
        .to_string();
        assert!(text.contains("/nonexistent/ward.toml"), "{text}");
    }

    #[test]
    fn secrets_load_from_files_and_never_print() {
        let dir = tempfile::tempdir().expect("tmp");
        let token = write(dir.path(), "credential", "s3cr3t-token-value-0123456789\n");
        let pw = write(dir.path(), "pw", "db-password-value\n");
        let env = vec![
            (
                "LYCHD_WARD__AUTH__CREDENTIAL_FILE".to_owned(),
                token.display().to_string(),
            ),
            (
                "LYCHD_WARD__DATABASE__PASSWORD_FILE".to_owned(),
                pw.display().to_string(),
            ),
        ];
        let cfg = OfficeConfig::load(Office::Ward, None, env).expect("loads");
        let secrets = Secrets::load(&cfg).expect("secrets");
        assert_eq!(
            secrets
                .credential
                .as_ref()
                .map(|s| s.expose_secret().to_owned())
                .as_deref(),
            Some("s3cr3t-token-value-0123456789")
        );
        assert_eq!(
            secrets
                .db_password
                .as_ref()
                .map(|s| s.expose_secret().to_owned())
                .as_deref(),
            Some("db-password-value")
        );
        let printed = format!("{secrets:?} {cfg:?}");
        assert!(
            !printed.contains("s3cr3t") && !printed.contains("db-password-value"),
            "{printed}"
        );
    }

    #[test]
    fn empty_or_unreadable_secret_is_refused_naming_field_and_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let empty = write(dir.path(), "credential", "\n");
        let env = vec![(
            "LYCHD_WARD__AUTH__CREDENTIAL_FILE".to_owned(),
            empty.display().to_string(),
        )];
        let cfg = OfficeConfig::load(Office::Ward, None, env).expect("loads");
        let text = Secrets::load(&cfg).expect_err("empty").to_string();
        assert!(
            text.contains("auth.credential_file") && text.contains("empty"),
            "{text}"
        );
        let env = vec![(
            "LYCHD_WARD__DATABASE__PASSWORD_FILE".to_owned(),
            "/nonexistent/pw".to_owned(),
        )];
        let cfg = OfficeConfig::load(Office::Ward, None, env).expect("loads");
        let text = Secrets::load(&cfg).expect_err("missing").to_string();
        assert!(
            text.contains("database.password_file") && text.contains("/nonexistent/pw"),
            "{text}"
        );
    }
}
