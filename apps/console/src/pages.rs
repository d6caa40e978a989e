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

const CSS: &str = include_str!("../static/console.css");
const SCRIPT: &str = include_str!("../static/live.js");

pub struct App {
    ward: Ward,
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
        secure: bool,
        limit: SignInLimit,
        closing: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        App {
            ward,
            sessions: Sessions::new(MAX_SESSIONS),
            limit,
            secure,
            pre_key: random_hex(),
            closing,
        }
    }

    fn cookie(&self, name: &str, value: &str, max_age: Option<u64>) -> HeaderValue {
        let mut c = format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict");
        if let Some(age) = max_age {
            c.push_str(&format!("; Max-Age={age}"));
        }
        if self.secure {
            c.push_str("; Secure");
        }
        HeaderValue::try_from(c).expect("invariant: cookie values are hex")
    }

    fn pre_token(&self, nonce: &str) -> String {
        hex::encode(Sha256::digest(format!("{}:{nonce}", self.pre_key)))
    }
}

type AppState = State<Arc<App>>;

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

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
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
fn signed(app: &App, headers: &HeaderMap) -> Option<(String, Arc<Session>)> {
    let handle = cookie(headers, COOKIE)?;
    let session = app.sessions.get(&handle)?;
    Some((handle, session))
}

fn html(status: StatusCode, page: Result<String, askama::Error>) -> Response {
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
struct SignInPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    refusal: Option<&'a Refusal>,
    notice: &'a str,
}

#[derive(Template)]
#[template(path = "consents.html")]
struct PendingPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    consents: Vec<ConsentView>,
    refusal: Option<Refusal>,
}

#[derive(Template)]
#[template(path = "pending.html")]
struct PendingFragment<'a> {
    csrf: &'a str,
    consents: Vec<ConsentView>,
    refusal: Option<Refusal>,
}

#[derive(Template)]
#[template(path = "history.html")]
struct HistoryPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    consents: Vec<ConsentView>,
    refusal: Option<Refusal>,
}

#[derive(Template)]
#[template(path = "outcome.html")]
struct OutcomePage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    title: &'a str,
    message: String,
    refusal: Option<Refusal>,
    consent: Option<ConsentView>,
}

