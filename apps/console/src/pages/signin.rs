//! Sign-in with one's own Ward credential (rate-limited, its form's CSRF token tied to a
//! pre-session cookie) and sign-out (the session is dropped at once).

use super::*;

pub(super) async fn signin_page(State(app): AppState, headers: HeaderMap) -> Response {
    if signed(&app, &headers).is_some() {
        return Redirect::to("/consents").into_response();
    }
    signin_form(&app, StatusCode::OK, None, "")
}

pub(super) fn signin_form(
    app: &App,
    status: StatusCode,
    refusal: Option<&Refusal>,
    notice: &str,
) -> Response {
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
pub(super) struct SignInForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    credential: String,
}

pub(super) async fn signin(
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
    let exchanged = match app.ward.exchange(credential, "ward").await {
        Ok(e) => e,
        Err(refusal) => return signin_form(&app, status_of(&refusal), Some(&refusal), ""),
    };
    // One session per further office, each bound to it alone; the console session lasts as
    // long as the shortest of them.
    let mut lifetime = exchanged.lifetime;
    let mut others = Vec::new();
    for office in app.hardware.offices() {
        match app.ward.exchange(credential, office).await {
            Ok(e) => {
                lifetime = lifetime.min(e.lifetime);
                others.push((office, e.token));
            }
            Err(refusal) => return signin_form(&app, status_of(&refusal), Some(&refusal), ""),
        }
    }
    let handle = match app.sessions.open(
        exchanged.principal,
        exchanged.principal_id,
        exchanged.token,
        others,
        lifetime,
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
        app.cookie(COOKIE, &handle, Some(lifetime.as_secs())),
    );
    h.append(header::SET_COOKIE, app.cookie(PRE_COOKIE, "", Some(0)));
    response
}

#[derive(Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

pub(super) async fn signout(
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
