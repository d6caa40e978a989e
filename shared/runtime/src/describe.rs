//! `Describe`, which every office answers the same way: who it is, which schema version it
//! runs on and, when asked, how each configured peer answers an authenticated call.

use std::str::FromStr;

use http::uri::PathAndQuery;
use lychd_proto::common::v1::{OfficeDescription, PeerDescription, ServingState};
use tonic::Status;

use crate::Office;
use crate::client::peer_channel;
use crate::server::ServeContext;

// Every office's `DescribeRequest`/`DescribeResponse` have the same fields; the ward ones are
// used as the codec types for calling any peer's `Describe`.
use lychd_proto::ward::v1::{DescribeRequest, DescribeResponse};

/// How long one peer gets to answer `Describe`.
const PEER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

pub async fn describe(
    ctx: &ServeContext,
    include_peers: bool,
) -> Result<OfficeDescription, Status> {
    let schema_version = crate::db::schema_version(&ctx.pool)
        .await
        .map_err(|e| crate::refusal::Refusals::new(ctx.office.domain(), &[]).database(&e))?;
    let mut peers = Vec::new();
    if include_peers {
        for (name, peer) in &ctx.config.peers {
            peers.push(describe_peer(ctx, name, &peer.endpoint).await);
        }
    }
    Ok(OfficeDescription {
        office: ctx.office.name().to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        schema_version,
        peers,
    })
}

#[tracing::instrument(skip(ctx, endpoint), fields(peer = %name))]
async fn describe_peer(ctx: &ServeContext, name: &str, endpoint: &str) -> PeerDescription {
    let call = tokio::time::timeout(PEER_TIMEOUT, call_describe(ctx, name, endpoint));
    let result = call
        .await
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("peer did not answer in time")));
    let (state, detail) = match result {
        Ok(desc) if desc.office == name => (ServingState::Serving, String::new()),
        Ok(_) => (
            ServingState::Unreachable,
            "answered as another office".to_owned(),
        ),
        Err(status)
            if matches!(
                status.code(),
                tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
            ) =>
        {
            (ServingState::Unreachable, format!("{:?}", status.code()))
        }
        Err(status) => (ServingState::NotServing, format!("{:?}", status.code())),
    };
    PeerDescription {
        office: name.to_owned(),
        endpoint: endpoint.to_owned(),
        state: state as i32,
        detail,
    }
}

async fn call_describe(
    ctx: &ServeContext,
    name: &str,
    endpoint: &str,
) -> Result<OfficeDescription, Status> {
    let office =
        Office::from_name(name).ok_or_else(|| Status::invalid_argument("unknown office"))?;
    let channel = peer_channel(endpoint, ctx.outgoing.clone())
        .map_err(|_| Status::unavailable("bad endpoint"))?;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|_| Status::unavailable("peer not reachable"))?;
    let path = PathAndQuery::from_str(&format!("/{}/Describe", office.grpc_service()))
        .map_err(|_| Status::internal("bad path"))?;
    let codec = tonic_prost::ProstCodec::<DescribeRequest, DescribeResponse>::default();
    let response = grpc
        .unary(
            tonic::Request::new(DescribeRequest {
                include_peers: false,
            }),
            path,
            codec,
        )
        .await?;
    response
        .into_inner()
        .office
        .ok_or_else(|| Status::internal("empty description"))
}
