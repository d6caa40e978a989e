//! gRPC handlers of `lychd.archive.v1.Archive`: authenticate (the layer) → decode into a
//! typed command (bad input is `INVALID_ARGUMENT` before any object is built) → authorize the
//! action on `namespace:<name>` (before any read) → the service (which asks Ward again under
//! the namespace lock, immediately before its first write) → Ward asked once more after the
//! transaction has ended, immediately before any material is returned → encode.
//!
//! A refusal at that last boundary does not undo a committed mutation: an exact replay of the
//! request id (intake, recall) or a metadata read (`GetNote`) recovers it.

mod convert;

use std::sync::Arc;

use futures::future::BoxFuture;
use lychd_proto::archive::v1 as pb;
use lychd_proto::archive::v1::archive_server::{Archive, ArchiveServer};
use lychd_runtime::auth::{Action, Principal};
use lychd_runtime::server::ServeContext;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use crate::actions;
use crate::domain::lifecycle::Change;
use crate::error::ArchiveError;
use crate::service::{Recheck, Recollection, Service};

pub struct ArchiveService {
    ctx: ServeContext,
    service: Arc<Service>,
    /// The retention job, stopped when serving ends and this service is dropped.
    _retention: Option<lychd_runtime::retention::Job>,
}

fn err(e: ArchiveError) -> Status {
    e.into()
}

fn object(namespace: &str) -> String {
    format!("namespace:{namespace}")
}

#[tonic::async_trait]
impl Archive for ArchiveService {
    async fn describe(
        &self,
        request: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::DescribeResponse>, Status> {
        self.ctx
            .authorize(&request, crate::actions::DESCRIBE, "office:archive")
            .await?;
        let office =
            lychd_runtime::describe::describe(&self.ctx, request.get_ref().include_peers).await?;
        Ok(Response::new(pb::DescribeResponse {
            office: Some(office),
        }))
    }

    async fn intake(
        &self,
        request: Request<pb::IntakeRequest>,
    ) -> Result<Response<pb::IntakeResponse>, Status> {
        let (metadata, extensions, message) = request.into_parts();
        let asking = Request::from_parts(metadata, extensions, ());
        let cmd = self
            .ctx
            .authorizer
            .decoded(
                &asking,
                convert::intake(message, &self.service.settings).map_err(err),
            )
            .await?;
        let (principal, recheck) = self
            .authorize(&asking, actions::INTAKE, &cmd.namespace)
            .await?;
        let done = self
            .service
            .intake(&principal.id, &cmd, recheck.clone())
            .await
            .map_err(err)?;
        answer("intake", &cmd.namespace, &recheck).await?;
        Ok(Response::new(pb::IntakeResponse {
            note: Some(convert::note(&done.note)),
            replayed: done.replayed,
        }))
    }

    async fn promote(
        &self,
        request: Request<pb::LifecycleRequest>,
    ) -> Result<Response<pb::LifecycleResponse>, Status> {
        self.lifecycle(request, Change::Promote).await
    }

    async fn archive_note(
        &self,
        request: Request<pb::LifecycleRequest>,
    ) -> Result<Response<pb::LifecycleResponse>, Status> {
        self.lifecycle(request, Change::Archive).await
    }

    async fn revoke(
        &self,
        request: Request<pb::LifecycleRequest>,
    ) -> Result<Response<pb::LifecycleResponse>, Status> {
        self.lifecycle(request, Change::Revoke).await
    }

    async fn recall(
        &self,
        request: Request<pb::RecallRequest>,
    ) -> Result<Response<pb::RecallResponse>, Status> {
        let (metadata, extensions, message) = request.into_parts();
        let asking = Request::from_parts(metadata, extensions, ());
        let cmd = self
            .ctx
            .authorizer
            .decoded(
                &asking,
                convert::recall(message, &self.service.settings).map_err(err),
            )
            .await?;
        let (principal, recheck) = self
            .authorize(&asking, actions::RECALL, &cmd.namespace)
            .await?;
        let done = self
            .service
            .recall(&principal.id, &cmd, recheck.clone())
            .await
            .map_err(err)?;
        answer("recall", &cmd.namespace, &recheck).await?;
        let Recollection {
            receipt,
            notes,
            replayed,
        } = done;
        Ok(Response::new(pb::RecallResponse {
            receipt: Some(convert::receipt(&receipt)),
            notes: notes.iter().map(convert::recalled).collect(),
            replayed,
        }))
    }

    async fn resolve_receipt(
        &self,
        request: Request<pb::ResolveReceiptRequest>,
    ) -> Result<Response<pb::ResolveReceiptResponse>, Status> {
        let r = request.get_ref();
        let (namespace, request_id) =
            convert::receipt_ref(&r.namespace, &r.request_id).map_err(err)?;
        let (_, recheck) = self
            .authorize(&request, actions::RESOLVE, &namespace)
            .await?;
        let done = self
            .service
            .resolve(&namespace, &request_id)
            .await
            .map_err(err)?;
        answer("resolve", &namespace, &recheck).await?;
        Ok(Response::new(pb::ResolveReceiptResponse {
            receipt: Some(convert::receipt(&done.receipt)),
            notes: done.notes.iter().map(convert::recalled).collect(),
        }))
    }

    async fn inspect_receipt(
        &self,
        request: Request<pb::InspectReceiptRequest>,
    ) -> Result<Response<pb::InspectReceiptResponse>, Status> {
        let r = request.get_ref();
        let (namespace, request_id) =
            convert::receipt_ref(&r.namespace, &r.request_id).map_err(err)?;
        let (_, recheck) = self
            .authorize(&request, actions::INSPECT, &namespace)
            .await?;
        let receipt = self
            .service
            .inspect(&namespace, &request_id)
            .await
            .map_err(err)?;
        answer("inspect", &namespace, &recheck).await?;
        Ok(Response::new(pb::InspectReceiptResponse {
            receipt: Some(convert::receipt(&receipt)),
        }))
    }

    async fn list_notes(
        &self,
        request: Request<pb::ListNotesRequest>,
    ) -> Result<Response<pb::ListNotesResponse>, Status> {
        let cmd = convert::list(request.get_ref()).map_err(err)?;
        let (_, recheck) = self
            .authorize(&request, actions::INSPECT, &cmd.namespace)
            .await?;
        let rows = self
            .service
            .list_notes(
                &cmd.namespace,
                cmd.state,
                cmd.after,
                i64::from(cmd.size) + 1,
            )
            .await
            .map_err(err)?;
        answer("list", &cmd.namespace, &recheck).await?;
        let size = cmd.size as usize;
        let more = rows.len() > size;
        let rows = &rows[..rows.len().min(size)];
        Ok(Response::new(pb::ListNotesResponse {
            notes: rows.iter().map(convert::note).collect(),
            page: Some(lychd_proto::common::v1::PageResponse {
                next_page_token: match (more, rows.last()) {
                    (true, Some(last)) => lychd_runtime::paging::Tokens::Plain.token(&last.id),
                    _ => String::new(),
                },
            }),
        }))
    }

    async fn get_note(
        &self,
        request: Request<pb::GetNoteRequest>,
    ) -> Result<Response<pb::GetNoteResponse>, Status> {
        let (namespace, id) = convert::get_note(request.get_ref()).map_err(err)?;
        let (_, recheck) = self
            .authorize(&request, actions::INSPECT, &namespace)
            .await?;
        let note = self.service.get_note(&namespace, id).await.map_err(err)?;
        answer("get", &namespace, &recheck).await?;
        Ok(Response::new(pb::GetNoteResponse {
            note: Some(convert::note(&note)),
        }))
    }
}

/// The last boundary: Ward asked again after the transaction ended, immediately before the
/// answer (the test seam [`crate::testing`] runs just before it).
async fn answer(operation: &'static str, namespace: &str, recheck: &Recheck) -> Result<(), Status> {
    crate::testing::before_answer(operation, namespace).await;
    recheck().await.map_err(err)
}

impl ArchiveService {
    async fn lifecycle(
        &self,
        request: Request<pb::LifecycleRequest>,
        change: Change,
    ) -> Result<Response<pb::LifecycleResponse>, Status> {
        let cmd = convert::lifecycle(request.get_ref(), change).map_err(err)?;
        let (_, recheck) = self
            .authorize(&request, actions::LIFECYCLE, &cmd.namespace)
            .await?;
        let done = self
            .service
            .change(&cmd, recheck.clone())
            .await
            .map_err(err)?;
        answer("lifecycle", &cmd.namespace, &recheck).await?;
        Ok(Response::new(pb::LifecycleResponse {
            note: Some(convert::note(&done.note)),
            superseded: done.superseded.as_ref().map(convert::note),
        }))
    }

