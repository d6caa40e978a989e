//! The gRPC server every office runs: its own service (authenticated), `grpc.health.v1`, server
//! reflection v1 and v1alpha, and the layer stack — request id, trace span (with the caller's
//! W3C context), authentication, global concurrency limit, the wire check of every request body
//! ([`crate::wire`]), per-request timeout; max message size is also set on each service. Every
//! server error answered is logged with the request id ([`log_failure`]). Shutdown: health NOT_SERVING → stop accepting → drain within the grace → done.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::service::Routes;
use tonic::transport::Server;
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::classify::GrpcFailureClass;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::Office;
use crate::auth::Authorizer;
use crate::client::Outgoing;
use crate::config::OfficeConfig;
use crate::health::HealthState;

/// What an office's handlers get: its config, database pool, the authorizer (Ward decides),
/// the outgoing interceptor carrying its own session, and its health.
#[derive(Clone)]
pub struct ServeContext {
    pub office: Office,
    pub config: Arc<OfficeConfig>,
    pub pool: PgPool,
    pub authorizer: Authorizer,
    pub outgoing: Outgoing,
    pub health: HealthState,
    /// Methods that take a bearer but authenticate it themselves: Ward's ExchangeCredential,
    /// and handlers whose authorization authenticates the caller (it refuses an unknown session
    /// as `UNAUTHENTICATED`; on input that does not decode they authenticate before refusing
    /// it), so the layer does not ask Ward twice.
    pub self_authenticating: &'static [&'static str],
    /// Work that must finish before the office exits (see [`Finishing`]).
    pub finishing: Finishing,
}

/// Background tasks an office registers at start that must finish before it exits (a writer
/// flushing what it holds), and flushes to run once serving has ended (a writer that lives as
/// long as something the context holds — Ward's own verifier and its decision log — cannot end
/// first, so what it holds is written instead). Serving ends first and the office's services
/// are dropped, then each task is awaited and each flush run, within the shutdown grace period.
#[derive(Clone, Default)]
pub struct Finishing {
    tasks: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    flushes: Arc<std::sync::Mutex<Vec<Flush>>>,
}

/// A flush run when serving has ended: done once everything it held is written.
pub type Flush = Arc<dyn Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

impl Finishing {
    pub fn push(&self, task: tokio::task::JoinHandle<()>) {
        self.tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(task);
    }

    /// Run `flush` whenever serving ends (every time, should a context serve again).
    pub fn on_finish(&self, flush: Flush) {
        self.flushes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(flush);
    }

    /// A fresh list of tasks, sharing this one's flushes (an in-process office started from a
    /// context another one was cloned from awaits only its own tasks).
    fn with_own_tasks(&self) -> Finishing {
        Finishing {
            tasks: Arc::default(),
            flushes: self.flushes.clone(),
        }
    }

    /// Await every registered task and every flush for at most `within`; true when all finished.
    async fn join(&self, within: Duration) -> bool {
        let tasks: Vec<_> = std::mem::take(
            &mut *self
                .tasks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let flushes: Vec<_> = self
            .flushes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|f| f())
            .collect();
        let all = async {
            futures::future::join_all(tasks).await;
            futures::future::join_all(flushes).await;
        };
        tokio::time::timeout(within, all).await.is_ok()
    }
}

impl ServeContext {
    pub fn max_message_bytes(&self) -> usize {
        self.config.server.max_message_bytes
    }

    /// May the caller of `request` perform `action` (`<office>:<verb>`) on `object`
    /// (`<type>:<id>` or `<type>:*`)? Handlers call this first, with the action and object
    /// declared next to them, and again immediately before an effect. Audience is this office;
    /// purpose is the action's verb ([`Authorizer::authorize_for`] takes an explicit one).
    /// Refusals are `UNAUTHENTICATED` or `PERMISSION_DENIED` with Ward's reason.
    pub async fn authorize<T>(
        &self,
        request: &tonic::Request<T>,
        action: lychd_auth::Action,
        object: &str,
    ) -> Result<lychd_auth::Principal, tonic::Status> {
        self.authorizer.authorize(request, action, object).await
    }

    /// A reader: the caller may `read` on `object` (else the refusal), and whether it also
    /// holds `read_all` on `all` — it reads every principal's items, not only its own. Both
    /// are asked of Ward together; lacking `read_all` is not a refusal.
    pub async fn reader<T>(
        &self,
        request: &tonic::Request<T>,
        read: lychd_auth::Action,
        object: &str,
        read_all: lychd_auth::Action,
        all: &str,
    ) -> Result<(lychd_auth::Principal, bool), tonic::Status> {
        let (principal, every) = tokio::join!(
            self.authorize(request, read, object),
            self.authorizer.decision(request, read_all, all, None)
        );
        Ok((principal?, every?.is_some()))
    }
}

/// Starts the office: reads its `[office]` configuration, builds its state and returns the
/// router with its own service(s) (health and reflection are added by the runtime). An error
/// refuses start-up; a [`crate::config::ConfigError`] inside it exits with the config code.
pub type Start = fn(ServeContext) -> futures::future::BoxFuture<'static, anyhow::Result<Routes>>;

/// How serving ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Every in-flight request finished within the grace period.
    Drained,
    /// The grace period ran out with requests still in flight.
    GraceExpired,
}

