//! Shared helpers: a Dispatcher spawned on a registry built from simulated llama.cpp
//! endpoints, a tester allowed every dispatcher action, an Orchestrator principal, and small
//! accessors for answers and refusals.

use std::sync::Arc;

use lychd_proto::dispatcher::v1 as pb;
use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
use lychd_proto::ward::v1::PrincipalKind;
use lychd_runtime::Office;
use lychd_runtime::client::PeerChannel;
use lychd_runtime::server::{InProcess, ServeContext};
pub use lychd_testkit::refusal::{field_violations as fields, reason};
use lychd_testkit::{Spawned, spawn_office_with};

pub type Client = DispatcherClient<PeerChannel>;

/// A spawned Dispatcher with its tester client (allowed every dispatcher action) and an
/// Orchestrator client (allowed `dispatcher:admission` and `dispatcher:observe`).
pub struct Stack {
    pub spawned: Spawned,
    pub client: Client,
    pub orchestrator: Client,
    pub orchestrator_token: String,
}

pub const TESTER_ACTIONS: &[(&str, &str)] = &[
    ("dispatcher:lease", "capability:*"),
    ("dispatcher:lease", "lease:*"),
    ("dispatcher:read", "capability:*"),
    ("dispatcher:read", "lease:*"),
    ("dispatcher:read", "event:*"),
    ("dispatcher:observe", "animator:*"),
];

/// What `lychd dev` gives the Orchestrator's service principal (no `closure:*`: reopening is
/// authorized on the closure's animators).
const ORCHESTRATOR_ACTIONS: &[(&str, &str)] = &[
    ("dispatcher:admission", "animator:*"),
    ("dispatcher:observe", "animator:*"),
];

/// Spawn with `office` as the `[office]` TOML section body (without the `[office]` header).
pub async fn stack(office: &str) -> Stack {
    stack_with(office, "").await
}

/// [`stack`] with more `[office]` settings (`knobs`, e.g. `stream_limit = 2`) before the
/// registry.
pub async fn stack_with(office: &str, knobs: &str) -> Stack {
    stack_adjusted(office, knobs, |_| {}).await
}

/// [`stack_with`], with a chance to adjust the rest of the configuration (the database URL
/// through a fault proxy).
pub async fn stack_adjusted(
    office: &str,
    knobs: &str,
    adjust: impl FnOnce(&mut lychd_runtime::config::OfficeConfig),
) -> Stack {
    let table: toml::Table =
        toml::from_str(&format!("{knobs}\n{office}")).expect("test registry is TOML");
    let spawned = spawn_office_with(lychd_dispatcher::spec(), move |cfg| {
        cfg.office = table;
        adjust(cfg);
    })
    .await;
    for (action, object) in TESTER_ACTIONS {
        spawned.allow(action, object).await;
    }
    let (orch_id, orchestrator_token) = spawned
        .principal(PrincipalKind::Service, "orchestrator")
        .await;
    let mut admin = spawned.admin.clone();
    for (action, object) in ORCHESTRATOR_ACTIONS {
        let verb = action.split_once(':').map(|(_, v)| v).unwrap_or(action);
        admin
            .ensure_assignment(&orch_id, action, object, "dispatcher", verb)
            .await
            .expect("assign orchestrator");
    }
    let client = DispatcherClient::new(spawned.channel());
    let orchestrator = DispatcherClient::new(spawned.channel_with(&orchestrator_token));
    Stack {
        spawned,
        client,
        orchestrator,
        orchestrator_token,
    }
}

impl Stack {
    /// Another Dispatcher serving the same database and registry (a second replica).
    pub async fn replica(&self) -> (InProcess, Client, Client) {
        serve_again(
            &self.spawned.ctx,
            &self.spawned.token,
            &self.orchestrator_token,
        )
        .await
    }
}

