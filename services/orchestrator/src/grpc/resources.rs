//! Handlers of transitions as resources: `RequestTransition` (recorded at once, an optional
//! bounded wait), `GetTransition`, `ListTransitions`, `WatchTransitions` (from a cursor) and
//! `CancelTransition` (raised at once). No call runs longer than the
//! server's request timeout: waits are bounded by `max_wait_ms`, the rite runs in the
//! engine's own task.

use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use lychd_proto::common::v1 as cpb;
use lychd_proto::orchestrator::v1 as pb;
use lychd_runtime::auth::Principal;
use lychd_runtime::paging;
use lychd_runtime::refusal::Violations;
use tonic::{Request, Response, Status};

use super::OrchestratorService;
use super::convert::{
    decode_transition, err, event_pb, listed_pb, recorded_outcome, request_id_ok, settled_pb,
    transition_id, view_pb, wait,
};
use crate::actions;
use crate::error::OrchestratorError;
use crate::error::reasons::{
    ADMISSION_TIMEOUT_INVALID, PAGE_TOKEN_INVALID, REQUEST_ID_INVALID, SEQUENCE_OUT_OF_RANGE,
};
use crate::service::resources::{self, Reader, RequestRow};
use crate::service::transition::{Cancelled, Heard, Submitted, TransitionRequest, Waiting};

pub(super) type EventStream =
    Pin<Box<dyn Stream<Item = Result<pb::TransitionEvent, Status>> + Send + 'static>>;

/// Default and largest page of `ListTransitions`.
const PAGE_SIZE: paging::PageSize = paging::PageSize {
    default: 50,
    max: 500,
    oversize: paging::Oversize::Lower,
};
/// How often an idle stream reads the feed again (it is also woken by this process's phases).
const FOLLOW_POLL: Duration = Duration::from_millis(250);

impl OrchestratorService {
    /// Who reads: the principal, and whether it reads every principal's transitions.
    async fn reader<T>(
        &self,
        request: &Request<T>,
        object: &str,
    ) -> Result<(Principal, bool), Status> {
        self.ctx
            .reader(
                request,
                actions::READ,
                object,
                actions::READ_ALL,
                "transition:*",
            )
            .await
    }

    /// The transition `id` as recorded, for its owner (or joiner).
    async fn recorded(&self, id: &str, principal: &str) -> Result<pb::Transition, Status> {
        resources::get(&self.ctx.pool, id, Reader::Own(principal))
            .await
            .map_err(err)?
            .as_ref()
            .and_then(view_pb)
            .ok_or_else(|| err(OrchestratorError::TransitionNotFound))
    }

    /// Wait (at most `wait`) on `waiting`; the outcome, or `None` when not settled in time. A
    /// cohort refusal heard in the wait is answered as that refusal.
    async fn hear(
        waiting: &Waiting,
        wait: Duration,
    ) -> Result<Option<pb::TransitionOutcome>, Status> {
        match waiting.hear(tokio::time::Instant::now() + wait).await {
            None => Ok(None),
            Some(Heard::WaitExpired) => Err(err(OrchestratorError::AdmissionWaitExpired)),
            Some(Heard::Settled { settled, joined }) => settled_pb(settled, joined).map(Some),
        }
    }

