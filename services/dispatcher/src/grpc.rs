//! gRPC handlers of `lychd.dispatcher.v1.Dispatcher`. Every call passes the authenticator first.

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

pub fn add_routes(ctx: &ServeContext, routes: Routes) -> Routes {
    let server = DispatcherServer::new(DispatcherService { ctx: ctx.clone() })
        .max_decoding_message_size(ctx.max_message_bytes())
        .max_encoding_message_size(ctx.max_message_bytes());
    routes.add_service(InterceptedService::new(server, ctx.authenticator.clone()))
}
