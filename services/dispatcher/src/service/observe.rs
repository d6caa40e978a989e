//! Fresh probes of animators, recorded before they are answered.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Service;
use crate::domain::observation::{Observed, settle};
use crate::domain::registry::{Animator, Capability};
use crate::error::{DispatcherError, Result};
use crate::store::admission::{self, AdmissionRow};
use crate::store::observations;

/// Fresh observations of one animator.
#[derive(Debug, Clone)]
pub struct AnimatorObserved {
    pub animator: String,
    pub observations: BTreeMap<String, observations::Cached>,
    pub failure: Option<String>,
    pub admission: Option<AdmissionRow>,
}

impl Service {
    /// Probe `keys` of `animator` (nothing recorded).
    pub(super) async fn probe_keys(
        &self,
        animator: &Animator,
        keys: &[String],
    ) -> (BTreeMap<String, Observed>, Option<String>) {
        let reg = &self.settings.registry;
        let caps: Vec<&Capability> = keys.iter().filter_map(|k| reg.capability(k)).collect();
        let result = crate::probe::probe(&self.settings.probe, animator, &caps).await;
        let (obs, failure) = settle(keys, result);
        if let Some(code) = &failure {
            tracing::warn!(animator = %animator.name, code = %code, "probe failed; observations invalidated");
        }
        (obs, failure)
    }

    /// Probe `keys` of `animator` and record the result (or the invalidation) before
    /// answering. The probe runs in its own task, so a caller that goes away does not leave a
    /// probe half-done: it completes and is recorded either way.
    async fn observe_keys(
        self: &Arc<Self>,
        animator: &str,
        keys: &[String],
    ) -> Result<Option<String>> {
        let this = self.clone();
        let animator = animator.to_owned();
        let keys = keys.to_vec();
        let task = tokio::spawn(async move {
            let a = this
                .settings
                .registry
                .animator(&animator)
                .expect("invariant: observed animators are declared");
            let (obs, failure) = this.probe_keys(a, &keys).await;
            observations::record(&this.pool, &animator, &obs).await?;
            Ok::<_, DispatcherError>(failure)
        });
        task.await.unwrap_or(Err(DispatcherError::Interrupted))
    }

    /// Probe every declared capability of each animator now (all animators when empty).
    pub async fn observe(self: &Arc<Self>, animators: &[String]) -> Result<Vec<AnimatorObserved>> {
        let reg = &self.settings.registry;
        let names: Vec<String> = if animators.is_empty() {
            reg.animators().map(|a| a.name.clone()).collect()
        } else {
            animators.to_vec()
        };
        let probes = names.iter().map(|name| {
            let keys = reg.keys_of(name).to_vec();
            async move {
                let failure = self.observe_keys(name, &keys).await?;
                Ok::<_, DispatcherError>((name.clone(), keys, failure))
            }
        });
        let done = futures::future::try_join_all(probes).await?;
        let all_keys: Vec<String> = done
            .iter()
            .flat_map(|(_, k, _)| k.iter().cloned())
            .collect();
        let cached = observations::of_keys(&self.pool, &all_keys).await?;
        let states = admission::states(&self.pool, &names).await?;
        Ok(done
            .into_iter()
            .map(|(name, keys, failure)| AnimatorObserved {
                observations: keys
                    .iter()
                    .filter_map(|k| cached.get(k).map(|c| (k.clone(), c.clone())))
                    .collect(),
                admission: states.iter().find(|s| s.animator == name).cloned(),
                animator: name,
                failure,
            })
            .collect())
    }
}
