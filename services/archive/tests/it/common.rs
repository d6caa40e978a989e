//! Shared helpers: an Archive spawned with its Ward, a tester allowed every archive action on
//! every namespace, and small builders and accessors.

use lychd_proto::archive::v1 as pb;
use lychd_proto::archive::v1::archive_client::ArchiveClient;
use lychd_proto::ward::v1::PrincipalKind;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::client::PeerChannel;
pub use lychd_testkit::refusal::{assert_refused as refused, field_violations as fields, reason};
use lychd_testkit::{Spawned, spawn_office};

pub type Client = ArchiveClient<PeerChannel>;
pub type Ward = WardClient<PeerChannel>;

pub const ALL_ACTIONS: &[&str] = &[
    "archive:intake",
    "archive:lifecycle",
    "archive:recall",
    "archive:resolve",
    "archive:inspect",
];

pub struct Stack {
    pub spawned: Spawned,
    pub client: Client,
}

/// An Archive whose tester holds every archive action on `namespace:*`.
pub async fn stack() -> Stack {
    let spawned = spawn_office(lychd_archive::spec()).await;
    for action in ALL_ACTIONS {
        spawned.allow(action, "namespace:*").await;
    }
    let client = ArchiveClient::new(spawned.channel());
    Stack { spawned, client }
}

impl Stack {
    /// Another principal holding `grants` (action, object) at the Archive: its id and client.
    pub async fn principal(&self, name: &str, grants: &[(&str, &str)]) -> (String, Client) {
        let (id, token) = self.spawned.principal(PrincipalKind::Human, name).await;
        let mut admin = self.spawned.admin.clone();
        for (action, object) in grants {
            let verb = action.split_once(':').map(|(_, v)| v).unwrap_or(action);
            admin
                .ensure_assignment(&id, action, object, "archive", verb)
                .await
                .expect("assign");
        }
        (id, ArchiveClient::new(self.spawned.channel_with(&token)))
    }

    /// A Ward client of a principal allowed to administer Ward.
    pub async fn warden(&self) -> Ward {
        let (id, token) = self
            .spawned
            .principal_at(PrincipalKind::Human, "warden", &["ward"])
            .await;
        self.spawned
            .admin
            .clone()
            .ensure_assignment(&id, "ward:administer", "principal:*", "ward", "administer")
            .await
            .expect("assign ward:administer");
        Ward::new(lychd_testkit::channel_with(
            &self.spawned.ward_endpoint(),
            &token,
        ))
    }

    /// A superuser connection to the office's test database.
    pub async fn db(&self) -> sqlx::PgConnection {
        self.spawned.db.superuser().await
    }
}

pub use lychd_testkit::unassign;

pub fn observed() -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: 1_780_000_000,
        nanos: 0,
    }
}

/// An intake request of `text` under `source_key`@`source_revision`.
pub fn note(ns: &str, request_id: &str, key: &str, rev: &str, text: &str) -> pb::IntakeRequest {
    pb::IntakeRequest {
        namespace: ns.into(),
        request_id: request_id.into(),
        source_key: key.into(),
        source_revision: rev.into(),
        text: text.into(),
        producer: "tester".into(),
        classification: "public".into(),
        observed_at: Some(observed()),
    }
}

pub async fn intake(c: &mut Client, req: pb::IntakeRequest) -> pb::NoteInfo {
    c.intake(req)
        .await
        .expect("intake")
        .into_inner()
        .note
        .expect("a note")
}

pub fn change(n: &pb::NoteInfo) -> pb::LifecycleRequest {
    pb::LifecycleRequest {
        namespace: n.namespace.clone(),
        revision_id: n.revision_id.clone(),
        expected_version: n.version,
    }
}

pub async fn promote(c: &mut Client, n: &pb::NoteInfo) -> pb::NoteInfo {
    c.promote(change(n))
        .await
        .expect("promote")
        .into_inner()
        .note
        .expect("a note")
}

pub async fn revoke(c: &mut Client, n: &pb::NoteInfo) -> pb::NoteInfo {
    c.revoke(change(n))
        .await
        .expect("revoke")
        .into_inner()
        .note
        .expect("a note")
}

pub async fn archive(c: &mut Client, n: &pb::NoteInfo) -> pb::NoteInfo {
    c.archive_note(change(n))
        .await
        .expect("archive")
        .into_inner()
        .note
        .expect("a note")
}

/// Intake and promote in one go.
pub async fn promoted(c: &mut Client, ns: &str, key: &str, rev: &str, text: &str) -> pb::NoteInfo {
    let n = intake(c, note(ns, &format!("{key}@{rev}"), key, rev, text)).await;
    promote(c, &n).await
}

pub fn recall_req(ns: &str, request_id: &str, query: &str) -> pb::RecallRequest {
    pb::RecallRequest {
        namespace: ns.into(),
        request_id: request_id.into(),
        query: query.into(),
        purpose: "answer".into(),
        max_results: 10,
        max_chars: 10_000,
    }
}

pub async fn recall(c: &mut Client, ns: &str, request_id: &str, query: &str) -> pb::RecallResponse {
    c.recall(recall_req(ns, request_id, query))
        .await
        .expect("recall")
        .into_inner()
}

pub async fn resolve(
    c: &mut Client,
    ns: &str,
    request_id: &str,
) -> Result<pb::ResolveReceiptResponse, tonic::Status> {
    c.resolve_receipt(pb::ResolveReceiptRequest {
        namespace: ns.into(),
        request_id: request_id.into(),
    })
    .await
    .map(|r| r.into_inner())
}

pub fn ids(notes: &[pb::RecalledNote]) -> Vec<String> {
    notes
        .iter()
        .map(|n| n.note.as_ref().expect("note").revision_id.clone())
        .collect()
}
