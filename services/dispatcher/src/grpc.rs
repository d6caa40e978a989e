//! gRPC handlers of `lychd.dispatcher.v1.Dispatcher`. Every call passes the authenticator first.

use futures::future::BoxFuture;
use lychd_proto::dispatcher::v1::dispatcher_server::{Dispatcher, DispatcherServer};
use lychd_proto::dispatcher::v1::{DescribeRequest, DescribeResponse};
use lychd_runtime::server::ServeContext;
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

pub struct DispatcherService {
    ctx: ServeContext,
}

#[tonic::async_trait]
impl Dispatcher for DispatcherService {
    async fn describe(
        &self,
        request: Request<DescribeRequest>,
    ) -> Result<Response<DescribeResponse>, Status> {
        let office =
            lychd_runtime::describe::describe(&self.ctx, request.get_ref().include_peers).await?;
        Ok(Response::new(DescribeResponse {
            office: Some(office),
        }))
    }
}

/// Start the office: its routes, every call behind the authenticator.
pub fn start(ctx: ServeContext) -> BoxFuture<'static, anyhow::Result<Routes>> {
    Box::pin(async move { Ok(routes(&ctx)) })
}

fn routes(ctx: &ServeContext) -> Routes {
    let server = DispatcherServer::new(DispatcherService { ctx: ctx.clone() })
        .max_decoding_message_size(ctx.max_message_bytes())
        .max_encoding_message_size(ctx.max_message_bytes());
    Routes::new(InterceptedService::new(server, ctx.authenticator.clone()))
}