    /// The first decision (before any read) on `namespace:<namespace>`, and the [`Recheck`]
    /// that asks the same question again later with that decision's policy generation.
    async fn authorize<T>(
        &self,
        request: &Request<T>,
        action: Action,
        namespace: &str,
    ) -> Result<(Principal, Recheck), Status> {
        let object = object(namespace);
        let principal = self.ctx.authorize(request, action, &object).await?;
        let authorizer = self.ctx.authorizer.clone();
        let metadata = request.metadata().clone();
        let generation = principal.policy_generation;
        let recheck: Recheck = Arc::new(move || {
            let authorizer = authorizer.clone();
            let asking = Request::from_parts(metadata.clone(), tonic::Extensions::default(), ());
            let object = object.clone();
            Box::pin(async move {
                authorizer
                    .authorize_for(&asking, action, &object, action.verb(), Some(generation))
                    .await
                    .map(|_| ())
                    .map_err(|refused| ArchiveError::Refused(Box::new(refused)))
            })
        });
        Ok((principal, recheck))
    }
}

/// Start the office: validate the `[office]` section (a bad one refuses start-up with exit 2)
/// and return the routes.
pub fn start(ctx: ServeContext) -> BoxFuture<'static, anyhow::Result<Routes>> {
    Box::pin(async move {
        let settings = crate::config::load(&ctx.config)?;
        let retention = crate::service::retention::start(&ctx.config, ctx.pool.clone())?;
        let service = Service::new(settings, ctx.pool.clone());
        let server = ArchiveServer::new(ArchiveService {
            ctx: ctx.clone(),
            service,
            _retention: retention,
        })
        .max_decoding_message_size(ctx.max_message_bytes())
        .max_encoding_message_size(ctx.max_message_bytes());
        Ok(Routes::new(server))
    })
}
