//! How the handlers ask Ward: decoding behind authentication, decisions asked again at the
//! effect ([`Recheck`]), answers that are not refusals, lease readers and animator sets.

use std::sync::Arc;

use lychd_runtime::auth::{Action, Principal};
use tonic::{Request, Status};

use super::{DispatcherService, err};
use crate::actions;
use crate::error::DispatcherError;
use crate::service::Recheck;

impl DispatcherService {
    /// Decode with `decode`; on bad input, authenticate the caller first, so a junk or
    /// missing session is `UNAUTHENTICATED` whatever else is wrong. For the self-authenticating
    /// lease methods (their decision authenticates a well-formed request; a bad one is rare and
    /// may take the extra question). Ward is never asked about an object built from bad input.
    pub(super) async fn decode_authenticated<T, C>(
        &self,
        request: &Request<T>,
        decode: impl FnOnce(&Request<T>) -> Result<C, DispatcherError>,
    ) -> Result<C, Status> {
        self.ctx
            .authorizer
            .decoded(request, decode(request).map_err(err))
            .await
    }

    /// Ward asked again, later, whether the caller of `request` may still do `action` on
    /// `object`: with `first`'s policy generation when given (an effect prepared under that
    /// decision), or whatever the caller's policy now (a stream's standing authority).
    pub(super) fn recheck<T>(
        &self,
        request: &Request<T>,
        action: Action,
        object: String,
        first: Option<&Principal>,
    ) -> Recheck {
        let authorizer = self.ctx.authorizer.clone();
        let metadata = request.metadata().clone();
        let generation = first.map(|p| p.policy_generation);
        Arc::new(move || {
            let authorizer = authorizer.clone();
            let asking = Request::from_parts(metadata.clone(), tonic::Extensions::default(), ());
            let object = object.clone();
            Box::pin(async move {
                authorizer
                    .authorize_for(&asking, action, &object, action.verb(), generation)
                    .await
                    .map(|_| ())
                    .map_err(|refused| DispatcherError::Refused(Box::new(refused)))
            })
        })
    }

    /// Does the caller hold `action` on `object` (with `first`'s policy generation)? A denial
    /// is an answer here, not a refusal (and is not logged as one); a session that
    /// authenticates nobody, or Ward unreachable, is the refusal.
    pub(super) async fn holds<T>(
        &self,
        request: &Request<T>,
        action: Action,
        object: &str,
        first: Option<&Principal>,
    ) -> Result<bool, Status> {
        Ok(self
            .ctx
            .authorizer
            .decision(request, action, object, first.map(|p| p.policy_generation))
            .await?
            .is_some())
    }

    /// A reader of leases: `dispatcher:read` on `lease:*`, and whether it may see every
    /// principal's (`dispatcher:read_all` on `lease:*`), asked together.
    pub(super) async fn reader<T>(
        &self,
        request: &Request<T>,
    ) -> Result<(Principal, bool), Status> {
        self.ctx
            .reader(
                request,
                actions::READ,
                "lease:*",
                actions::READ_ALL,
                "lease:*",
            )
            .await
    }

    /// `action` on the (decoded, distinct) `animators`: one decision on `animator:*` first,
    /// and one per animator only when that is denied (all of them when none is named).
    pub(super) async fn authorize_animators<T>(
        &self,
        request: &Request<T>,
        action: Action,
        animators: &[String],
    ) -> Result<Principal, Status> {
        if animators.is_empty() {
            return self.ctx.authorize(request, action, "animator:*").await;
        }
        if let Some(principal) = self
            .ctx
            .authorizer
            .decision(request, action, "animator:*", None)
            .await?
        {
            return Ok(principal);
        }
        let mut principal = None;
        for a in animators {
            principal = Some(
                self.ctx
                    .authorize(request, action, &format!("animator:{a}"))
                    .await?,
            );
        }
        Ok(principal.expect("invariant: animators is non-empty"))
    }
}
