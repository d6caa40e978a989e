//! gRPC handlers of `lychd.dispatcher.v1.Dispatcher`: authenticate (the layer, or the handler's
//! own decision on the self-authenticating lease methods) → decode → authorize (action and
//! object declared next to each handler, the object built from decoded input only) → call the
//! service → encode. Nothing else.
//!
//! Authority at the effect: a handler that writes after awaited preparation hands the service
//! a [`Recheck`] (Ward asked again, with the first decision's policy generation) that is
//! awaited immediately before the write; a handler whose only preparation is its decision
//! writes right after it. Ownership: leases and closures are their principal's; another
//! principal's is answered as not found unless Ward allows the caller the administrative
//! action, asked only then and immediately before that write.

mod authority;
mod convert;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use lychd_proto::dispatcher::v1 as pb;
use lychd_proto::dispatcher::v1::dispatcher_server::{Dispatcher, DispatcherServer};
use lychd_runtime::server::ServeContext;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use crate::actions;
use crate::error::DispatcherError;
use crate::service::{Filter, LeaseOutcome, Recheck, Service};

pub struct DispatcherService {
    ctx: ServeContext,
    service: Arc<Service>,
    /// The retention job, stopped when serving ends and this service is dropped.
    _retention: Option<lychd_runtime::retention::Job>,
}

/// Page sizes of `ListLeases`: at most 1000, a larger size lowered to it.
const PAGES: lychd_runtime::paging::PageSize = lychd_runtime::paging::PageSize::lowered(1000);

fn err(e: DispatcherError) -> Status {
    e.into()
}

