//! A lease's life after its issue: renew, release, and reads of one or many.

use uuid::Uuid;

use super::Service;
use crate::error::Result;
use crate::store::leases;

impl Service {
    /// Renew `owner`'s lease (`None`: any principal's, for an administrator).
    pub async fn renew(
        &self,
        id: Uuid,
        holder: &str,
        ttl_seconds: i32,
        owner: Option<&str>,
    ) -> Result<leases::LeaseRow> {
        leases::renew(&self.pool, id, holder, ttl_seconds, owner).await
    }

    /// Release `owner`'s lease (`None`: any principal's): the released lease, and whether it
    /// was already over.
    pub async fn release(
        &self,
        id: Uuid,
        holder: &str,
        owner: Option<&str>,
    ) -> Result<(leases::LeaseRow, bool)> {
        leases::release(&self.pool, id, holder, owner).await
    }

    /// One lease `owner` may see (`None`: any principal's); request ids are `caller`'s own.
    pub async fn find_lease(
        &self,
        lookup: leases::Lookup<'_>,
        caller: &str,
        owner: Option<&str>,
    ) -> Result<leases::LeaseRow> {
        leases::find(&self.pool, lookup, caller, owner).await
    }

    pub async fn list_leases(
        &self,
        filter: leases::Filter<'_>,
        after: Option<leases::Cursor>,
        limit: i64,
    ) -> Result<Vec<leases::LeaseRow>> {
        leases::list(&self.pool, filter, after, limit).await
    }
}
