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
}

/// Serve until `shutdown` completes.
pub async fn serve(
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (close, closing) = tokio::sync::watch::channel(false);
    let app = Arc::new(pages::App::new(
        ward::Ward::new(&config.ward).context("ward endpoint")?,
        hardware::Hardware::new(
            config.orchestrator.as_deref(),
            config.dispatcher.as_deref(),
            config.runner.as_deref(),
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
