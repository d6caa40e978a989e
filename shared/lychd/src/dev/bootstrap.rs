//! Ward's bootstrap and who may do what: the operator's standing credential and session, a
//! service principal for each office with its assignments, and their credential files
//! (mode 0600).

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use lychd_auth::admin::{Session, WardAdmin};
use lychd_runtime::Office;
use tonic::transport::Channel;

use super::configuration::Layout;
use super::supervision::Supervised;

/// Lifetime asked for the operator's dev session (Ward may cap it).
pub(super) const OPERATOR_SESSION: Duration = Duration::from_secs(12 * 3600);

/// The mode of every credential and token file `lychd dev` writes.
pub(super) const SECRET_MODE: u32 = 0o600;

/// What the dev operator holds besides `ward:administer` and describing every office: the
/// Dispatcher's read, lease and observe API, so the printed examples work; the approver's side
/// of consent (review every consent, settle any effect's, cancel a run's, manage standing
/// rules); the Archive's intake, lifecycle, recall, resolve and inspect actions on every
/// namespace (no note is seeded), so the documented walk works; the Orchestrator's read,
/// transition and recover API; and the whole HelmLoop API, owner records included (the
/// operator stands in for the owners in dev).
const OPERATOR_GRANTS: &[(&str, &str)] = &[
    ("ward:review", "consent:*"),
    ("ward:approve", "effect:*"),
    ("ward:cancel", "run:*"),
    ("ward:administer", "preauth:*"),
    ("dispatcher:read", "capability:*"),
    ("dispatcher:read", "lease:*"),
    ("dispatcher:read", "event:*"),
    ("dispatcher:lease", "capability:*"),
    ("dispatcher:lease", "lease:*"),
    ("dispatcher:observe", "animator:*"),
    ("orchestrator:read", "topology:*"),
    ("orchestrator:read", "capability:*"),
    ("orchestrator:read", "transition:*"),
    ("orchestrator:read", "containment:*"),
    ("orchestrator:transition", "capability:*"),
    ("orchestrator:recover", "containment:*"),
    ("orchestrator:cancel", "transition:*"),
    ("archive:intake", "namespace:*"),
    ("archive:lifecycle", "namespace:*"),
    ("archive:recall", "namespace:*"),
    ("archive:resolve", "namespace:*"),
    ("archive:inspect", "namespace:*"),
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

/// HelmLoop's owner-record actions: besides the operator, only Ward's own service principal
/// holds them (Ward issues owner records on an owner's approval). Ward also reads records: a
/// promotion's contract, and an issued record whose acknowledgement was lost.
const WARD_GRANTS: &[(&str, &str)] = &[
    ("helmloop:append_contract", "subject:*"),
    ("helmloop:append_grant", "subject:*"),
    ("helmloop:append_assurance", "subject:*"),
    ("helmloop:append_promotion", "subject:*"),
    ("helmloop:append_learning_acceptance", "subject:*"),
    ("helmloop:read", "subject:*"),
];

/// The Orchestrator's service principal: it observes animators and alone closes and reopens
/// admission.
const ORCHESTRATOR_GRANTS: &[(&str, &str)] = &[
    ("dispatcher:observe", "animator:*"),
    ("dispatcher:admission", "animator:*"),
];

/// On a first start (no operator credential yet), Ward's `bootstrap`: the first operator, whose
/// standing credential goes to the operator credential file.
pub(super) async fn bootstrap_ward(ward: &Supervised, layout: &Layout) -> anyhow::Result<()> {
    if layout.operator_credential.is_file() {
        return Ok(());
    }
    let credential = ward.run_once("bootstrap").await.map_err(|e| {
        anyhow::anyhow!(
            "{e:#} (a persisted stack whose {} was lost cannot be recovered: remove {} to start over)",
            layout.operator_credential.display(),
            layout.pg.display()
        )
    })?;
    write_secret(&layout.operator_credential, credential.trim())?;
    println!(
        "ward bootstrapped: operator credential in {} (mode {SECRET_MODE:04o})",
        layout.operator_credential.display()
    );
    Ok(())
}

/// Exchange the operator's standing credential for one session of [`OPERATOR_SESSION`] per
/// office, each bound to that office alone and written to its token file; returns Ward's.
pub(super) async fn operator_session(ward: Channel, layout: &Layout) -> anyhow::Result<Session> {
    let credential = std::fs::read_to_string(&layout.operator_credential)?;
    let ttl_seconds = u32::try_from(OPERATOR_SESSION.as_secs()).unwrap_or(u32::MAX);
    let mut ward_session = None;
    for office in Office::ALL {
        let session = lychd_auth::admin::exchange(
            ward.clone(),
            credential.trim(),
            ttl_seconds,
            &[office.name()],
        )
        .await
        .with_context(|| format!("operator session for {office} from ward"))?;
        write_secret(&layout.operator_token(office), &session.token)?;
        if office == Office::Ward {
            ward_session = Some(session);
        }
    }
    ward_session.context("invariant: ward is an office")
}

/// The operator's assignments; then for each office (Ward too: it calls its peers'
/// `Describe`) a service principal allowed to ask Ward for decisions, with its assignments and,
/// once, its standing credential.
pub(super) async fn enrol(
    ward: Channel,
    operator: &Session,
    layout: &Layout,
) -> anyhow::Result<()> {
    let mut admin = WardAdmin::new(ward, &operator.token)?;
    assign(&mut admin, &operator.principal_id, &operator_grants()).await?;
    for office in Office::ALL {
        let id = admin.ensure_office_principal(office.name()).await?;
        assign(&mut admin, &id, &service_grants(office)).await?;
        let file = layout.credential(office);
        if !file.is_file() {
            write_secret(&file, &admin.issue_standing(&id).await?)?;
        }
    }
    Ok(())
}

/// One assignment `lychd dev` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Grant {
    /// Describing an office (`<office>:describe` on `office:<office>`).
    Describe(Office),
    /// An action on an object; audience: the action's office; purpose: its verb.
    Assign(&'static str, &'static str),
}

