//! Read-only pages of the hardware offices, each read with the person's own session for that
//! office: transitions, containments (with what recovery needs), leases.

use super::*;
use crate::hardware::{
    CapabilityView, ContainmentView, DISPATCHER, LeaseView, ORCHESTRATOR, RUNNER, RunPageView,
    RunView, TransitionView,
};

#[derive(Template)]
#[template(path = "capabilities.html")]
pub(super) struct CapabilitiesPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    capabilities: Vec<CapabilityView>,
    refusal: Option<Refusal>,
}

pub(super) async fn capabilities_page(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    let read = app
        .hardware
        .capabilities(session.token_for(DISPATCHER))
        .await;
    let Some((capabilities, refusal)) = rows(&app, &handle, read) else {
        return to_signin();
    };
    let status = refusal.as_ref().map_or(StatusCode::OK, status_of);
    html(
        status,
        CapabilitiesPage {
            principal: Some(&session.principal),
            csrf: &session.csrf,
            capabilities,
            refusal,
        }
        .render(),
    )
}

#[derive(Template)]
#[template(path = "transitions.html")]
pub(super) struct TransitionsPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    transitions: Vec<TransitionView>,
    refusal: Option<Refusal>,
}

#[derive(Template)]
#[template(path = "transition_list.html")]
pub(super) struct TransitionList<'a> {
    csrf: &'a str,
    transitions: Vec<TransitionView>,
    refusal: Option<Refusal>,
}

#[derive(Template)]
#[template(path = "transition_outcome.html")]
pub(super) struct TransitionOutcome<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    title: &'a str,
    message: &'a str,
    refusal: Option<Refusal>,
    transition: Option<TransitionView>,
}

#[derive(Template)]
#[template(path = "containments.html")]
pub(super) struct ContainmentsPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    containments: Vec<ContainmentView>,
    refusal: Option<Refusal>,
}

#[derive(Template)]
#[template(path = "leases.html")]
pub(super) struct LeasesPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    leases: Vec<LeaseView>,
    refusal: Option<Refusal>,
}

/// The rows, or the refusal shown in their place; `None` when the console session ended.
fn rows<T>(
    app: &App,
    handle: &str,
    read: Result<Vec<T>, Refusal>,
) -> Option<(Vec<T>, Option<Refusal>)> {
    match read {
        Ok(rows) => Some((rows, None)),
        Err(r) if r.ends_session() => {
            app.sessions.close(handle);
            None
        }
        Err(r) => Some((Vec::new(), Some(r))),
    }
}

pub(super) async fn transitions_page(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    let read = app
        .hardware
        .transitions(session.token_for(ORCHESTRATOR))
        .await;
    let Some((transitions, refusal)) = rows(&app, &handle, read) else {
        return to_signin();
    };
    let status = refusal.as_ref().map_or(StatusCode::OK, status_of);
    html(
        status,
        TransitionsPage {
            principal: Some(&session.principal),
            csrf: &session.csrf,
            transitions,
            refusal,
        }
        .render(),
    )
}

/// The transitions list alone (what the live script fetches on each `transition` event).
pub(super) async fn transitions_fragment(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let read = app
        .hardware
        .transitions(session.token_for(ORCHESTRATOR))
        .await;
    let Some((transitions, refusal)) = rows(&app, &handle, read) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    html(
        StatusCode::OK,
        TransitionList {
            csrf: &session.csrf,
            transitions,
            refusal,
        }
        .render(),
    )
}

#[derive(serde::Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// `CancelTransition` with the person's own session; the Orchestrator decides who owns it.
pub(super) async fn cancel_transition(
    State(app): AppState,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(form): axum::Form<CsrfForm>,
) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    if !same(&form.csrf, &session.csrf) {
        return forged(Some(&session));
    }
    let answer = app
        .hardware
        .cancel_transition(session.token_for(ORCHESTRATOR), &id)
        .await;
    let (status, title, message, refusal, transition) = match answer {
        Ok(t) => (
            StatusCode::OK,
            "Cancellation recorded",
            "The Orchestrator recorded your cancellation; the transition settles as its table says \
             (restored, or contained when the prior world cannot be proved). Follow its phase on \
             the transitions page.",
            None,
            t,
        ),
        Err(r) if r.ends_session() => {
            app.sessions.close(&handle);
            return to_signin();
        }
        Err(r) => (
            status_of(&r),
            "Not cancelled",
            "The Orchestrator refused the cancellation.",
            Some(r),
            None,
        ),
    };
    html(
        status,
        TransitionOutcome {
            principal: Some(&session.principal),
            csrf: &session.csrf,
            title,
            message,
            refusal,
            transition,
        }
        .render(),
    )
}

#[derive(Template)]
#[template(path = "containment_outcome.html")]
pub(super) struct ContainmentOutcome<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    title: &'a str,
    message: String,
    refusal: Option<Refusal>,
    containment: Option<ContainmentView>,
}

