//! Two `lychd dev` stacks racing for the same base port, and a third process taking one of the
//! first stack's ports between its choosing and its binding: each stack's endpoints file names
//! only its own offices, each answering as itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lychd_runtime::Office;
use nix::sys::signal::Signal;

use crate::{Interrupted, grpcurl, text};

/// A running `lychd dev`, stopped with Ctrl-C when dropped (a failed assertion included).
struct Stack {
    process: Interrupted,
    state: tempfile::TempDir,
}

impl Stack {
    fn start(base_port: u16) -> Stack {
        let state = tempfile::tempdir().expect("tmp");
        Stack {
            process: Interrupted::dev(state.path(), base_port, &[]),
            state,
        }
    }

    fn dev(&self) -> PathBuf {
        self.state.path().join("dev")
    }

    /// The endpoints file, once written (within 180 s: two stacks start on a busy machine).
    async fn endpoints(&mut self) -> BTreeMap<String, String> {
        let file = self.dev().join("endpoints.json");
        self.process
            .until_written(&file, Duration::from_secs(180))
            .await;
        serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json")
    }

    fn token(&self, office: Office) -> String {
        std::fs::read_to_string(self.dev().join(format!("operator.{office}.token")))
            .expect("token")
            .trim()
            .to_owned()
    }

    /// Ctrl-C; what it said on standard error, once stopped.
    async fn stop(mut self) -> String {
        let child = self.process.0.take().expect("running");
        if let Some(pid) = child.id() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGINT);
        }
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("stops within 60 s")
            .expect("output");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "exit {}: {stderr}", out.status);
        stderr
    }
}

/// The port `[server] listen` names in the office configuration at `path`, once written.
fn listen_port(path: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(path).ok()?;
    let listen = text.lines().find_map(|l| l.strip_prefix("listen = \""))?;
    listen.strip_suffix('"')?.rsplit_once(':')?.1.parse().ok()
}

/// `Describe` at `addr` with `token`: whether it answered.
fn describes(office: Office, addr: &str, token: &str) -> Result<(), String> {
    let bearer = format!("authorization: Bearer {token}");
    let service = format!("{}/Describe", office.grpc_service());
    let out = grpcurl(&["-plaintext", "-H", &bearer, "-d", "{}", addr, &service]);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", text(&out.stdout), text(&out.stderr)))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_stacks_racing_for_one_base_port_each_publish_only_their_own_offices() {
    let base = lychd_pg::free_port().expect("port");
    let mut first = Stack::start(base);
    let mut second = Stack::start(base);

    // A foreign process takes the first stack's Ward port as soon as it is chosen (its
    // configuration is written before Ward starts), and answers health SERVING there: what
    // another stack's office would do.
    let ward_config = first.dev().join("config/ward.toml");
    let deadline = Instant::now() + Duration::from_secs(120);
    let ward_port = loop {
        if let Some(port) = listen_port(&ward_config) {
            break port;
        }
        assert!(Instant::now() < deadline, "ward.toml not written");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let foreign = match tokio::net::TcpListener::bind(("127.0.0.1", ward_port)).await {
        Ok(listener) => {
            let (_reporter, health) = tonic_health::server::health_reporter();
            Some(tokio::spawn(
                tonic::transport::Server::builder()
                    .add_service(health)
                    .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
            ))
        }
        // The second stack's Ward was quicker: the race is on all the same.
        Err(_) => None,
    };

    let first_endpoints = first.endpoints().await;
    let second_endpoints = second.endpoints().await;
    let names: Vec<&str> = {
        let mut n: Vec<&str> = Office::ALL.iter().map(|o| o.name()).collect();
        n.sort();
        n
    };
    for endpoints in [&first_endpoints, &second_endpoints] {
        assert_eq!(
            endpoints.keys().map(String::as_str).collect::<Vec<_>>(),
            names
        );
    }
    // No port is published twice, nor the foreign one.
    let mut published: Vec<&String> = first_endpoints
        .values()
        .chain(second_endpoints.values())
        .collect();
    published.sort();
    published.dedup();
    assert_eq!(
        published.len(),
        2 * Office::ALL.len(),
        "{first_endpoints:?} {second_endpoints:?}"
    );
    if foreign.is_some() {
        let taken = format!("127.0.0.1:{ward_port}");
        assert!(
            !published.contains(&&taken),
            "the foreign port {taken} is published: {first_endpoints:?} {second_endpoints:?}"
        );
    }
    // Each office answers as its own stack's: its stack's operator session is accepted there,
    // the other stack's refused (Ward of the other stack never issued it).
    for (own, other, endpoints) in [
        (&first, &second, &first_endpoints),
        (&second, &first, &second_endpoints),
    ] {
        for office in Office::ALL {
            let addr = &endpoints[office.name()];
            describes(office, addr, &own.token(office))
                .unwrap_or_else(|e| panic!("{office} at {addr} is not its stack's: {e}"));
            let refused = describes(office, addr, &other.token(office))
                .expect_err("the other stack's session");
            assert!(refused.contains("Unauthenticated"), "{office}: {refused}");
        }
    }

    let first_said = first.stop().await;
    let second_said = second.stop().await;
    if let Some(foreign) = foreign {
        foreign.abort();
        assert!(
            first_said.contains("choosing the offices' ports again"),
            "the first stack chose again after its Ward port was taken: {first_said}"
        );
    }
    eprintln!("first stack: {first_said}\nsecond stack: {second_said}");
}
