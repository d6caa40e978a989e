//! Proposals: `ProposeEffect` (one exact call recorded as a consent, granted by the first
//! standing rule that matches it or left pending), the standing preauthorization rules, and
//! proposal history (proposals, their records, supersession and withdrawal).
//!
//! Invariant: what a proposal binds (censored arguments, digests) and which rules may grant it
//! are decided here from `domain` before the one statement of the store that records it; a
//! live-only class is never granted by a rule.

use std::sync::Arc;

use sqlx::PgPool;
use uuid::Uuid;

use crate::actions;
use crate::config::Settings;
use crate::domain::consent::{self, Proposal, censor};
use crate::domain::preauth::Rule;
use crate::domain::proposal::{Appender, NewRecord};
use crate::error::{Entity, Result, WardError};
use crate::store;
use crate::store::Page;
use crate::store::consents::Derived;
use lychd_runtime::auth::Action;

pub use crate::store::consents::ConsentRecord;
pub use crate::store::preauth::RuleRecord;
pub use crate::store::proposals::{Closing, HistoryRecord, NewProposal, ProposalRecord};

/// What a standing-rule administrator holds.
pub const PREAUTH: (Action, &str) = (actions::ADMINISTER, "preauth:*");

/// The standing rules that may grant `p`, proposed by `principal_name`, in matching order: their
/// slugs and policy digests (the statement that records the consent re-checks each on its
/// latest row). None for a live-only class: only a live verdict settles it.
pub fn grant_candidates<'r>(
    rules: &'r [Rule],
    p: &Proposal,
    principal_name: &str,
) -> (Vec<&'r str>, Vec<String>) {
    if p.class.live_only() {
        return (Vec::new(), Vec::new());
    }
    rules
        .iter()
        .filter(|r| r.matches(p, principal_name))
        .map(|r| (r.slug.as_str(), r.policy_digest()))
        .unzip()
}

/// The action a record of `record`'s kind is appended under, and by whom; a kind Ward or its
/// own call appends is bad input.
pub fn append_action(record: &NewRecord) -> Result<(Appender, Action)> {
    let appender = record.kind.appended_by().ok_or_else(|| {
        store::invalid(
            "kind",
            crate::error::reasons::KIND_INVALID,
            "is appended by ward or by its own call",
        )
    })?;
    Ok(match appender {
        Appender::Proposer => (appender, actions::PROPOSE),
        Appender::EffectOwner => (appender, actions::CONSUME),
    })
}

/// A proposer's record is appended by the principal that initiated the proposal only.
pub fn may_append(appender: Appender, caller: Uuid, initiated_by: Uuid) -> Result<()> {
    if appender == Appender::Proposer && caller != initiated_by {
        return Err(WardError::NotProposer);
    }
    Ok(())
}

pub struct Proposals {
    pool: PgPool,
    settings: Arc<Settings>,
    /// The standing preauthorization rules, in matching order.
    rules: Arc<Vec<Rule>>,
}

impl Proposals {
    pub fn new(pool: PgPool, settings: Arc<Settings>, rules: Arc<Vec<Rule>>) -> Self {
        Proposals {
            pool,
            settings,
            rules,
        }
    }

    /// Record `proposal` by `requested_by` (id as resolved: `principal_id`; name
    /// `principal_name`): the consent, and whether this call created it (an identical earlier
    /// proposal is answered as it stands).
    pub async fn propose(
        &self,
        proposal: &Proposal,
        requested_by: Uuid,
        principal_id: &str,
        principal_name: &str,
    ) -> Result<(ConsentRecord, bool)> {
        let censored = lychd_helmloop::to_canonical_string(&censor(&proposal.arguments));
        let digests = consent::digests(proposal, principal_id);
        let (Ok(censored), Ok((arguments_digest, binding_digest))) = (censored, digests) else {
            // The arguments parsed under HL-C14N-1, so they canonicalize: unreachable in
            // practice, refused without echoing anything if it ever is.
            return Err(store::invalid(
                "arguments_json",
                crate::error::reasons::ARGUMENTS_INVALID,
                "cannot be canonicalized",
            ));
        };
        let derived = Derived {
            censored_arguments: &censored,
            arguments_digest: &arguments_digest,
            binding_digest: &binding_digest,
            ttl_seconds: i64::from(self.settings.consent_ttl(proposal.class)),
        };
        let (slugs, digests) = grant_candidates(&self.rules, proposal, principal_name);
        let (record, created) = store::consents::propose(
            &self.pool,
            proposal,
            requested_by,
            &derived,
            (&slugs, &digests),
        )
        .await?;
        tracing::info!(consent = %record.id, owner = %record.effect_owner, created, "effect proposed");
        Ok((record, created))
    }

    pub async fn rules(&self) -> Result<Vec<RuleRecord>> {
        store::preauth::list(&self.pool).await
    }

    pub async fn disable_rule(&self, slug: &str, by: Uuid) -> Result<RuleRecord> {
        let rule = store::preauth::disable(&self.pool, slug, by).await?;
        tracing::info!(rule = %rule.slug, "standing rule disabled");
        Ok(rule)
    }

    /// The effect owner of proposal `id`'s consent (what changes to it are authorized on) and
    /// the proposal's initiator; an unknown proposal is not found.
    pub async fn parties(&self, id: Uuid) -> Result<(String, Uuid)> {
        store::proposals::parties(&self.pool, id)
            .await?
            .ok_or(WardError::NotFound(Entity::Proposal))
    }