/// Serve the Dispatcher of `ctx` again (same database, registry and Ward) with a fresh
/// connection pool: a replica, or the office after a restart. Returns the server and clients
/// for the tester and the Orchestrator.
pub async fn serve_again(
    ctx: &ServeContext,
    tester_token: &str,
    orchestrator_token: &str,
) -> (InProcess, Client, Client) {
    let opts =
        lychd_runtime::db::connect_options(&ctx.config.database.url, None, Office::Dispatcher)
            .expect("runtime url");
    let pool = lychd_runtime::db::pool(opts, 8)
        .await
        .expect("runtime role connects");
    let ctx = ServeContext {
        pool,
        config: Arc::new((*ctx.config).clone()),
        ..ctx.clone()
    };
    let server = InProcess::start(ctx, lychd_dispatcher::spec().start)
        .await
        .expect("dispatcher starts");
    let endpoint = server.endpoint();
    let channel = |token: &str| {
        let outgoing = lychd_runtime::client::Outgoing::new(Some(
            lychd_auth::credentials::SessionSource::fixed(secrecy::SecretString::from(
                token.to_owned(),
            )),
        ));
        lychd_runtime::client::peer_channel(&endpoint, outgoing).expect("endpoint")
    };
    let tester = DispatcherClient::new(channel(tester_token));
    let orch = DispatcherClient::new(channel(orchestrator_token));
    (server, tester, orch)
}

/// One `[[animators]]` entry.
pub fn animator(name: &str, endpoint: &str, extra: &str) -> String {
    format!(
        "[[animators]]\nname = \"{name}\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"{endpoint}\"\n{extra}\n"
    )
}

/// One `[[capabilities]]` entry.
pub fn capability(animator: &str, family: &str, model: &str, extra: &str) -> String {
    format!(
        "[[capabilities]]\nanimator = \"{animator}\"\nfamily = \"{family}\"\nmodel_id = \"{model}\"\n{extra}\n"
    )
}

pub fn by_family(family: pb::Family) -> pb::Demand {
    pb::Demand {
        family: family as i32,
        ..Default::default()
    }
}

pub fn chat_model(model: &str) -> pb::Demand {
    pb::Demand {
        family: pb::Family::Chat as i32,
        model_id: model.into(),
        ..Default::default()
    }
}

pub fn exact(key: &str) -> pb::Demand {
    pb::Demand {
        capability_key: key.into(),
        ..Default::default()
    }
}

pub fn request(demand: pb::Demand) -> pb::LeaseRequest {
    pb::LeaseRequest {
        demand: Some(demand),
        holder: "worker-1".into(),
        run_id: "run-1".into(),
        attempt_id: "1".into(),
        priority: 50,
        ttl_seconds: 0,
        request_id: String::new(),
    }
}

pub type Outcome = pb::lease_response::Outcome;

pub type Ward = lychd_proto::ward::v1::ward_client::WardClient<PeerChannel>;

/// Another principal with `grants` (action, object) at the Dispatcher: its id, session token
/// and a client presenting it.
pub async fn principal(s: &Stack, name: &str, grants: &[(&str, &str)]) -> (String, String, Client) {
    let (id, token) = s.spawned.principal(PrincipalKind::Human, name).await;
    let mut admin = s.spawned.admin.clone();
    for (action, object) in grants {
        let verb = action.split_once(':').map(|(_, v)| v).unwrap_or(action);
        admin
            .ensure_assignment(&id, action, object, "dispatcher", verb)
            .await
            .expect("assign");
    }
    let client = DispatcherClient::new(s.spawned.channel_with(&token));
    (id, token, client)
}

/// Grant `principal_id` one more action at the Dispatcher.
pub async fn grant(s: &Stack, principal_id: &str, action: &str, object: &str) {
    let verb = action.split_once(':').map(|(_, v)| v).unwrap_or(action);
    s.spawned
        .admin
        .clone()
        .ensure_assignment(principal_id, action, object, "dispatcher", verb)
        .await
        .expect("assign");
}

/// A Ward client of a principal allowed to administer Ward (revoke, unassign) and to resolve
/// tokens presented to the Dispatcher (its session is bound to Ward).
pub async fn warden(s: &Stack) -> Ward {
    let (id, token) = s
        .spawned
        .principal_at(PrincipalKind::Human, "warden", &["ward"])
        .await;
    let mut admin = s.spawned.admin.clone();
    admin
        .ensure_assignment(&id, "ward:administer", "principal:*", "ward", "administer")
        .await
        .expect("assign ward:administer");
    admin
        .ensure_assignment(&id, "ward:decide", "decision:dispatcher", "ward", "decide")
        .await
        .expect("assign ward:decide");
    Ward::new(lychd_testkit::channel_with(
        &s.spawned.ward_endpoint(),
        &token,
    ))
}

