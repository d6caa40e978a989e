//! Who may do what: the operator's assignments, and for each office a service principal (named
//! after the office) allowed to ask Ward for decisions, with its assignments and, once, its
//! standing credential written to a secret file. Everything goes through Ward's API with the
//! operator's credential (`lychd_auth::admin::WardAdmin`); every step is idempotent — a
//! principal, an assignment or a credential file that exists is kept — so enrolling again
//! after an upgrade adds only what is new.

use std::path::PathBuf;

use anyhow::Context;
use lychd_auth::admin::WardAdmin;
use lychd_runtime::Office;
use tonic::transport::Channel;

use super::secrets;
use lychd::grants::{OPERATOR_GRANTS, ORCHESTRATOR_GRANTS, RUNNER_GRANTS, WARD_GRANTS};

/// Lifetime asked for the enrolling session (only Ward sees it).
const ENROLL_SESSION_SECONDS: u32 = 600;

/// What [`enroll`] did: each office's credential file and whether it was issued now.
#[derive(Debug)]
pub struct Enrolled {
    pub credentials: Vec<(Office, PathBuf, bool)>,
}

/// With the operator's standing credential: the operator's assignments, then every office's
/// service principal (Ward's too: it calls its peers' `Describe` and appends HelmLoop's owner
/// records), its assignments and — when `credential_file(office)` does not exist — a new
/// standing credential written there (mode 0600).
pub async fn enroll(
    ward: Channel,
    operator_credential: &str,
    credential_file: impl Fn(Office) -> PathBuf,
) -> anyhow::Result<Enrolled> {
    let session = lychd_auth::admin::exchange(
        ward.clone(),
        operator_credential,
        ENROLL_SESSION_SECONDS,
        &[Office::Ward.name()],
    )
    .await
    .context("exchange the operator credential with ward")?;
    let mut admin = WardAdmin::new(ward, &session.token)?;
    assign(&mut admin, &session.principal_id, &operator_grants())
        .await
        .context("the operator's assignments")?;
    let mut credentials = Vec::new();
    for office in Office::ALL {
        let id = admin
            .ensure_office_principal(office.name())
            .await
            .with_context(|| format!("enroll {office}'s service principal"))?;
        assign(&mut admin, &id, &service_grants(office))
            .await
            .with_context(|| format!("{office}'s assignments"))?;
        let file = credential_file(office);
        let issue = !file.is_file();
        if issue {
            let credential = admin
                .issue_standing(&id)
                .await
                .with_context(|| format!("issue {office}'s credential"))?;
            secrets::write_secret(&file, &credential)?;
        }
        credentials.push((office, file, issue));
    }
    Ok(Enrolled { credentials })
}

/// One assignment provisioning makes.
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
/// and closes and reopens admission; Ward also appends HelmLoop owner records and reads HelmLoop
/// records; the Runner also leases (and releases) capabilities for model steps, proposes and
/// consumes its effects' approvals and holds its effect permission.
fn service_grants(office: Office) -> Vec<Grant> {
    let own: &'static [(&str, &str)] = match office {
        Office::Orchestrator => ORCHESTRATOR_GRANTS,
        Office::Ward => WARD_GRANTS,
        Office::Runner => RUNNER_GRANTS,
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

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
            Grant::Assign("dispatcher:read_all", "lease:*"),
            Grant::Assign("dispatcher:lease", "capability:*"),
            Grant::Assign("dispatcher:lease", "lease:*"),
            Grant::Assign("dispatcher:observe", "animator:*"),
            Grant::Assign("orchestrator:read", "topology:*"),
            Grant::Assign("orchestrator:read", "capability:*"),
            Grant::Assign("orchestrator:read", "transition:*"),
            Grant::Assign("orchestrator:read_all", "transition:*"),
            Grant::Assign("orchestrator:read", "containment:*"),
            Grant::Assign("orchestrator:transition", "capability:*"),
            Grant::Assign("orchestrator:recover", "containment:*"),
            Grant::Assign("orchestrator:cancel", "transition:*"),
            Grant::Assign("archive:intake", "namespace:*"),
            Grant::Assign("archive:lifecycle", "namespace:*"),
            Grant::Assign("archive:recall", "namespace:*"),
            Grant::Assign("archive:resolve", "namespace:*"),
            Grant::Assign("archive:inspect", "namespace:*"),
            Grant::Assign("runner:start", "run:*"),
            Grant::Assign("runner:read", "run:*"),
            Grant::Assign("runner:read_all", "run:*"),
            Grant::Assign("runner:cancel", "run:*"),
            Grant::Assign("runner:review", "run:*"),
            Grant::Assign("runner:reconcile", "run:*"),
            Grant::Assign("runner:effect_http", "destination:*"),
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
            } else if office == Office::Runner {
                // Model steps: a lease on a capability and its release; no observation, no
                // admission. Verification: observations, reads and reductions at HelmLoop and
                // proposals to Ward (no owner record, no verdict). Effects: its consents proposed,
                // consumed and (for a cancelled run) cancelled at Ward, and the effect-time
                // permission on destinations.
                let own: BTreeSet<Grant> = grants
                    .into_iter()
                    .filter(|g| matches!(g, Grant::Assign(..)))
                    .collect();
                assert_eq!(
                    own,
                    BTreeSet::from([
                        Grant::Assign("dispatcher:lease", "capability:*"),
                        Grant::Assign("dispatcher:lease", "lease:*"),
                        Grant::Assign("helmloop:append_observation", "subject:*"),
                        Grant::Assign("helmloop:read", "subject:*"),
                        Grant::Assign("helmloop:reduce", "subject:*"),
                        Grant::Assign("ward:propose", "effect:helmloop"),
                        Grant::Assign("ward:propose", "effect:runner"),
                        Grant::Assign("ward:cancel", "run:*"),
                        Grant::Assign("ward:consume", "effect:runner"),
                        Grant::Assign("runner:effect_http", "destination:*"),
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
    fn only_ward_appends_helmloop_owner_records() {
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
        assert!(
            OWNER_ACTIONS.iter().all(|a| !operator.contains(a)),
            "the operator appends no owner record"
        );
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
}
