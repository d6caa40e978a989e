//! Shared helpers: a HelmLoop office spawned with its Ward, a tester allowed every helmloop
//! action, the core suite's cases, and small accessors for refusals.

use std::path::{Path, PathBuf};

use lychd_helmloop::conformance::{Case, parse_manifest};
use lychd_helmloop::{Value, to_canonical_vec};
use lychd_proto::helmloop::v1 as pb;
use lychd_proto::helmloop::v1::helm_loop_client::HelmLoopClient;
use lychd_proto::ward::v1::PrincipalKind;
use lychd_runtime::client::PeerChannel;
pub use lychd_testkit::refusal::{field_violations as violations, reason};
use lychd_testkit::{Spawned, spawn_office_with};

pub type Client = HelmLoopClient<PeerChannel>;

/// Every helmloop action on every object the office asks about.
pub const TESTER_ACTIONS: &[(&str, &str)] = &[
    ("helmloop:append_observation", "subject:*"),
    ("helmloop:append_learning_proposal", "subject:*"),
    ("helmloop:append_contract", "subject:*"),
    ("helmloop:append_grant", "subject:*"),
    ("helmloop:append_assurance", "subject:*"),
    ("helmloop:append_promotion", "subject:*"),
    ("helmloop:append_learning_acceptance", "subject:*"),
    ("helmloop:read", "subject:*"),
    ("helmloop:reduce", "subject:*"),
    ("helmloop:reduce", "office:helmloop"),
    ("helmloop:check", "office:helmloop"),
];

pub struct Stack {
    pub spawned: Spawned,
    pub client: Client,
}

/// The office with a 12 MiB message cap (an 8 MiB evaluation input fits) and `knobs` as its
/// `[office]` section; the tester holds [`TESTER_ACTIONS`].
pub async fn stack_with(knobs: &str) -> Stack {
    let table: toml::Table = toml::from_str(knobs).expect("office section is TOML");
    let spawned = spawn_office_with(lychd_helmloop_service::spec(), move |cfg| {
        cfg.server.max_message_bytes = 12 * 1024 * 1024;
        cfg.office = table;
    })
    .await;
    for (action, object) in TESTER_ACTIONS {
        spawned.allow(action, object).await;
    }
    let client = big(HelmLoopClient::new(spawned.channel()));
    Stack { spawned, client }
}

pub async fn stack() -> Stack {
    stack_with("").await
}

/// A client whose message caps carry a maximal bundle.
pub fn big(c: Client) -> Client {
    c.max_decoding_message_size(16 * 1024 * 1024)
        .max_encoding_message_size(16 * 1024 * 1024)
}

impl Stack {
    /// A client presenting `token`.
    pub fn client_with(&self, token: &str) -> Client {
        big(HelmLoopClient::new(self.spawned.channel_with(token)))
    }

    /// Forget every stored record and evaluation (as the superuser: the runtime role may not
    /// delete, and the store never does).
    pub async fn wipe(&self) {
        let mut c = self.spawned.db.superuser().await;
        sqlx::query("TRUNCATE helmloop.records, helmloop.evaluations")
            .execute(&mut c)
            .await
            .expect("truncate");
    }
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every case of the core suite, in manifest order.
pub fn core_cases() -> Vec<Case> {
    let dir = root().join("fixtures/helmloop/core");
    let manifest = std::fs::read(dir.join("manifest.json")).expect("manifest");
    let (_, entries) = parse_manifest(&manifest).expect("manifest parses");
    entries
        .into_iter()
        .map(|(_, file, _)| {
            Case::parse(&std::fs::read(dir.join(file)).expect("case")).expect("case parses")
        })
        .collect()
}

/// The baseline PASS case (14 records).
pub fn baseline() -> Case {
    core_cases()
        .into_iter()
        .find(|c| c.case_id == "core-001-pass-baseline")
        .expect("baseline case")
}

/// Canonical bytes of a value.
pub fn bytes(v: &Value) -> Vec<u8> {
    to_canonical_vec(v).expect("canonical")
}

/// The canonical bytes of a case's evaluation input (nesting counted per record, so a case
/// whose records are nested to the limit still has bytes).
pub fn input_bytes(case: &Case) -> Vec<u8> {
    case.input.canonical_bytes().expect("canonical input")
}

/// The records of an evaluation input, each as canonical bytes.
pub fn records_of(input: &Value) -> Vec<Vec<u8>> {
    input
        .get("records")
        .and_then(Value::as_array)
        .unwrap_or(&[])
        .iter()
        .map(bytes)
        .collect()
}

pub async fn append(
    client: &mut Client,
    records: Vec<Vec<u8>>,
) -> Result<Vec<pb::AppendResult>, tonic::Status> {
    client
        .append_records(pb::AppendRecordsRequest { records })
        .await
        .map(|r| r.into_inner().results)
}

pub async fn reduce(client: &mut Client, input: Vec<u8>) -> pb::ReduceResponse {
    client
        .reduce(pb::ReduceRequest {
            input: input.into(),
            ..Default::default()
        })
        .await
        .expect("reduce")
        .into_inner()
}

/// A copy of `record` with `edit` applied and its record digest sealed again.
pub fn reseal(record: &Value, edit: impl FnOnce(&mut lychd_helmloop::Map)) -> Value {
    let Value::Object(mut m) = record.clone() else {
        panic!("a record is an object")
    };
    edit(&mut m);
    let mut v = Value::Object(m);
    let d = lychd_helmloop::record_digest(&v).expect("digest");
    if let Value::Object(m) = &mut v {
        m.insert("digest", d.render().into());
    }
    v
}

/// The records of `input` of type `t`, each as canonical bytes.
pub fn of_type(input: &Value, t: &str) -> Vec<Vec<u8>> {
    input
        .get("records")
        .and_then(Value::as_array)
        .expect("records")
        .iter()
        .filter(|r| r.get("recordType").and_then(Value::as_str) == Some(t))
        .map(bytes)
        .collect()
}

/// A service principal holding `grants` at the HelmLoop office; its client.
pub async fn principal_with(s: &Stack, name: &str, grants: &[(&str, &str)]) -> Client {
    let (id, token) = s.spawned.principal(PrincipalKind::Service, name).await;
    let mut admin = s.spawned.admin.clone();
    for (action, object) in grants {
        let verb = action.split_once(':').map(|(_, v)| v).unwrap_or(action);
        admin
            .ensure_assignment(&id, action, object, "helmloop", verb)
            .await
            .expect("assign");
    }
    s.client_with(&token)
}

/// A refusal for want of an assignment.
pub fn denied(status: &tonic::Status) {
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert_eq!(reason(status), "NO_ASSIGNMENT");
}