#[tonic::async_trait]
impl Dispatcher for DispatcherService {
    async fn describe(
        &self,
        request: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::DescribeResponse>, Status> {
        self.ctx
            .authorize(&request, actions::DESCRIBE, "office:dispatcher")
            .await?;
        let office =
            lychd_runtime::describe::describe(&self.ctx, request.get_ref().include_peers).await?;
        Ok(Response::new(pb::DescribeResponse {
            office: Some(office),
        }))
    }

    async fn list_capabilities(
        &self,
        request: Request<pb::ListCapabilitiesRequest>,
    ) -> Result<Response<pb::ListCapabilitiesResponse>, Status> {
        self.ctx
            .authorize(&request, actions::READ, "capability:*")
            .await?;
        let reg = &self.service.settings.registry;
        let (cached, states) = self.service.snapshot().await.map_err(err)?;
        Ok(Response::new(pb::ListCapabilitiesResponse {
            animators: reg.animators().map(convert::animator_info).collect(),
            capabilities: reg
                .capabilities()
                .map(|c| pb::CapabilityInfo {
                    capability_key: c.key_text.clone(),
                    animator: c.animator().to_owned(),
                    route: reg.animator(c.animator()).map(|a| convert::route(a, c)),
                    aliases: c.aliases.clone(),
                    observation: Some(convert::observation(&c.key_text, cached.get(&c.key_text))),
                })
                .collect(),
            admission: states.iter().map(convert::admission).collect(),
        }))
    }

    async fn lease(
        &self,
        request: Request<pb::LeaseRequest>,
    ) -> Result<Response<pb::LeaseResponse>, Status> {
        let (metadata, extensions, message) = request.into_parts();
        let asking = Request::from_parts(metadata, extensions, ());
        let cmd = self
            .decode_authenticated(&asking, |_| {
                convert::lease_request(message, &self.service.settings.ttl)
            })
            .await?;
        let object = match &cmd.demand.key {
            Some(k) => format!("capability:{k}"),
            None => "capability:*".to_owned(),
        };
        // The read-only half overlaps the caller's authorization; its answer is used only
        // once the caller is allowed.
        let (principal, prepared) = tokio::join!(
            self.ctx.authorize(&asking, actions::LEASE, &object),
            self.service.prepare(&cmd.demand)
        );
        let principal = principal?;
        let prepared = prepared.map_err(err)?;
        let recheck = self.recheck(&asking, actions::LEASE, object, Some(&principal));
        let outcome = self
            .service
            .lease(&principal.id, &cmd, prepared, recheck)
            .await
            .map_err(err)?;
        use pb::lease_response::Outcome;
        let outcome = match outcome {
            LeaseOutcome::Granted(g) => Outcome::Granted(pb::Grant {
                lease_id: g.lease_id.to_string(),
                capability_key: g.capability_key.clone(),
                animator: g.animator_name.clone(),
                route: g.declared.as_ref().map(|(a, c)| convert::route(a, c)),
                issued_at: Some(convert::ts(g.issued_at)),
                expires_at: Some(convert::ts(g.expires_at)),
                holder: g.holder.clone(),
                priority: g.priority,
                admission_generation: u64::try_from(g.generation).unwrap_or(0),
            }),
            LeaseOutcome::TransitionRequired {
                capability_key,
                animator,
                ready_estimate_seconds,
            } => Outcome::HardwareTransitionRequired(pb::HardwareTransitionRequired {
                capability_key,
                animator,
                ready_estimate_seconds,
            }),
            LeaseOutcome::Unavailable {
                reason,
                capability_key,
                animator,
                observed,
            } => {
                let (observed_phase, observed_reason) = observed
                    .as_ref()
                    .map(convert::observed)
                    .unwrap_or((pb::Phase::Unspecified as i32, String::new()));
                Outcome::Unavailable(pb::Unavailable {
                    reason: reason.code().to_owned(),
                    capability_key,
                    animator,
                    observed_phase,
                    observed_reason,
                })
            }
        };
        Ok(Response::new(pb::LeaseResponse {
            outcome: Some(outcome),
        }))
    }

    async fn renew_lease(
        &self,
        request: Request<pb::RenewLeaseRequest>,
    ) -> Result<Response<pb::RenewLeaseResponse>, Status> {
        let (id, holder, ttl) = self
            .decode_authenticated(&request, |r| {
                convert::renew_request(r.get_ref(), &self.service.settings.ttl)
            })
            .await?;
        let principal = self
            .ctx
            .authorize(&request, actions::LEASE, "lease:*")
            .await?;
        let ttl = i32::try_from(ttl).unwrap_or(i32::MAX);
        let renewed = match self
            .service
            .renew(id, &holder, ttl, Some(&principal.id))
            .await
        {
            Err(DispatcherError::LeaseNotOwned)
                if self
                    .holds(&request, actions::LEASE_ADMIN, "lease:*", Some(&principal))
                    .await? =>
            {
                self.service.renew(id, &holder, ttl, None).await
            }
            other => other,
        };
        let lease = renewed.map_err(err)?;
        Ok(Response::new(pb::RenewLeaseResponse {
            lease: Some(convert::lease_info(&lease)),
        }))
    }

    async fn release_lease(
        &self,
        request: Request<pb::ReleaseLeaseRequest>,
    ) -> Result<Response<pb::ReleaseLeaseResponse>, Status> {
        let (id, holder) = self
            .decode_authenticated(&request, |r| convert::release_request(r.get_ref()))
            .await?;
        let principal = self
            .ctx
            .authorize(&request, actions::LEASE, "lease:*")
            .await?;
        let released = match self.service.release(id, &holder, Some(&principal.id)).await {
            Err(DispatcherError::LeaseNotOwned)
                if self
                    .holds(&request, actions::LEASE_ADMIN, "lease:*", Some(&principal))
                    .await? =>
            {
                self.service.release(id, &holder, None).await
            }
            other => other,
        };
        let (lease, already_over) = released.map_err(err)?;
        Ok(Response::new(pb::ReleaseLeaseResponse {
            lease: Some(convert::lease_info(&lease)),
            already_over,
        }))
    }

    async fn get_lease(
        &self,
        request: Request<pb::GetLeaseRequest>,
    ) -> Result<Response<pb::GetLeaseResponse>, Status> {
        let lookup = convert::get_request(request.get_ref()).map_err(err)?;
        let (principal, all) = self.reader(&request).await?;
        let owner = (!all).then_some(principal.id.as_str());
        let lease = self
            .service
            .find_lease(lookup, &principal.id, owner)
            .await
            .map_err(err)?;
        Ok(Response::new(pb::GetLeaseResponse {
            lease: Some(convert::lease_info(&lease)),
        }))
    }

    async fn list_leases(
        &self,
        request: Request<pb::ListLeasesRequest>,
    ) -> Result<Response<pb::ListLeasesResponse>, Status> {
        let cmd = convert::list_request(request.get_ref()).map_err(err)?;
        let (principal, all) = self.reader(&request).await?;
        let page = request.get_ref().page.clone().unwrap_or_default();
        let size = PAGES.of(page.page_size).unwrap_or(PAGES.max);
        let rows = self
            .service
            .list_leases(
                Filter {
                    animators: &cmd.animators,
                    include_inactive: cmd.include_inactive,
                    owner: (!all).then_some(principal.id.as_str()),
                    request_id: cmd.request_id.as_deref(),
                },
                cmd.after,
                i64::from(size) + 1,
            )
            .await
            .map_err(err)?;
        let more = rows.len() > size as usize;
        let rows = &rows[..rows.len().min(size as usize)];
        Ok(Response::new(pb::ListLeasesResponse {
            leases: rows.iter().map(convert::lease_info).collect(),
            page: Some(lychd_proto::common::v1::PageResponse {
                next_page_token: if more {
                    rows.last()
                        .map(convert::next_page_token)
                        .unwrap_or_default()
                } else {
                    String::new()
                },
            }),
        }))
    }

    async fn observe_animators(
        &self,
        request: Request<pb::ObserveAnimatorsRequest>,
    ) -> Result<Response<pb::ObserveAnimatorsResponse>, Status> {
        let names = convert::animators(
            &self.service.settings.registry,
            &request.get_ref().animators,
            true,
        )
        .map_err(err)?;
        self.authorize_animators(&request, actions::OBSERVE, &names)
            .await?;
        let observed = self.service.observe(&names).await.map_err(err)?;
        Ok(Response::new(pb::ObserveAnimatorsResponse {
            animators: observed
                .iter()
                .map(|o| pb::AnimatorObservation {
                    animator: o.animator.clone(),
                    observations: self
                        .service
                        .settings
                        .registry
                        .keys_of(&o.animator)
                        .iter()
                        .map(|k| convert::observation(k, o.observations.get(k)))
                        .collect(),
                    probe_ok: o.failure.is_none(),
                    probe_error: o.failure.clone().unwrap_or_default(),
                    admission: o.admission.as_ref().map(convert::admission),
                })
                .collect(),
        }))
    }

    async fn close_admission(
        &self,
        request: Request<pb::CloseAdmissionRequest>,
    ) -> Result<Response<pb::CloseAdmissionResponse>, Status> {
        let (request_id, animators, reason) =
            convert::close_request(&self.service.settings.registry, request.get_ref())
                .map_err(err)?;
        let principal = self
            .authorize_animators(&request, actions::ADMISSION, &animators)
            .await?;
        let closed = self
            .service
            .close_admission(&request_id, &animators, &reason, &principal.id)
            .await
            .map_err(err)?;
        if !closed.replayed {
            tracing::info!(animators = ?animators, "admission closed");
            tracing::debug!(closure = %closed.token, "admission closed");
        }
        Ok(Response::new(pb::CloseAdmissionResponse {
            closure_token: closed.token.to_string(),
            admission: closed.states.iter().map(convert::admission).collect(),
            replayed: closed.replayed,
        }))
    }

    async fn await_drain(
        &self,
        request: Request<pb::AwaitDrainRequest>,
    ) -> Result<Response<pb::AwaitDrainResponse>, Status> {
        let (animators, wait_ms) = convert::drain_request(
            &self.service.settings.registry,
            request.get_ref(),
            self.service.settings.drain_wait_max_ms,
        )
        .map_err(err)?;
        self.authorize_animators(&request, actions::ADMISSION, &animators)
            .await?;
        let (drained, states) = self
            .service
            .await_drain(&animators, Duration::from_millis(u64::from(wait_ms)))
            .await
            .map_err(err)?;
        Ok(Response::new(pb::AwaitDrainResponse {
            drained,
            admission: states.iter().map(convert::admission).collect(),
        }))
    }

    async fn reopen_admission(
        &self,
        request: Request<pb::ReopenAdmissionRequest>,
    ) -> Result<Response<pb::ReopenAdmissionResponse>, Status> {
        let token = convert::closure_token(&request.get_ref().closure_token).map_err(err)?;
        // The closure's animators are the object (an unknown token: every animator, so a
        // caller without admission authority learns nothing of which tokens exist).
        let closure = self.service.closure(token).await.map_err(err)?;
        let animators = closure
            .as_ref()
            .map(|c| c.animators.clone())
            .unwrap_or_default();
        let principal = self
            .authorize_animators(&request, actions::ADMISSION, &animators)
            .await?;
        if closure.is_none() {
            return Err(err(DispatcherError::ClosureNotFound));
        }
        let reopened = match self
            .service
            .reopen_admission(token, &principal.id, Some(&principal.id))
            .await
        {
            Err(DispatcherError::ClosureNotOwned)
                if self
                    .holds(
                        &request,
                        actions::ADMISSION_ADMIN,
                        "closure:*",
                        Some(&principal),
                    )
                    .await? =>
            {
                self.service
                    .reopen_admission(token, &principal.id, None)
                    .await
            }
            other => other,
        };
        let reopened = reopened.map_err(err)?;
        if !reopened.already_reopened {
            tracing::info!(animators = ?animators, "admission reopened");
            tracing::debug!(closure = %token, "admission reopened");
        }
        Ok(Response::new(pb::ReopenAdmissionResponse {
            admission: reopened.states.iter().map(convert::admission).collect(),
            already_reopened: reopened.already_reopened,
        }))
    }

    type WatchDispatchEventsStream =
        std::pin::Pin<Box<dyn Stream<Item = Result<pb::DispatchEvent, Status>> + Send>>;

    async fn watch_dispatch_events(
        &self,
        request: Request<pb::WatchDispatchEventsRequest>,
    ) -> Result<Response<Self::WatchDispatchEventsStream>, Status> {
        let after = i64::try_from(request.get_ref().after_sequence).map_err(|_| {
            err(DispatcherError::invalid(
                "after_sequence",
                crate::error::reasons::SEQUENCE_OUT_OF_RANGE,
                "is beyond any sequence",
            ))
        })?;
        // Every event to a holder of `dispatcher:read_all` on `lease:*` (who sees every
        // principal's leases); to anyone else only the events of its own leases.
        let (principal, all) = self
            .ctx
            .reader(
                &request,
                actions::READ,
                "event:*",
                actions::READ_ALL,
                "lease:*",
            )
            .await?;
        let only = if all {
            None
        } else {
            Some(principal.id.clone())
        };
        let place = self.service.stream_place(&principal.id).map_err(err)?;
        let follow = request.get_ref().follow;
        // The stream's authority is asked for again while it is open: still allowed to read
        // (whatever else changed in the caller's policy meanwhile).
        let read = self.recheck(&request, actions::READ, "event:*".to_owned(), None);
        // A stream of every principal's events ends when `dispatcher:read_all` goes (opened
        // again, it is scoped to the caller's own leases).
        let recheck: Recheck = match &only {
            Some(_) => read,
            None => {
                let all = self.recheck(&request, actions::READ_ALL, "lease:*".to_owned(), None);
                Arc::new(move || {
                    let (read, all) = (read.clone(), all.clone());
                    Box::pin(async move {
                        read().await?;
                        all().await
                    })
                })
            }
        };
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let service = self.service.clone();
        tokio::spawn(async move {
            service
                .watch_events(after, follow, only, tx, recheck, place)
                .await
        });
        let events = ReceiverStream::new(rx).map(|e| e.map(|r| convert::event(&r)).map_err(err));
        Ok(Response::new(Box::pin(events)))
    }
}

/// Start the office: validate the registry (a bad one refuses start-up with exit 2), make sure
/// every animator has an admission row, and return the routes.
pub fn start(ctx: ServeContext) -> BoxFuture<'static, anyhow::Result<Routes>> {
    Box::pin(async move {
        let settings = crate::config::load(&ctx.config)?;
        tracing::info!(
            animators = settings.registry.animators().count(),
            capabilities = settings.registry.len(),
            "registry loaded"
        );
        let retention = crate::service::retention::start(&ctx.config, ctx.pool.clone())?;
        let service = Service::new(settings, ctx.pool.clone());
        service
            .ensure_admission()
            .await
            .map_err(|e| anyhow::anyhow!("cannot prepare admission state: {e}"))?;
        let server = DispatcherServer::new(DispatcherService {
            ctx: ctx.clone(),
            service,
            _retention: retention,
        })
        .max_decoding_message_size(ctx.max_message_bytes())
        .max_encoding_message_size(ctx.max_message_bytes());
        Ok(Routes::new(server))
    })
}