fn outcome(
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

fn status_of(refusal: &Refusal) -> StatusCode {
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
fn forged(session: Option<&Session>) -> Response {
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

fn to_signin() -> Response {
    Redirect::to("/signin").into_response()
}

// ---- sign-in and sign-out ----

async fn signin_page(State(app): AppState, headers: HeaderMap) -> Response {
    if signed(&app, &headers).is_some() {
        return Redirect::to("/consents").into_response();
    }
    signin_form(&app, StatusCode::OK, None, "")
}

fn signin_form(app: &App, status: StatusCode, refusal: Option<&Refusal>, notice: &str) -> Response {
    let nonce = random_hex();
    let token = app.pre_token(&nonce);
    let mut response = html(
        status,
        SignInPage {
            principal: None,
            csrf: &token,
            refusal,
            notice,
        }
        .render(),
    );
    response.headers_mut().append(
        header::SET_COOKIE,
        app.cookie(PRE_COOKIE, &nonce, Some(900)),
    );
    response
}

#[derive(Deserialize)]
struct SignInForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    credential: String,
}

async fn signin(
    State(app): AppState,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<SignInForm>,
) -> Response {
    let Some(nonce) = cookie(&headers, PRE_COOKIE) else {
        return forged(None);
    };
    if !same(&form.csrf, &app.pre_token(&nonce)) {
        return forged(None);
    }
    if !app.limit.admit(peer.ip()) {
        return signin_form(
            &app,
            StatusCode::TOO_MANY_REQUESTS,
            None,
            "Too many sign-in attempts: wait a minute, then try again.",
        );
    }
    let credential = form.credential.trim();
    if credential.is_empty() {
        return signin_form(
            &app,
            StatusCode::BAD_REQUEST,
            None,
            "Paste your Ward credential to sign in.",
        );
    }
    let exchanged = match app.ward.exchange(credential).await {
        Ok(e) => e,
        Err(refusal) => return signin_form(&app, status_of(&refusal), Some(&refusal), ""),
    };
    let handle = match app.sessions.open(
        exchanged.principal,
        exchanged.principal_id,
        exchanged.token,
        exchanged.lifetime,
    ) {
        Ok(h) => h,
        Err(_) => {
            return signin_form(
                &app,
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                "The console holds as many sessions as it may: try again later.",
            );
        }
    };
    let mut response = Redirect::to("/consents").into_response();
    let h = response.headers_mut();
    h.append(
        header::SET_COOKIE,
        app.cookie(COOKIE, &handle, Some(exchanged.lifetime.as_secs())),
    );
    h.append(header::SET_COOKIE, app.cookie(PRE_COOKIE, "", Some(0)));
    response
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn signout(
    State(app): AppState,
    headers: HeaderMap,
    axum::Form(form): axum::Form<CsrfForm>,
) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    if !same(&form.csrf, &session.csrf) {
        return forged(Some(&session));
    }
    app.sessions.close(&handle);
    let mut response = signin_form(&app, StatusCode::OK, None, "You are signed out.");
    response
        .headers_mut()
        .append(header::SET_COOKIE, app.cookie(COOKIE, "", Some(0)));
    response
}

// ---- consents ----

/// The pending consents of the person's own session, or Ward's refusal. A refusal that ends
/// the Ward session ends the console session too.
async fn pending(app: &App, handle: &str, session: &Session) -> Result<Vec<ConsentView>, Refusal> {
    let listed = app
        .ward
        .consents(session.token(), Some(ConsentState::Pending))
        .await;
    match listed {
        Ok(list) => Ok(list.iter().map(ConsentView::from).collect()),
        Err(r) => {
            if r.ends_session() {
                app.sessions.close(handle);
            }
            Err(r)
        }
    }
}

async fn pending_page(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    let (consents, refusal) = match pending(&app, &handle, &session).await {
        Ok(c) => (c, None),
        Err(r) if r.ends_session() => return to_signin(),
        Err(r) => (Vec::new(), Some(r)),
    };
    let status = refusal.as_ref().map_or(StatusCode::OK, status_of);
    html(
        status,
        PendingPage {
            principal: Some(&session.principal),
            csrf: &session.csrf,
            consents,
            refusal,
        }
        .render(),
    )
}

async fn pending_fragment(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let (consents, refusal) = match pending(&app, &handle, &session).await {
        Ok(c) => (c, None),
        Err(r) if r.ends_session() => return StatusCode::UNAUTHORIZED.into_response(),
        Err(r) => (Vec::new(), Some(r)),
    };
    html(
        StatusCode::OK,
        PendingFragment {
            csrf: &session.csrf,
            consents,
            refusal,
        }
        .render(),
    )
}

async fn history_page(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    let (consents, refusal) = match app.ward.consents(session.token(), None).await {
        Ok(list) => (
            list.iter()
                .filter(|c| c.state != ConsentState::Pending as i32)
                .map(ConsentView::from)
                .collect(),
            None,
        ),
        Err(r) if r.ends_session() => {
            app.sessions.close(&handle);
            return to_signin();
        }
        Err(r) => (Vec::new(), Some(r)),
    };
    let status = refusal.as_ref().map_or(StatusCode::OK, status_of);
    html(
        status,
        HistoryPage {
            principal: Some(&session.principal),
            csrf: &session.csrf,
            consents,
            refusal,
        }
        .render(),
    )
}

#[derive(Deserialize)]
struct DecideForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    verdict: String,
    #[serde(default)]
    review_digest: String,
}

async fn decide(
    State(app): AppState,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(form): axum::Form<DecideForm>,
) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    if !same(&form.csrf, &session.csrf) {
        return forged(Some(&session));
    }
    let verdict = match form.verdict.as_str() {
        "approve" => Verdict::Approve,
        "deny" => Verdict::Deny,
        _ => {
            return outcome(
                StatusCode::BAD_REQUEST,
                Some(&session),
                "No verdict",
                "The form named no verdict: use the page's Approve or Deny button.".into(),
                None,
                None,
            );
        }
    };
    let wanted = if verdict == Verdict::Approve {
        "granted"
    } else {
        "denied"
    };
    match app
        .ward
        .decide(session.token(), &id, verdict, &form.review_digest)
        .await
    {
        Ok(answer) => {
            let consent = answer.consent.as_ref().map(ConsentView::from);
            let state = answer
                .consent
                .as_ref()
                .map_or("unknown", |c| state_name(c.state));
            if answer.changed && state == wanted {
                let title = if verdict == Verdict::Approve {
                    "Approved"
                } else {
                    "Denied"
                };
                outcome(
                    StatusCode::OK,
                    Some(&session),
                    title,
                    format!("Ward recorded your verdict: the consent is {state}."),
                    None,
                    consent,
                )
            } else {
                outcome(
                    StatusCode::CONFLICT,
                    Some(&session),
                    "Nothing was changed",
                    format!(
                        "This consent had already been settled ({state}) before your verdict \
                         arrived, so your click changed nothing. Look at the history for who \
                         settled it."
                    ),
                    None,
                    consent,
                )
            }
        }
        Err(refusal) if refusal.ends_session() => {
            app.sessions.close(&handle);
            let mut response = signin_form(
                &app,
                StatusCode::UNAUTHORIZED,
                Some(&refusal),
                "Your session ended before the verdict was sent: nothing was settled.",
            );
            response
                .headers_mut()
                .append(header::SET_COOKIE, app.cookie(COOKIE, "", Some(0)));
            response
        }
        Err(refusal) => outcome(
            status_of(&refusal),
            Some(&session),
            "Refused",
            "Ward refused the verdict.".into(),
            Some(refusal),
            None,
        ),
    }
}

