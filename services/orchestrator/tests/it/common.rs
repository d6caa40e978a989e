//! A sandbox of Ward, Dispatcher and Orchestrator processes sharing one animator registry
//! (the same `[office]` declarations for both offices), each animator a unit of one
//! simulated host — its own process (`lychd-simhost`) — whose control API the Orchestrator's
//! `simulated` actuator drives and the tests inject faults through; the Orchestrator's service principal holds what `lychd dev` gives it, the
//! operator what the tests call.

use std::time::Duration;

use lychd_proto::dispatcher::v1 as dpb;
use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
use lychd_proto::orchestrator::v1 as pb;
use lychd_proto::orchestrator::v1::orchestrator_client::OrchestratorClient;
use lychd_runtime::Office;
use lychd_runtime::client::PeerChannel;
pub use lychd_testkit::refusal::reason;
use lychd_testkit::simllama::SimHostProcess;
use lychd_testkit::{Sandbox, channel_with};

pub type Client = OrchestratorClient<PeerChannel>;

/// One declared animator of a test registry.
pub struct Decl {
    pub name: &'static str,
    /// Extra TOML lines of its `[[office.animators]]` entry (`dedicated`, `resident`,
    /// `conflict_domains`, …).
    pub extra: &'static str,
    /// Running and WARM at the start, or stopped (connection refused: COLD).
    pub serving: bool,
}

pub struct Stack {
    pub sandbox: Sandbox,
    /// The operator's session, allowed to read, transition and recover.
    pub client: Client,
    /// The operator's session at the Dispatcher (lease, read).
    pub dispatcher: DispatcherClient<PeerChannel>,
    pub host: SimHostProcess,
}

/// The wait every test asks for (the office's default maximum under the 30 s request timeout):
/// these tests read the outcome from the answer, as before transitions were resources.
pub const WAIT: Option<u32> = Some(20_000);

/// A fresh request id.
pub fn rid() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The model every test animator serves: `<animator>:chat:m`.
pub const MODEL: &str = "m";

/// Budgets short enough for tests.
pub const KNOBS: &str = "planning_timeout_ms = 3000\ndrain_timeout_ms = 3000\nwarmup_timeout_ms = 1500\npoll_interval_ms = 50\nstream_recheck_interval_ms = 500\nhost_lease_ttl_ms = 2000\n";

pub async fn stack(decls: &[Decl]) -> Stack {
    stack_with(decls, "").await
}

/// [`stack`] with more Orchestrator `[office]` settings (`knobs`) ahead of [`KNOBS`].
pub async fn stack_with(decls: &[Decl], knobs: &str) -> Stack {
    stack_actuated(decls, knobs, |host, _| {
        format!(
            "[office.actuator]\nkind = \"simulated\"\nendpoint = \"{}\"\n",
            host.control_endpoint()
        )
    })
    .await
}

/// [`stack_with`] with the `[office.actuator]` section `actuator` writes (given the simulated
/// host and the registry text).
pub async fn stack_actuated(
    decls: &[Decl],
    knobs: &str,
    actuator: impl FnOnce(&SimHostProcess, &str) -> String,
) -> Stack {
    stack_routed(decls, knobs, actuator, None).await
}

