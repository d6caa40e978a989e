//! The console as a process, over plain HTTP (no browser, no Ward: the one it names does not
//! answer): the headers every answer carries, the cookie's attributes, a sign-in form without
//! its CSRF token refused, sign-in attempts limited per client, pages refused without a
//! session, an unreachable Ward never taken for a sign-in, and a clean stop on SIGTERM.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

struct Console {
    child: tokio::process::Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

async fn console(extra: &[&str]) -> Console {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("address");
    let child = tokio::process::Command::new(lychd_testkit::bin_path("lychd-console"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--ward",
            "http://127.0.0.1:1",
        ])
        .arg("--address-file")
        .arg(&file)
        .args(extra)
        .kill_on_drop(true)
        .spawn()
        .expect("start lychd-console");
    let deadline = Instant::now() + Duration::from_secs(15);
    let addr = loop {
        if let Ok(a) = std::fs::read_to_string(&file) {
            break a.trim().parse().expect("address");
        }
        assert!(Instant::now() < deadline, "the console did not listen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    Console {
        child,
        addr,
        _dir: dir,
    }
}

async fn call(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, HeaderMap, String) {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, addr.to_string());
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = sender
        .send_request(
            request
                .body(Full::new(Bytes::from(body.to_owned())))
                .expect("request"),
        )
        .await
        .expect("response");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

/// The sign-in form's cookie (`name=value`) and CSRF token.
async fn signin_form(addr: SocketAddr) -> (String, String, HeaderMap) {
    let (status, headers, body) = call(addr, Method::GET, "/signin", &[], "").await;
    assert_eq!(status, StatusCode::OK);
    let set = headers
        .get(header::SET_COOKIE)
        .expect("a pre-session cookie")
        .to_str()
        .expect("ascii")
        .to_owned();
    let cookie = set.split(';').next().expect("name=value").to_owned();
    let csrf = body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("a csrf field")
        .to_owned();
    (cookie, csrf, headers)
}

const FORM: (&str, &str) = ("content-type", "application/x-www-form-urlencoded");

#[tokio::test]
async fn the_console_over_http() {
    let c = console(&["--signin-per-minute", "2"]).await;
    let (cookie, csrf, headers) = signin_form(c.addr).await;

    // Every answer: a strict policy, no sniffing, no referrer, no caching of pages.
    assert_eq!(
        headers[header::CONTENT_SECURITY_POLICY],
        lychd_console::security::CSP
    );
    assert!(!lychd_console::security::CSP.contains("unsafe-inline"));
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
    let set = headers[header::SET_COOKIE].to_str().expect("ascii");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict") && !set.contains("Secure"),
        "{set}"
    );

    // Pages need a session; the live stream and the list fragment answer 401.
    for path in [
        "/consents",
        "/transitions",
        "/capabilities",
        "/runs",
        "/runs/some-run",
    ] {
        let (status, headers, _) = call(c.addr, Method::GET, path, &[], "").await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{path}");
        assert_eq!(headers[header::LOCATION], "/signin", "{path}");
    }
    // The forms need a session too: nothing reaches an office without one.
    for path in [
        "/transitions/abc/cancel",
        "/containments/1/recover",
        "/runs/some-run/cancel",
    ] {
        let form = [("content-type", "application/x-www-form-urlencoded")];
        let (status, headers, _) = call(c.addr, Method::POST, path, &form, "csrf=x").await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{path}");
        assert_eq!(headers[header::LOCATION], "/signin", "{path}");
    }
    for path in [
        "/events",
        "/consents/pending",
        "/transitions/events",
        "/transitions/list",
    ] {
        let (status, _, _) = call(c.addr, Method::GET, path, &[], "").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }

    // A sign-in form without its token, or with another, is refused before anything else.
    for body in [
        "credential=lwc_x".to_owned(),
        format!("csrf={}&credential=lwc_x", "0".repeat(64)),
    ] {
        let (status, _, page) = call(
            c.addr,
            Method::POST,
            "/signin",
            &[FORM, ("cookie", &cookie)],
            &body,
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{page}");
        assert!(page.contains("no valid CSRF token"), "{page}");
    }

    // Ward does not answer: never a sign-in, and said so; the third attempt in the minute is
    // refused without being made.
    let body = format!("csrf={csrf}&credential=lwc_{}", "ab".repeat(32));
    for _ in 0..2 {
        let (status, headers, page) = call(
            c.addr,
            Method::POST,
            "/signin",
            &[FORM, ("cookie", &cookie)],
            &body,
        )
        .await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{page}");
        assert!(page.contains("could not be reached"), "{page}");
        assert!(!page.contains("lwc_"), "the credential is never echoed");
        assert!(
            headers
                .get_all(header::SET_COOKIE)
                .iter()
                .all(|v| !v.to_str().expect("ascii").starts_with("lychd_console=")),
            "no session"
        );
    }
    let (status, _, page) = call(
        c.addr,
        Method::POST,
        "/signin",
        &[FORM, ("cookie", &cookie)],
        &body,
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(page.contains("Too many sign-in attempts"), "{page}");

    stops_cleanly(c).await;
}

#[tokio::test]
async fn behind_tls_the_cookies_are_secure() {
    let c = console(&["--secure-cookie"]).await;
    let (_, _, headers) = signin_form(c.addr).await;
    let set = headers[header::SET_COOKIE].to_str().expect("ascii");
    assert!(set.contains("Secure") && set.contains("HttpOnly"), "{set}");
    stops_cleanly(c).await;
}

async fn stops_cleanly(mut c: Console) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(c.child.id().expect("pid") as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("sigterm");
    let status = tokio::time::timeout(Duration::from_secs(5), c.child.wait())
        .await
        .expect("stops within 5 s")
        .expect("exit");
    assert!(status.success(), "{status}");
}
