//! `grpc.health.v1` with a shutdown-aware state: on a shutdown signal every service turns
//! NOT_SERVING, open `Watch` streams receive that and then end, so they do not hold the drain.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::watch;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    serving: bool,
    draining: bool,
}

/// Shared health state of one office process.
#[derive(Clone)]
pub struct HealthState {
    services: Arc<BTreeMap<String, ()>>,
    tx: Arc<watch::Sender<State>>,
}

impl HealthState {
    /// Health for the whole server (`""`) and the named services. Starts NOT_SERVING.
    pub fn new(services: &[&str]) -> Self {
        let mut map = BTreeMap::new();
        map.insert(String::new(), ());
        for s in services {
            map.insert((*s).to_owned(), ());
        }
        let (tx, _) = watch::channel(State {
            serving: false,
            draining: false,
        });
        HealthState {
            services: Arc::new(map),
            tx: Arc::new(tx),
        }
    }

    pub fn set_serving(&self) {
        self.tx.send_modify(|s| s.serving = true);
    }

    /// Shutdown began: NOT_SERVING from now on, and watchers are released.
    pub fn begin_drain(&self) {
        self.tx.send_modify(|s| {
            s.serving = false;
            s.draining = true;
        });
    }

    pub fn is_serving(&self) -> bool {
        self.tx.borrow().serving
    }

    pub fn server(&self) -> HealthServer<HealthService> {
        HealthServer::new(HealthService {
            state: self.clone(),
        })
    }

    fn status_of(&self, service: &str) -> Result<ServingStatus, Status> {
        if !self.services.contains_key(service) {
            return Err(Status::not_found("unknown service"));
        }
        Ok(if self.tx.borrow().serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        })
    }
}

pub struct HealthService {
    state: HealthState,
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let status = self.state.status_of(&request.get_ref().service)?;
        Ok(Response::new(HealthCheckResponse {
            status: status as i32,
        }))
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        self.state.status_of(&request.get_ref().service)?;
        let mut rx = self.state.tx.subscribe();
        let stream = async_stream(move |yield_| async move {
            let mut last = None;
            loop {
                let state = *rx.borrow_and_update();
                let status = if state.serving {
                    ServingStatus::Serving
                } else {
                    ServingStatus::NotServing
                };
                if last != Some(status) {
                    last = Some(status);
                    if yield_
                        .send(Ok(HealthCheckResponse {
                            status: status as i32,
                        }))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                if state.draining || rx.changed().await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(stream))
    }
}

/// A tiny generator: runs `f` with a sender and streams what it sends.
fn async_stream<F, Fut>(f: F) -> WatchStream
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<HealthCheckResponse, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(f(tx));
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}
