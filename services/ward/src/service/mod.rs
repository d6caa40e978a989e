//! Ward's use cases, one module per capability: `identity` (principals, credentials, sessions,
//! enrollment, assignments), `decisions` (Authorize and Authenticate asked over the API, the
//! decision log, counted strangers, the audit), `consent` (verdicts, consumption, revocation,
//! the consent feed), `proposals` (ProposeEffect, standing preauthorization, proposal history)
//! and `promotion` (the owner's promotion authority for HelmLoop).
//!
//! Invariant: a service calls `store` and `domain` and knows nothing of protobuf or tonic; the
//! handlers in `grpc/` decode, authorize and encode around it. The store owns the transactions
//! (each use case is one transaction or one statement there); a service never holds a
//! transaction across a call to another office.

pub mod consent;
pub mod decisions;
pub mod identity;
pub mod metrics;
pub mod promotion;
pub mod proposals;
pub mod retention;

use std::sync::Arc;

use lychd_runtime::server::Finishing;
use sqlx::PgPool;

use crate::config::Settings;
use crate::helmloop::Link;
use crate::store::decision_log::DecisionLog;
use crate::store::strangers::Tally;

pub use crate::store::Page;

/// Ward's services, started once per process.
pub struct Services {
    pub identity: identity::Identity,
    pub decisions: Arc<decisions::Decisions>,
    pub consents: consent::Consents,
    pub proposals: proposals::Proposals,
    pub promotions: Arc<promotion::Promotions>,
}

impl Services {
    /// Start the services on `pool`: the decision log's writer, the standing rules (as one set,
    /// before the first call: a bad file refuses the start), the HelmLoop delivery when
    /// `helmloop` is configured, and the strangers' tally. Every background task is pushed to
    /// `finishing`, so it ends before the process does.
    pub async fn start(
        pool: PgPool,
        settings: Settings,
        helmloop: Option<Link>,
        finishing: &Finishing,
    ) -> anyhow::Result<Services> {
        let (log, writer) = DecisionLog::start_with(pool.clone(), settings.decision_log_max_age);
        finishing.push(writer);
        metrics::observe_queue(&log, "rpc");
        let rules = settings
            .preauth_rules()
            .map_err(|e| anyhow::anyhow!("preauthorization rules refused: {e}"))?;
        crate::store::preauth::sync(&pool, &rules)
            .await
            .map_err(|e| anyhow::anyhow!("preauthorization rules not synchronised: {e}"))?;
        tracing::info!(
            rules = rules.len(),
            "standing preauthorization rules loaded"
        );
        if let Some(link) = &helmloop {
            finishing.push(link.start(pool.clone(), settings.promotion_retry_interval));
        }
        let (strangers, writer) = Tally::start(pool.clone());
        finishing.push(writer);
        let strangers = Arc::new(strangers);
        let settings = Arc::new(settings);
        Ok(Services {
            identity: identity::Identity::new(pool.clone(), strangers.clone()),
            decisions: Arc::new(decisions::Decisions::new(pool.clone(), log, strangers)),
            consents: consent::Consents::new(pool.clone()),
            proposals: proposals::Proposals::new(pool.clone(), settings.clone(), Arc::new(rules)),
            promotions: Arc::new(promotion::Promotions::new(pool, settings, helmloop)),
        })
    }
}
