//! gRPC handlers of `lychd.dispatcher.v1.Dispatcher`: authorize (action and object declared
//! next to each handler) → decode → call the service or store → encode. Nothing else.

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
use crate::service::{LeaseOutcome, Prepared, Service};

pub struct DispatcherService {
    ctx: ServeContext,
    service: Arc<Service>,
}

/// Largest page of `ListLeases`.
const PAGE_MAX: u32 = 1000;
const PAGE_DEFAULT: u32 = 100;

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
        let object = match request
            .get_ref()
            .demand
            .as_ref()
            .map(|d| d.capability_key.as_str())
        {
            Some(k) if !k.is_empty() => format!("capability:{k}"),
            _ => "capability:*".to_owned(),
        };
        let (metadata, extensions, message) = request.into_parts();
        let asking = Request::from_parts(metadata, extensions, ());
        let cmd = convert::lease_request(message, &self.service.settings.ttl);
        // The read-only half overlaps the caller's authorization; its answer is used only
        // once the caller is allowed (and an invalid request is refused only then).
        let (principal, prepared) = tokio::join!(
            self.ctx.authorize(&asking, actions::LEASE, &object),
            async {
                match &cmd {
                    Ok(c) => Some(self.service.prepare(&c.demand).await),
                    Err(_) => None,
                }
            }
        );
        let principal = principal?;
        let cmd = cmd.map_err(err)?;
        let outcome = match prepared.expect("invariant: a valid request was prepared") {
            Ok(Prepared::Answered(outcome)) => outcome,
            Ok(Prepared::Chosen { key, captured }) => self
                .service
                .issue(&principal.id, &cmd, key, captured)
                .await
                .map_err(err)?,
            Err(e) => return Err(err(e)),
        };
        use pb::lease_response::Outcome;
        let outcome = match outcome {
            LeaseOutcome::Granted(g) => Outcome::Granted(pb::Grant {
                lease_id: g.lease_id.to_string(),
                capability_key: g.capability.key_text.clone(),
                animator: g.animator.name.clone(),
                route: Some(convert::route(&g.animator, &g.capability)),
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
        let object = format!("lease:{}", request.get_ref().lease_id);
        self.ctx
            .authorize(&request, actions::LEASE, &object)
            .await?;
        let (id, holder, ttl) =
            convert::renew_request(request.get_ref(), &self.service.settings.ttl).map_err(err)?;
        let ttl = i32::try_from(ttl).unwrap_or(i32::MAX);
        let lease = self.service.renew(id, &holder, ttl).await.map_err(err)?;
        Ok(Response::new(pb::RenewLeaseResponse {
            lease: Some(convert::lease_info(&lease)),
        }))
    }

    async fn release_lease(
        &self,
        request: Request<pb::ReleaseLeaseRequest>,
    ) -> Result<Response<pb::ReleaseLeaseResponse>, Status> {
        let object = format!("lease:{}", request.get_ref().lease_id);
        self.ctx
            .authorize(&request, actions::LEASE, &object)
            .await?;
        let (id, holder) = convert::release_request(request.get_ref()).map_err(err)?;
        let (lease, already_over) = self.service.release(id, &holder).await.map_err(err)?;
        Ok(Response::new(pb::ReleaseLeaseResponse {
            lease: Some(convert::lease_info(&lease)),
            already_over,
        }))
    }

    async fn list_leases(
        &self,
        request: Request<pb::ListLeasesRequest>,
    ) -> Result<Response<pb::ListLeasesResponse>, Status> {
        self.ctx
            .authorize(&request, actions::READ, "lease:*")
            .await?;
        let req = request.into_inner();
        convert::animator_filter(&req.animators).map_err(err)?;
        let page = req.page.unwrap_or_default();
        let after = convert::page_token(&page.page_token).map_err(err)?;
        let size = match page.page_size {
            0 => PAGE_DEFAULT,
            n => n.min(PAGE_MAX),
        };
        let rows = self
            .service
            .list_leases(
                &req.animators,
                req.include_inactive,
                after,
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
        if request.get_ref().animators.is_empty() {
            self.ctx
                .authorize(&request, actions::OBSERVE, "animator:*")
                .await?;
        } else {
            for a in &request.get_ref().animators {
                self.ctx
                    .authorize(&request, actions::OBSERVE, &format!("animator:{a}"))
                    .await?;
            }
        }
        let names = convert::animators(
            &self.service.settings.registry,
            &request.get_ref().animators,
            true,
        )
        .map_err(err)?;
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
        let principal = self
            .authorize_animators(&request, &request.get_ref().animators)
            .await?;
        let (request_id, animators, reason) =
            convert::close_request(&self.service.settings.registry, request.get_ref())
                .map_err(err)?;
        let closed = self
            .service
            .close_admission(&request_id, &animators, &reason, &principal.id)
            .await
            .map_err(err)?;
        if !closed.replayed {
            tracing::info!(closure = %closed.token, animators = ?animators, "admission closed");
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
        self.authorize_animators(&request, &request.get_ref().animators)
            .await?;
        let (animators, wait_ms) = convert::drain_request(
            &self.service.settings.registry,
            request.get_ref(),
            self.service.settings.drain_wait_max_ms,
        )
        .map_err(err)?;
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
        let object = format!("closure:{}", request.get_ref().closure_token);
        let principal = self
            .ctx
            .authorize(&request, actions::ADMISSION, &object)
            .await?;
        let token = convert::closure_token(&request.get_ref().closure_token).map_err(err)?;
        let reopened = self
            .service
            .reopen_admission(token, &principal.id)
            .await
            .map_err(err)?;
        if !reopened.already_reopened {
            tracing::info!(closure = %token, "admission reopened");
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
        self.ctx
            .authorize(&request, actions::READ, "event:*")
            .await?;
        let req = request.into_inner();
        let after = i64::try_from(req.after_sequence).map_err(|_| {
            err(DispatcherError::invalid(
                "after_sequence",
                crate::error::reasons::SEQUENCE_OUT_OF_RANGE,
                "is beyond any sequence",
            ))
        })?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let service = self.service.clone();
        tokio::spawn(async move { service.watch_events(after, req.follow, tx).await });
        let events = ReceiverStream::new(rx).map(|e| e.map(|r| convert::event(&r)).map_err(err));
        Ok(Response::new(Box::pin(events)))
    }
}

impl DispatcherService {
    /// `dispatcher:admission` on every named animator (or `animator:*` when none is named, so
    /// an empty request is refused for authority before it is refused as bad input).
    async fn authorize_animators<T>(
        &self,
        request: &Request<T>,
        animators: &[String],
    ) -> Result<lychd_runtime::auth::Principal, Status> {
        if animators.is_empty() {
            return self
                .ctx
                .authorize(request, actions::ADMISSION, "animator:*")
                .await;
        }
        let mut principal = None;
        for a in animators {
            principal = Some(
                self.ctx
                    .authorize(request, actions::ADMISSION, &format!("animator:{a}"))
                    .await?,
            );
        }
        Ok(principal.expect("invariant: animators is non-empty"))
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
        let service = Service::new(settings, ctx.pool.clone());
        service
            .ensure_admission()
            .await
            .map_err(|e| anyhow::anyhow!("cannot prepare admission state: {e}"))?;
        let server = DispatcherServer::new(DispatcherService {
            ctx: ctx.clone(),
            service,
        })
        .max_decoding_message_size(ctx.max_message_bytes())
        .max_encoding_message_size(ctx.max_message_bytes());
        Ok(Routes::new(server))
    })
}
