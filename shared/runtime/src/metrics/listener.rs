//! The scrape endpoint: HTTP/1.1 on `[metrics] listen`, `GET /metrics` answers the text
//! exposition of what the office measured (in memory: a scrape never reaches PostgreSQL);
//! any other path is 404, any other method 405. At most [`CONNECTIONS`] connections are served
//! at once (further ones wait in the accept queue), each must send its headers within
//! [`HEADER_TIMEOUT`]; the listener stops when dropped.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::Scrape;

/// Connections served at once.
const CONNECTIONS: usize = 16;
/// How long a connection may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) struct Listener {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Listener {
    pub async fn bind(listen: SocketAddr, scrape: Scrape) -> std::io::Result<Listener> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(accept(listener, scrape));
        Ok(Listener { addr, task })
    }
}

async fn accept(listener: TcpListener, scrape: Scrape) {
    let permits = Arc::new(Semaphore::new(CONNECTIONS));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "metrics endpoint: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let scrape = scrape.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let scrape = scrape.clone();
                async move { Ok::<_, Infallible>(answer(&scrape, &request)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
            drop(permit);
        });
    }
}

fn answer<B>(scrape: &Scrape, request: &http::Request<B>) -> http::Response<Full<Bytes>> {
    let status = if request.uri().path() != "/metrics" {
        http::StatusCode::NOT_FOUND
    } else if request.method() != http::Method::GET && request.method() != http::Method::HEAD {
        http::StatusCode::METHOD_NOT_ALLOWED
    } else {
        return http::Response::builder()
            .header(
                http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )
            .body(Full::new(Bytes::from(scrape.render())))
            .unwrap_or_default();
    };
    let mut response = http::Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response
}
