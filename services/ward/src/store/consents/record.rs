//! A consent as stored: its row, its columns, the bound fields' columns and the expiry sweep.
//!
//! Invariant: the one mapping between `ward.consents` rows and [`ConsentRecord`]; the bound
//! columns are derived from `domain::consent::BoundField`, never listed by hand.

use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::consent::{
    self as rules, BINDING_MEMBER, Binding, BoundField, ConsentState, EffectClass, Kept, Proposal,
};
use crate::error::{Result, WardError};

/// A consent as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsentRecord {
    pub id: Uuid,
    pub seq: i64,
    pub run_id: String,
    pub effect_owner: String,
    pub effect_id: String,
    pub effect_revision: i64,
    pub tool_name: String,
    pub deferred_call_id: String,
    /// Canonical-order JSON text of the censored arguments.
    pub censored_arguments: String,
    pub arguments_digest: String,
    pub class: EffectClass,
    pub binding: Binding,
    pub binding_digest: String,
    pub requested_by: Uuid,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub state: ConsentState,
    pub decided_at: Option<OffsetDateTime>,
    pub decided_by: Option<Uuid>,
    pub consumed_at: Option<OffsetDateTime>,
    /// The principal that consumed it.
    pub consumed_by: Option<Uuid>,
    pub revoked_at: Option<OffsetDateTime>,
    /// The standing rule that granted it, and the digest of its policy then.
    pub granted_by_rule: Option<(String, String)>,
}

pub(crate) const COLUMNS: &str = "c.id, c.seq, c.run_id, c.effect_owner, c.effect_id, c.effect_revision, \
     c.tool_name, c.deferred_call_id, c.censored_arguments, c.arguments_digest, \
     c.effect_class, c.binding::text, c.binding_digest, c.requested_by, c.created_at, c.expires_at, \
     c.state, c.decided_at, c.decided_by, c.consumed_at, c.consumed_by, c.revoked_at, \
     c.granted_by_rule, c.rule_policy_digest";

#[derive(sqlx::FromRow)]
pub(crate) struct Row {
    pub(crate) id: Uuid,
    pub(crate) seq: i64,
    pub(crate) run_id: String,
    pub(crate) effect_owner: String,
    pub(crate) effect_id: String,
    pub(crate) effect_revision: i64,
    pub(crate) tool_name: String,
    pub(crate) deferred_call_id: String,
    pub(crate) censored_arguments: String,
    pub(crate) arguments_digest: String,
    pub(crate) effect_class: String,
    pub(crate) binding: String,
    pub(crate) binding_digest: String,
    pub(crate) requested_by: Uuid,
    pub(crate) created_at: OffsetDateTime,
    pub(crate) expires_at: OffsetDateTime,
    pub(crate) state: String,
    pub(crate) decided_at: Option<OffsetDateTime>,
    pub(crate) decided_by: Option<Uuid>,
    pub(crate) consumed_at: Option<OffsetDateTime>,
    pub(crate) consumed_by: Option<Uuid>,
    pub(crate) revoked_at: Option<OffsetDateTime>,
    pub(crate) granted_by_rule: Option<String>,
    pub(crate) rule_policy_digest: Option<String>,
}

pub(crate) fn corrupt(id: Uuid, what: &str) -> WardError {
    WardError::Database(sqlx::Error::Decode(
        format!("unreadable {what} in ward.consents {id}").into(),
    ))
}

impl Row {
    pub(crate) fn record(self) -> Result<ConsentRecord> {
        let id = self.id;
        let bound: serde_json::Value =
            serde_json::from_str(&self.binding).map_err(|_| corrupt(id, "binding"))?;
        let text = |k: &str| bound.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        let binding = Binding {
            workflow_version: text("workflow_version"),
            action_hash: text("action_hash"),
            artifact_hash: text("artifact_hash"),
            destination_hash: text("destination_hash"),
            visibility: text("visibility"),
            scope: text("scope"),
            actor: text("actor"),
            expiry: bound.get("expiry").and_then(|v| v.as_i64()),
            nonce: text("nonce"),
            rationale: text("rationale"),
        };
        Ok(ConsentRecord {
            id,
            seq: self.seq,
            run_id: self.run_id,
            effect_owner: self.effect_owner,
            effect_id: self.effect_id,
            effect_revision: self.effect_revision,
            tool_name: self.tool_name,
            deferred_call_id: self.deferred_call_id,
            censored_arguments: self.censored_arguments,
            arguments_digest: self.arguments_digest,
            class: EffectClass::parse(&self.effect_class)
                .ok_or_else(|| corrupt(id, "effect class"))?,
            binding,
            binding_digest: self.binding_digest,
            requested_by: self.requested_by,
            created_at: self.created_at,
            expires_at: self.expires_at,
            state: ConsentState::parse(&self.state).ok_or_else(|| corrupt(id, "state"))?,
            decided_at: self.decided_at,
            decided_by: self.decided_by,
            consumed_at: self.consumed_at,
            consumed_by: self.consumed_by,
            revoked_at: self.revoked_at,
            granted_by_rule: self.granted_by_rule.zip(self.rule_policy_digest),
        })
    }
}

