//! A small WebDriver client (W3C WebDriver over HTTP/1.1) for Debian's `chromedriver` driving
//! `chromium` headless: only the commands these tests use.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// WebDriver's Tab and Enter keys.
pub const TAB: &str = "\u{E004}";
pub const ENTER: &str = "\u{E007}";

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// `name` on PATH, or a failure that says how to install it.
fn tool(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} not found on PATH: the console's browser tests need Debian's chromium and \
                 chromium-driver: `apt-get install -y chromium chromium-driver` (bash .ci/run \
                 installs them)"
            )
        })
}

/// One plain HTTP/1.1 exchange on a new connection: status, headers and body.
pub async fn http(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (http::StatusCode, http::HeaderMap, Vec<u8>) {
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
        .send_request(request.body(Full::new(Bytes::from(body))).expect("request"))
        .await
        .expect("response");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .to_vec();
    (status, headers, body)
}

pub struct Browser {
    driver: tokio::process::Child,
    addr: SocketAddr,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Start `chromedriver` on a free port and a headless `chromium` session.
    pub async fn start() -> Browser {
        let chromium = tool("chromium");
        let chromedriver = tool("chromedriver");
        let port = lychd_testkit::verify::free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let driver = tokio::process::Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group, which the chromium it starts joins: a failed test ends
            // the whole group (`Drop`), leaving no browser behind.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let mut browser = Browser {
            driver,
            addr,
            session: String::new(),
            _profile: profile,
        };
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.to_string_lossy(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1200,1400",
                         "--no-first-run", "--disable-extensions",
                         format!("--user-data-dir={}", browser._profile.path().display())]
            }
        }}});
        let answer = browser.call(Method::POST, "/session", Some(caps)).await;
        browser.session = answer["sessionId"]
            .as_str()
            .expect("a WebDriver session id")
            .to_owned();
        browser
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        match self.try_call(method.clone(), path, body).await {
            Ok(v) => v,
            Err(e) => panic!("WebDriver {method} {path}: {e}"),
        }
    }

    async fn try_call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Value> {
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let (status, _, answer) = http(
            self.addr,
            method.clone(),
            path,
            &[("content-type", "application/json")],
            body,
        )
        .await;
        let value: Value = serde_json::from_slice(&answer).expect("WebDriver answers JSON");
        if status.is_success() {
            Ok(value["value"].clone())
        } else {
            Err(value["value"].clone())
        }
    }

    fn at(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    pub async fn goto(&self, url: &str) {
        self.call(Method::POST, &self.at("/url"), Some(json!({ "url": url })))
            .await;
    }

    pub async fn url(&self) -> String {
        self.call(Method::GET, &self.at("/url"), None)
            .await
            .as_str()
            .expect("url")
            .to_owned()
    }

    pub async fn source(&self) -> String {
        self.call(Method::GET, &self.at("/source"), None)
            .await
            .as_str()
            .expect("source")
            .to_owned()
    }

    /// The element `css` selects; fails when none does.
    pub async fn find(&self, css: &str) -> String {
        let v = self
            .call(
                Method::POST,
                &self.at("/element"),
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        match v[ELEMENT].as_str() {
            Some(id) => id.to_owned(),
            None => panic!(
                "no element {css} at {}: {v}\n{}",
                self.url().await,
                self.source().await
            ),
        }
    }

    /// Click what `css` selects (found again if the live list replaced it meanwhile).
    pub async fn click(&self, css: &str) {
        for _ in 0..5 {
            let e = self.find(css).await;
            match self
                .try_call(
                    Method::POST,
                    &self.at(&format!("/element/{e}/click")),
                    Some(json!({})),
                )
                .await
            {
                Ok(_) => return,
                Err(v) if v["error"] == "stale element reference" => continue,
                Err(v) => panic!("click {css}: {v}"),
            }
        }
        panic!("click {css}: the element kept being replaced");
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css).await;
        self.call(
            Method::POST,
            &self.at(&format!("/element/{e}/value")),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Click `css`, which leaves the page (a form's submit), and wait until the next page has
    /// loaded: a mark set on the old page's window is gone and the new document is complete.
    /// Needed where the old page has the element the test reads next.
    pub async fn click_and_load(&self, css: &str) {
        self.run("window.__lychd_old_page = true; return true;")
            .await;
        self.click(css).await;
        self.wait_until(
            "return window.__lychd_old_page === undefined && document.readyState === 'complete';",
            Duration::from_secs(10),
        )
        .await;
    }

    /// The rendered text of what `css` selects, once it is there (a click's navigation may
    /// still be loading); read in one step, since the live list may replace elements between
    /// two WebDriver commands.
    pub async fn text(&self, css: &str) -> String {
        let css_json = Value::String(css.to_owned());
        let script = format!(
            "const e = document.querySelector({css_json}); return e === null ? null : e.innerText;"
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(t) = self.run(&script).await.as_str() {
                return t.to_owned();
            }
            if Instant::now() > deadline {
                panic!(
                    "no element {css} at {}:\n{}",
                    self.url().await,
                    self.source().await
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Run `script` in the page (WebDriver's, not the page's: the page's CSP does not apply).
    pub async fn run(&self, script: &str) -> Value {
        self.call(
            Method::POST,
            &self.at("/execute/sync"),
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Press `keys` on the keyboard, one after another (WebDriver key codes: `\u{E004}` Tab,
    /// `\u{E007}` Enter), as a person would.
    pub async fn keys(&self, keys: &str) {
        let actions: Vec<Value> = keys
            .chars()
            .flat_map(|k| {
                [
                    json!({"type": "keyDown", "value": k.to_string()}),
                    json!({"type": "keyUp", "value": k.to_string()}),
                ]
            })
            .collect();
        self.call(
            Method::POST,
            &self.at("/actions"),
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        )
        .await;
    }

    /// Press Tab until `css` has the focus (at most 40 times).
    pub async fn tab_to(&self, css: &str) {
        let css_json = Value::String(css.to_owned());
        let script =
            format!("return document.activeElement === document.querySelector({css_json});");
        for _ in 0..40 {
            if self.run(&script).await == Value::Bool(true) {
                return;
            }
            self.keys(TAB).await;
        }
        panic!("Tab never reached {css}");
    }

    pub async fn cookies(&self) -> Vec<Value> {
        self.call(Method::GET, &self.at("/cookie"), None)
            .await
            .as_array()
            .expect("cookies")
            .clone()
    }

    /// A PNG of the viewport, written to `file`.
    pub async fn screenshot(&self, file: &Path) {
        let b64 = self.call(Method::GET, &self.at("/screenshot"), None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("base64"))
            .expect("png");
        std::fs::write(file, png).expect("write screenshot");
    }

    /// Wait until `script` returns true in the page.
    pub async fn wait_until(&self, script: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if self.run(script).await == Value::Bool(true) {
                return;
            }
            assert!(Instant::now() < deadline, "not within {within:?}: {script}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub async fn quit(self) {
        self.call(Method::DELETE, &self.at(""), None).await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(pid) = self.driver.id() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