/// Serve on `listener` until `shutdown` resolves, then drain.
pub async fn serve(
    ctx: ServeContext,
    listener: TcpListener,
    routes: Routes,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Stopped> {
    let cfg = ctx.config.clone();
    let office = ctx.office;
    let health = ctx.health.clone();

    let reflection_names = [
        office.grpc_service(),
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ];
    let mut v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(lychd_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
    let mut v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(lychd_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
    for name in reflection_names {
        v1 = v1.with_service_name(name);
        v1alpha = v1alpha.with_service_name(name);
    }

    let routes = routes
        .add_service(health.server())
        .add_service(v1.build_v1()?)
        .add_service(v1alpha.build_v1alpha()?);

    let layers = ServiceBuilder::new()
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .layer(
            TraceLayer::new_for_grpc()
                .make_span_with(crate::telemetry::request_span)
                .on_failure(log_failure),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(crate::metrics::MetricsLayer::new(&crate::metrics::meter(
            office,
        )))
        .layer(lychd_auth::layer::AuthLayer::new(
            &ctx.authorizer,
            ctx.self_authenticating,
        ))
        .layer(GlobalConcurrencyLimitLayer::new(
            cfg.server.concurrency_limit,
        ))
        .layer(crate::wire::WireLayer::new(cfg.server.max_message_bytes));

    let (drain_tx, drain_rx) = oneshot::channel::<()>();
    let signal = {
        let health = health.clone();
        async move {
            shutdown.await;
            health.begin_drain();
            tracing::info!(office = %office, "shutdown requested: not serving, draining");
            let _ = drain_tx.send(());
        }
    };
    let mut builder = Server::builder();
    if let Some(tls) = crate::tls::Material::load(&cfg.tls)?.server() {
        builder = builder.tls_config(tls)?;
    }
    let server = builder
        .timeout(cfg.request_timeout())
        .layer(layers)
        .add_routes(routes)
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            signal,
        );

    health.set_serving();
    tracing::info!(office = %office, "serving");
    let grace = cfg.shutdown_grace();
    let stopped = {
        // The server (and the office's services it owns) is dropped at the end of this block.
        tokio::pin!(server);
        tokio::select! {
            res = &mut server => { res?; Stopped::Drained }
            () = grace_after(drain_rx, grace) => {
                tracing::warn!(office = %office, grace_ms = grace.as_millis() as u64, "grace period expired with requests in flight");
                Stopped::GraceExpired
            }
        }
    };
    if !ctx.finishing.join(grace).await {
        tracing::warn!(office = %office, grace_ms = grace.as_millis() as u64, "background work unfinished at exit");
        return Ok(Stopped::GraceExpired);
    }
    Ok(stopped)
}

/// Every failed answer is logged inside the request's span (its `request_id` and method): an
/// `INTERNAL`, `UNKNOWN` or `DATA_LOSS` — a bug or a broken invariant, never the caller's
/// doing — as an error, every other refusal at info.
fn log_failure(class: GrpcFailureClass, latency: Duration, _span: &tracing::Span) {
    let latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
    match class {
        GrpcFailureClass::Code(code) => {
            let code = tonic::Code::from_i32(code.get());
            if matches!(
                code,
                tonic::Code::Internal | tonic::Code::Unknown | tonic::Code::DataLoss
            ) {
                tracing::error!(code = ?code, latency_ms, "answered with a server error");
            } else {
                tracing::info!(code = ?code, latency_ms, "refused");
            }
        }
        GrpcFailureClass::Error(error) => {
            tracing::error!(%error, latency_ms, "answer failed");
        }
    }
}

async fn grace_after(drain: oneshot::Receiver<()>, grace: Duration) {
    if drain.await.is_err() {
        // The server ended on its own; the other branch finishes.
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(grace).await;
}

/// An office served in this process (tests). Dropping it does not stop it; call `stop`.
pub struct InProcess {
    pub addr: SocketAddr,
    tls: bool,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<Stopped>>,
}

impl InProcess {
    /// Start the office, bind `ctx.config.server.listen` (port 0 is fine) and serve in a task.
    pub async fn start(ctx: ServeContext, start: Start) -> anyhow::Result<Self> {
        // Contexts are cloned between in-process offices; the tasks that must finish are this
        // one's (the flushes of what the context holds — its verifier — are shared with it).
        let ctx = ServeContext {
            finishing: ctx.finishing.with_own_tasks(),
            ..ctx
        };
        let routes = start(ctx.clone()).await?;
        let listener = TcpListener::bind(ctx.config.server.listen).await?;
        let addr = listener.local_addr()?;
        let tls = ctx.config.tls.serves_tls();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(ctx, listener, routes, async move {
            let _ = stopped.await;
        }));
        Ok(InProcess {
            addr,
            tls,
            stop: Some(stop),
            task,
        })
    }

    /// `http://…`, or `https://localhost:…` when it serves TLS.
    pub fn endpoint(&self) -> String {
        if self.tls {
            format!("https://localhost:{}", self.addr.port())
        } else {
            format!("http://{}", self.addr)
        }
    }

    pub async fn stop(mut self) -> anyhow::Result<Stopped> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await?
    }
}
