//! TLS overhead (issue 30): Ward's `Authorize` and a gRPC health check over mutual TLS against
//! the same over plaintext, in the same run: two Wards served in this process (one with a
//! throwaway CA's certificates, one without), each over its own database of the test kit's
//! cluster. The asking principal is the `dispatcher` office, presenting its own certificate on
//! the TLS Ward (so every call also passes the certificate-against-session check). Prints
//! p50/p99, calls/s and CPU per call (this process — both Wards and the clients — plus
//! PostgreSQL), and the TLS/plaintext ratios, at concurrency 1 and 32. Connections are made
//! once (the handshake is not in the per-call figures).
//!
//! Then lease+release round trips on the Dispatcher (a WARM capability of a simulated
//! llama.cpp runtime; Ward, a process, deciding each call over loopback plaintext) served over
//! TLS against plaintext: the caller's leg is what differs (a server-only TLS client, as an
//! operator's or a run's), at concurrency 1 and 32.
//!
//! Run: `cargo bench -p lychd-e2e --bench tls` (or `--profile dev`; needs PostgreSQL like the tests).

use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_proto::ward::v1::{AuthorizeRequest, Decision, PrincipalKind};
use lychd_runtime::Office;
use lychd_runtime::client::{Outgoing, PeerChannel, peer_channel};
use lychd_runtime::devca::DevCa;
use lychd_testkit::Spawned;
use lychd_testkit::bench::{Cpu, Stats, closed, figures, ms};
use secrecy::SecretString;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const SECONDS_PER_CASE: u64 = 4;
const WARMUP: usize = 200;

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = DevCa::new("lychd bench CA").expect("ca");
    let ward_files = ca
        .issue_office(Office::Ward, &[])
        .expect("issue")
        .write(dir.path(), "ward")
        .expect("write");
    let ca_file = ca.write_ca(dir.path()).expect("ca");
    let tls = lychd_runtime::tls::TlsConfig {
        cert_file: Some(ward_files.cert_file),
        key_file: Some(ward_files.key_file),
        ca_file: Some(ca_file),
        allow_plaintext: false,
    };
    let dispatcher = ca.issue_office(Office::Dispatcher, &[]).expect("issue");
    let client_tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca.cert_pem()))
        .identity(Identity::from_pem(
            &dispatcher.cert_pem,
            &dispatcher.key_pem,
        ));

    let plain = lychd_testkit::spawn_office(lychd_ward::spec()).await;
    let secure = lychd_testkit::spawn_office_with(lychd_ward::spec(), move |c| c.tls = tls).await;
    let plain_calls = calls(&plain, None).await;
    let secure_calls = calls(&secure, Some(client_tls)).await;

    println!(
        "case                         conc   p50 ms   p99 ms      per s   CPU us/call total (this process + PostgreSQL; the rest: Ward processes)"
    );
    for concurrency in [1usize, 32] {
        for (what, (p_call, t_call)) in [
            ("health", (plain_calls.0.clone(), secure_calls.0.clone())),
            ("authorize", (plain_calls.1.clone(), secure_calls.1.clone())),
        ] {
            let (p, p_cpu) = metered(concurrency, p_call).await;
            let (t, t_cpu) = metered(concurrency, t_call).await;
            line(&format!("{what} plaintext"), concurrency, p, p_cpu);
            line(&format!("{what} mutual TLS"), concurrency, t, t_cpu);
            println!(
                "ratio {what:<10} TLS/plain    {concurrency:>4} {:>8.2} {:>8.2} {:>10.2}   {:>6.2}",
                ms(t.p50) / ms(p.p50),
                ms(t.p99) / ms(p.p99),
                t.per_second / p.per_second,
                t_cpu.total().as_secs_f64() / p_cpu.total().as_secs_f64()
            );
        }
    }
    plain.stop().await;
    secure.stop().await;

    let dispatcher_files = ca
        .issue_office(Office::Dispatcher, &[])
        .expect("issue")
        .write(dir.path(), "dispatcher")
        .expect("write");
    let dispatcher_tls = lychd_runtime::tls::TlsConfig {
        cert_file: Some(dispatcher_files.cert_file),
        key_file: Some(dispatcher_files.key_file),
        ca_file: Some(dir.path().join("ca.pem")),
        allow_plaintext: false,
    };
    let sim = lychd_testkit::simllama::SimLlama::start().await;
    sim.set_models(vec![lychd_testkit::simllama::SimModel::served("m0")]);
    let registry: toml::Table = toml::from_str(&format!(
        "[[animators]]\nname = \"gpu0\"\nsource = \"soulstone\"\ndialect = \"llama_cpp\"\n\
         endpoint = \"{}\"\ndedicated = true\n\n\
         [[capabilities]]\nanimator = \"gpu0\"\nfamily = \"chat\"\nmodel_id = \"m0\"\n",
        sim.endpoint()
    ))
    .expect("registry");
    let plain = spawn_dispatcher(registry.clone(), None).await;
    let secure = spawn_dispatcher(registry, Some(dispatcher_tls)).await;
    assert!(secure.endpoint().starts_with("https://"));
    for concurrency in [1usize, 32] {
        let (p, p_cpu) = metered(concurrency, lease_release(&plain)).await;
        let (t, t_cpu) = metered(concurrency, lease_release(&secure)).await;
        line("lease+release plaintext", concurrency, p, p_cpu);
        line("lease+release TLS", concurrency, t, t_cpu);
        println!(
            "ratio lease+release TLS/plain {concurrency:>4} {:>8.2} {:>8.2} {:>10.2}   {:>6.2}",
            ms(t.p50) / ms(p.p50),
            ms(t.p99) / ms(p.p99),
            t.per_second / p.per_second,
            t_cpu.total().as_secs_f64() / p_cpu.total().as_secs_f64()
        );
    }
    plain.stop().await;
    secure.stop().await;
}