/// The binding document of `p` by `requested_by` (canonical JSON): what is stored, column by
/// column, by [`bound_columns`]/[`bound_values`], and what the binding digest was taken of.
pub(crate) fn binding_document(p: &Proposal, arguments_digest: &str, requested_by: Uuid) -> String {
    let document = rules::binding_document(p, arguments_digest, &requested_by.to_string());
    lychd_helmloop::to_canonical_string(&document).unwrap_or_else(|_| {
        unreachable!("invariant: a proposal's digests were computed from this document")
    })
}

/// The columns of `ward.consents` that keep the bound fields, from the one definition
/// ([`BoundField`]): each column-kept field, then `binding`.
pub(crate) fn bound_columns() -> String {
    BoundField::ALL
        .iter()
        .filter(|f| matches!(f.kept(), Kept::Column(_)))
        .map(|f| f.name())
        .chain([BINDING_MEMBER])
        .collect::<Vec<_>>()
        .join(", ")
}

/// The values of [`bound_columns`], taken from the binding document bound as parameter
/// `$param` (jsonb): each column cast to its type.
pub(crate) fn bound_values(param: usize) -> String {
    BoundField::ALL
        .iter()
        .filter_map(|f| match f.kept() {
            Kept::Column(ty) => Some(format!("(${param}::jsonb->>'{}')::{ty}", f.name())),
            Kept::Binding => None,
        })
        .chain([format!("${param}::jsonb->'{BINDING_MEMBER}'")])
        .collect::<Vec<_>>()
        .join(", ")
}

/// The binding document as stored (of the consent row `c`), rebuilt from the same definition:
/// what consumption digests again and compares with the stored binding digest.
pub(crate) fn stored_document() -> String {
    let members: Vec<String> = BoundField::ALL
        .iter()
        .filter(|f| matches!(f.kept(), Kept::Column(_)))
        .map(|f| format!("'{0}', c.{0}", f.name()))
        .chain([format!("'{BINDING_MEMBER}', c.{BINDING_MEMBER}")])
        .collect();
    format!("jsonb_build_object({})::text", members.join(", "))
}

/// The classes any principal but the requester may settle (the others need a human), for SQL.
pub(crate) fn classes_settled_by_any() -> String {
    EffectClass::ALL
        .iter()
        .filter(|c| !c.live_only())
        .map(|c| format!("'{}'", c.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Settle every pending consent past its TTL as `expired`, decided at the instant it expired.
pub async fn expire_due(conn: &mut sqlx::PgConnection) -> Result<u64> {
    Ok(sqlx::query(
        "UPDATE ward.consents SET state = 'expired', decided_at = expires_at
         WHERE state = 'pending' AND expires_at <= statement_timestamp()",
    )
    .execute(&mut *conn)
    .await?
    .rows_affected())
}

/// A rule (`r`) may grant now: in the files, not disabled, unexpired by database time.
pub(crate) const RULE_GRANTS: &str = "r.in_files AND r.disabled_at IS NULL
    AND (r.expires_at IS NULL OR r.expires_at > statement_timestamp())";

/// A consent granted by a standing rule is honoured only while that rule is still in the
/// files, not disabled, unexpired by database time and the same policy (digest-equal); a human
/// verdict does not depend on any rule.
pub(crate) const RULE_STILL_VALID: &str = "(c.granted_by_rule IS NULL OR EXISTS (
    SELECT 1 FROM ward.preauth_rules p
    WHERE p.slug = c.granted_by_rule AND p.policy_digest = c.rule_policy_digest AND p.in_files
      AND p.disabled_at IS NULL
      AND (p.expires_at IS NULL OR p.expires_at > statement_timestamp())))";
