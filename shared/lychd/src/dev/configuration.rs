//! What the stack is configured with: where it keeps its state, which ports the offices take,
//! each office's configuration file (regenerated at every start) and the endpoints file.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use lychd_runtime::Office;

/// The one database every office's schema lives in.
pub(super) const DATABASE: &str = "lychd";

/// Lifetime asked for the operator's dev session (Ward may cap it).
pub(super) const OPERATOR_SESSION: Duration = Duration::from_secs(12 * 3600);

/// The dev stack's one animator and the model its simulated runtime serves.
pub(super) const DEV_ANIMATOR: &str = "sim0";
pub(super) const DEV_MODEL: &str = "qwen3-0.6b";
/// The simulated GPU's animators and their models: dedicated, conflicts omitted (the
/// compiler's `default-exclusive`: any two conflict), the first one running at start.
pub(super) const DEV_GPUS: &[(&str, &str)] = &[
    ("gpu-a", "llama-3.1-8b-q4"),
    ("gpu-b", "qwen3-8b-q4"),
    ("gpu-c", "mistral-7b-q4"),
];

/// The simulated GPU whose memory decides what stops (issue 25 point 4): its name and
/// capacity in MiB.
pub(super) const DEV_DEVICE: (&str, u64) = ("sim-gpu", 16_000);
/// The animators placed on [`DEV_DEVICE`], with NO declared conflict (placed, so no
/// `default-exclusive`): `(animator, model, declared MiB, MiB it really holds while it runs)`.
/// Either fits alone; together (9,000 + 8,000 declared) they do not, so memory alone forces
/// the eviction. The first one runs at start; the simulated host holds what each really
/// takes, so a measurement after WARM replaces the declaration.
pub(super) const DEV_PLACED: &[(&str, &str, u64, u64)] = &[
    ("mem-a", "gemma-2-9b-q8", 9_000, 9_500),
    ("mem-b", "phi-4-q8", 8_000, 8_500),
];

/// Where everything the stack runs listens: loopback only.
pub(super) fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// The gRPC endpoint of an office on `port`.
pub(super) fn loopback_url(port: u16) -> String {
    format!("{}://{}", super::tls::scheme(), loopback(port))
}

/// Where `lychd dev` keeps its state: PostgreSQL under `<state>/pg`, the rest under
/// `<state>/dev`.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    /// The persisted PostgreSQL cluster (not used with `--ephemeral`).
    pub pg: PathBuf,
    /// Each office's address while the stack runs.
    pub endpoints: PathBuf,
    /// Every replica's address of each office while the stack runs (`--replicas`).
    pub replicas: PathBuf,
    /// The operator's standing credential, from Ward's bootstrap.
    pub operator_credential: PathBuf,
    dev: PathBuf,
    configs: PathBuf,
    logs: PathBuf,
    credentials: PathBuf,
    /// The database roles' password files (`lychd provision database` writes them).
    pub secrets: PathBuf,
}

impl Layout {
    /// The layout under `state_dir` (relative to the current directory unless absolute).
    pub fn new(state_dir: &Path) -> anyhow::Result<Self> {
        let state = if state_dir.is_absolute() {
            state_dir.to_owned()
        } else {
            std::env::current_dir()?.join(state_dir)
        };
        let dev = state.join("dev");
        Ok(Layout {
            pg: state.join("pg"),
            endpoints: dev.join("endpoints.json"),
            replicas: dev.join("replicas.json"),
            operator_credential: dev.join("operator.credential"),
            configs: dev.join("config"),
            logs: dev.join("logs"),
            credentials: dev.join("credentials"),
            secrets: dev.join("secrets"),
            dev,
        })
    }

    /// Each office's metrics scrape address while the stack runs (`dev/metrics.json`).
    pub fn metrics(&self) -> PathBuf {
        self.dev.join("metrics.json")
    }

    /// The operator's session for `office`, renewed at every start: bound to that office
    /// alone, so an office that receives it cannot replay it at another (nor at Ward).
    pub fn operator_token(&self, office: Office) -> PathBuf {
        self.dev.join(format!("operator.{}.token", office.name()))
    }