    pub async fn create(&self, n: &NewProposal<'_>, by: Uuid) -> Result<ProposalRecord> {
        let created = store::proposals::create(&self.pool, n, by).await?;
        tracing::info!(proposal = %created.id, consent = %created.consent_id, "proposal recorded");
        Ok(created)
    }

    /// Append `record` to proposal `id` by `caller`, appending as `appender` (see
    /// [`may_append`]).
    pub async fn append(
        &self,
        id: Uuid,
        record: &NewRecord,
        (appender, caller, initiated_by): (Appender, Uuid, Uuid),
    ) -> Result<HistoryRecord> {
        may_append(appender, caller, initiated_by)?;
        let appended = store::proposals::append_record(&self.pool, id, record, caller).await?;
        // The kind and number only: the text is untrusted content and never logged.
        tracing::info!(proposal = %id, seq = appended.seq, kind = appended.kind.as_str(), "proposal record appended");
        Ok(appended)
    }

    /// Close proposal `id` by `by`: the proposal and its consent afterwards.
    pub async fn close(
        &self,
        id: Uuid,
        closing: Closing,
        by: Uuid,
    ) -> Result<(ProposalRecord, ConsentRecord)> {
        let closed = store::proposals::close(&self.pool, id, closing, by).await?;
        match closing {
            Closing::Supersede(successor) => {
                tracing::info!(proposal = %id, successor = %successor, "proposal superseded");
            }
            Closing::Withdraw => tracing::info!(proposal = %id, "proposal withdrawn"),
        }
        Ok(closed)
    }

    /// Proposal `id` and one page of its records.
    pub async fn get(
        &self,
        id: Uuid,
        size: u32,
        after: Option<i64>,
    ) -> Result<(ProposalRecord, Page<HistoryRecord>)> {
        let found = store::proposals::get(&self.pool, id)
            .await?
            .ok_or(WardError::NotFound(Entity::Proposal))?;
        let page = store::proposals::records(&self.pool, id, size, after).await?;
        Ok((found, page))
    }

    pub async fn list(
        &self,
        group: Uuid,
        size: u32,
        after: Option<i64>,
    ) -> Result<Page<ProposalRecord>> {
        store::proposals::list(&self.pool, group, size, after).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::consent::{Binding, EffectClass, parse_arguments};
    use crate::domain::preauth::parse_set;
    use crate::domain::proposal::RecordKind;

    fn proposal(class: EffectClass, tool: &str) -> Proposal {
        Proposal {
            run_id: "run-1".into(),
            effect_owner: "runner".into(),
            effect_id: "e".into(),
            effect_revision: 1,
            tool_name: tool.into(),
            deferred_call_id: "c".into(),
            class,
            binding: Binding::default(),
            arguments: parse_arguments(b"{}").expect("args"),
        }
    }

    fn rules() -> Vec<Rule> {
        let text = r#"
[[rule]]
slug = "any-write"
effect_class = "standard"
principal = "*"
tool = "fs.write"

[[rule]]
slug = "svc-write"
effect_class = "standard"
principal = "svc"
tool = "fs.*"
priority = 10
"#;
        parse_set(&[("a.toml".to_owned(), text.to_owned())]).expect("rules")
    }

    #[test]
    fn candidates_are_the_matching_rules_in_order_and_none_for_a_live_only_class() {
        let rules = rules();
        let order: Vec<&str> = rules.iter().map(|r| r.slug.as_str()).collect();
        let (slugs, digests) =
            grant_candidates(&rules, &proposal(EffectClass::Standard, "fs.write"), "svc");
        let mut want = order.clone();
        assert_eq!(slugs, want);
        assert_eq!(digests.len(), slugs.len());
        for (slug, digest) in slugs.iter().zip(&digests) {
            let rule = rules.iter().find(|r| r.slug == *slug).unwrap();
            assert_eq!(*digest, rule.policy_digest());
        }
        // Another principal: only the rule for anyone.
        want.retain(|s| *s == "any-write");
        let (slugs, _) = grant_candidates(
            &rules,
            &proposal(EffectClass::Standard, "fs.write"),
            "other",
        );
        assert_eq!(slugs, want);
        // No rule grants a live-only class (no rule may name one).
        let live = proposal(EffectClass::SecretOrAuthorityChange, "fs.write");
        assert!(live.class.live_only());
        assert_eq!(grant_candidates(&rules, &live, "svc"), (vec![], vec![]));
    }

    #[test]
    fn records_are_appended_by_their_appender_only() {
        let record = |kind| NewRecord {
            kind,
            text: None,
            attempt_id: None,
            receipt_id: None,
        };
        let (appender, action) = append_action(&record(RecordKind::Explanation)).unwrap();
        assert_eq!((appender, action), (Appender::Proposer, actions::PROPOSE));
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        assert!(may_append(Appender::Proposer, a, a).is_ok());
        assert!(matches!(
            may_append(Appender::Proposer, a, b),
            Err(WardError::NotProposer)
        ));
        assert!(may_append(Appender::EffectOwner, a, b).is_ok());
        assert!(matches!(
            append_action(&record(RecordKind::Judgment)),
            Err(WardError::InvalidArgument(_))
        ));
    }
}
