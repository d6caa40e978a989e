//! Promotion: the owner's authority for HelmLoop. A promotion (or a set of exact owner
//! records) is proposed as a live-only consent on `effect:helmloop` that only the contract's
//! accountable owner may settle; an approval issues the records into the outbox in the
//! verdict's transaction, and `helmloop::Link` delivers them.
//!
//! Invariant: the terms are canonical before anything is stored; nothing is issued without
//! the owner's approval; the HelmLoop office is asked (contract, identities) before Ward's
//! transaction, never inside it.

use std::sync::Arc;

use sqlx::PgPool;
use uuid::Uuid;

use crate::config::Settings;
use crate::domain::consent::{self, Binding, EffectClass, Proposal, Verdict, censor};
use crate::domain::owner_records::{self, Drafts};
use crate::domain::promotion::{self, EFFECT_OWNER, PromotionRefusal, Request, Terms};
use crate::error::{Entity, Result, WardError};
use crate::helmloop::Link;
use crate::store;
use crate::store::consents::Derived;

pub use crate::store::consents::ConsentRecord;
pub use crate::store::promotions::{OutboxRecord, PromotionRecord};

/// An issuance ready to record: the live-only consent on `effect:helmloop` whose arguments are
/// the canonical terms, what it binds, and the owner who alone may settle it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issuance {
    pub proposal: Proposal,
    terms_json: String,
    censored: String,
    arguments_digest: String,
    binding_digest: String,
    ttl_seconds: i64,
    owner: (Uuid, String),
}

/// The consent of an issuance: `(run, effect id and deferred call id, tool)` with `terms` as
/// its arguments, bound for `proposer` (the first resolution of the caller); an unusable
/// contract when the terms do not canonicalize.
pub fn issuance(
    (run_id, effect, tool): (String, &str, &str),
    terms: lychd_helmloop::Value,
    proposer: &str,
    ttl_seconds: u32,
    owner: (Uuid, String),
) -> Result<Issuance> {
    let proposal = Proposal {
        run_id,
        effect_owner: EFFECT_OWNER.to_owned(),
        effect_id: effect.to_owned(),
        effect_revision: 1,
        tool_name: tool.to_owned(),
        deferred_call_id: effect.to_owned(),
        class: EffectClass::SecretOrAuthorityChange,
        binding: Binding::default(),
        arguments: terms,
    };
    let terms_json = lychd_helmloop::to_canonical_string(&proposal.arguments);
    let censored = lychd_helmloop::to_canonical_string(&censor(&proposal.arguments));
    let digests = consent::digests(&proposal, proposer);
    let (Ok(terms_json), Ok(censored), Ok((arguments_digest, binding_digest))) =
        (terms_json, censored, digests)
    else {
        return Err(WardError::Promotion(PromotionRefusal::ContractUnusable));
    };
    Ok(Issuance {
        proposal,
        terms_json,
        censored,
        arguments_digest,
        binding_digest,
        ttl_seconds: i64::from(ttl_seconds),
        owner,
    })
}

/// Only the contract's accountable owner may settle a promotion.
pub fn owner_settles(owner: Uuid, decider: Uuid) -> Result<()> {
    if decider != owner {
        return Err(WardError::NotOwner);
    }
    Ok(())
}

pub struct Promotions {
    pool: PgPool,
    settings: Arc<Settings>,
    /// The HelmLoop office (`peers.helmloop`), when configured: promotions need it.
    helmloop: Option<Link>,
}

impl Promotions {
    pub fn new(pool: PgPool, settings: Arc<Settings>, helmloop: Option<Link>) -> Self {
        Promotions {
            pool,
            settings,
            helmloop,
        }
    }

    fn link(&self) -> Result<&Link> {
        self.helmloop
            .as_ref()
            .ok_or(WardError::Promotion(PromotionRefusal::NotConfigured))
    }

    fn ttl(&self) -> u32 {
        self.settings
            .consent_ttl(EffectClass::SecretOrAuthorityChange)
    }

    /// The live human principal named `name`, who may own a promotion.
    async fn owner(&self, name: &str) -> Result<Uuid> {
        store::promotions::owner(&self.pool, name)
            .await?
            .ok_or(WardError::Promotion(PromotionRefusal::OwnerNotEnrolled))
    }

    /// A promotion asked for by `proposer`: its contract read from the HelmLoop office, its
    /// owner enrolled here, its terms.
    pub async fn promotion(&self, asked: Request, proposer: &str) -> Result<Issuance> {
        let link = self.link()?;
        let contract = link.contract(&asked.contract).await?;
        let owner = self.owner(&contract.owner).await?;
        let terms = Terms::new(&asked, &contract);
        issuance(
            (asked.run_id, "promote", promotion::TOOL),
            terms.to_value(),
            proposer,
            self.ttl(),
            (owner, contract.owner),
        )
    }

