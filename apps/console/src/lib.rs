//! `lychd-console`: the operators' console, a small server-rendered web server over the
//! offices' gRPC APIs (issue 29). It is a *client*: it holds no credential and no authority of
//! its own. A person signs in with their own Ward credential, which is exchanged at once for a
//! Ward session per office the console calls (each bound to that office alone) and then
//! forgotten; the session stays server-side ([`sessions`]), the browser holds only an opaque
//! random handle in an `HttpOnly; SameSite=Strict` cookie (`Secure` behind TLS), and every
//! action is the person's own gRPC call, authorized by Ward as if made with grpcurl.
//!
//! Map: [`pages`] (the routes and what each does), [`view`] (what a consent shows), [`ward`]
//! (the calls and refusals in plain words), [`hardware`] (the Orchestrator's and Dispatcher's
//! read-only views), [`sessions`] (handles and CSRF tokens), [`limit`]
//! (sign-in attempts), [`security`] (the headers every answer carries). Templates are in
//! `templates/` (compiled and escaped by askama), the stylesheet and the one script in
//! `static/`.

pub mod hardware;
pub mod limit;
pub mod pages;
pub mod security;
pub mod sessions;
pub mod view;
pub mod ward;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

/// How the console runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it listens (loopback by default).
    pub listen: SocketAddr,
    /// Ward's endpoint (`http://host:port`).
    pub ward: String,
    /// The Orchestrator's endpoint (its pages say "not configured" without it).
    pub orchestrator: Option<String>,
    /// The Dispatcher's endpoint (likewise).
    pub dispatcher: Option<String>,
    /// The Runner's endpoint (runs pages).
    pub runner: Option<String>,
    /// Mark the cookie `Secure` (the console is served to browsers over TLS, by a proxy).
    pub secure_cookie: bool,
    /// Sign-in attempts per client address per minute (the total is ten times this).
    pub signin_per_minute: u32,
    /// Write the bound address here once listening (for `lychd dev` and tests: port 0).
    pub address_file: Option<PathBuf>,
    /// The CA (PEM) verifying the offices' certificates: `https://` endpoints are called over
    /// server-only TLS with it (the console presents no client certificate: it is no office).
    pub ca_file: Option<PathBuf>,
}

/// A lazily connected channel to `endpoint`, over TLS verified by `ca` when it is `https://`.
pub fn office_channel(
    endpoint: &str,
    ca: Option<&tonic::transport::Certificate>,
) -> anyhow::Result<tonic::transport::Channel> {
    let mut e = tonic::transport::Endpoint::from_shared(endpoint.to_owned())?
        .connect_timeout(Duration::from_secs(5));
    if e.uri().scheme_str() == Some("https") {
        let ca = ca.context("an https:// endpoint needs --ca-file")?;
        e = e.tls_config(tonic::transport::ClientTlsConfig::new().ca_certificate(ca.clone()))?;
    }
    Ok(e.connect_lazy())
}

/// Serve until `shutdown` completes.
pub async fn serve(
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (close, closing) = tokio::sync::watch::channel(false);
    let ca = config
        .ca_file
        .as_deref()
        .map(|p| {
            std::fs::read(p)
                .map(tonic::transport::Certificate::from_pem)
                .with_context(|| format!("--ca-file {}", p.display()))
        })
        .transpose()?;
    let app = Arc::new(pages::App::new(
        ward::Ward::with_ca(&config.ward, ca.as_ref()).context("ward endpoint")?,
        hardware::Hardware::with_ca(
            config.orchestrator.as_deref(),
            config.dispatcher.as_deref(),
            config.runner.as_deref(),
            ca.as_ref(),
        )
        .context("orchestrator, dispatcher or runner endpoint")?,
        config.secure_cookie,
        limit::SignInLimit::new(
            config.signin_per_minute,
            config.signin_per_minute.saturating_mul(10),
            Duration::from_secs(60),
        ),
        closing,
    ));
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listen on {}", config.listen))?;
    let bound = listener.local_addr()?;
    if let Some(file) = &config.address_file {
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, bound.to_string())?;
        std::fs::rename(&tmp, file)?;
    }
    tracing::info!(address = %bound, "console serving");
    axum::serve(
        listener,
        pages::router(app).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        shutdown.await;
        // Live streams end first, or they would hold the graceful shutdown forever.
        let _ = close.send(true);
    })
    .await?;
    Ok(())
}
