//! `lychd dev --tls`: the whole stack over TLS — a throwaway CA and per-office certificates in
//! the state directory, every office serving TLS and calling its peers over mutual TLS,
//! PostgreSQL verified with `sslmode=verify-full`, the console as a TLS client — driven with
//! grpcurl `-cacert` as the printed examples say; a plaintext call gets no answer.

use std::collections::BTreeMap;
use std::time::Duration;

use lychd_runtime::Office;
use lychd_testkit::bin_path;
use nix::sys::signal::Signal;

use crate::{Interrupted, grpcurl, text};

#[tokio::test(flavor = "multi_thread")]
async fn dev_stack_runs_over_tls_and_refuses_plaintext() {
    let state = tempfile::tempdir().expect("tmp");
    let mut stack = Interrupted::dev(
        state.path(),
        lychd_pg::free_port().expect("port"),
        &["--tls"],
    );
    let endpoints_file = state.path().join("dev/endpoints.json");
    stack
        .until_written(&endpoints_file, Duration::from_secs(120))
        .await;
    let endpoints: BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(&endpoints_file).expect("read"))
            .expect("json object of strings");
    let ca = state.path().join("dev/tls/ca.pem");
    let ca = ca.to_str().expect("utf-8 path");
    let token = |office: Office| {
        std::fs::read_to_string(state.path().join(format!("dev/operator.{office}.token")))
            .expect("token")
            .trim()
            .to_owned()
    };

    for office in Office::ALL {
        let addr = &endpoints[office.name()];
        // Health over TLS, the office's certificate verified with the dev CA.
        let out = grpcurl(&["-cacert", ca, addr, "grpc.health.v1.Health/Check"]);
        assert!(
            out.status.success() && text(&out.stdout).contains("SERVING"),
            "{office}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        // Describe with peers: each office calls every other over mutual TLS with its own
        // certificate and session, and reaches PostgreSQL over verified TLS.
        let bearer = format!("authorization: Bearer {}", token(office));
        let service = format!("{}/Describe", office.grpc_service());
        let out = grpcurl(&[
            "-cacert",
            ca,
            "-H",
            &bearer,
            "-d",
            r#"{"include_peers": true}"#,
            addr,
            &service,
        ]);
        assert!(out.status.success(), "{service}: {}", text(&out.stderr));
        let described: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("grpcurl prints JSON");
        let peers = described["office"]["peers"].as_array().expect("peers");
        assert_eq!(peers.len(), Office::ALL.len() - 1, "{described}");
        for peer in peers {
            assert_eq!(peer["state"], "SERVING_STATE_SERVING", "{office}: {peer}");
        }
        // A plaintext call to a TLS office gets no answer.
        let out = grpcurl(&["-plaintext", addr, "grpc.health.v1.Health/Check"]);
        assert!(!out.status.success(), "{office} answered plaintext");
        // A client that does not know the dev CA refuses the office's certificate.
        let out = grpcurl(&[addr, "grpc.health.v1.Health/Check"]);
        assert!(
            !out.status.success() && text(&out.stderr).contains("certificate"),
            "{office}: {}",
            text(&out.stderr)
        );
    }

    // The office's own healthcheck (the Quadlets' HealthCmd) reaches it over TLS, verifying its
    // certificate for `ward.lychd.internal` with the CA of its configuration.
    let ward_config = state.path().join("dev/config/ward.toml");
    let ward_port = endpoints["ward"].rsplit(':').next().expect("port");
    let out = std::process::Command::new(bin_path("lychd-ward"))
        .arg("--config")
        .arg(&ward_config)
        .args(["healthcheck", "--addr", &format!("127.0.0.1:{ward_port}")])
        .output()
        .expect("healthcheck");
    assert!(
        out.status.success() && text(&out.stdout).contains("SERVING"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );

    // The console calls Ward over TLS (with the dev CA): the operator's credential signs in.
    let console =
        std::fs::read_to_string(state.path().join("dev/console.address")).expect("console address");
    let credential = std::fs::read_to_string(state.path().join("dev/operator.credential"))
        .expect("operator credential");
    let (head, body) = http(console.trim(), "GET /signin", &[], "").await;
    let cookie = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("set-cookie: ")
                .or(l.strip_prefix("Set-Cookie: "))
        })
        .and_then(|c| c.split(';').next())
        .expect("a pre-session cookie")
        .to_owned();
    let csrf = body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("a csrf field")
        .to_owned();
    let form = format!("csrf={csrf}&credential={}", credential.trim());
    let (head, _) = http(
        console.trim(),
        "POST /signin",
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("cookie", &cookie),
        ],
        &form,
    )
    .await;
    assert!(
        head.starts_with("HTTP/1.1 303")
            && head.to_lowercase().contains("set-cookie: lychd_console="),
        "the console signs in through Ward over TLS: {head}"
    );

    // A lease and its release through the Dispatcher, which asks Ward over mutual TLS.
    let dispatcher = &endpoints["dispatcher"];
    let bearer = format!("authorization: Bearer {}", token(Office::Dispatcher));
    let call = |method: &str, body: &str| -> serde_json::Value {
        let out = grpcurl(&[
            "-cacert",
            ca,
            "-H",
            &bearer,
            "-d",
            body,
            dispatcher,
            &format!("lychd.dispatcher.v1.Dispatcher/{method}"),
        ]);
        assert!(out.status.success(), "{method}: {}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("grpcurl prints JSON")
    };
    let answer = call(
        "Lease",
        r#"{"demand": {"family": "FAMILY_CHAT", "model_id": "qwen3-0.6b"}, "holder": "operator"}"#,
    );
    let lease_id = answer["granted"]["leaseId"].as_str().expect("lease id");
    let released = call(
        "ReleaseLease",
        &format!(r#"{{"lease_id": "{lease_id}", "holder": "operator"}}"#),
    );
    assert_eq!(released["lease"]["leaseId"], lease_id, "{released}");

    let child = stack.0.take().expect("running");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().expect("pid") as i32),
        Signal::SIGINT,
    )
    .expect("ctrl-c");
    let out = tokio::time::timeout(Duration::from_secs(40), child.wait_with_output())
        .await
        .expect("stops within 40 s")
        .expect("output");
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "exit {}: {}",
        out.status,
        text(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("grpcurl -cacert {ca} ")) && !stdout.contains("-plaintext"),
        "prints grpcurl examples with -cacert: {stdout}"
    );
    // The offices' configurations read PostgreSQL over verified TLS.
    let ward = std::fs::read_to_string(state.path().join("dev/config/ward.toml")).expect("config");
    assert!(ward.contains("sslmode=verify-full"), "{ward}");
}

/// One HTTP/1.1 exchange with the console (`Connection: close`): the head and the body.
async fn http(
    addr: &str,
    request_line: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("console");
    let mut request = format!("{request_line} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("answer");
    let answer = text(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (head.to_owned(), body.to_owned())
}

/// Plaintext on a non-loopback listen address is refused at start with a clear error naming the
/// field (before any connection is made), unless `tls.allow_plaintext` says so.
#[test]
fn plaintext_off_loopback_is_refused_at_start() {
    let out = std::process::Command::new(bin_path("lychd-ward"))
        .arg("serve")
        .env("LYCHD_WARD__SERVER__LISTEN", "0.0.0.0:0")
        .output()
        .expect("run lychd-ward");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("field `server.listen`")
            && stderr.contains("plaintext on a non-loopback address is refused"),
        "{stderr}"
    );
}
