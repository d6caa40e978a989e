//! Independent completion verification beside a test's offices (issue 28 item 3): the HelmLoop
//! office as a real process on the test's database, Ward delivering the owner records it issues
//! to it, the verified office's principal allowed to append its observations, propose and
//! reduce, and an accountable owner ([`OWNER`]) who may approve in Ward what is proposed for
//! the outcomes it owns.
//!
//! A test that verifies a run in its own way (the owner silent, denying, an observer's evidence)
//! decides through [`Verification::owner`]; one whose subject is something else (steps, budgets,
//! effects, replicas) lets [`Verification::approve_all`] approve every owner-record and
//! promotion consent as it is proposed, so its runs succeed on a HelmLoop PASS they did not
//! produce, as they must. The owner's approval never stands in for the reduction: HelmLoop
//! still reduces the stored records, and a run succeeds only on its PASS.

use std::time::Duration;

use lychd_auth::admin::WardAdmin;
use lychd_proto::ward::v1 as wpb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::Office;
use lychd_runtime::client::PeerChannel;

use crate::process::{SandboxBuilder, start_office, write_config};
use crate::{OfficeProcess, Sandbox, Spawned, TestDb, channel_with, run_office, wait_serving};

/// The accountable owner every verified test workflow names (`"verification":{"owner":…}`).
pub const OWNER: &str = "owner-alice";

/// The consents the owner settles: the run's owner records, then its promotion.
pub const OWNER_TOOLS: [&str; 2] = ["helmloop.issue", "helmloop.promote"];

/// What the verified office's principal holds at HelmLoop and Ward (what `lychd provision`
/// gives the Runner for its verifier).
pub const VERIFIED_GRANTS: &[(&str, &str)] = &[
    ("helmloop:append_observation", "subject:*"),
    ("helmloop:read", "subject:*"),
    ("helmloop:reduce", "subject:*"),
    ("ward:propose", "effect:helmloop"),
];

/// Ward's own principal at HelmLoop (what `lychd dev` grants it): the owner records it issues.
pub const WARD_GRANTS: &[(&str, &str)] = &[
    ("helmloop:append_contract", "subject:*"),
    ("helmloop:append_grant", "subject:*"),
    ("helmloop:append_assurance", "subject:*"),
    ("helmloop:append_promotion", "subject:*"),
    ("helmloop:append_learning_acceptance", "subject:*"),
    ("helmloop:read", "subject:*"),
];

/// How often Ward retries delivering issued owner records (ms).
const PROMOTION_RETRY_MS: u64 = 100;