fn assignments(grants: &'static [(&'static str, &'static str)]) -> impl Iterator<Item = Grant> {
    grants
        .iter()
        .map(|(action, object)| Grant::Assign(action, object))
}

/// The operator describes every office and reads, leases and observes at the Dispatcher.
fn operator_grants() -> Vec<Grant> {
    Office::ALL
        .into_iter()
        .map(Grant::Describe)
        .chain(assignments(OPERATOR_GRANTS))
        .collect()
}

/// An office's service principal describes its peers; the Orchestrator also observes animators
/// and closes and reopens admission; Ward also appends HelmLoop owner records and reads HelmLoop records.
fn service_grants(office: Office) -> Vec<Grant> {
    let own: &'static [(&str, &str)] = match office {
        Office::Orchestrator => ORCHESTRATOR_GRANTS,
        Office::Ward => WARD_GRANTS,
        _ => &[],
    };
    Office::ALL
        .into_iter()
        .filter(|peer| *peer != office)
        .map(Grant::Describe)
        .chain(assignments(own))
        .collect()
}

/// `dispatcher:read` → audience `dispatcher`, purpose `read`.
fn audience_and_purpose(action: &str) -> (&str, &str) {
    action.split_once(':').unwrap_or((action, action))
}

async fn assign(admin: &mut WardAdmin, id: &str, grants: &[Grant]) -> Result<(), tonic::Status> {
    for grant in grants {
        match *grant {
            Grant::Describe(office) => admin.allow_describe(id, office.name()).await?,
            Grant::Assign(action, object) => {
                let (audience, purpose) = audience_and_purpose(action);
                admin
                    .ensure_assignment(id, action, object, audience, purpose)
                    .await?
            }
        }
    }
    Ok(())
}