    /// Create the directories and remove the endpoints file of a stack that did not stop
    /// cleanly (it names addresses nothing may serve any more).
    pub fn prepare(&self) -> std::io::Result<()> {
        for dir in [&self.configs, &self.logs, &self.credentials] {
            std::fs::create_dir_all(dir)?;
        }
        let _ = std::fs::remove_file(&self.endpoints);
        let _ = std::fs::remove_file(&self.replicas);
        let _ = std::fs::remove_file(self.metrics());
        Ok(())
    }

    /// The throwaway CA and certificates of `lychd dev --tls`.
    pub fn tls(&self) -> PathBuf {
        self.dev.join("tls")
    }

    /// The first replica's configuration.
    #[cfg(test)]
    pub fn config(&self, office: Office) -> PathBuf {
        self.replica_config(office, 0)
    }

    pub fn log(&self, office: Office) -> PathBuf {
        self.replica_log(office, 0)
    }

    /// Where the console writes its address once it listens (`dev/console.address`).
    pub fn console_address(&self) -> PathBuf {
        self.dev.join("console.address")
    }

    /// The console's log.
    pub fn console_log(&self) -> PathBuf {
        self.logs.join("console.log")
    }

    /// Replica `replica`'s configuration (the first replica's is [`Layout::config`]; the
    /// second's `<office>.2.toml`, …).
    pub fn replica_config(&self, office: Office, replica: usize) -> PathBuf {
        match replica {
            0 => self.configs.join(format!("{office}.toml")),
            r => self.configs.join(format!("{office}.{}.toml", r + 1)),
        }
    }

    /// Replica `replica`'s log (`<office>.log`, `<office>.2.log`, …).
    pub fn replica_log(&self, office: Office, replica: usize) -> PathBuf {
        match replica {
            0 => self.logs.join(format!("{office}.log")),
            r => self.logs.join(format!("{office}.{}.log", r + 1)),
        }
    }

    /// The standing credential of the office's service principal.
    pub fn credential(&self, office: Office) -> PathBuf {
        self.credentials.join(format!("{office}.credential"))
    }
}

/// The offices' ports, one set per replica: consecutive from `base` in `Office::ALL` order,
/// the second replica's right after the first's, and so on; a busy one is replaced by a free
/// one, and no port is chosen twice.
pub(super) fn choose_ports(
    base: u16,
    replicas: usize,
) -> anyhow::Result<Vec<BTreeMap<Office, u16>>> {
    replica_ports(
        base,
        replicas,
        |port| TcpListener::bind(loopback(port)).is_ok(),
        || Ok(lychd_pg::free_port()?),
    )
}

fn replica_ports(
    base: u16,
    replicas: usize,
    available: impl Fn(u16) -> bool,
    mut any_free: impl FnMut() -> anyhow::Result<u16>,
) -> anyhow::Result<Vec<BTreeMap<Office, u16>>> {
    let mut taken = std::collections::BTreeSet::new();
    let mut sets = Vec::new();
    for r in 0..replicas {
        let from = base.saturating_add((r * Office::ALL.len()) as u16);
        let set = ports_from(
            from,
            |p| !taken.contains(&p) && available(p),
            || loop {
                let p = any_free()?;
                if !taken.contains(&p) {
                    return Ok(p);
                }
            },
        )?;
        taken.extend(set.values().copied());
        sets.push(set);
    }
    Ok(sets)
}

fn ports_from(
    base: u16,
    available: impl Fn(u16) -> bool,
    mut any_free: impl FnMut() -> anyhow::Result<u16>,
) -> anyhow::Result<BTreeMap<Office, u16>> {
    let mut ports = BTreeMap::new();
    for (i, office) in Office::ALL.into_iter().enumerate() {
        let wanted = base.saturating_add(i as u16);
        let port = if available(wanted) && !ports.values().any(|p| *p == wanted) {
            wanted
        } else {
            any_free()?
        };
        ports.insert(office, port);
    }
    Ok(ports)
}

/// How often `lychd dev`'s offices refresh their database gauges, in seconds.
pub(super) const DEV_METRICS_REFRESH_SECONDS: u64 = 2;

