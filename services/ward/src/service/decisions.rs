//! Decisions asked over Ward's API: `Authenticate` and `Authorize` about someone else's token
//! (the asker's own `ward:decide` question resolved in the same statement), their records on the
//! decision log (ADR 0004), the counted refusals of strangers (ADR 0005), and the audit listing.
//!
//! Invariant: no decision is cached; a refusal that authenticates nobody is counted (against
//! the caller's source, or the office a token was presented to), never audited.

use std::sync::Arc;

use sqlx::PgPool;

use crate::actions;
use crate::domain::decision::Reason;
use crate::error::Result;
use crate::store;
use crate::store::Page;
use crate::store::decision_log::DecisionLog;
use crate::store::strangers::Tally;

pub use crate::store::audit::AuditRecord;
pub use crate::store::decisions::{
    Asked, Authentication, Batching, DecisionRecord, Question, Resolved, Resolver,
};

/// The object an asker must hold `ward:decide` on to ask about a token presented to
/// `audience`.
pub fn decision_object(audience: &str) -> String {
    format!("decision:{audience}")
}

/// Where a token asked about came from, as its refusals are counted: the office it was
/// presented to.
pub fn presented_to(audience: &str) -> String {
    format!("office:{audience}")
}

/// The question an asker's own token must answer before Ward resolves someone else's: the same
/// one `ServeContext::authorize` would ask (audience this office, purpose the verb), about the
/// audience `object` names.
pub fn decide_question<'a>(token: &'a str, object: &'a str) -> Question<'a> {
    Question {
        token,
        action: actions::DECIDE.name,
        object,
        audience: crate::OFFICE.name(),
        purpose: actions::DECIDE.verb(),
        expected_policy_generation: None,
        asked_by: None,
    }
}

pub struct Decisions {
    /// Resolves the questions asked together in one statement.
    resolver: Resolver,
    /// Records of the decisions asked over `Authorize` and `Authenticate`.
    log: DecisionLog,
    /// Counts of refusals of callers and tokens that authenticate nobody.
    strangers: Arc<Tally>,
}

impl Decisions {
    pub fn new(pool: PgPool, log: DecisionLog, strangers: Arc<Tally>) -> Self {
        Decisions {
            resolver: Resolver::start(pool),
            log,
            strangers,
        }
    }

    /// Count one refusal of a caller from `source` that authenticates nobody.
    pub fn count_stranger(&self, source: &str, reason: Reason) {
        self.strangers.count(source, reason.as_str());
    }

    /// Resolve `token` presented to Ward itself (the caller's own).
    pub async fn authenticate(&self, token: &str) -> Result<Authentication> {
        store::decisions::authenticate(&self.resolver, token, crate::OFFICE.name()).await
    }

    /// `Authenticate` about `token` presented to `audience`, asked by `bearer` (from `source`).
    /// An asker that authenticates nobody is counted against `source`; a refused token against
    /// the office it was presented to.
    pub async fn authenticate_asked(
        &self,
        source: &str,
        bearer: &str,
        token: &str,
        audience: &str,
    ) -> Result<Asked<Authentication>> {
        let object = decision_object(audience);
        let asker = decide_question(bearer, &object);
        let asked = store::decisions::authenticate_asked(
            &self.resolver,
            &self.log,
            &asker,
            token,
            audience,
        )
        .await?;
        match &asked {
            Asked::Refused(d) => self.count_asker(source, d),
            Asked::Answered(Authentication::Refused(reason), _) => {
                self.count_stranger(&presented_to(audience), *reason);
            }
            Asked::Answered(Authentication::Authenticated(_), _) => {}
        }
        Ok(asked)
    }

    /// `Authorize`'s question `q`, asked by `bearer` (from `source`), counted as
    /// [`Decisions::authenticate_asked`] counts.
    pub async fn authorize_asked(
        &self,
        source: &str,
        bearer: &str,
        q: &Question<'_>,
    ) -> Result<Asked<DecisionRecord>> {
        let object = decision_object(q.audience);
        let asker = decide_question(bearer, &object);
        let started = std::time::Instant::now();
        let asked = store::decisions::authorize_asked(&self.resolver, &self.log, &asker, q).await?;
        super::metrics::decided("rpc", started);
        match &asked {
            Asked::Refused(d) => self.count_asker(source, d),
            Asked::Answered(d, _) if d.reason.is_authentication_failure() => {
                self.count_stranger(&presented_to(q.audience), d.reason);
            }
            Asked::Answered(..) => {}
        }
        Ok(asked)
    }

    /// `AuthorizeBatch`'s questions `qs` (all about tokens presented to `audience`), asked by
    /// `bearer` (from `source`), each counted as [`Decisions::authorize_asked`] counts.
    pub async fn authorize_batch(
        &self,
        source: &str,
        bearer: &str,
        audience: &str,
        qs: &[Question<'_>],
    ) -> Result<Asked<Vec<DecisionRecord>>> {
        let object = decision_object(audience);
        let asker = decide_question(bearer, &object);
        let started = std::time::Instant::now();
        let asked =
            store::decisions::authorize_batch(&self.resolver, &self.log, &asker, qs).await?;
        match &asked {
            Asked::Refused(d) => self.count_asker(source, d),
            Asked::Answered(ds, _) => {
                for d in ds {
                    super::metrics::decided("rpc", started);
                    if d.reason.is_authentication_failure() {
                        self.count_stranger(&presented_to(audience), d.reason);
                    }
                }
            }
        }
        Ok(asked)
    }

    /// An asker's refusal: counted when it authenticates nobody (else it is audited).
    fn count_asker(&self, source: &str, d: &DecisionRecord) {
        if d.reason.is_authentication_failure() {
            self.count_stranger(source, d.reason);
        }
    }

    /// How much the questions asked so far were batched.
    pub fn batching(&self) -> Batching {
        self.resolver.batching()
    }

    /// Write every decision answered and every refusal counted so far (before a listing).
    pub async fn flush(&self) -> Result<()> {
        self.log.flush().await?;
        self.strangers.flush().await
    }

    /// One page of the audit, newest first.
    pub async fn audit(&self, size: u32, before: Option<i64>) -> Result<Page<AuditRecord>> {
        store::audit::list(self.resolver.pool(), size, before).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_asker_is_asked_ward_decide_on_the_audience_it_asks_for() {
        let object = decision_object("dispatcher");
        assert_eq!(object, "decision:dispatcher");
        let q = decide_question("tok", &object);
        assert_eq!(
            (q.token, q.action, q.object, q.audience, q.purpose),
            (
                "tok",
                "ward:decide",
                "decision:dispatcher",
                "ward",
                "decide"
            )
        );
        assert_eq!(q.expected_policy_generation, None);
        assert_eq!(q.asked_by, None);
    }

    #[test]
    fn a_refused_token_is_counted_against_the_office_it_was_presented_to() {
        assert_eq!(presented_to("archive"), "office:archive");
    }
}
