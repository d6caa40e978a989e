//! The `host-reactor` actuator: the Orchestrator's side of the spool. It publishes the frozen
//! intent atomically into the inbox (never replacing), waits for a claim until the claim
//! deadline — then retracts the unclaimed intent by rename, a no-effect decline — and, once
//! claimed, for the journal's terminal class until the transition's deadline. Claimed work
//! without a terminal class by then is contained (it may still run on the host).

use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use super::{Class, Spool, WireIntent, delivery_name, publish};
use crate::actuator::{Actuator, Applied};
use crate::domain::intent::TransitionIntent;

/// How often the journal is read while waiting.
const POLL: Duration = Duration::from_millis(5);

/// The producer of one spool.
pub struct HostReactor {
    spool: Spool,
    claim_deadline: Duration,
}

impl HostReactor {
    /// The spool at `root` (created owner-only when missing; refused when unsafe).
    pub fn new(root: &Path, claim_deadline: Duration) -> Result<HostReactor, String> {
        Ok(HostReactor {
            spool: Spool::open(root)?,
            claim_deadline,
        })
    }

    /// Take the intent back if nobody claimed it: whether the retraction won the race.
    fn retract(&self, file: &Path, name: &str) -> bool {
        let aside = self.spool.inbox.join(format!(".{name}.retracted"));
        match std::fs::rename(file, &aside) {
            Ok(()) => {
                let _ = std::fs::remove_file(&aside);
                true
            }
            Err(_) => false,
        }
    }
}

fn outcome(class: Class) -> Applied {
    match class {
        Class::Completed => Applied::Applied,
        Class::Declined => Applied::NoEffect,
        Class::Restored => Applied::Restored,
        // Invalid delivery, containment or unresolved work: fail closed.
        Class::Contained | Class::Rejected | Class::Processing => Applied::Contained,
    }
}

#[tonic::async_trait]
impl Actuator for HostReactor {
    async fn apply(&self, intent: &TransitionIntent, deadline: Instant) -> Applied {
        let name = delivery_name(intent);
        let Ok(bytes) = serde_json::to_vec(&WireIntent::from(intent)) else {
            return Applied::NoEffect;
        };
        let file = self.spool.inbox.join(format!("{name}.json"));
        if let Err(e) = publish(&self.spool.inbox, &format!("{name}.json"), &bytes, false) {
            tracing::warn!(transition_id = %intent.id, error = %e.kind(), "publishing the intent failed");
            return Applied::NoEffect;
        }
        let claim_by = (Instant::now() + self.claim_deadline).min(deadline);
        let applied = loop {
            if let Some(class) = self.spool.terminal(&name) {
                break outcome(class);
            }
            let now = Instant::now();
            let unclaimed = std::fs::symlink_metadata(&file).is_ok();
            if unclaimed && now >= claim_by {
                if self.retract(&file, &name) {
                    break Applied::NoEffect;
                }
                // Claimed meanwhile: wait for its result. Still published but not retractable
                // past the deadline: it may yet be claimed, so nothing is proved.
                if now >= deadline && std::fs::symlink_metadata(&file).is_ok() {
                    break Applied::Contained;
                }
            } else if !unclaimed && now >= deadline {
                // A last look: a result written just now still counts.
                break self
                    .spool
                    .terminal(&name)
                    .map_or(Applied::Contained, outcome);
            }
            tokio::time::sleep(POLL).await;
        };
        tracing::info!(
            transition_id = %intent.id,
            operation = intent.operation.as_str(),
            outcome = applied.as_str(),
            "host-reactor actuator"
        );
        applied
    }
}
