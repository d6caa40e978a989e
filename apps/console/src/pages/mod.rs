//! The routes. Every page but sign-in needs a live console session; every form carries the
//! session's CSRF token (sign-in's is tied to a random pre-session cookie instead); every
//! action is one call of the person's own session to the office.
//!
//! | route | what |
//! | --- | --- |
//! | `GET /signin`, `POST /signin` | sign in with one's own Ward credential (rate-limited) |
//! | `POST /signout` | end the console session at once |
//! | `GET /consents` | pending consents, each with what the verdict binds, approve / deny |
//! | `GET /consents/pending` | the same list alone (what the live script fetches) |
//! | `POST /consents/{id}/decide` | `Decide` with the review digest that was displayed |
//! | `GET /consents/history` | settled consents |
//! | `GET /transitions` | the Orchestrator's transitions, phases live; `GET /transitions/list` the list alone; `GET /transitions/events` one Server-Sent Event per recorded phase (`WatchTransitions`) |
//! | `GET /runs`, `GET /runs/{id}` | the Runner's runs (`ListRuns`); one run with what it consumed, its transitions and latest checkpoint (`GetRun`, `ListRunTransitions`, `InspectCheckpoint`) |
//! | `POST /runs/{id}/cancel` | `CancelRun` (the Runner cancels only the caller's runs) |
//! | `POST /containments/{id}/recover` | `RecoverContainment` (the Orchestrator observes the proof afresh) |
//! | `POST /transitions/{id}/cancel` | `CancelTransition` (the owner's; the Orchestrator refuses anyone else) |
//! | `GET /containments`, `/leases`, `/capabilities` | read-only: containments (with what recovery needs), the Dispatcher's live leases and its capabilities (`ListCapabilities`) |
//! | `GET /events` | Server-Sent Events: one per consent change (`WatchConsents`) |
//! | `GET /static/…`, `GET /healthz` | the stylesheet and script; liveness |

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use askama::Template;
use axum::Router;
use axum::extract::{ConnectInfo, Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures::Stream;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use lychd_proto::ward::v1::{ConsentState, Verdict};
use serde::Deserialize;
use sha2::{Digest, Sha256};

mod consents;
mod hardware;
mod live;
mod signin;

use consents::{decide, history_page, pending_fragment, pending_page};
use hardware::{
    cancel_run, cancel_transition, capabilities_page, containments_page, leases_page,
    recover_containment, run_page, runs_page, transitions_fragment, transitions_page,
};
use live::{events, transition_events};
use signin::{signin, signin_page, signout};

use crate::limit::SignInLimit;
use crate::sessions::{Session, Sessions, random_hex, same};
use crate::view::{ConsentView, state_name};
use crate::ward::{Refusal, Ward};

/// The cookie holding the session handle.
pub const COOKIE: &str = "lychd_console";
/// The cookie holding the sign-in form's nonce.
pub const PRE_COOKIE: &str = "lychd_console_pre";
/// Signed-in sessions held at most.
const MAX_SESSIONS: usize = 1024;

const CSS: &str = include_str!("../../static/console.css");
const SCRIPT: &str = include_str!("../../static/live.js");

pub struct App {
    ward: Ward,
    hardware: crate::hardware::Hardware,
    sessions: Sessions,
    limit: SignInLimit,
    secure: bool,
    /// Key of the sign-in form's CSRF token (random per process).
    pre_key: String,
    /// True once the console is shutting down: live streams end, so shutdown is not held.
    closing: tokio::sync::watch::Receiver<bool>,
}

impl App {
    pub fn new(
        ward: Ward,
        hardware: crate::hardware::Hardware,
        secure: bool,
        limit: SignInLimit,
        closing: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        App {
            ward,
            hardware,
            sessions: Sessions::new(MAX_SESSIONS),
            limit,
            secure,
            pre_key: random_hex(),
            closing,
        }
    }

    pub(super) fn cookie(&self, name: &str, value: &str, max_age: Option<u64>) -> HeaderValue {
        let mut c = format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict");
        if let Some(age) = max_age {
            c.push_str(&format!("; Max-Age={age}"));
        }
        if self.secure {
            c.push_str("; Secure");
        }
        HeaderValue::try_from(c).expect("invariant: cookie values are hex")
    }

    pub(super) fn pre_token(&self, nonce: &str) -> String {
        hex::encode(Sha256::digest(format!("{}:{nonce}", self.pre_key)))
    }
}

pub(super) type AppState = State<Arc<App>>;

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/consents") }))
        .route("/signin", get(signin_page).post(signin))
        .route("/signout", post(signout))
        .route("/consents", get(pending_page))
        .route("/consents/pending", get(pending_fragment))
        .route("/consents/history", get(history_page))
        .route("/consents/{id}/decide", post(decide))
        .route("/events", get(events))
        .route("/transitions", get(transitions_page))
        .route("/transitions/list", get(transitions_fragment))
        .route("/transitions/events", get(transition_events))
        .route("/transitions/{id}/cancel", post(cancel_transition))
        .route("/containments", get(containments_page))
        .route("/containments/{id}/recover", post(recover_containment))
        .route("/leases", get(leases_page))
        .route("/capabilities", get(capabilities_page))
        .route("/runs", get(runs_page))
        .route("/runs/{id}", get(run_page))
        .route("/runs/{id}/cancel", post(cancel_run))
        .route(
            "/static/console.css",
            get(|| async { asset("text/css", CSS) }),
        )
        .route(
            "/static/live.js",
            get(|| async { asset("text/javascript", SCRIPT) }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .layer(axum::middleware::from_fn(crate::security::headers))
        .with_state(app)
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "private, max-age=300"),
        ],
        body,
    )
        .into_response()
}