/// Write a secret with [`SECRET_MODE`] (created new; an existing file is replaced).
fn write_secret(path: &Path, secret: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(SECRET_MODE)
        .open(path)?;
    f.write_all(secret.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn set(grants: Vec<Grant>) -> BTreeSet<Grant> {
        grants.into_iter().collect()
    }

    fn describing(offices: impl IntoIterator<Item = Office>) -> BTreeSet<Grant> {
        offices.into_iter().map(Grant::Describe).collect()
    }

    fn actions(grants: &[Grant]) -> BTreeSet<&'static str> {
        grants
            .iter()
            .filter_map(|g| match g {
                Grant::Assign(action, _) => Some(*action),
                Grant::Describe(_) => None,
            })
            .collect()
    }

    #[test]
    fn the_operator_describes_every_office_approves_consents_and_uses_the_other_offices() {
        let grants = operator_grants();
        let mut expected = describing(Office::ALL);
        expected.extend([
            Grant::Assign("ward:review", "consent:*"),
            Grant::Assign("ward:approve", "effect:*"),
            Grant::Assign("ward:cancel", "run:*"),
            Grant::Assign("ward:administer", "preauth:*"),
            Grant::Assign("dispatcher:read", "capability:*"),
            Grant::Assign("dispatcher:read", "lease:*"),
            Grant::Assign("dispatcher:read", "event:*"),
            Grant::Assign("dispatcher:lease", "capability:*"),
            Grant::Assign("dispatcher:lease", "lease:*"),
            Grant::Assign("dispatcher:observe", "animator:*"),
            Grant::Assign("orchestrator:read", "topology:*"),
            Grant::Assign("orchestrator:read", "capability:*"),
            Grant::Assign("orchestrator:read", "transition:*"),
            Grant::Assign("orchestrator:read", "containment:*"),
            Grant::Assign("orchestrator:transition", "capability:*"),
            Grant::Assign("orchestrator:recover", "containment:*"),
            Grant::Assign("orchestrator:cancel", "transition:*"),
            Grant::Assign("archive:intake", "namespace:*"),
            Grant::Assign("archive:lifecycle", "namespace:*"),
            Grant::Assign("archive:recall", "namespace:*"),
            Grant::Assign("archive:resolve", "namespace:*"),
            Grant::Assign("archive:inspect", "namespace:*"),
        ]);
        expected.extend(
            assignments(OPERATOR_GRANTS)
                .filter(|g| matches!(g, Grant::Assign(a, _) if a.starts_with("helmloop:"))),
        );
        assert_eq!(grants.len(), expected.len(), "no grant twice: {grants:?}");
        assert_eq!(set(grants), expected);
    }

    #[test]
    fn each_office_describes_its_peers_and_not_itself() {
        for office in Office::ALL {
            let described: BTreeSet<Grant> = service_grants(office)
                .into_iter()
                .filter(|g| matches!(g, Grant::Describe(_)))
                .collect();
            let peers = Office::ALL.into_iter().filter(|p| *p != office);
            assert_eq!(described, describing(peers), "{office}");
        }
    }

    #[test]
    fn only_the_orchestrator_observes_animators_and_holds_admission() {
        for office in Office::ALL {
            let grants = service_grants(office);
            let held = actions(&grants);
            if office == Office::Orchestrator {
                let own: BTreeSet<Grant> = grants
                    .into_iter()
                    .filter(|g| matches!(g, Grant::Assign(..)))
                    .collect();
                assert_eq!(
                    own,
                    BTreeSet::from([
                        Grant::Assign("dispatcher:observe", "animator:*"),
                        Grant::Assign("dispatcher:admission", "animator:*"),
                    ])
                );
            } else if office == Office::Ward {
                assert!(
                    held.iter()
                        .all(|a| OWNER_ACTIONS.contains(a) || *a == "helmloop:read"),
                    "ward holds {held:?}"
                );
            } else {
                assert!(held.is_empty(), "{office} holds {held:?}");
            }
        }
        assert!(
            !actions(&operator_grants()).contains("dispatcher:admission"),
            "admission is the Orchestrator's alone"
        );
    }

    /// HelmLoop's owner-record append actions.
    const OWNER_ACTIONS: [&str; 5] = [
        "helmloop:append_contract",
        "helmloop:append_grant",
        "helmloop:append_assurance",
        "helmloop:append_promotion",
        "helmloop:append_learning_acceptance",
    ];

    #[test]
    fn only_ward_and_the_operator_append_helmloop_owner_records() {
        for office in Office::ALL {
            let held = actions(&service_grants(office));
            let owner: BTreeSet<&str> = held
                .iter()
                .copied()
                .filter(|a| OWNER_ACTIONS.contains(a))
                .collect();
            if office == Office::Ward {
                assert_eq!(owner, BTreeSet::from(OWNER_ACTIONS), "ward");
            } else {
                assert!(owner.is_empty(), "{office} holds {owner:?}");
            }
        }
        let operator = actions(&operator_grants());
        assert!(OWNER_ACTIONS.iter().all(|a| operator.contains(a)));
        assert!(operator.contains("helmloop:append_observation"));
    }

    #[test]
    fn an_action_names_its_audience_and_purpose() {
        assert_eq!(
            audience_and_purpose("dispatcher:admission"),
            ("dispatcher", "admission")
        );
        assert_eq!(audience_and_purpose("ward:decide"), ("ward", "decide"));
        assert_eq!(audience_and_purpose("plain"), ("plain", "plain"));
    }

    #[test]
    fn secrets_are_written_mode_0600_even_over_a_readable_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let mode =
            |path: &Path| std::fs::metadata(path).expect("meta").permissions().mode() & 0o777;
        let credential = dir.path().join("ward.credential");
        write_secret(&credential, "credential").expect("write");
        assert_eq!(mode(&credential), 0o600);

        let token = dir.path().join("operator.token");
        std::fs::write(&token, "old session, readable by everyone").expect("old");
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        write_secret(&token, "new session").expect("write");
        assert_eq!(mode(&token), 0o600);
        assert_eq!(
            std::fs::read_to_string(&token).expect("read"),
            "new session"
        );
    }
}