// ---- live updates ----

/// One `consent` event per change Ward streams (its data is the change number); an `end`
/// event when the stream or the console session ends (the script then reloads the page, which
/// shows why). The console session is checked every second, so sign-out ends the stream too.
async fn events(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let stream = match app.ward.watch(session.token()).await {
        Ok(s) => s,
        Err(r) => {
            if r.ends_session() {
                app.sessions.close(&handle);
            }
            return status_of(&r).into_response();
        }
    };
    drop(session);
    Sse::new(changes(app, handle, stream))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

fn changes(
    app: Arc<App>,
    handle: String,
    stream: tonic::Streaming<lychd_proto::ward::v1::WatchConsentsResponse>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let tick = tokio::time::interval(Duration::from_secs(1));
    let closing = app.closing.clone();
    futures::stream::unfold(
        Some((app, handle, stream, tick, closing)),
        |state| async move {
            enum Next {
                Change(
                    Box<
                        Result<Option<lychd_proto::ward::v1::WatchConsentsResponse>, tonic::Status>,
                    >,
                ),
                Closing,
                Tick,
            }
            let (app, handle, mut stream, mut tick, mut closing) = state?;
            loop {
                let next = tokio::select! {
                    _ = closing.wait_for(|c| *c) => Next::Closing,
                    message = stream.message() => Next::Change(Box::new(message)),
                    _ = tick.tick() => Next::Tick,
                };
                let end = |why: String| Some((Ok(Event::default().event("end").data(why)), None));
                match next {
                    Next::Closing => return end("closing".into()),
                    Next::Tick => {
                        if app.sessions.get(&handle).is_none() {
                            return end("signed out".into());
                        }
                    }
                    Next::Change(change) => match *change {
                        Ok(Some(change)) => {
                            let event = Event::default()
                                .event("consent")
                                .data(change.change.to_string());
                            return Some((Ok(event), Some((app, handle, stream, tick, closing))));
                        }
                        Ok(None) => return end("ended".into()),
                        Err(status) => {
                            let refusal = Ward::refusal(&status);
                            if refusal.ends_session() {
                                app.sessions.close(&handle);
                            }
                            return end(refusal.reason);
                        }
                    },
                }
            }
        },
    )
}
