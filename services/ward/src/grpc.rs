//! gRPC handlers of `lychd.ward.v1.Ward`. Every call passes the authenticator first.

use lychd_proto::ward::v1::ward_server::{Ward, WardServer};
use lychd_proto::ward::v1::{DescribeRequest, DescribeResponse};
use lychd_runtime::server::ServeContext;
use tonic::service::Routes;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

pub struct WardService {
    ctx: ServeContext,
}

#[tonic::async_trait]
impl Ward for WardService {
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
    let server = WardServer::new(WardService { ctx: ctx.clone() })
        .max_decoding_message_size(ctx.max_message_bytes())
        .max_encoding_message_size(ctx.max_message_bytes());
    routes.add_service(InterceptedService::new(server, ctx.authenticator.clone()))
}