/// [`stack_actuated`], the Orchestrator's database reached through `proxy` if given.
pub async fn stack_routed(
    decls: &[Decl],
    knobs: &str,
    actuator: impl FnOnce(&SimHostProcess, &str) -> String,
    proxy: Option<&lychd_testkit::FaultProxy>,
) -> Stack {
    let units: Vec<(&str, &[&str])> = decls.iter().map(|d| (d.name, &[MODEL][..])).collect();
    let running: Vec<&str> = decls.iter().filter(|d| d.serving).map(|d| d.name).collect();
    let host = SimHostProcess::spawn(&lychd_testkit::bin_path("lychd-simhost"), &units, &running)
        .await
        .expect("the simulated host serves");
    let mut registry = String::new();
    for d in decls {
        registry.push_str(&format!(
            "[[office.animators]]\nname = \"{}\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"{}\"\n{}\n",
            d.name,
            host.endpoint(d.name).await,
            d.extra
        ));
    }
    for d in decls {
        registry.push_str(&format!(
            "[[office.capabilities]]\nanimator = \"{}\"\nfamily = \"chat\"\nmodel_id = \"{MODEL}\"\n",
            d.name
        ));
    }
    // Test budgets, unless `knobs` sets them.
    let defaults: String = KNOBS
        .lines()
        .filter(|l| {
            let key = l.split('=').next().unwrap_or_default().trim();
            !knobs.lines().any(|k| k.trim_start().starts_with(key))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let orchestrator = format!(
        "[office]\n{knobs}{defaults}\n{}\n{registry}",
        actuator(&host, &registry)
    );
    let mut builder = Sandbox::builder()
        .office(Office::Dispatcher)
        .office(Office::Orchestrator)
        .peer(Office::Orchestrator, Office::Dispatcher)
        .config_text(Office::Dispatcher, format!("[office]\n{registry}"))
        .config_text(Office::Orchestrator, orchestrator);
    if let Some(proxy) = proxy {
        builder = builder.route_database(Office::Orchestrator, proxy);
    }
    let sandbox = builder.start().await;
    let mut admin = sandbox.admin();
    let orchestrator = admin
        .ensure_office_principal("orchestrator")
        .await
        .expect("orchestrator principal");
    for (action, object) in [
        ("dispatcher:observe", "animator:*"),
        ("dispatcher:admission", "animator:*"),
    ] {
        let purpose = action.split_once(':').expect("action").1;
        admin
            .ensure_assignment(&orchestrator, action, object, "dispatcher", purpose)
            .await
            .expect("orchestrator grant");
    }
    for (action, object, audience) in [
        ("orchestrator:read", "topology:*", "orchestrator"),
        ("orchestrator:read", "capability:*", "orchestrator"),
        ("orchestrator:read", "transition:*", "orchestrator"),
        ("orchestrator:read_all", "transition:*", "orchestrator"),
        ("orchestrator:read", "containment:*", "orchestrator"),
        ("orchestrator:transition", "capability:*", "orchestrator"),
        ("orchestrator:recover", "containment:*", "orchestrator"),
        ("orchestrator:cancel", "transition:*", "orchestrator"),
        ("dispatcher:lease", "capability:*", "dispatcher"),
        ("dispatcher:read", "capability:*", "dispatcher"),
    ] {
        let purpose = action.split_once(':').expect("action").1;
        admin
            .ensure_assignment(&sandbox.operator_id, action, object, audience, purpose)
            .await
            .expect("operator grant");
    }
    let client = OrchestratorClient::new(channel_with(
        &sandbox.office(Office::Orchestrator).endpoint(),
        &sandbox.token,
    ));
    let dispatcher = DispatcherClient::new(channel_with(
        &sandbox.office(Office::Dispatcher).endpoint(),
        &sandbox.token,
    ));
    Stack {
        sandbox,
        client,
        dispatcher,
        host,
    }
}

/// Wait until `holds` answers true, polling every 10 ms for at most 10 s (`what` names it).
pub async fn eventually<F: std::future::Future<Output = bool>>(
    what: &str,
    mut holds: impl FnMut() -> F,
) {
    let t = std::time::Instant::now();
    while !holds().await {
        assert!(t.elapsed() < Duration::from_secs(10), "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

impl Stack {
    /// Kill the Orchestrator (SIGKILL) and start it again while `pending` is in flight: its
    /// caller loses the answer. Then a fresh client.
    pub async fn kill_orchestrator<T, E>(
        &mut self,
        pending: tokio::task::JoinHandle<Result<T, E>>,
    ) {
        self.sandbox
            .restart(Office::Orchestrator, nix::sys::signal::Signal::SIGKILL)
            .await;
        assert!(
            pending.await.expect("task").is_err(),
            "the caller lost its answer"
        );
        self.reconnect();
    }

    /// A fresh client (after the Orchestrator restarted).
    pub fn reconnect(&mut self) {
        self.client = OrchestratorClient::new(channel_with(
            &self.sandbox.office(Office::Orchestrator).endpoint(),
            &self.sandbox.token,
        ));
    }

    pub async fn transition(
        &self,
        key: &str,
        priority: u32,
        admission_timeout_s: Option<f64>,
    ) -> Result<pb::TransitionOutcome, tonic::Status> {
        self.client
            .clone()
            .request_transition(pb::RequestTransitionRequest {
                request_id: rid(),
                wait_ms: WAIT,
                capability_key: key.into(),
                priority,
                admission_timeout_s,
            })
            .await
            .map(|r| r.into_inner().outcome.expect("an outcome"))
    }

    /// Open closures per animator, from the Dispatcher.
    pub async fn open_closures(&self, animator: &str) -> u32 {
        self.dispatcher
            .clone()
            .list_capabilities(dpb::ListCapabilitiesRequest {})
            .await
            .expect("list")
            .into_inner()
            .admission
            .iter()
            .find(|a| a.animator == animator)
            .map(|a| a.open_closures)
            .expect("declared")
    }

    pub async fn containments(&self) -> Vec<pb::Containment> {
        self.client
            .clone()
            .list_containments(pb::ListContainmentsRequest {
                include_recovered: false,
            })
            .await
            .expect("list")
            .into_inner()
            .containments
    }

    /// Watch every phase from now on.
    pub async fn watch(&self) -> tonic::Streaming<pb::TransitionEvent> {
        self.client
            .clone()
            .watch_transitions(pb::WatchTransitionsRequest::default())
            .await
            .expect("watch")
            .into_inner()
    }
}

/// The next event within 10 s.
pub async fn next(events: &mut tonic::Streaming<pb::TransitionEvent>) -> pb::TransitionEvent {
    tokio::time::timeout(Duration::from_secs(10), events.message())
        .await
        .expect("an event within 10 s")
        .expect("stream ok")
        .expect("stream open")
}

/// a, b, c: dedicated, conflicts omitted (default-exclusive: pairwise in conflict); b runs.
pub fn three(b_serving: bool) -> Vec<Decl> {
    vec![
        Decl {
            name: "a",
            extra: "dedicated = true",
            serving: false,
        },
        Decl {
            name: "b",
            extra: "dedicated = true",
            serving: b_serving,
        },
        Decl {
            name: "c",
            extra: "dedicated = true",
            serving: false,
        },
    ]
}