/// The offices' metrics ports, one set per replica: free ports, none of `taken` (the gRPC
/// ports) and none chosen twice. An office that finds its port taken by the time it binds
/// exits as for its gRPC port, and every port is chosen again.
pub(super) fn metrics_ports(
    taken: &[BTreeMap<Office, u16>],
) -> anyhow::Result<Vec<BTreeMap<Office, u16>>> {
    let mut used: std::collections::BTreeSet<u16> =
        taken.iter().flat_map(|set| set.values().copied()).collect();
    let mut sets = Vec::new();
    for _ in taken {
        let mut set = BTreeMap::new();
        for office in Office::ALL {
            let port = loop {
                let p = lychd_pg::free_port()?;
                if used.insert(p) {
                    break p;
                }
            };
            set.insert(office, port);
        }
        sets.push(set);
    }
    Ok(sets)
}

/// The replicas file: `{"dispatcher": ["127.0.0.1:50051", "127.0.0.1:50057"], …}`, each
/// office's replicas in order (the first is the one `endpoints.json` names).
pub(super) fn replicas_json(sets: &[BTreeMap<Office, u16>]) -> serde_json::Result<String> {
    let replicas: BTreeMap<&str, Vec<String>> = Office::ALL
        .into_iter()
        .map(|office| {
            let addrs = sets.iter().map(|set| loopback(set[&office]).to_string());
            (office.name(), addrs.collect())
        })
        .collect();
    Ok(serde_json::to_string_pretty(&replicas)? + "\n")
}

/// The endpoints file: `{"dispatcher": "127.0.0.1:50051", …}`.
pub(super) fn endpoints_json(ports: &BTreeMap<Office, u16>) -> serde_json::Result<String> {
    let endpoints: BTreeMap<&str, String> = ports
        .iter()
        .map(|(office, port)| (office.name(), loopback(*port).to_string()))
        .collect();
    Ok(serde_json::to_string_pretty(&endpoints)? + "\n")
}

/// What every office's configuration is made of.
pub(super) struct Configs<'a> {
    pub layout: &'a Layout,
    /// This replica's ports (its own listeners, and the peers it calls: the same replica of
    /// every other office).
    pub ports: &'a BTreeMap<Office, u16>,
    /// This replica's metrics scrape ports (`[metrics] listen`).
    pub metrics: &'a BTreeMap<Office, u16>,
    /// Which replica these configurations are for (0: the first).
    pub replica: usize,
    pub pg_port: u16,
    /// The simulated llama.cpp runtime of the resident animator ([`DEV_ANIMATOR`]).
    pub runtime: &'a str,
    /// The endpoints of [`DEV_GPUS`]' runtimes, in that order.
    pub gpus: &'a [String],
    /// The endpoints of [`DEV_PLACED`]'s runtimes, in that order.
    pub placed: &'a [String],
    /// The simulated host's control API (the Orchestrator's `simulated` actuator).
    pub host_control: &'a str,
}

