//! Consent: verdicts, consumption, revocation, cancellation by run, reads and the feed of
//! changes. The guards (first verdict wins, one consumption, expiry by the database clock) are
//! the store's statements; who may settle what is `domain::consent`.
//!
//! Invariant: every change is one guarded statement or one store transaction; the caller's
//! authority on the consent's effect owner is asked by the handler immediately before the
//! change, after [`Consents::owner_of`].

use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::consent::{ConsentState, Verdict};
use crate::error::{Entity, Result, WardError};
use crate::store;
use crate::store::Page;

pub use crate::store::consents::{Change, ConsentRecord};

/// The object of an effect's consents: its owner.
pub fn effect_object(owner: &str) -> String {
    format!("effect:{owner}")
}

/// The object a run's cancellation is asked on.
pub fn run_object(run: &str) -> String {
    format!("run:{run}")
}

/// What a reviewer holds: every consent.
pub const CONSENTS: &str = "consent:*";

/// The filters and page of a consent listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub run_id: Option<String>,
    pub state: Option<ConsentState>,
    pub size: u32,
    pub before: Option<i64>,
}

#[derive(Clone)]
pub struct Consents {
    pool: PgPool,
}

impl Consents {
    pub fn new(pool: PgPool) -> Self {
        Consents { pool }
    }

    /// The effect owner of consent `id` (what its changes are authorized on); an unknown
    /// consent is not found.
    pub async fn owner_of(&self, id: Uuid) -> Result<String> {
        store::consents::owner_of(&self.pool, id)
            .await?
            .ok_or(WardError::NotFound(Entity::Consent))
    }

    /// Settle consent `id` with `verdict` by `by`: the consent afterwards and whether this call
    /// settled it.
    pub async fn decide(
        &self,
        id: Uuid,
        verdict: Verdict,
        review: &str,
        by: Uuid,
    ) -> Result<(ConsentRecord, bool)> {
        let (record, changed) =
            store::consents::decide(&self.pool, id, verdict, review, by).await?;
        if changed {
            tracing::info!(consent = %id, state = record.state.as_str(), "consent settled");
        }
        Ok((record, changed))
    }

    /// Consume the approval of `id` for the call whose binding digest is `digest`.
    pub async fn consume(&self, id: Uuid, digest: &str, by: Uuid) -> Result<ConsentRecord> {
        let record = store::consents::consume(&self.pool, id, digest, by).await?;
        tracing::info!(consent = %id, "approval consumed");
        Ok(record)
    }

    pub async fn revoke(&self, id: Uuid, by: Uuid) -> Result<ConsentRecord> {
        store::consents::revoke(&self.pool, id, by).await
    }

    /// Cancel every pending consent of `run`: how many.
    pub async fn cancel_for_run(&self, run: &str, by: Uuid) -> Result<u64> {
        store::consents::cancel_for_run(&self.pool, run, by).await
    }

    pub async fn get(&self, id: Uuid) -> Result<ConsentRecord> {
        store::consents::get(&self.pool, id)
            .await?
            .ok_or(WardError::NotFound(Entity::Consent))
    }

    pub async fn list(&self, q: &ListQuery) -> Result<Page<ConsentRecord>> {
        store::consents::list(&self.pool, q.run_id.as_deref(), q.state, q.size, q.before).await
    }

    /// At most `limit` changes after change `after`, in sequence order (read under the gap
    /// rule of `lychd_runtime::feed` by the caller).
    pub async fn changes_after(&self, after: i64, limit: i64) -> Result<Vec<Change>> {
        store::consents::changes_after(&self.pool, after, limit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_of_effects_and_runs() {
        assert_eq!(effect_object("helmloop"), "effect:helmloop");
        assert_eq!(run_object("r-1"), "run:r-1");
        for o in [
            effect_object("fs.write"),
            run_object("run:7"),
            CONSENTS.to_owned(),
        ] {
            assert!(lychd_auth::grammar::Object::parse(&o).is_ok(), "{o}");
        }
    }
}