/// The verifier's peers and the owner, beside a test's offices.
pub struct Verification {
    /// The HelmLoop office (its own process when started beside an in-process office; `None`
    /// when it is part of a [`Sandbox`]).
    pub helmloop: Option<OfficeProcess>,
    pub helmloop_endpoint: String,
    pub owner_id: String,
    /// The owner's Ward client (the owner may review consents and approve `effect:helmloop`).
    pub owner: WardClient<PeerChannel>,
    /// The verified office's standing credential: a session for its verifier may be exchanged
    /// with it for Ward and HelmLoop.
    pub credential: String,
    approver: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for Verification {
    fn drop(&mut self) {
        if let Some(a) = self.approver.take() {
            a.abort();
        }
    }
}

impl SandboxBuilder {
    /// The sandbox with the HelmLoop office, Ward delivering owner records to it and `office`
    /// calling it; then [`Verification::in_sandbox`].
    pub fn verified(self, office: Office) -> Self {
        self.office(Office::HelmLoop)
            .peer(office, Office::HelmLoop)
            .peer(Office::Ward, Office::HelmLoop)
    }
}

async fn assign(admin: &mut WardAdmin, id: &str, grants: &[(&str, &str)]) {
    for (action, object) in grants {
        let (aud, purpose) = action.split_once(':').expect("invariant: audience:verb");
        admin
            .ensure_assignment(id, action, object, aud, purpose)
            .await
            .expect("assign");
    }
}

/// Restart `ward` (SIGTERM) on its port with `extra` appended to its configuration, and its
/// delivery of issued records retried every [`PROMOTION_RETRY_MS`] (in the `[office]` section
/// it has, or a new one).
async fn reconfigure_ward(ward: &mut OfficeProcess, extra: &str) {
    let mut text = std::fs::read_to_string(&ward.config_path).expect("ward config");
    let retry = format!("promotion_retry_interval_ms = {PROMOTION_RETRY_MS}\n");
    if text.contains("\n[office]\n") {
        text = text.replacen("\n[office]\n", &format!("\n[office]\n{retry}"), 1);
    } else {
        text.push_str(&format!("\n[office]\n{retry}"));
    }
    text.push_str(extra);
    std::fs::write(&ward.config_path, text).expect("ward config");
    ward.signal(nix::sys::signal::Signal::SIGTERM);
    ward.wait_exit(Duration::from_secs(30))
        .await
        .expect("ward exits");
    let mut process = start_office(Office::Ward, &ward.config_path, ward.addr.port(), &None).await;
    wait_serving(&mut process).await;
    *ward = process;
}

/// Ward's standing credential, written to `dir`, and its grants at HelmLoop.
async fn ward_credential(admin: &mut WardAdmin, dir: &std::path::Path) -> std::path::PathBuf {
    let ward_id = admin.ensure_office_principal("ward").await.expect("ward");
    assign(admin, &ward_id, WARD_GRANTS).await;
    let credential = admin.issue_standing(&ward_id).await.expect("credential");
    let file = dir.join("ward-self.credential");
    std::fs::write(&file, credential).expect("write");
    file
}

/// The owner, enrolled, allowed to review and approve, with a Ward session.
async fn owner(admin: &mut WardAdmin, ward: &str) -> (String, WardClient<PeerChannel>) {
    let id = admin
        .ensure_principal(wpb::PrincipalKind::Human, OWNER)
        .await
        .expect("owner");
    assign(
        admin,
        &id,
        &[
            ("ward:approve", "effect:helmloop"),
            ("ward:review", "consent:*"),
        ],
    )
    .await;
    let credential = admin.issue_standing(&id).await.expect("credential");
    let channel = lychd_runtime::client::channel(ward).expect("endpoint");
    let session = lychd_auth::admin::exchange(channel, &credential, 0, &["ward"])
        .await
        .expect("owner session");
    (id, WardClient::new(channel_with(ward, &session.token)))
}

/// The verified office's principal: its grants and a standing credential.
async fn verified_office(admin: &mut WardAdmin, office: Office) -> String {
    let id = admin
        .ensure_office_principal(office.name())
        .await
        .expect("office principal");
    assign(admin, &id, VERIFIED_GRANTS).await;
    admin.issue_standing(&id).await.expect("credential")
}

impl Verification {
    /// Beside `spawned` (an in-process office, its Ward a process): the HelmLoop office started
    /// on `port` (the office may have been configured to call it there before it started:
    /// [`free_port`]; 0: a port picked now, the shortest time for another process to take it),
    /// migrated on the test's database; Ward restarted to deliver to it.
    pub async fn beside(spawned: &mut Spawned, port: u16) -> Verification {
        let port = if port == 0 { free_port() } else { port };
        let dir = tempfile::tempdir().expect("temp dir");
        let mut admin = spawned.admin.clone();
        let ward_endpoint = spawned.ward_endpoint();
        let helmloop =
            start_helmloop(&spawned.db, &mut admin, dir.path(), port, &ward_endpoint).await;
        let endpoint = helmloop.endpoint();
        let file = ward_credential(&mut admin, dir.path()).await;
        let ward = spawned
            .ward
            .as_mut()
            .expect("the spawned office's Ward is a process");
        reconfigure_ward(
            ward,
            &format!(
                "\n[peers.helmloop]\nendpoint = \"{endpoint}\"\n\n[auth]\ncredential_file = \"{}\"\n",
                file.display()
            ),
        )
        .await;
        let credential = verified_office(&mut admin, spawned.office).await;
        let (owner_id, owner) = owner(&mut admin, &ward_endpoint).await;
        Verification {
            helmloop: Some(helmloop),
            helmloop_endpoint: endpoint,
            owner_id,
            owner,
            credential,
            approver: None,
            _dir: dir,
        }
    }

