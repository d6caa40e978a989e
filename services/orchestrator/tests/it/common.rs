//! A sandbox of Ward, Dispatcher and Orchestrator processes sharing one animator registry
//! (the same `[office]` declarations for both offices), each animator a simulated llama.cpp
//! runtime; the Orchestrator's service principal holds what `lychd dev` gives it.

use std::collections::BTreeMap;

use lychd_proto::orchestrator::v1::orchestrator_client::OrchestratorClient;
use lychd_runtime::Office;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::simllama::SimLlama;
use lychd_testkit::{Sandbox, channel_with};

pub type Client = OrchestratorClient<PeerChannel>;

/// One declared animator of a test registry.
pub struct Decl {
    pub name: &'static str,
    /// Extra TOML lines of its `[[office.animators]]` entry (`dedicated`, `resident`,
    /// `conflict_domains`, …).
    pub extra: &'static str,
    /// Serving (WARM) at the start, or stopped (connection refused: COLD).
    pub serving: bool,
}

pub struct Stack {
    /// Kept for the processes' lifetime (and for tests that restart or kill one).
    #[allow(dead_code)]
    pub sandbox: Sandbox,
    /// The operator's session, allowed to read the Orchestrator.
    pub client: Client,
    pub units: BTreeMap<&'static str, SimLlama>,
}

/// The model every test animator serves: `<animator>:chat:m`.
pub const MODEL: &str = "m";

pub async fn stack(decls: &[Decl]) -> Stack {
    let mut units = BTreeMap::new();
    let mut registry = String::from("[office]\n");
    for d in decls {
        let sim = SimLlama::serving(MODEL).await;
        registry.push_str(&format!(
            "[[office.animators]]\nname = \"{}\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\nendpoint = \"{}\"\n{}\n",
            d.name,
            sim.endpoint(),
            d.extra
        ));
        units.insert(d.name, sim);
    }
    for d in decls {
        registry.push_str(&format!(
            "[[office.capabilities]]\nanimator = \"{}\"\nfamily = \"chat\"\nmodel_id = \"{MODEL}\"\n",
            d.name
        ));
    }
    for d in decls {
        if !d.serving {
            units.get_mut(d.name).expect("unit").stop().await;
        }
    }
    let sandbox = Sandbox::builder()
        .office(Office::Dispatcher)
        .office(Office::Orchestrator)
        .peer(Office::Orchestrator, Office::Dispatcher)
        .config_text(Office::Dispatcher, registry.clone())
        .config_text(Office::Orchestrator, registry)
        .start()
        .await;
    let mut admin = sandbox.admin();
    let orchestrator = admin
        .ensure_office_principal("orchestrator")
        .await
        .expect("orchestrator principal");
    for (action, object, purpose) in [
        ("dispatcher:observe", "animator:*", "observe"),
        ("dispatcher:admission", "animator:*", "admission"),
    ] {
        admin
            .ensure_assignment(&orchestrator, action, object, "dispatcher", purpose)
            .await
            .expect("orchestrator grant");
    }
    for (action, object, purpose) in [
        ("orchestrator:read", "topology:*", "read"),
        ("orchestrator:read", "capability:*", "read"),
    ] {
        admin
            .ensure_assignment(
                &sandbox.operator_id,
                action,
                object,
                "orchestrator",
                purpose,
            )
            .await
            .expect("operator grant");
    }
    let client = OrchestratorClient::new(channel_with(
        &sandbox.office(Office::Orchestrator).endpoint(),
        &sandbox.token,
    ));
    Stack {
        sandbox,
        client,
        units,
    }
}
