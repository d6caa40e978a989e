//! Read-only pages of the hardware offices, each read with the person's own session for that
//! office: transitions, containments (with what recovery needs), leases.

use super::*;
use crate::hardware::{ContainmentView, DISPATCHER, LeaseView, ORCHESTRATOR, TransitionView};

#[derive(Template)]
#[template(path = "transitions.html")]
pub(super) struct TransitionsPage<'a> {
    principal: Option<&'a str>,
    csrf: &'a str,
    transitions: Vec<TransitionView>,
    refusal: Option<Refusal>,
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
