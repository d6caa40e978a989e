//! `grpc.health.v1` with a shutdown-aware state: on a shutdown signal every service turns
//! NOT_SERVING, open `Watch` streams receive that and then end, so they do not hold the drain.
//! An office may hold one of its named services back ([`HealthState::hold_back`]): that one
//! answers NOT_SERVING while the whole server (`""`) serves (the Orchestrator's standby serves
//! reads but actuates nothing).
//!
//! A process started with an instance id ([`INSTANCE_ENV`], chosen by its supervisor for this
//! one start) names it in every `Check` answer's [`INSTANCE_HEADER`] metadata, so the
//! supervisor's readiness wait can tell its own child from another process answering on the
//! same port (`lychd dev`). The id is a random label, not a secret, and grants nothing.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::watch;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    serving: bool,
    draining: bool,
    /// Named services answering NOT_SERVING whatever `serving` says.
    held_back: std::collections::BTreeSet<String>,
}

impl State {
    fn status(&self, service: &str) -> ServingStatus {
        if self.serving && !self.held_back.contains(service) {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        }
    }
}

/// Shared health state of one office process.
#[derive(Clone)]
pub struct HealthState {
    services: Arc<BTreeMap<String, ()>>,
    tx: Arc<watch::Sender<State>>,
    instance: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
}

/// The environment variable a supervisor passes this start's instance id in.
pub const INSTANCE_ENV: &str = "LYCHD_INSTANCE";
/// The response metadata a health `Check` answer names the instance id in.
pub const INSTANCE_HEADER: &str = "lychd-instance";

/// The instance id given in [`INSTANCE_ENV`], if any: 1 to 64 ASCII letters, digits, `-` or
/// `_` (anything else is a configuration error).
pub fn instance_from_env() -> Result<Option<String>, String> {
    match std::env::var(INSTANCE_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Ok(id) if is_instance_id(&id) => Ok(Some(id)),
        _ => Err(format!(
            "{INSTANCE_ENV} must be 1 to 64 ASCII letters, digits, '-' or '_'"
        )),
    }
}

fn is_instance_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
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
            held_back: Default::default(),
        });
        HealthState {
            services: Arc::new(map),
            tx: Arc::new(tx),
            instance: None,
        }
    }

    /// Name `instance` (checked by [`instance_from_env`]) in every `Check` answer.
    pub fn with_instance(mut self, instance: Option<&str>) -> Self {
        self.instance = instance
            .filter(|id| is_instance_id(id))
            .and_then(|id| id.parse().ok());
        self
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

    /// Hold the named `service` back (NOT_SERVING while the server serves), or release it.
    pub fn hold_back(&self, service: &str, held: bool) {
        self.tx.send_if_modified(|s| {
            if held {
                s.held_back.insert(service.to_owned())
            } else {
                s.held_back.remove(service)
            }
        });
    }

    /// Resolves once shutdown began ([`HealthState::begin_drain`]).
    pub async fn drained(&self) {
        let mut rx = self.tx.subscribe();
        if rx.wait_for(|s| s.draining).await.is_err() {
            std::future::pending::<()>().await;
        }
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
        Ok(self.tx.borrow().status(service))
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
        let mut answer = Response::new(HealthCheckResponse {
            status: status as i32,
        });
        if let Some(instance) = &self.state.instance {
            answer
                .metadata_mut()
                .insert(INSTANCE_HEADER, instance.clone());
        }
        Ok(answer)
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let service = request.get_ref().service.clone();
        self.state.status_of(&service)?;
        let mut rx = self.state.tx.subscribe();
        let stream = async_stream(move |yield_| async move {
            let mut last = None;
            loop {
                let state = rx.borrow_and_update().clone();
                let status = state.status(&service);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_ids_are_short_plain_labels() {
        for good in ["a", "0123abcd", "dev-ward_1", &"x".repeat(64)] {
            assert!(is_instance_id(good), "{good}");
        }
        for bad in ["", "a b", "a\nb", "é", &"x".repeat(65)] {
            assert!(!is_instance_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_held_back_service_is_not_serving_while_the_server_serves() {
        let health = HealthState::new(&["svc"]);
        health.set_serving();
        health.hold_back("svc", true);
        assert_eq!(
            health.status_of("svc").ok(),
            Some(ServingStatus::NotServing)
        );
        assert_eq!(health.status_of("").ok(), Some(ServingStatus::Serving));
        health.hold_back("svc", false);
        assert_eq!(health.status_of("svc").ok(), Some(ServingStatus::Serving));
    }

    #[tokio::test]
    async fn a_check_names_the_instance_it_was_started_as() {
        let health = HealthState::new(&[]).with_instance(Some("abc-1"));
        health.set_serving();
        let service = HealthService {
            state: health.clone(),
        };
        let answer = service
            .check(Request::new(HealthCheckRequest::default()))
            .await
            .expect("check");
        assert_eq!(
            answer
                .metadata()
                .get(INSTANCE_HEADER)
                .map(|v| v.to_str().ok()),
            Some(Some("abc-1"))
        );
        let anonymous = HealthService {
            state: HealthState::new(&[]),
        };
        let answer = anonymous
            .check(Request::new(HealthCheckRequest::default()))
            .await
            .expect("check");
        assert!(answer.metadata().get(INSTANCE_HEADER).is_none());
    }
}
