//! With an OTLP endpoint configured, spans reach a collector, and a call from one office to
//! another carries one trace id across both processes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lychd_runtime::Office;
use lychd_testkit::Sandbox;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use tokio::net::TcpListener;

/// (service.name, trace id, span name) of every span received.
type Spans = Arc<Mutex<Vec<(String, Vec<u8>, String)>>>;

struct Collector {
    spans: Spans,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().expect("lock");
        for rs in request.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref()?.value.as_ref())
                .map(|v| match v {
                    Value::StringValue(s) => s.clone(),
                    other => format!("{other:?}"),
                })
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    spans.push((service.clone(), span.trace_id, span.name));
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_are_exported_and_one_trace_spans_two_offices() {
    let spans: Spans = Arc::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let collector = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(Collector {
                spans: spans.clone(),
            }))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );

    let mut sandbox = Sandbox::builder()
        .office(Office::Dispatcher)
        .office(Office::Ward)
        .peer(Office::Dispatcher, Office::Ward)
        .otlp_endpoint(collector)
        .start()
        .await;
    let channel = crate::channel_with(
        &sandbox.office(Office::Dispatcher).endpoint(),
        &sandbox.token,
    );
    let mut client = lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient::new(channel);
    let answer = client
        .describe(lychd_proto::dispatcher::v1::DescribeRequest {
            include_peers: true,
        })
        .await
        .expect("describe");
    let peers = answer.into_inner().office.expect("office").peers;
    assert_eq!(
        peers[0].state,
        lychd_proto::common::v1::ServingState::Serving as i32,
        "{peers:?}"
    );

    // Stopping flushes each office's exporter.
    sandbox.stop().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = {
            let spans = spans.lock().expect("lock");
            let dispatcher: Vec<&Vec<u8>> = spans
                .iter()
                .filter(|(svc, _, name)| svc == "lychd-dispatcher" && name == "grpc.request")
                .map(|(_, t, _)| t)
                .collect();
            spans.iter().any(|(svc, trace, name)| {
                svc == "lychd-ward" && name == "grpc.request" && dispatcher.contains(&trace)
            })
        };
        if found {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no ward span sharing a trace id with a dispatcher span; got {:?}",
            spans
                .lock()
                .expect("lock")
                .iter()
                .map(|(s, t, n)| (s.clone(), hex(t), n.clone()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
