//! Consent over loopback gRPC (Ward in-process on the test kit's cluster, every call decided by
//! Ward): a live round trip — `ProposeEffect` + `Decide` + `ConsumeConsent` by three principals —
//! at concurrency 32, and a preauthorized `ProposeEffect` (a standing rule grants it, one use
//! consumed with the consent row) closed loop at concurrency 1 and 32 and open loop at 500/s
//! (the targets: ≥ 2,000/s on 2 cores, p99 ≤ 5 ms at 500/s), each against a gRPC health check
//! measured in the same run, with the CPU each call cost (this process + PostgreSQL).
//!
//! Run: `cargo bench -p lychd-ward --bench consent` (needs PostgreSQL binaries, like the
//! tests). Timings never gate anything.

use std::sync::atomic::{AtomicU64, Ordering};

use lychd_proto::ward::v1 as pb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::client::PeerChannel;
use lychd_testkit::bench::{Cpu, Stats, closed, ms, paced};
use lychd_testkit::{Spawned, channel_with};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const WARMUP: usize = 200;
const SECONDS: u64 = 5;
const RATE: u32 = 500;

static NEXT: AtomicU64 = AtomicU64::new(0);

const RULE: &str = r#"
[[rule]]
slug = "bench"
effect_class = "standard"
principal = "proposer"
tool = "fs.write"
[rule.constraints.path_prefixes]
path = ["/srv/reports"]
"#;

async fn client(s: &Spawned, name: &str, action: &str) -> WardClient<PeerChannel> {
    let (id, token) = s.principal(pb::PrincipalKind::Service, name).await;
    let verb = action.split_once(':').map(|(_, v)| v).unwrap_or(action);
    s.admin
        .clone()
        .ensure_assignment(&id, action, "effect:runner", "ward", verb)
        .await
        .expect("assign");
    WardClient::new(channel_with(&s.endpoint(), &token))
}

fn proposal(arguments: &str) -> pb::ProposeEffectRequest {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    pb::ProposeEffectRequest {
        run_id: "bench-run".into(),
        effect_owner: "runner".into(),
        effect_id: "write-report".into(),
        effect_revision: 1,
        tool_name: "fs.write".into(),
        deferred_call_id: format!("call-{n}"),
        arguments_json: arguments.as_bytes().to_vec(),
        effect_class: pb::EffectClass::Standard as i32,
        binding: None,
    }
}

fn line(what: &str, s: Stats) -> String {
    format!(
        "{what:<34} p50 {:>7.3} ms p99 {:>7.3} ms {:>7.0}/s",
        ms(s.p50),
        ms(s.p99),
        s.per_second
    )
}

async fn measured<F, Fut>(call: F) -> (Stats, Cpu)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let before = Cpu::now();
    let stats = closed(32, WARMUP, SECONDS, call).await;
    (stats, before.per_call_since(stats.calls + WARMUP))
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let rules = tempfile::tempdir().expect("tmp");
        std::fs::write(rules.path().join("bench.toml"), RULE).expect("rule file");
        let dir = rules.path().display().to_string();
        let s = lychd_testkit::spawn_office_with(lychd_ward::spec(), move |cfg| {
            cfg.office = toml::from_str(&format!("preauth_dir = {dir:?}")).expect("toml");
        })
        .await;
        let proposer = client(&s, "proposer", "ward:propose").await;
        let approver = client(&s, "approver", "ward:approve").await;
        let owner = client(&s, "owner", "ward:consume").await;
        let channel = tonic::transport::Endpoint::from_shared(s.endpoint())
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        let health_client = HealthClient::new(channel);
        let health = move || {
            let mut c = health_client.clone();
            async move {
                c.check(HealthCheckRequest::default()).await.expect("health");
            }
        };
        let live = {
            let (p, a, o) = (proposer.clone(), approver.clone(), owner.clone());
            move || {
                let (mut p, mut a, mut o) = (p.clone(), a.clone(), o.clone());
                async move {
                    // Outside the rule's prefix: pending, for a live verdict.
                    let consent = p
                        .propose_effect(proposal(r#"{"path":"/tmp/x"}"#))
                        .await
                        .expect("propose")
                        .into_inner()
                        .consent
                        .expect("consent");
                    a.decide(pb::DecideRequest {
                        consent_id: consent.consent_id.clone(),
                        verdict: pb::Verdict::Approve as i32,
                        review_digest: consent.binding_digest.clone(),
                    })
                    .await
                    .expect("decide");
                    o.consume_consent(pb::ConsumeConsentRequest {
                        consent_id: consent.consent_id,
                        binding_digest: consent.binding_digest,
                    })
                    .await
                    .expect("consume");
                }
            }
        };
        let preauthorized = move || {
            let mut p = proposer.clone();
            async move {
                let consent = p
                    .propose_effect(proposal(r#"{"path":"/srv/reports/q.txt"}"#))
                    .await
                    .expect("propose")
                    .into_inner()
                    .consent
                    .expect("consent");
                assert_eq!(consent.state, pb::ConsentState::Granted as i32);
            }
        };
        println!(
            "consent bench: {WARMUP} warm-up, then {SECONDS} s per case; Ward decides every call"
        );
        let (h32, h_cpu) = measured(health.clone()).await;
        let h_open = paced(RATE, SECONDS, health).await;
        let (l32, l_cpu) = measured(live).await;
        let p1 = closed(1, WARMUP, SECONDS, preauthorized.clone()).await;
        let (p32, p_cpu) = measured(preauthorized.clone()).await;
        let p_open = paced(RATE, SECONDS, preauthorized).await;
        println!("  {}", line("health c=32", h32));
        println!("  {}", line(&format!("health @{RATE}/s"), h_open));
        println!("  {}", line("propose+decide+consume c=32", l32));
        println!("  {}", line("preauthorized propose c=1", p1));
        println!("  {}", line("preauthorized propose c=32", p32));
        println!("  {}", line(&format!("preauthorized propose @{RATE}/s"), p_open));
        let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
        println!(
            "  CPU per call at c=32 (this process + PostgreSQL): health {:.0} + {:.0} us, live round trip {:.0} + {:.0} us, preauthorized propose {:.0} + {:.0} us",
            us(h_cpu.process),
            us(h_cpu.database),
            us(l_cpu.process),
            us(l_cpu.database),
            us(p_cpu.process),
            us(p_cpu.database)
        );
        println!(
            "  ratio to health (p99): @{RATE}/s preauthorized {:.1}x; c=32 throughput: live {:.3}x, preauthorized {:.3}x",
            p_open.p99.as_secs_f64() / h_open.p99.as_secs_f64(),
            l32.per_second / h32.per_second,
            p32.per_second / h32.per_second
        );
        s.stop().await;
    });
}
