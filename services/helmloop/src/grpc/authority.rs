//! How the handlers ask Ward: decoding behind authentication, readers of subjects, appends
//! authorized per record authority, and decisions asked again at the write.

use super::*;

impl HelmLoopService {
    /// Decode with `decode`; on bad input, authenticate the caller first, so a junk or missing
    /// session is `UNAUTHENTICATED` whatever else is wrong (the self-authenticating `Reduce`).
    pub(super) async fn decode_authenticated(
        &self,
        request: &Request<()>,
        decode: impl FnOnce() -> crate::error::Result<()>,
    ) -> Result<(), Status> {
        self.ctx
            .authorizer
            .decoded(request, decode().map_err(err))
            .await
    }

    /// A reader without `helmloop:read` on `subject:*` may read what belongs to `subjects`
    /// when it holds the action on each of them. Anything else (nothing found, an evaluation
    /// of no subject, one subject denied) is answered with the refusal on `subject:*`, so a
    /// denied caller learns neither whether the record exists nor whose it is.
    pub(super) async fn read_subjects<T>(
        &self,
        request: &Request<T>,
        subjects: BTreeSet<&str>,
    ) -> Result<(), Status> {
        let mut allowed = !subjects.is_empty();
        for subject in subjects {
            let object = subject_object(subject);
            if self
                .ctx
                .authorizer
                .decision(request, actions::READ, &object, None)
                .await?
                .is_none()
            {
                allowed = false;
                break;
            }
        }
        if allowed {
            return Ok(());
        }
        self.ctx
            .authorize(request, actions::READ, ANY_SUBJECT)
            .await
            .map(|_| ())
    }

    /// May the caller append `verified`? Each record needs its authority's action on its own
    /// subject and, when its identity already holds a body, on the first body's subject with
    /// the first body's authority: nobody makes a second body of a record they have no
    /// authority over. An owner record's action is asked on `subject:*` only: an identity of an
    /// owner record is claimed by the issuer (the holder of the action on every subject) alone.
    /// Other actions are asked on `subject:*` first and, when that is denied, per subject
    /// (refused at the first denial). Returns the principal and every (action, object)
    /// allowed, for the re-check before the write.
    pub(super) async fn authorize_append(
        &self,
        request: &Request<()>,
        verified: &[Verified],
        known: &BTreeMap<Identity, FirstBody>,
    ) -> Result<(Principal, Vec<(Action, String)>), Status> {
        let mut needed: BTreeMap<Authority, BTreeSet<&str>> = BTreeMap::new();
        for r in verified {
            needed
                .entry(r.authority)
                .or_default()
                .insert(r.subject_id.as_str());
        }
        for first in known.values() {
            needed
                .entry(first.authority)
                .or_default()
                .insert(first.subject_id.as_str());
        }
        let asked = needed.into_iter().map(|(authority, subjects)| {
            let action = append_action(authority);
            async move {
                if authority.is_owner() {
                    let p = self.ctx.authorize(request, action, ANY_SUBJECT).await?;
                    return Ok::<_, Status>((p, vec![(action, ANY_SUBJECT.to_owned())]));
                }
                if let Some(p) = self
                    .ctx
                    .authorizer
                    .decision(request, action, ANY_SUBJECT, None)
                    .await?
                {
                    return Ok((p, vec![(action, ANY_SUBJECT.to_owned())]));
                }
                let mut principal = None;
                let mut decided = Vec::new();
                for s in subjects {
                    let object = subject_object(s);
                    principal = Some(self.ctx.authorize(request, action, &object).await?);
                    decided.push((action, object));
                }
                Ok((
                    principal.expect("invariant: a needed authority has a subject"),
                    decided,
                ))
            }
        });
        let answers = futures::future::try_join_all(asked).await?;
        let mut principal = None;
        let mut decided = Vec::new();
        for (p, d) in answers {
            principal.get_or_insert(p);
            decided.extend(d);
        }
        let principal = principal.expect("invariant: at least one record was verified");
        Ok((principal, decided))
    }

    /// Ward asked again whether the caller may still do `action` on `object`, with `first`'s
    /// policy generation: awaited immediately before the write.
    pub(super) fn recheck(
        &self,
        request: &Request<()>,
        action: Action,
        object: &str,
        first: &Principal,
    ) -> impl std::future::Future<Output = crate::error::Result<()>> + use<> {
        self.recheck_all(request, vec![(action, object.to_owned())], first)
    }

    /// [`Self::recheck`] for every decided pair, asked together.
    pub(super) fn recheck_all(
        &self,
        request: &Request<()>,
        decided: Vec<(Action, String)>,
        first: &Principal,
    ) -> impl std::future::Future<Output = crate::error::Result<()>> + use<> {
        let authorizer = self.ctx.authorizer.clone();
        let metadata = request.metadata().clone();
        let generation = first.policy_generation;
        async move {
            let asking = Request::from_parts(metadata, tonic::Extensions::default(), ());
            let asks = decided.iter().map(|(action, object)| {
                authorizer.authorize_for(&asking, *action, object, action.verb(), Some(generation))
            });
            futures::future::try_join_all(asks)
                .await
                .map(|_| ())
                .map_err(|refused| HelmLoopError::Refused(Box::new(refused)))
        }
    }
}