    /// In a sandbox built with [`SandboxBuilder::verified`] for `office`: the grants, Ward
    /// restarted with its own credential (to deliver what it issues), the owner enrolled.
    pub async fn in_sandbox(sandbox: &mut Sandbox, office: Office) -> Verification {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut admin = sandbox.admin();
        let file = ward_credential(&mut admin, dir.path()).await;
        let ward = sandbox.office_mut(Office::Ward);
        reconfigure_ward(
            ward,
            &format!("\n[auth]\ncredential_file = \"{}\"\n", file.display()),
        )
        .await;
        let mut admin = sandbox.admin();
        let credential = verified_office(&mut admin, office).await;
        let (owner_id, owner) = owner(&mut admin, &sandbox.office(Office::Ward).endpoint()).await;
        Verification {
            helmloop: None,
            helmloop_endpoint: sandbox.office(Office::HelmLoop).endpoint(),
            owner_id,
            owner,
            credential,
            approver: None,
            _dir: dir,
        }
    }

    /// From now on the owner approves every owner-record and promotion consent proposed (of
    /// any run), as it is seen pending; the reduction at HelmLoop still decides.
    pub fn approve_all(&mut self) {
        let mut owner = self.owner.clone();
        self.approver = Some(tokio::spawn(async move {
            loop {
                approve_pending(&mut owner).await;
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }));
    }

    /// Stop approving (what is pending stays pending).
    pub fn stop_approving(&mut self) {
        if let Some(a) = self.approver.take() {
            a.abort();
        }
    }

    pub async fn stop(mut self) {
        self.stop_approving();
        if let Some(h) = self.helmloop.take() {
            h.stop().await.expect("helmloop stops");
        }
    }
}

/// Approve every pending owner-record and promotion consent, as the owner.
async fn approve_pending(owner: &mut WardClient<PeerChannel>) {
    let Ok(listed) = owner
        .list_consents(wpb::ListConsentsRequest {
            run_id: String::new(),
            state: wpb::ConsentState::Pending as i32,
            page: None,
        })
        .await
    else {
        return;
    };
    for c in listed.into_inner().consents {
        if !OWNER_TOOLS.contains(&c.tool_name.as_str()) {
            continue;
        }
        // A consent settled meanwhile answers an error: it is seen settled on the next look.
        let _ = owner
            .decide(wpb::DecideRequest {
                consent_id: c.consent_id,
                verdict: wpb::Verdict::Approve as i32,
                review_digest: c.binding_digest,
            })
            .await;
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    lychd_pg::free_port().expect("free port")
}

/// The HelmLoop office on `db`, as its binary runs: its principal and credential, `migrate`,
/// then `serve` on `port`, calling Ward at `ward`.
async fn start_helmloop(
    db: &TestDb,
    admin: &mut WardAdmin,
    dir: &std::path::Path,
    port: u16,
    ward: &str,
) -> OfficeProcess {
    let id = admin
        .ensure_office_principal(Office::HelmLoop.name())
        .await
        .expect("helmloop principal");
    admin.allow_describe(&id, "ward").await.expect("describe");
    let credential = admin.issue_standing(&id).await.expect("credential");
    let file = dir.join("helmloop.credential");
    std::fs::write(&file, credential).expect("write credential");
    let config = write_config(
        dir,
        Office::HelmLoop,
        port,
        db,
        Some(&file),
        &[(Office::Ward, ward.to_owned())],
        &SandboxBuilder::default(),
    );
    let out = run_office(Office::HelmLoop, &config, &["migrate"]).await;
    assert!(
        out.status.success(),
        "helmloop migrate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut process = start_office(Office::HelmLoop, &config, port, &None).await;
    wait_serving(&mut process).await;
    process
}