pub(super) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// The live session of the request, with its handle.
pub(super) fn signed(app: &App, headers: &HeaderMap) -> Option<(String, Arc<Session>)> {
    let handle = cookie(headers, COOKIE)?;
    let session = app.sessions.get(&handle)?;
    Some((handle, session))
}

pub(super) fn html(status: StatusCode, page: Result<String, askama::Error>) -> Response {
    match page {
        Ok(body) => (status, Html(body)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "template failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

// ---- templates ----

#[derive(Template)]
#[template(path = "signin.html")]
pub(super) struct SignInPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    refusal: Option<&'a Refusal>,
    notice: &'a str,
}

#[derive(Template)]
#[template(path = "consents.html")]
pub(super) struct PendingPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    consents: Vec<ConsentView>,
    refusal: Option<Refusal>,
}

#[derive(Template)]
#[template(path = "pending.html")]
pub(super) struct PendingFragment<'a> {
    csrf: &'a str,
    consents: Vec<ConsentView>,
    refusal: Option<Refusal>,
}

#[derive(Template)]
#[template(path = "history.html")]
pub(super) struct HistoryPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    consents: Vec<ConsentView>,
    refusal: Option<Refusal>,
}

#[derive(Template)]
#[template(path = "outcome.html")]
pub(super) struct OutcomePage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    title: &'a str,
    message: String,
    refusal: Option<Refusal>,
    consent: Option<ConsentView>,
}

pub(super) fn outcome(
    status: StatusCode,
    session: Option<&Session>,
    title: &str,
    message: String,
    refusal: Option<Refusal>,
    consent: Option<ConsentView>,
) -> Response {
    html(
        status,
        OutcomePage {
            principal: session.map(|s| s.principal.as_str()),
            csrf: session.map_or("", |s| s.csrf.as_str()),
            title,
            message,
            refusal,
            consent,
        }
        .render(),
    )
}

pub(super) fn status_of(refusal: &Refusal) -> StatusCode {
    use tonic::Code;
    match refusal.code {
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::FailedPrecondition | Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::InvalidArgument => StatusCode::BAD_REQUEST,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The answer to a form without this session's CSRF token: refused, nothing called.
pub(super) fn forged(session: Option<&Session>) -> Response {
    outcome(
        StatusCode::FORBIDDEN,
        session,
        "Refused: the form is not this page's",
        "The form carried no valid CSRF token for your session, so nothing was sent to any \
         office. Reload the page and use its own forms."
            .into(),
        None,
        None,
    )
}

pub(super) fn to_signin() -> Response {
    Redirect::to("/signin").into_response()
}