    pub(super) async fn request_transition_resource(
        &self,
        request: Request<pb::RequestTransitionRequest>,
    ) -> Result<Response<pb::RequestTransitionResponse>, Status> {
        let body = request.get_ref();
        let mut v = Violations::new();
        if !request_id_ok(&body.request_id) {
            v.push(
                "request_id",
                REQUEST_ID_INVALID,
                "must be 1 to 128 of A-Z a-z 0-9 . _ : -",
            );
        }
        let waited = wait(&mut v, body.wait_ms, self.settings.max_wait);
        let cmd = match (decode_transition(body), v.is_empty()) {
            (Ok(cmd), true) => cmd,
            (Ok(_), false) => return Err(err(v.into())),
            (Err(OrchestratorError::InvalidArgument(mut more)), _) => {
                more.extend(v);
                return Err(err(more.into()));
            }
            (Err(e), _) => return Err(err(e)),
        };
        let request_id = body.request_id.clone();
        // The cutoff is fixed at entry, before Ward is asked.
        let cutoff = cmd
            .timeout
            .map(|d| tokio::time::Instant::now().checked_add(d));
        let object = format!("capability:{}", cmd.key);
        let principal = self
            .ctx
            .authorize(&request, actions::TRANSITION, &object)
            .await?;
        if self.settings.registry.capability(&cmd.key).is_none() {
            return Err(err(OrchestratorError::CapabilityUnknown));
        }
        // A containment latched in this process (not yet written: the database may be out of
        // reach) fences before anything is read.
        if self.transitions.latched() {
            return Err(err(OrchestratorError::Contained));
        }
        // A request id seen before answers its transition, whatever happened since.
        if let Some(seen) = self
            .transitions
            .replay(&principal.id, &request_id)
            .await
            .map_err(err)?
        {
            return self
                .replayed(&principal.id, seen, &cmd.key, cmd.priority, waited)
                .await;
        }
        let cutoff = match cutoff {
            None => None,
            Some(None) => {
                return Err(err(OrchestratorError::invalid(
                    "admission_timeout_s",
                    ADMISSION_TIMEOUT_INVALID,
                    "makes a cutoff beyond the clock",
                )));
            }
            Some(Some(c)) => Some(c),
        };
        // An already-expired request declines before any trace, cohort or probe.
        if cutoff.is_some_and(|c| tokio::time::Instant::now() >= c) {
            return Err(err(OrchestratorError::AdmissionExpired));
        }
        // A standby (or a process that lost the lease) records and actuates nothing.
        if !self.transitions.holds_lease() {
            return Err(err(OrchestratorError::HostLeaseNotHeld));
        }
        if self.transitions.fenced().await.map_err(err)? {
            return Err(err(OrchestratorError::Contained));
        }
        let recheck = super::standing(self.recheck(
            &request,
            actions::TRANSITION,
            object,
            Some(principal.policy_generation),
        ));
        let submitted = self
            .transitions
            .submit(
                TransitionRequest {
                    capability_key: cmd.key.clone(),
                    priority: cmd.priority,
                    cutoff,
                    principal_id: principal.id.clone(),
                    recheck,
                },
                &request_id,
            )
            .await
            .map_err(err)?;
        let waiting = match submitted {
            Submitted::Replayed(seen) => {
                return self
                    .replayed(&principal.id, seen, &cmd.key, cmd.priority, waited)
                    .await;
            }
            Submitted::Recorded(w) => w,
        };
        let outcome = Self::hear(&waiting, waited).await?;
        // The outcome heard stands even when the record cannot be read back now.
        let transition = match self.recorded(&waiting.transition_id, &principal.id).await {
            Ok(t) => Some(t),
            Err(_) if outcome.is_some() => None,
            Err(e) => return Err(e),
        };
        Ok(Response::new(pb::RequestTransitionResponse {
            outcome: outcome.or_else(|| transition.as_ref().and_then(recorded_outcome)),
            transition,
            replayed: false,
        }))
    }

    /// The answer to a request id seen before: its transition (conflicting target: refused).
    async fn replayed(
        &self,
        principal: &str,
        seen: RequestRow,
        key: &str,
        priority: u8,
        waited: Duration,
    ) -> Result<Response<pb::RequestTransitionResponse>, Status> {
        if seen.capability_key != key || seen.priority != i16::from(priority) {
            return Err(err(OrchestratorError::RequestIdConflict));
        }
        let outcome = match self.transitions.live(&seen.transition_id, seen.joined) {
            Some(w) => Self::hear(&w, waited).await?,
            None => None,
        };
        let transition = self.recorded(&seen.transition_id, principal).await?;
        Ok(Response::new(pb::RequestTransitionResponse {
            outcome: outcome.or_else(|| recorded_outcome(&transition)),
            transition: Some(transition),
            replayed: true,
        }))
    }

    pub(super) async fn get_transition_resource(
        &self,
        request: Request<pb::GetTransitionRequest>,
    ) -> Result<Response<pb::GetTransitionResponse>, Status> {
        let id = transition_id("transition_id", &request.get_ref().transition_id).map_err(err)?;
        let (principal, all) = self.reader(&request, &format!("transition:{id}")).await?;
        let reader = if all {
            Reader::All
        } else {
            Reader::Own(&principal.id)
        };
        let view = resources::get(&self.ctx.pool, &id, reader)
            .await
            .map_err(err)?;
        let transition = view
            .as_ref()
            .and_then(view_pb)
            .ok_or_else(|| err(OrchestratorError::TransitionNotFound))?;
        Ok(Response::new(pb::GetTransitionResponse {
            transition: Some(transition),
        }))
    }

