//! Standing preauthorization rules (`ward.preauth_rules`): synchronised from the rule files at
//! start as one set in one transaction; one use consumed by the same statement that records the
//! consent it grants ([`super::consents::propose`]).

use sqlx::postgres::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::preauth::Rule;
use crate::error::{Entity, Result, WardError};

/// A rule as stored, for operators.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct RuleRecord {
    pub slug: String,
    pub source: String,
    pub effect_class: String,
    pub principal_pattern: String,
    pub tool_pattern: String,
    pub owner_pattern: String,
    pub priority: i32,
    pub expires_at: Option<OffsetDateTime>,
    pub max_uses: Option<i64>,
    pub uses: i64,
    pub policy: String,
    pub policy_digest: String,
    pub in_files: bool,
    pub disabled_at: Option<OffsetDateTime>,
}

/// `uses` as reported: the consents the rule granted (its counter is kept for a limited rule
/// only; migration 0008).
const COLUMNS: &str = "slug, source, effect_class, principal_pattern, tool_pattern, \
     owner_pattern, priority, expires_at, max_uses, \
     (SELECT count(*) FROM ward.consents c WHERE c.granted_by_rule = preauth_rules.slug) AS uses, \
     policy, policy_digest, in_files, disabled_at";

/// Make the stored rules the set `rules`, in one transaction: same slug → policy replaced, uses
/// and a manual disable kept (a rule that gains a limit counts its earlier grants); a stored
/// rule not in the set → no longer in the files (disabled).
pub async fn sync(pool: &PgPool, rules: &[Rule]) -> Result<()> {
    let mut tx = super::begin(pool).await?;
    sqlx::query("LOCK TABLE ward.preauth_rules IN EXCLUSIVE MODE")
        .execute(&mut *tx)
        .await?;
    for r in rules {
        let policy = lychd_helmloop::to_canonical_string(&r.policy())
            .unwrap_or_else(|_| unreachable!("invariant: a rule's policy is canonical JSON"));
        sqlx::query(
            "INSERT INTO ward.preauth_rules (slug, source, effect_class, principal_pattern,
                 tool_pattern, owner_pattern, priority, expires_at, max_uses, policy,
                 policy_digest)
             VALUES ($1, $2, $3, $4, $5, $6, $7, to_timestamp($8), $9, $10, $11)
             ON CONFLICT (slug) DO UPDATE SET source = EXCLUDED.source,
                 effect_class = EXCLUDED.effect_class,
                 principal_pattern = EXCLUDED.principal_pattern,
                 tool_pattern = EXCLUDED.tool_pattern, owner_pattern = EXCLUDED.owner_pattern,
                 priority = EXCLUDED.priority, expires_at = EXCLUDED.expires_at,
                 max_uses = EXCLUDED.max_uses, policy = EXCLUDED.policy,
                 policy_digest = EXCLUDED.policy_digest, in_files = true,
                 loaded_at = statement_timestamp()",
        )
        .bind(&r.slug)
        .bind(&r.source)
        .bind(r.class.as_str())
        .bind(r.principal.as_str())
        .bind(r.tool.as_str())
        .bind(r.effect_owner.as_str())
        .bind(r.priority)
        .bind(r.expires_at.map(|e| e as f64))
        .bind(r.max_uses)
        .bind(policy)
        .bind(r.policy_digest())
        .execute(&mut *tx)
        .await?;
    }
    let slugs: Vec<&str> = rules.iter().map(|r| r.slug.as_str()).collect();
    sqlx::query("UPDATE ward.preauth_rules SET in_files = false WHERE NOT slug = ANY($1)")
        .bind(slugs)
        .execute(&mut *tx)
        .await?;
    lychd_runtime::refusal::commit(tx).await?;
    Ok(())
}

/// Every stored rule, by slug.
pub async fn list(pool: &PgPool) -> Result<Vec<RuleRecord>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM ward.preauth_rules ORDER BY slug"
    ))
    .fetch_all(pool)
    .await?)
}

/// Disable `slug` by `by` (kept across starts; idempotent).
pub async fn disable(pool: &PgPool, slug: &str, by: Uuid) -> Result<RuleRecord> {
    let disabled: Option<RuleRecord> = sqlx::query_as(&format!(
        "UPDATE ward.preauth_rules SET disabled_by = $2, disabled_at = statement_timestamp()
         WHERE slug = $1 AND disabled_at IS NULL RETURNING {COLUMNS}"
    ))
    .bind(slug)
    .bind(by)
    .fetch_optional(pool)
    .await?;
    if let Some(r) = disabled {
        return Ok(r);
    }
    sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM ward.preauth_rules WHERE slug = $1"
    ))
    .bind(slug)
    .fetch_optional(pool)
    .await?
    .ok_or(WardError::NotFound(Entity::PreauthRule))
}