/// The Dispatcher in-process over `registry`, serving TLS with `tls`; the tester may lease.
async fn spawn_dispatcher(
    registry: toml::Table,
    tls: Option<lychd_runtime::tls::TlsConfig>,
) -> Spawned {
    let spawned = lychd_testkit::spawn_office_with(lychd_dispatcher::spec(), move |cfg| {
        cfg.office = registry;
        if let Some(tls) = tls {
            cfg.tls = tls;
        }
    })
    .await;
    spawned.allow("dispatcher:lease", "capability:*").await;
    spawned.allow("dispatcher:lease", "lease:*").await;
    spawned
}

/// A lease of `m0` and its release, by the tester.
fn lease_release(s: &Spawned) -> Call {
    use lychd_proto::dispatcher::v1 as pb;
    let client = pb::dispatcher_client::DispatcherClient::new(s.channel());
    std::sync::Arc::new(move || {
        let mut c = client.clone();
        Box::pin(async move {
            let answer = c
                .lease(pb::LeaseRequest {
                    demand: Some(pb::Demand {
                        family: pb::Family::Chat as i32,
                        model_id: "m0".into(),
                        ..Default::default()
                    }),
                    holder: "bench".into(),
                    priority: 50,
                    ..Default::default()
                })
                .await
                .expect("lease")
                .into_inner();
            let Some(pb::lease_response::Outcome::Granted(g)) = answer.outcome else {
                panic!("expected a grant, got {:?}", answer.outcome);
            };
            c.release_lease(pb::ReleaseLeaseRequest {
                lease_id: g.lease_id,
                holder: "bench".into(),
            })
            .await
            .expect("release");
        })
    })
}

type Call = std::sync::Arc<dyn Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// The health check and an allowed `Authorize` asked by the `dispatcher` office of `s`.
async fn calls(s: &Spawned, tls: Option<ClientTlsConfig>) -> (Call, Call) {
    let (office_id, office_token) = s.principal(PrincipalKind::Service, "dispatcher").await;
    let mut admin = s.admin.clone();
    admin
        .ensure_assignment(
            &office_id,
            "ward:decide",
            "decision:dispatcher",
            "ward",
            "decide",
        )
        .await
        .expect("decide");
    let (subject_id, subject_token) = s
        .principal_at(PrincipalKind::Human, "bench-subject", &["dispatcher"])
        .await;
    admin
        .ensure_assignment(
            &subject_id,
            "dispatcher:lease",
            "capability:*",
            "dispatcher",
            "lease",
        )
        .await
        .expect("grant");
    let outgoing = Outgoing::new(Some(lychd_auth::credentials::SessionSource::fixed(
        SecretString::from(office_token),
    )))
    .with_tls(tls);
    let channel: PeerChannel = peer_channel(&s.endpoint(), outgoing).expect("endpoint");
    let health: Call = {
        let channel = channel.clone();
        std::sync::Arc::new(move || {
            let mut client = HealthClient::new(channel.clone());
            Box::pin(async move {
                client
                    .check(HealthCheckRequest::default())
                    .await
                    .expect("health");
            })
        })
    };
    let authorize: Call = std::sync::Arc::new(move || {
        let mut client = WardClient::new(channel.clone());
        let token = subject_token.clone();
        Box::pin(async move {
            let answer = client
                .authorize(AuthorizeRequest {
                    token,
                    action: "dispatcher:lease".into(),
                    object: "capability:anvil:chat:qwen3-8b".into(),
                    audience: "dispatcher".into(),
                    purpose: "lease".into(),
                    expected_policy_generation: None,
                })
                .await
                .expect("authorize")
                .into_inner();
            assert_eq!(answer.decision, Decision::Allow as i32);
        })
    });
    (health, authorize)
}

fn line(what: &str, concurrency: usize, s: Stats, cpu: Cpu) {
    println!("{what:<28} {}", figures(concurrency, &s, &cpu));
}

/// A closed loop with the CPU each call cost (warm-up included in both).
async fn metered(concurrency: usize, call: Call) -> (Stats, Cpu) {
    let before = Cpu::now();
    let stats = closed(concurrency, WARMUP, SECONDS_PER_CASE, move || call()).await;
    (stats, before.per_call_since(stats.calls + WARMUP))
}
