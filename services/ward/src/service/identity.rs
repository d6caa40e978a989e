//! Identity: enrollment, credentials (issue, rotate, revoke, exchange), sessions and
//! assignments.
//!
//! Invariant: every change is one store transaction that locks the principal first; a secret
//! leaves only in the answer that issues it; a refused exchange is counted against its source,
//! never audited under a principal it does not authenticate.

use std::sync::Arc;

use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::kinds::CredentialKind;
use crate::error::{Result, WardError};
use crate::store;
use crate::store::Page;
use crate::store::strangers::Tally;
use lychd_auth::grammar::{Audiences, Question};

pub use crate::store::PrincipalRecord;
pub use crate::store::assignments::{Assigned, AssignmentRecord, Unassigned};
pub use crate::store::credentials::{IssuedCredential, NewSession};
pub use crate::store::principals::{Enrollment, Revoked};

/// What `Revoke` takes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevokeTarget {
    Credential(Uuid),
    Session(Uuid),
    Principal(Uuid),
}

pub struct Identity {
    pool: PgPool,
    /// Counts of refusals of callers that authenticate nobody.
    strangers: Arc<Tally>,
}

impl Identity {
    pub fn new(pool: PgPool, strangers: Arc<Tally>) -> Self {
        Identity { pool, strangers }
    }

    /// Exchange `credential` for a session bound to `audiences` (already decoded: bad
    /// audiences are answered only to a caller whose credential is good). A refused credential
    /// is counted against `source`.
    pub async fn exchange(
        &self,
        source: &str,
        credential: &str,
        ttl_seconds: u32,
        audiences: Result<Audiences>,
    ) -> Result<NewSession> {
        let exchanged =
            store::credentials::exchange_decoded(&self.pool, credential, ttl_seconds, audiences)
                .await;
        if let Err(WardError::Refused(refusal)) = &exchanged {
            self.strangers.count(source, refusal.as_str());
        }
        exchanged
    }

    pub async fn enroll(&self, actor: Option<Uuid>, e: &Enrollment) -> Result<PrincipalRecord> {
        store::principals::enroll(&self.pool, actor, e).await
    }

    pub async fn issue(
        &self,
        actor: Option<Uuid>,
        principal_id: Uuid,
        kind: CredentialKind,
        ttl: u32,
    ) -> Result<IssuedCredential> {
        store::credentials::issue(&self.pool, actor, principal_id, kind, ttl).await
    }

    pub async fn rotate(
        &self,
        actor: Option<Uuid>,
        credential_id: Uuid,
        request_id: Option<&str>,
    ) -> Result<IssuedCredential> {
        store::credentials::rotate(&self.pool, actor, credential_id, request_id).await
    }

    pub async fn revoke(&self, actor: Option<Uuid>, target: RevokeTarget) -> Result<Revoked> {
        let pool = &self.pool;
        match target {
            RevokeTarget::Credential(id) => store::credentials::revoke(pool, actor, id).await,
            RevokeTarget::Session(id) => store::sessions::revoke(pool, actor, id).await,
            RevokeTarget::Principal(id) => store::principals::revoke(pool, actor, id).await,
        }
    }

    pub async fn assign(
        &self,
        actor: Option<Uuid>,
        principal_id: Uuid,
        grant: &Question,
        expires_at: Option<OffsetDateTime>,
    ) -> Result<Assigned> {
        store::assignments::assign(&self.pool, actor, principal_id, grant, expires_at).await
    }

    pub async fn unassign(&self, actor: Option<Uuid>, assignment_id: Uuid) -> Result<Unassigned> {
        store::assignments::unassign(&self.pool, actor, assignment_id).await
    }

    pub async fn principals(
        &self,
        size: u32,
        after: Option<Uuid>,
    ) -> Result<Page<PrincipalRecord>> {
        store::principals::list(&self.pool, size, after).await
    }

    pub async fn assignments(
        &self,
        principal_id: Option<Uuid>,
        size: u32,
        after: Option<Uuid>,
    ) -> Result<Page<AssignmentRecord>> {
        store::assignments::list(&self.pool, principal_id, size, after).await
    }
}
