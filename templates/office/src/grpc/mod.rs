//! gRPC handlers of `lychd.{{office}}.v1.{{Office}}`: decode → authorize (Ward) → call the
//! service → encode. No store path, no SQL here; proto ↔ typed conversions go in
//! `grpc/convert.rs` once there are any.

use std::sync::Arc;

use futures::future::BoxFuture;
use lychd_proto::{{office}}::v1::{{server_module}}::{{{Office}}, {{Office}}Server};
use lychd_proto::{{office}}::v1::{DescribeRequest, DescribeResponse};
use lychd_runtime::server::ServeContext;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

use crate::service::Service;

pub struct {{Office}}Service {
    ctx: ServeContext,
    #[allow(dead_code)] // called by the office's first use case
    service: Arc<Service>,
}

#[tonic::async_trait]
impl {{Office}} for {{Office}}Service {
    async fn describe(
        &self,
        request: Request<DescribeRequest>,
    ) -> Result<Response<DescribeResponse>, Status> {
        self.ctx
            .authorize(&request, crate::actions::DESCRIBE, "office:{{office}}")
            .await?;
        let office =
            lychd_runtime::describe::describe(&self.ctx, request.get_ref().include_peers).await?;
        Ok(Response::new(DescribeResponse {
            office: Some(office),
        }))
    }
}

/// Start the office: its routes (every call passes the auth layer, then `authorize`).
pub fn start(ctx: ServeContext) -> BoxFuture<'static, anyhow::Result<Routes>> {
    Box::pin(async move { Ok(routes(&ctx)) })
}

fn routes(ctx: &ServeContext) -> Routes {
    let server = {{Office}}Server::new({{Office}}Service {
        ctx: ctx.clone(),
        service: Service::new(ctx.pool.clone()),
    })
        .max_decoding_message_size(ctx.max_message_bytes())
        .max_encoding_message_size(ctx.max_message_bytes());
    Routes::new(server)
}