/// Revoke the session `token` (Ward's `Revoke` by session id).
pub async fn revoke_session(warden: &mut Ward, token: &str) {
    use lychd_proto::ward::v1::authenticate_response::Result as Resolved;
    let own = warden
        .authenticate(lychd_proto::ward::v1::AuthenticateRequest {
            token: token.to_owned(),
            audience: "dispatcher".into(),
        })
        .await
        .expect("the warden resolves a token presented to the dispatcher")
        .into_inner();
    let Some(Resolved::Authenticated(a)) = own.result else {
        panic!("token did not resolve: {own:?}");
    };
    warden
        .revoke(lychd_proto::ward::v1::RevokeRequest {
            target: Some(lychd_proto::ward::v1::revoke_request::Target::SessionId(
                a.session_id,
            )),
        })
        .await
        .expect("revoke session");
}

pub use lychd_testkit::unassign;

pub async fn lease(c: &mut Client, demand: pb::Demand) -> Outcome {
    lease_req(c, request(demand)).await
}

pub async fn lease_req(c: &mut Client, req: pb::LeaseRequest) -> Outcome {
    c.lease(req)
        .await
        .expect("lease answers in-band")
        .into_inner()
        .outcome
        .expect("an outcome")
}

pub fn granted(o: Outcome) -> pb::Grant {
    match o {
        Outcome::Granted(g) => g,
        other => panic!("expected a grant, got {other:?}"),
    }
}

pub fn transition(o: Outcome) -> pb::HardwareTransitionRequired {
    match o {
        Outcome::HardwareTransitionRequired(t) => t,
        other => panic!("expected a transition, got {other:?}"),
    }
}

pub fn unavailable(o: Outcome) -> pb::Unavailable {
    match o {
        Outcome::Unavailable(u) => u,
        other => panic!("expected unavailable, got {other:?}"),
    }
}

pub async fn leases(c: &mut Client, include_inactive: bool) -> Vec<pb::LeaseInfo> {
    c.list_leases(pb::ListLeasesRequest {
        include_inactive,
        ..Default::default()
    })
    .await
    .expect("list leases")
    .into_inner()
    .leases
}

/// The next event of a follow stream, within 5 s.
pub async fn next_event(stream: &mut tonic::Streaming<pb::DispatchEvent>) -> pb::DispatchEvent {
    use tokio_stream::StreamExt;
    tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
        .await
        .expect("event in time")
        .expect("open")
        .expect("ok")
}

pub async fn events(c: &mut Client) -> Vec<pb::DispatchEvent> {
    use tokio_stream::StreamExt;
    let mut s = c
        .watch_dispatch_events(pb::WatchDispatchEventsRequest {
            after_sequence: 0,
            follow: false,
        })
        .await
        .expect("watch")
        .into_inner();
    let mut out = Vec::new();
    while let Some(e) = s.next().await {
        out.push(e.expect("event"));
    }
    out
}

pub async fn close(
    c: &mut Client,
    request_id: &str,
    animators: &[&str],
) -> pb::CloseAdmissionResponse {
    c.close_admission(pb::CloseAdmissionRequest {
        request_id: request_id.into(),
        animators: animators.iter().map(|a| (*a).to_owned()).collect(),
        reason: "test transition".into(),
    })
    .await
    .expect("close")
    .into_inner()
}

pub async fn reopen(c: &mut Client, token: &str) -> pb::ReopenAdmissionResponse {
    c.reopen_admission(pb::ReopenAdmissionRequest {
        closure_token: token.into(),
    })
    .await
    .expect("reopen")
    .into_inner()
}

pub async fn observe(c: &mut Client, animators: &[&str]) -> Vec<pb::AnimatorObservation> {
    c.observe_animators(pb::ObserveAnimatorsRequest {
        animators: animators.iter().map(|a| (*a).to_owned()).collect(),
    })
    .await
    .expect("observe")
    .into_inner()
    .animators
}

pub fn phase_of(obs: &[pb::AnimatorObservation], key: &str) -> (pb::Phase, String) {
    let o = obs
        .iter()
        .flat_map(|a| a.observations.iter())
        .find(|o| o.capability_key == key)
        .unwrap_or_else(|| panic!("no observation of {key}"));
    (
        pb::Phase::try_from(o.phase).expect("known phase"),
        o.reason.clone(),
    )
}