/// `RecoverContainment` with the person's own session. The proof is not typed in: the
/// Orchestrator has the Dispatcher observe the recorded animators afresh; the page shows what
/// the proof must find.
pub(super) async fn recover_containment(
    State(app): AppState,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(form): axum::Form<CsrfForm>,
) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    if !same(&form.csrf, &session.csrf) {
        return forged(Some(&session));
    }
    let page = |status, title, message, refusal, containment| {
        html(
            status,
            ContainmentOutcome {
                principal: Some(&session.principal),
                csrf: &session.csrf,
                title,
                message,
                refusal,
                containment,
            }
            .render(),
        )
    };
    let Ok(id) = id.parse::<i64>() else {
        return page(
            StatusCode::BAD_REQUEST,
            "No such containment",
            "A containment id is a number: use the Recover button of the containments page.".into(),
            None,
            None,
        );
    };
    match app
        .hardware
        .recover_containment(session.token_for(ORCHESTRATOR), id)
        .await
    {
        Ok((containment, proved)) => page(
            StatusCode::OK,
            "Recovered",
            format!(
                "The Dispatcher's fresh observation proved the recorded world ({proved}); the \
                 Orchestrator reopened admission and marked the containment recovered."
            ),
            None,
            containment,
        ),
        Err(r) if r.ends_session() => {
            app.sessions.close(&handle);
            to_signin()
        }
        Err(r) => page(
            status_of(&r),
            "Not recovered",
            "The Orchestrator refused the recovery; the containment stays.".into(),
            Some(r),
            None,
        ),
    }
}

pub(super) async fn containments_page(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    let read = app
        .hardware
        .containments(session.token_for(ORCHESTRATOR))
        .await;
    let Some((containments, refusal)) = rows(&app, &handle, read) else {
        return to_signin();
    };
    let status = refusal.as_ref().map_or(StatusCode::OK, status_of);
    html(
        status,
        ContainmentsPage {
            principal: Some(&session.principal),
            csrf: &session.csrf,
            containments,
            refusal,
        }
        .render(),
    )
}

pub(super) async fn leases_page(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    let read = app.hardware.leases(session.token_for(DISPATCHER)).await;
    let Some((leases, refusal)) = rows(&app, &handle, read) else {
        return to_signin();
    };
    let status = refusal.as_ref().map_or(StatusCode::OK, status_of);
    html(
        status,
        LeasesPage {
            principal: Some(&session.principal),
            csrf: &session.csrf,
            leases,
            refusal,
        }
        .render(),
    )
}

#[derive(Template)]
#[template(path = "runs.html")]
pub(super) struct RunsPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    runs: Vec<RunView>,
    refusal: Option<Refusal>,
}

#[derive(Template)]
#[template(path = "run.html")]
pub(super) struct RunPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    title: &'a str,
    message: String,
    page: Option<RunPageView>,
    refusal: Option<Refusal>,
}

pub(super) async fn runs_page(State(app): AppState, headers: HeaderMap) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    let read = app.hardware.runs(session.token_for(RUNNER)).await;
    let Some((runs, refusal)) = rows(&app, &handle, read) else {
        return to_signin();
    };
    let status = refusal.as_ref().map_or(StatusCode::OK, status_of);
    html(
        status,
        RunsPage {
            principal: Some(&session.principal),
            csrf: &session.csrf,
            runs,
            refusal,
        }
        .render(),
    )
}

/// A run's page: the run, what it consumed, its transitions and its latest checkpoint.
pub(super) async fn run_page(
    State(app): AppState,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    let (status, page, refusal) = match app.hardware.run(session.token_for(RUNNER), &id).await {
        Ok(p) => (StatusCode::OK, Some(p), None),
        Err(r) if r.ends_session() => {
            app.sessions.close(&handle);
            return to_signin();
        }
        Err(r) => (status_of(&r), None, Some(r)),
    };
    html(
        status,
        RunPage {
            principal: Some(&session.principal),
            csrf: &session.csrf,
            title: "Run",
            message: String::new(),
            page,
            refusal,
        }
        .render(),
    )
}

/// `CancelRun` with the person's own session; the Runner cancels only the caller's runs.
pub(super) async fn cancel_run(
    State(app): AppState,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(form): axum::Form<CsrfForm>,
) -> Response {
    let Some((handle, session)) = signed(&app, &headers) else {
        return to_signin();
    };
    if !same(&form.csrf, &session.csrf) {
        return forged(Some(&session));
    }
    let (status, title, message, refusal) = match app
        .hardware
        .cancel_run(session.token_for(RUNNER), &id)
        .await
    {
        Ok(run) => (
            StatusCode::OK,
            "Cancellation recorded",
            format!(
                "The Runner recorded your cancellation; the run is {} (a run in an \
                     effect-critical state honours it at its next safe point).",
                run.map_or_else(|| "unknown".into(), |r| r.state)
            ),
            None,
        ),
        Err(r) if r.ends_session() => {
            app.sessions.close(&handle);
            return to_signin();
        }
        Err(r) => (
            status_of(&r),
            "Not cancelled",
            "The Runner refused the cancellation.".into(),
            Some(r),
        ),
    };
    html(
        status,
        RunPage {
            principal: Some(&session.principal),
            csrf: &session.csrf,
            title,
            message,
            page: None,
            refusal,
        }
        .render(),
    )
}