    /// Exact owner records asked for by `proposer`: their owner enrolled here, and no record's
    /// identity taken at the HelmLoop office.
    pub async fn owner_records(
        &self,
        run_id: String,
        drafts: &Drafts,
        proposer: &str,
    ) -> Result<Issuance> {
        let link = self.link()?;
        let owner = self.owner(&drafts.owner).await?;
        for r in &drafts.records {
            if link.holds(r.record_type, &r.id).await? {
                return Err(WardError::Promotion(PromotionRefusal::IdentityTaken));
            }
        }
        issuance(
            (run_id, "issue", owner_records::TOOL),
            drafts.to_value(),
            proposer,
            self.ttl(),
            (owner, drafts.owner.clone()),
        )
    }

    /// Record `i` by `requested_by`: its consent, its promotion, and whether this call created
    /// them.
    pub async fn propose(
        &self,
        i: &Issuance,
        requested_by: Uuid,
    ) -> Result<(ConsentRecord, PromotionRecord, bool)> {
        let derived = Derived {
            censored_arguments: &i.censored,
            arguments_digest: &i.arguments_digest,
            binding_digest: &i.binding_digest,
            ttl_seconds: i.ttl_seconds,
        };
        let (owner, name) = &i.owner;
        store::promotions::propose(
            &self.pool,
            &i.proposal,
            requested_by,
            &derived,
            (*owner, name),
            &i.terms_json,
        )
        .await
    }

    /// The owner of the promotion consent `id` judges, `None` when it judges none.
    pub async fn owner_of(&self, id: Uuid) -> Result<Option<Uuid>> {
        store::promotions::owner_of(&self.pool, id).await
    }

    /// Settle promotion `id` (owned by `owner`) with `verdict` by `by`: an approval issues the
    /// records in the verdict's transaction and wakes the delivery. The consent afterwards and
    /// whether this call settled it.
    pub async fn decide(
        &self,
        (id, owner): (Uuid, Uuid),
        verdict: Verdict,
        review: &str,
        by: Uuid,
    ) -> Result<(ConsentRecord, bool)> {
        owner_settles(owner, by)?;
        let (record, changed, issued) =
            store::promotions::decide(&self.pool, id, verdict, review, by).await?;
        if changed {
            tracing::info!(consent = %id, state = record.state.as_str(), issued, "promotion settled");
        }
        if issued && let Some(link) = &self.helmloop {
            link.wake();
        }
        Ok((record, changed))
    }

    /// Promotion `id` and its consent.
    pub async fn get(&self, id: Uuid) -> Result<(PromotionRecord, ConsentRecord)> {
        let promotion = store::promotions::get(&self.pool, id)
            .await?
            .ok_or(WardError::NotFound(Entity::Promotion))?;
        let record = store::consents::get(&self.pool, id)
            .await?
            .ok_or(WardError::NotFound(Entity::Consent))?;
        Ok((promotion, record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issuance_is_a_live_only_consent_on_helmloop_bound_for_its_proposer() {
        let terms = consent::parse_arguments(br#"{"b":1,"a":"x"}"#).expect("terms");
        let owner = (Uuid::new_v4(), "alice".to_owned());
        let i = issuance(
            ("run-1".to_owned(), "promote", promotion::TOOL),
            terms,
            "p-1",
            600,
            owner.clone(),
        )
        .expect("issuance");
        assert_eq!(i.proposal.effect_owner, EFFECT_OWNER);
        assert_eq!(
            (
                i.proposal.effect_id.as_str(),
                i.proposal.deferred_call_id.as_str()
            ),
            ("promote", "promote")
        );
        assert!(i.proposal.class.live_only());
        assert_eq!(i.terms_json, r#"{"a":"x","b":1}"#);
        assert_eq!((i.ttl_seconds, &i.owner), (600, &owner));
        let (arguments, binding) = consent::digests(&i.proposal, "p-1").unwrap();
        assert_eq!(
            (i.arguments_digest, i.binding_digest.clone()),
            (arguments, binding)
        );
        // Another proposer binds another call.
        let other = issuance(
            ("run-1".to_owned(), "promote", promotion::TOOL),
            i.proposal.arguments.clone(),
            "p-2",
            600,
            owner,
        )
        .unwrap();
        assert_ne!(other.binding_digest, i.binding_digest);
    }

    #[test]
    fn only_the_owner_settles_a_promotion() {
        let (owner, other) = (Uuid::new_v4(), Uuid::new_v4());
        assert!(owner_settles(owner, owner).is_ok());
        assert!(matches!(
            owner_settles(owner, other),
            Err(WardError::NotOwner)
        ));
    }
}
