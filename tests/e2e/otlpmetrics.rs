//! With an OTLP endpoint configured, an office pushes its metrics to the collector too (issue
//! 30 item 2): stopping it flushes them, and the requests it answered are there.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lychd_runtime::Office;
use lychd_testkit::Sandbox;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use tokio::net::TcpListener;

/// (service.name, metric name, `key=value` attributes) of every sum data point received.
type Points = Arc<Mutex<Vec<(String, String, Vec<String>)>>>;

struct Collector {
    points: Points,
}

fn text(kv: &KeyValue) -> String {
    let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        other => format!("{other:?}"),
    };
    format!("{}={value}", kv.key)
}

#[tonic::async_trait]
impl MetricsService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let mut points = self.points.lock().expect("lock");
        for rm in request.into_inner().resource_metrics {
            let service = rm
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .map(|kv| text(kv).trim_start_matches("service.name=").to_owned())
                .unwrap_or_default();
            for sm in rm.scope_metrics {
                for metric in sm.metrics {
                    if let Some(Data::Sum(sum)) = metric.data {
                        for p in sum.data_points {
                            let attributes = p.attributes.iter().map(text).collect();
                            points.push((service.clone(), metric.name.clone(), attributes));
                        }
                    }
                }
            }
        }
        Ok(tonic::Response::new(ExportMetricsServiceResponse {
            partial_success: None,
        }))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_are_pushed_over_otlp_and_flushed_when_the_office_stops() {
    let points: Points = Arc::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let collector = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(MetricsServiceServer::new(Collector {
                points: points.clone(),
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
    client
        .describe(lychd_proto::dispatcher::v1::DescribeRequest {
            include_peers: false,
        })
        .await
        .expect("describe");
    // The push interval is a minute: what arrives is the flush at stop.
    sandbox.stop().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = points
            .lock()
            .expect("lock")
            .iter()
            .any(|(svc, name, attrs)| {
                svc == "lychd-dispatcher"
                    && name == "lychd.rpc.server.requests"
                    && attrs.iter().any(|a| a == "rpc.method=Describe")
                    && attrs.iter().any(|a| a == "rpc.grpc.code=OK")
            });
        if found {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no Describe request pushed by the dispatcher; got {:?}",
            points.lock().expect("lock")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