    pub(super) async fn list_transitions_resource(
        &self,
        request: Request<pb::ListTransitionsRequest>,
    ) -> Result<Response<pb::ListTransitionsResponse>, Status> {
        let page = request.get_ref().page.clone().unwrap_or_default();
        let before = paging::Tokens::Plain
            .after::<paging::Seq>(&page.page_token)
            .map_err(|bad| {
                err(OrchestratorError::invalid(
                    "page.page_token",
                    PAGE_TOKEN_INVALID,
                    bad.to_string(),
                ))
            })?
            .map(|paging::Seq(n)| n);
        let size = PAGE_SIZE.of(page.page_size).unwrap_or(PAGE_SIZE.max);
        let (principal, all) = self.reader(&request, "transition:*").await?;
        let reader = if all {
            Reader::All
        } else {
            Reader::Own(&principal.id)
        };
        let rows = resources::list(&self.ctx.pool, reader, before, i64::from(size) + 1)
            .await
            .map_err(err)?;
        let more = rows.len() > size as usize;
        let rows = &rows[..rows.len().min(size as usize)];
        let next_page_token = match rows.last() {
            Some(l) if more => paging::Tokens::Plain.token(&paging::Seq(l.requested.sequence)),
            _ => String::new(),
        };
        Ok(Response::new(pb::ListTransitionsResponse {
            transitions: rows.iter().map(listed_pb).collect(),
            page: Some(cpb::PageResponse { next_page_token }),
        }))
    }

    pub(super) async fn cancel_transition_resource(
        &self,
        request: Request<pb::CancelTransitionRequest>,
    ) -> Result<Response<pb::CancelTransitionResponse>, Status> {
        let body = request.get_ref();
        let mut v = Violations::new();
        let waited = wait(&mut v, body.wait_ms, self.settings.max_wait);
        let id = match transition_id("transition_id", &body.transition_id) {
            Ok(id) if v.is_empty() => id,
            Ok(_) => return Err(err(v.into())),
            Err(OrchestratorError::InvalidArgument(mut more)) => {
                more.extend(v);
                return Err(err(more.into()));
            }
            Err(e) => return Err(err(e)),
        };
        let principal = self
            .ctx
            .authorize(&request, actions::CANCEL, &format!("transition:{id}"))
            .await?;
        // Only the lease holder runs transitions: a standby has none to cancel.
        if !self.transitions.holds_lease() {
            return Err(err(OrchestratorError::HostLeaseNotHeld));
        }
        let waiting = match self.transitions.cancel(&id, &principal.id) {
            Cancelled::NotRunning => return Err(err(OrchestratorError::TransitionNotRunning)),
            Cancelled::NotOwned => return Err(err(OrchestratorError::TransitionNotOwned)),
            Cancelled::Raised(w) => w,
        };
        let outcome = match waiting.hear(tokio::time::Instant::now() + waited).await {
            Some(Heard::Settled { settled, .. }) => Some(settled_pb(settled, false)?),
            _ => None,
        };
        let transition = self.recorded(&id, &principal.id).await.ok();
        Ok(Response::new(pb::CancelTransitionResponse {
            outcome: outcome.or_else(|| transition.as_ref().and_then(recorded_outcome)),
            transition,
        }))
    }

    pub(super) async fn watch_transitions_resource(
        &self,
        request: Request<pb::WatchTransitionsRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let after = match request.get_ref().after_sequence {
            None => None,
            Some(n) => match i64::try_from(n) {
                Ok(n) => Some(n),
                Err(_) => {
                    return Err(err(OrchestratorError::invalid(
                        "after_sequence",
                        SEQUENCE_OUT_OF_RANGE,
                        "must be at most 2^63 - 1",
                    )));
                }
            },
        };
        let (principal, all) = self.reader(&request, "transition:*").await?;
        let place = self
            .streams
            .open(&principal.id)
            .map_err(|refused| err(OrchestratorError::from(refused)))?;
        let read = self.recheck(&request, actions::READ, "transition:*".into(), None);
        let every = self.settings.stream_recheck_interval;
        let pool = self.ctx.pool.clone();
        let after = match after {
            Some(a) => a,
            None => resources::now(&pool).await.map_err(err)?,
        };
        let mut poked = self.transitions.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<pb::TransitionEvent, Status>>(64);
        let owner = principal.id;
        tokio::spawn(async move {
            let _place = place;
            let reader = if all {
                Reader::All
            } else {
                Reader::Own(&owner)
            };
            let mut cursor = lychd_runtime::feed::Cursor::after(after);
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                let (events, full) = match resources::follow(&pool, reader, &mut cursor).await {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = tx.send(Err(err(e))).await;
                        return;
                    }
                };
                for e in &events {
                    if tx.send(Ok(event_pb(e))).await.is_err() {
                        return;
                    }
                }
                if full {
                    continue;
                }
                tokio::select! {
                    () = tx.closed() => return,
                    _ = tick.tick() => {
                        if let Err(refused) = read().await {
                            let _ = tx.send(Err(refused)).await;
                            return;
                        }
                    }
                    _ = poked.recv() => {}
                    () = tokio::time::sleep(FOLLOW_POLL) => {}
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}