impl Configs<'_> {
    /// Write `office`'s configuration; returns its path. Ward's own credential exists only once
    /// Ward has issued it (on a first start), so Ward's configuration names it only when the
    /// file is there; every other office starts after its credential is issued.
    pub fn write(&self, office: Office) -> std::io::Result<PathBuf> {
        let credential = self.layout.credential(office);
        let credential =
            (office != Office::Ward || credential.is_file()).then_some(credential.as_path());
        let path = self.layout.replica_config(office, self.replica);
        std::fs::write(&path, self.text(office, credential))?;
        Ok(path)
    }

    fn text(&self, office: Office, credential: Option<&Path>) -> String {
        let pg = loopback(self.pg_port);
        // Over TLS, PostgreSQL's certificate is verified against the dev CA.
        let ssl = super::tls::ca_file()
            .map(|ca| format!("?sslmode=verify-full&sslrootcert={}", ca.display()))
            .unwrap_or_default();
        let mut s = format!(
            "# written by `lychd dev`; regenerated at every start\n\
             [server]\nlisten = \"{}\"\n\n\
             [database]\nurl = \"postgres://{}@{pg}/{DATABASE}{ssl}\"\n\
             password_file = \"{}\"\n\
             migrate_url = \"postgres://{}@{pg}/{DATABASE}{ssl}\"\n\
             migrate_password_file = \"{}\"\n\n\
             [telemetry]\nformat = \"json\"\nfilter = \"info\"\n",
            loopback(self.ports[&office]),
            office.runtime_role(),
            self.layout
                .secrets
                .join(crate::provision::secrets::app_password(office))
                .display(),
            office.owner_role(),
            self.layout
                .secrets
                .join(crate::provision::secrets::owner_password(office))
                .display(),
        );
        if let Some(file) = credential {
            s.push_str(&format!(
                "\n[auth]\ncredential_file = \"{}\"\n",
                file.display()
            ));
        }
        // Gauges read from the database refresh every 2 s here (15 s by default), so what an
        // operator just did shows at the next scrape.
        s.push_str(&format!(
            "\n[metrics]\nlisten = \"{}\"\nrefresh_seconds = {DEV_METRICS_REFRESH_SECONDS}\n",
            loopback(self.metrics[&office])
        ));
        if let (Some(ca), Some((cert, key))) =
            (super::tls::ca_file(), super::tls::office_files(office))
        {
            s.push_str(&format!(
                "\n[tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\nca_file = \"{}\"\n",
                cert.display(),
                key.display(),
                ca.display()
            ));
        }
        for (peer, port) in self.ports.iter().filter(|(p, _)| **p != office) {
            s.push_str(&format!(
                "\n[peers.{peer}]\nendpoint = \"{}\"\n",
                loopback_url(*port)
            ));
        }
        match office {
            Office::Dispatcher => {
                s.push_str("\n[office]\n");
                s.push_str(&self.registry());
            }
            Office::Orchestrator => {
                let (device, capacity) = DEV_DEVICE;
                s.push_str(&format!(
                    "\n[office]\n\n[office.actuator]\nkind = \"simulated\"\nendpoint = \"{}\"\n\n\
                     [[office.devices]]\nname = \"{device}\"\nmemory_mib = {capacity}\n",
                    self.host_control
                ));
                s.push_str(&self.registry());
            }
            _ => {}
        }
        s
    }

    /// The one animator registry the Dispatcher and the Orchestrator both read: the resident
    /// animator on its simulated runtime, and the simulated GPU's animators in conflict.
    fn registry(&self) -> String {
        let mut s = format!(
            "\n[[office.animators]]\nname = \"{DEV_ANIMATOR}\"\nsource = \"soulstone\"\n\
             dialect = \"llama_cpp\"\nendpoint = \"{}\"\ndedicated = true\nresident = true\n",
            self.runtime
        );
        for ((name, _), endpoint) in DEV_GPUS.iter().zip(self.gpus) {
            s.push_str(&format!(
                "\n[[office.animators]]\nname = \"{name}\"\nsource = \"soulstone\"\n\
                 dialect = \"llama_cpp\"\nendpoint = \"{endpoint}\"\ndedicated = true\n\
                 ready_estimate_seconds = 2\n"
            ));
        }
        let device = DEV_DEVICE.0;
        for ((name, _, declared, _), endpoint) in DEV_PLACED.iter().zip(self.placed) {
            s.push_str(&format!(
                "\n[[office.animators]]\nname = \"{name}\"\nsource = \"soulstone\"\n\
                 dialect = \"llama_cpp\"\nendpoint = \"{endpoint}\"\ndedicated = true\n\
                 ready_estimate_seconds = 2\ndevice = \"{device}\"\nmemory_mib = {declared}\n"
            ));
        }
        let placed = DEV_PLACED.iter().map(|(a, m, _, _)| (*a, *m));
        let all = std::iter::once((DEV_ANIMATOR, DEV_MODEL))
            .chain(DEV_GPUS.iter().copied())
            .chain(placed);
        for (animator, model) in all {
            s.push_str(&format!(
                "\n[[office.capabilities]]\nanimator = \"{animator}\"\nfamily = \"chat\"\n\
                 model_id = \"{model}\"\ninput_modalities = [\"text\"]\ncontext_tokens = 8192\n"
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use lychd_runtime::config::OfficeConfig;

    use super::*;

    const RUNTIME: &str = "http://127.0.0.1:40000";
    const HOST: &str = "http://127.0.0.1:40009";
    const PG_PORT: u16 = 45432;

    fn default_ports() -> BTreeMap<Office, u16> {
        Office::ALL.map(|o| (o, o.default_port())).into()
    }

    /// Write `office`'s configuration under `state` and load it as the office does.
    fn written(state: &Path, office: Office) -> OfficeConfig {
        let layout = Layout::new(state).expect("layout");
        layout.prepare().expect("prepare");
        let ports = default_ports();
        let gpus: Vec<String> = (1..=DEV_GPUS.len())
            .map(|i| format!("http://127.0.0.1:4000{i}"))
            .collect();
        let placed: Vec<String> = (1..=DEV_PLACED.len())
            .map(|i| format!("http://127.0.0.1:4010{i}"))
            .collect();
        let configs = Configs {
            layout: &layout,
            ports: &ports,
            metrics: &ports.iter().map(|(o, p)| (*o, p + 1000)).collect(),
            replica: 0,
            pg_port: PG_PORT,
            runtime: RUNTIME,
            gpus: &gpus,
            placed: &placed,
            host_control: HOST,
        };
        let path = configs.write(office).expect("write");
        assert_eq!(path, layout.config(office));
        OfficeConfig::load(office, Some(&path), Vec::new()).expect("the office accepts it")
    }

    #[test]
    fn every_office_scrapes_on_its_own_loopback_port_and_refreshes_quickly() {
        let state = tempfile::tempdir().expect("tmp");
        for office in Office::ALL {
            let config = written(state.path(), office);
            assert_eq!(
                config.metrics.listen,
                loopback(office.default_port() + 1000),
                "{office}"
            );
            assert_eq!(config.metrics.refresh_seconds, DEV_METRICS_REFRESH_SECONDS);
        }
        let grpc = vec![default_ports(), default_ports()];
        let sets = metrics_ports(&grpc).expect("ports");
        let all: std::collections::BTreeSet<u16> = sets
            .iter()
            .flat_map(|s| s.values().copied())
            .chain(grpc[0].values().copied())
            .collect();
        assert_eq!(all.len(), 3 * Office::ALL.len(), "no port chosen twice");
    }

    #[test]
    fn state_lives_where_the_readme_says() {
        let layout = Layout::new(Path::new(".lychd")).expect("layout");
        let state = std::env::current_dir().expect("cwd").join(".lychd");
        assert_eq!(layout.pg, state.join("pg"));
        assert_eq!(layout.endpoints, state.join("dev/endpoints.json"));
        assert_eq!(
            layout.operator_credential,
            state.join("dev/operator.credential")
        );
        assert_eq!(
            layout.operator_token(Office::Dispatcher),
            state.join("dev/operator.dispatcher.token")
        );
        assert_eq!(
            layout.config(Office::Ward),
            state.join("dev/config/ward.toml")
        );
        assert_eq!(
            layout.log(Office::Archive),
            state.join("dev/logs/archive.log")
        );
        assert_eq!(
            layout.credential(Office::HelmLoop),
            state.join("dev/credentials/helmloop.credential")
        );
        let absolute = Layout::new(Path::new("/srv/lychd")).expect("layout");
        assert_eq!(absolute.pg, Path::new("/srv/lychd/pg"));
    }

    #[test]
    fn prepare_creates_the_directories_and_drops_only_a_stale_endpoints_file() {
        let state = tempfile::tempdir().expect("tmp");
        let layout = Layout::new(state.path()).expect("layout");
        std::fs::create_dir_all(state.path().join("dev")).expect("dev dir");
        std::fs::write(&layout.endpoints, "{}").expect("stale endpoints");
        std::fs::write(&layout.operator_credential, "kept").expect("credential");

        layout.prepare().expect("prepare");

        assert!(!layout.endpoints.exists());
        assert_eq!(
            std::fs::read_to_string(&layout.operator_credential).expect("credential"),
            "kept"
        );
        for office in Office::ALL {
            for file in [
                layout.config(office),
                layout.log(office),
                layout.credential(office),
            ] {
                assert!(file.parent().expect("parent").is_dir(), "{file:?}");
            }
        }
    }

    #[test]
    fn offices_take_consecutive_ports_from_the_base() {
        let ports =
            ports_from(50051, |_| true, || anyhow::bail!("no port is busy")).expect("ports");
        assert_eq!(ports, default_ports());
    }

    #[test]
    fn replicas_take_the_next_ports_and_never_share_one() {
        let n = Office::ALL.len() as u16;
        let sets =
            replica_ports(50051, 2, |_| true, || anyhow::bail!("no port is busy")).expect("ports");
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0], default_ports());
        for office in Office::ALL {
            assert_eq!(sets[1][&office], sets[0][&office] + n, "{office}");
        }
        // The second replica's first wanted port is busy; the free port offered first is one
        // the first replica already has: it is not taken twice.
        let busy = 50051 + n;
        let mut offered = vec![61001, 50051];
        let sets = replica_ports(50051, 2, |p| p != busy, || Ok(offered.pop().expect("free")))
            .expect("ports");
        assert_eq!(sets[1][&Office::ALL[0]], 61001);
        let mut all: Vec<u16> = sets.iter().flat_map(|s| s.values().copied()).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 2 * Office::ALL.len(), "distinct ports");
        let text = replicas_json(&sets).expect("json");
        let listed: BTreeMap<String, Vec<String>> = serde_json::from_str(&text).expect("parse");
        assert_eq!(
            listed["dispatcher"],
            [
                format!("127.0.0.1:{}", sets[0][&Office::Dispatcher]),
                format!("127.0.0.1:{}", sets[1][&Office::Dispatcher])
            ]
        );
        assert_eq!(listed.len(), Office::ALL.len());
    }

    #[test]
    fn a_further_replica_has_its_own_configuration_and_log() {
        let layout = Layout::new(Path::new("/srv/lychd")).expect("layout");
        assert_eq!(
            layout.replica_config(Office::Ward, 0),
            layout.config(Office::Ward)
        );
        assert_eq!(
            layout.replica_config(Office::Ward, 1),
            Path::new("/srv/lychd/dev/config/ward.2.toml")
        );
        assert_eq!(
            layout.replica_log(Office::Archive, 1),
            Path::new("/srv/lychd/dev/logs/archive.2.log")
        );
        assert_eq!(layout.replicas, Path::new("/srv/lychd/dev/replicas.json"));
    }

    #[test]
    fn a_busy_port_is_replaced_by_a_free_one_and_the_others_keep_theirs() {
        let ward = Office::Ward.default_port();
        let ports = ports_from(50051, |port| port != ward, || Ok(61000)).expect("ports");
        let mut expected = default_ports();
        expected.insert(Office::Ward, 61000);
        assert_eq!(ports, expected);
    }

    #[test]
    fn a_port_in_use_is_not_chosen() {
        let taken = TcpListener::bind(loopback(0)).expect("bind");
        let base = taken.local_addr().expect("addr").port();
        let ports = choose_ports(base, 1).expect("ports").remove(0);
        assert_ne!(ports[&Office::Dispatcher], base);
        assert_eq!(ports.len(), Office::ALL.len());
    }

    #[test]
    fn endpoints_file_names_every_office_at_its_loopback_address() {
        let mut ports = default_ports();
        ports.insert(Office::Archive, 61234);
        let text = endpoints_json(&ports).expect("json");
        assert!(text.ends_with("}\n"), "{text}");
        let endpoints: BTreeMap<String, String> = serde_json::from_str(&text).expect("parse");
        // Every office by name at its loopback port: its default, the Archive's as chosen.
        let expected: BTreeMap<String, String> = Office::ALL
            .map(|o| {
                let port = if o == Office::Archive {
                    61234
                } else {
                    o.default_port()
                };
                (o.name().to_owned(), format!("127.0.0.1:{port}"))
            })
            .into();
        assert_eq!(endpoints, expected);
        assert_eq!(endpoints["dispatcher"], "127.0.0.1:50051");
    }

    #[test]
    fn each_office_listens_on_its_port_uses_its_roles_and_knows_every_peer() {
        let state = tempfile::tempdir().expect("tmp");
        let layout = Layout::new(state.path()).expect("layout");
        for office in Office::ALL {
            let cfg = written(state.path(), office);
            assert_eq!(cfg.server.listen, loopback(office.default_port()));
            assert_eq!(
                cfg.database.url,
                format!(
                    "postgres://{}@127.0.0.1:{PG_PORT}/lychd",
                    office.runtime_role()
                )
            );
            assert_eq!(
                cfg.database.migrate_url,
                format!(
                    "postgres://{}@127.0.0.1:{PG_PORT}/lychd",
                    office.owner_role()
                )
            );
            let peers: BTreeMap<String, String> = cfg
                .peers
                .iter()
                .map(|(name, peer)| (name.clone(), peer.endpoint.clone()))
                .collect();
            let expected: BTreeMap<String, String> = Office::ALL
                .into_iter()
                .filter(|p| *p != office)
                .map(|p| {
                    let endpoint = format!("http://127.0.0.1:{}", p.default_port());
                    (p.name().to_owned(), endpoint)
                })
                .collect();
            assert_eq!(peers, expected, "{office}");
            if office != Office::Ward {
                assert_eq!(
                    cfg.auth.credential_file,
                    Some(layout.credential(office)),
                    "{office}"
                );
            }
        }
    }

    #[test]
    fn ward_names_its_credential_only_once_it_exists() {
        let state = tempfile::tempdir().expect("tmp");
        let layout = Layout::new(state.path()).expect("layout");
        assert_eq!(
            written(state.path(), Office::Ward).auth.credential_file,
            None
        );
        std::fs::write(layout.credential(Office::Ward), "secret").expect("credential");
        assert_eq!(
            written(state.path(), Office::Ward).auth.credential_file,
            Some(layout.credential(Office::Ward))
        );
    }

    #[test]
    fn the_dispatcher_and_the_orchestrator_share_the_simulated_registry() {
        let state = tempfile::tempdir().expect("tmp");
        let dispatcher = written(state.path(), Office::Dispatcher);
        let animator = &dispatcher.office["animators"][0];
        assert_eq!(animator["name"].as_str(), Some(DEV_ANIMATOR));
        assert_eq!(animator["endpoint"].as_str(), Some(RUNTIME));
        assert_eq!(animator["resident"].as_bool(), Some(true));
        let capability = &dispatcher.office["capabilities"][0];
        assert_eq!(capability["animator"].as_str(), Some(DEV_ANIMATOR));
        assert_eq!(capability["model_id"].as_str(), Some(DEV_MODEL));
        let animators = dispatcher.office["animators"].as_array().expect("list");
        assert_eq!(animators.len(), 1 + DEV_GPUS.len() + DEV_PLACED.len());
        assert!(
            animators[1..]
                .iter()
                .all(|a| a.get("conflict_domains").is_none()
                    && a["dedicated"].as_bool() == Some(true))
        );
        let orchestrator = written(state.path(), Office::Orchestrator);
        assert_eq!(
            orchestrator.office["animators"],
            dispatcher.office["animators"]
        );
        assert_eq!(
            orchestrator.office["capabilities"],
            dispatcher.office["capabilities"]
        );
        assert_eq!(
            orchestrator.office["actuator"]["endpoint"].as_str(),
            Some(HOST)
        );
        // The memory-placed pair: on the one declared device, with declared footprints that
        // do not fit together, and no conflict declared.
        let devices = orchestrator.office["devices"].as_array().expect("devices");
        assert_eq!(devices.len(), 1);
        assert_eq!(devices[0]["name"].as_str(), Some(DEV_DEVICE.0));
        let capacity = devices[0]["memory_mib"].as_integer().expect("capacity");
        assert_eq!(capacity as u64, DEV_DEVICE.1);
        let placed: Vec<&toml::Value> = animators
            .iter()
            .filter(|a| a.get("device").is_some())
            .collect();
        assert_eq!(placed.len(), 2);
        let declared: i64 = placed
            .iter()
            .map(|a| a["memory_mib"].as_integer().expect("declared"))
            .sum();
        assert!(declared as u64 > DEV_DEVICE.1, "together they do not fit");
        assert!(
            placed
                .iter()
                .all(|a| a["memory_mib"].as_integer().expect("declared") as u64 <= DEV_DEVICE.1),
            "each fits alone"
        );
        assert!(
            dispatcher.office.get("devices").is_none(),
            "devices are the Orchestrator's"
        );
        for office in Office::ALL
            .into_iter()
            .filter(|o| !matches!(o, Office::Dispatcher | Office::Orchestrator))
        {
            assert!(written(state.path(), office).office.is_empty(), "{office}");
        }
    }
}
