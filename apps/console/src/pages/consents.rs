//! Pending consents, their history, and the verdict bound to the displayed review digest.

use super::signin::signin_form;
use super::*;

/// The pending consents of the person's own session, or Ward's refusal. A refusal that ends
/// the Ward session ends the console session too.
pub(super) async fn pending(
    app: &App,
    handle: &str,
    session: &Session,
) -> Result<Vec<ConsentView>, Refusal> {
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

pub(super) async fn pending_page(State(app): AppState, headers: HeaderMap) -> Response {
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

pub(super) async fn pending_fragment(State(app): AppState, headers: HeaderMap) -> Response {
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

pub(super) async fn history_page(State(app): AppState, headers: HeaderMap) -> Response {
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
pub(super) struct DecideForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    verdict: String,
    #[serde(default)]
    review_digest: String,
}

pub(super) async fn decide(
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
