//! `Authorize` over loopback gRPC with PostgreSQL, against a gRPC health check measured in the
//! same run: p50/p99, decisions/s and CPU per call at concurrency 1 and 32 (this process — the
//! Ward office in-process and the bench's clients — and PostgreSQL's, from `/proc`).
//!
//! Each concurrency level also runs `Authorize` about 32 subjects' tokens in turn: the same
//! subject in every call lets Ward bind one question for a whole batch (ADR 0006), different
//! subjects share only the asking office's own `ward:decide` question. And the same question
//! asked the way every office asks it: through its `WardVerifier`, which sends the questions
//! asked while its previous call is in flight as one `AuthorizeBatch` call.
//!
//! Run: `cargo bench -p lychd-e2e --bench authorize` (needs PostgreSQL like the tests).

use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_proto::ward::v1::{AuthorizeRequest, Decision, PrincipalKind};
use lychd_testkit::bench::{Cpu, Stats, closed, figures, ms, paced};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const SECONDS_PER_CASE: u64 = 5;
const WARMUP: usize = 200;
/// Subjects asked about round-robin in the "different tokens" case.
const SUBJECTS: usize = 32;

#[tokio::main]
async fn main() {
    let spawned = lychd_testkit::spawn_office(lychd_ward::spec()).await;
    spawned.allow("ward:describe", "office:ward").await;
    // An office-like principal that may ask for decisions, and a subject with one assignment.
    let (office_id, office_token) = spawned
        .principal(PrincipalKind::Service, "bench-office")
        .await;
    let mut admin = spawned.admin.clone();
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
    // The subject's session is presented to the Dispatcher (the audience asked about).
    let subject_id = admin
        .ensure_principal(PrincipalKind::Human, "bench-subject")
        .await
        .expect("subject");
    let subject_credential = admin.issue_standing(&subject_id).await.expect("credential");
    let subject_token = lychd_auth::admin::exchange(
        lychd_runtime::client::channel(&spawned.endpoint()).expect("endpoint"),
        &subject_credential,
        0,
        &["dispatcher"],
    )
    .await
    .expect("subject session")
    .token;
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

    // Subjects of their own, each with one session, for the case where the questions asked
    // together are about different tokens (only the asker's own question is shared).
    let mut subject_tokens = Vec::with_capacity(SUBJECTS);
    for i in 0..SUBJECTS {
        let id = admin
            .ensure_principal(PrincipalKind::Human, &format!("bench-subject-{i}"))
            .await
            .expect("subject");
        let credential = admin.issue_standing(&id).await.expect("credential");
        let token = lychd_auth::admin::exchange(
            lychd_runtime::client::channel(&spawned.endpoint()).expect("endpoint"),
            &credential,
            0,
            &["dispatcher"],
        )
        .await
        .expect("subject session")
        .token;
        admin
            .ensure_assignment(
                &id,
                "dispatcher:lease",
                "capability:*",
                "dispatcher",
                "lease",
            )
            .await
            .expect("grant");
        subject_tokens.push(token);
    }
    let subject_tokens: std::sync::Arc<[String]> = subject_tokens.into();
    let next_subject = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));

    let endpoint = spawned.endpoint();
    let channel = tonic::transport::Endpoint::from_shared(endpoint.clone())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let bearer: tonic::metadata::MetadataValue<_> =
        format!("Bearer {office_token}").parse().expect("ascii");
    let subject: std::sync::Arc<str> = subject_token.clone().into();
    let authorize = {
        let channel = channel.clone();
        move || {
            let mut client = WardClient::new(channel.clone());
            let bearer = bearer.clone();
            let token = subject_token.clone();
            async move {
                let mut request = tonic::Request::new(AuthorizeRequest {
                    token,
                    action: "dispatcher:lease".into(),
                    object: "capability:anvil:chat:qwen3-8b".into(),
                    audience: "dispatcher".into(),
                    purpose: "lease".into(),
                    expected_policy_generation: None,
                });
                request.metadata_mut().insert("authorization", bearer);
                let answer = client
                    .authorize(request)
                    .await
                    .expect("authorize")
                    .into_inner();
                assert_eq!(answer.decision, Decision::Allow as i32);
            }
        }
    };
    let authorize_many = {
        let channel = channel.clone();
        let bearer: tonic::metadata::MetadataValue<_> =
            format!("Bearer {office_token}").parse().expect("ascii");
        move || {
            let mut client = WardClient::new(channel.clone());
            let bearer = bearer.clone();
            let n = next_subject.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let token = subject_tokens[n % subject_tokens.len()].clone();
            async move {
                let mut request = tonic::Request::new(AuthorizeRequest {
                    token,
                    action: "dispatcher:lease".into(),
                    object: "capability:anvil:chat:qwen3-8b".into(),
                    audience: "dispatcher".into(),
                    purpose: "lease".into(),
                    expected_policy_generation: None,
                });
                request.metadata_mut().insert("authorization", bearer);
                let answer = client
                    .authorize(request)
                    .await
                    .expect("authorize")
                    .into_inner();
                assert_eq!(answer.decision, Decision::Allow as i32);
            }
        }
    };
    let verifier = std::sync::Arc::new(lychd_auth::ward::WardVerifier::new(
        channel.clone(),
        lychd_auth::credentials::SessionSource::fixed(secrecy::SecretString::from(
            office_token.clone(),
        )),
    ));
    let through_verifier = {
        let verifier = verifier.clone();
        let token = subject.clone();
        move || {
            let (verifier, token) = (verifier.clone(), token.clone());
            async move {
                use lychd_auth::Verifier;
                let d = verifier
                    .authorize(&lychd_auth::Query {
                        token: &token,
                        action: "dispatcher:lease",
                        object: "capability:anvil:chat:qwen3-8b",
                        audience: "dispatcher",
                        purpose: "lease",
                        expected_policy_generation: None,
                    })
                    .await
                    .expect("authorize");
                assert!(d.allowed);
            }
        }
    };
    let health = {
        let channel = channel.clone();
        move || {
            let mut client = HealthClient::new(channel.clone());
            async move {
                client
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await
                    .expect("health");
            }
        }
    };

    println!(
        "case                      conc   p50 ms   p99 ms      per s   CPU us/call (process + PostgreSQL)"
    );
    for concurrency in [1usize, 32] {
        let (h, h_cpu) = metered(concurrency, health.clone()).await;
        let (a, a_cpu) = metered(concurrency, authorize.clone()).await;
        println!("{}", row("health check", concurrency, &h, h_cpu));
        println!("{}", row("authorize", concurrency, &a, a_cpu));
        println!(
            "{}",
            ratio("authorize/health", concurrency, (&a, a_cpu), (&h, h_cpu))
        );
        let calls_before = verifier.sent();
        let (v, v_cpu) = metered(concurrency, through_verifier.clone()).await;
        let calls = verifier.sent();
        println!(
            "{}  ({:.1} questions a call)",
            row("verifier (AuthorizeBatch)", concurrency, &v, v_cpu),
            (calls.1 - calls_before.1) as f64 / (calls.0 - calls_before.0).max(1) as f64
        );
        println!(
            "{}",
            ratio("verifier/health", concurrency, (&v, v_cpu), (&h, h_cpu))
        );
        let (m, m_cpu) = metered(concurrency, authorize_many.clone()).await;
        let label = format!("authorize, {SUBJECTS} subjects");
        println!("{}", row(&label, concurrency, &m, m_cpu));
        let label = format!("{SUBJECTS} subjects/health");
        println!("{}", ratio(&label, concurrency, (&m, m_cpu), (&h, h_cpu)));
    }
    let h = paced(500, SECONDS_PER_CASE, health.clone()).await;
    let a = paced(500, SECONDS_PER_CASE, authorize.clone()).await;
    println!(
        "health check   @500/s          {:>8.3} {:>8.3} {:>10.0}",
        ms(h.p50),
        ms(h.p99),
        h.per_second
    );
    println!(
        "authorize      @500/s          {:>8.3} {:>8.3} {:>10.0}",
        ms(a.p50),
        ms(a.p99),
        a.per_second
    );
    for (what, s) in [("health check", h), ("authorize", a)] {
        println!(
            "{what:<14} @500/s p99 of each fifth of the run: {:.3} .. {:.3} ms",
            ms(s.p99_of_fifths.0),
            ms(s.p99_of_fifths.1)
        );
    }
    println!(
        "ratio authorize/health @500/s  {:>8.2} {:>8.2}",
        ms(a.p50) / ms(h.p50),
        ms(a.p99) / ms(h.p99)
    );
    spawned.stop().await;
}

/// One case's line: latency, rate and CPU per call (this process + PostgreSQL).
fn row(label: &str, concurrency: usize, s: &Stats, cpu: Cpu) -> String {
    format!("{label:<25} {}", figures(concurrency, s, &cpu))
}

/// A case against the health check of the same run: p50, p99, rate and CPU ratios.
fn ratio(
    label: &str,
    concurrency: usize,
    (s, cpu): (&Stats, Cpu),
    (h, h_cpu): (&Stats, Cpu),
) -> String {
    format!(
        "ratio {label:<19} {concurrency:>4} {:>8.2} {:>8.2} {:>10.2}   {:>6.2}",
        ms(s.p50) / ms(h.p50),
        ms(s.p99) / ms(h.p99),
        s.per_second / h.per_second,
        cpu.total().as_secs_f64() / h_cpu.total().as_secs_f64()
    )
}

/// A closed loop with the CPU each call cost (warm-up included in both).
async fn metered<F, Fut>(concurrency: usize, call: F) -> (Stats, Cpu)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let before = Cpu::now();
    let stats = closed(concurrency, WARMUP, SECONDS_PER_CASE, call).await;
    (stats, before.per_call_since(stats.calls + WARMUP))
}
