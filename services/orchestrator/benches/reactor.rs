//! The host actuators' own cost, against the fake `systemctl`'s own time in the same run:
//!
//! 1. baseline: one `lychd-fake-systemctl show` of two animators (a process start, its state
//!    read, its answer) — what every `systemctl` call costs here;
//! 2. the `systemd` actuator applying a swap (two animators in conflict, swapped back and
//!    forth): lock, pending-job check, pre-world readback, stop, start, settled readback — its
//!    overhead is the apply time minus its calls times the baseline;
//! 3. the same swap through the host-reactor spool: publish, a path unit (a poller in this
//!    process) starting the one-shot consumer (`lychd-orchestrator reactor consume`), claim,
//!    custody, recheck, apply, journal, the producer reading the result: intent → applied.
//!
//! Run: `cargo bench -p lychd-orchestrator --bench reactor`. Timings never gate anything.

#[path = "../tests/it/host.rs"]
#[allow(dead_code)]
mod host;

use std::time::{Duration, Instant};

use host::{FakeHost, PathUnit, registry};
use lychd_orchestrator::actuator::Actuator;
use lychd_orchestrator::actuator::Applied;
use lychd_orchestrator::actuator::systemd::Systemd;
use lychd_orchestrator::domain::intent::{Operation, TransitionIntent};
use lychd_orchestrator::reactor::producer::HostReactor;
use lychd_testkit::bench::ms;

const N: usize = 40;

fn p(mut v: Vec<Duration>, q: f64) -> Duration {
    v.sort_unstable();
    v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
}

/// The i-th swap: even → a (evicting b), odd → b (evicting a).
fn swap(i: usize, digest: &str) -> TransitionIntent {
    let (to, from) = if i.is_multiple_of(2) {
        ("a", "b")
    } else {
        ("b", "a")
    };
    TransitionIntent {
        id: format!("{:032x}", i + 1),
        operation: Operation::Forward,
        config_digest: digest.into(),
        target_animator: to.into(),
        capability_key: format!("{to}:chat:m"),
        evict: vec![from.into()],
        launch: vec![to.into()],
        expected_active: vec![from.into()],
    }
}

fn digest(reg: &str) -> String {
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("o.toml");
    std::fs::write(&p, format!("[office]\n{reg}")).expect("write");
    let cfg = lychd_runtime::config::OfficeConfig::load(
        lychd_runtime::Office::Orchestrator,
        Some(&p),
        Vec::new(),
    )
    .expect("config");
    lychd_orchestrator::config::load(&cfg)
        .expect("settings")
        .graph
        .digest()
        .to_owned()
}

fn row(case: &str, v: &[Duration], base: Duration) {
    let (p50, p99) = (p(v.to_vec(), 0.5), p(v.to_vec(), 0.99));
    println!(
        "| {case} | {:.2} ms | {:.2} ms | {:.1} |",
        ms(p50),
        ms(p99),
        p50.as_secs_f64() / base.as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    let reg = registry(&["a", "b"], |_| "http://127.0.0.1:9".into());
    let digest = digest(&reg);

    // 1. The fake's own time per call.
    let fake = FakeHost::new(&["a", "b"], &["b"]);
    let mut base = Vec::new();
    for _ in 0..N {
        let t = Instant::now();
        let out = tokio::process::Command::new(&fake.systemctl)
            .args([
                "--user",
                "show",
                "--property=Id,LoadState,ActiveState",
                "--",
            ])
            .args([
                "lychd-animator-a.target",
                "lychd-animator-a.service",
                "lychd-animator-b.target",
                "lychd-animator-b.service",
            ])
            .output()
            .await
            .expect("fake");
        assert!(out.status.success());
        base.push(t.elapsed());
    }
    let base50 = p(base.clone(), 0.5);

    // 2. The systemd actuator, direct.
    let sd = Systemd::new(&fake.systemctl, &fake.lock)
        .expect("attested")
        .with_sources(&host::graph_of(&["a", "b"]));
    let mut direct = Vec::new();
    let calls_before = fake.log().len();
    for i in 0..N {
        let t = Instant::now();
        let applied = sd
            .apply(
                &swap(i, &digest),
                tokio::time::Instant::now() + Duration::from_secs(30),
            )
            .await;
        direct.push(t.elapsed());
        assert_eq!(applied, Applied::Applied);
    }
    let calls = (fake.log().len() - calls_before) / N;

    // 3. Through the spool, the consumer started by a path unit.
    let fake = FakeHost::new(&["a", "b"], &["b"]);
    let config = fake.consumer_config(&reg, None);
    let producer = HostReactor::new(&fake.spool, Duration::from_secs(30)).expect("spool");
    let unit = PathUnit::start(fake.inbox(), config);
    let mut spooled = Vec::new();
    let calls_before = fake.log().len();
    for i in 0..N {
        let t = Instant::now();
        let applied = producer
            .apply(
                &swap(i, &digest),
                tokio::time::Instant::now() + Duration::from_secs(30),
            )
            .await;
        spooled.push(t.elapsed());
        assert_eq!(applied, Applied::Applied);
    }
    unit.stop().await;
    let spool_calls = (fake.log().len() - calls_before) / N;

    println!("| case | p50 | p99 | p50 / one fake systemctl call |");
    println!("| --- | --- | --- | --- |");
    row("one fake `systemctl show` (baseline)", &base, base50);
    row(
        &format!("`systemd` actuator, one swap ({calls} calls)"),
        &direct,
        base50,
    );
    row(
        &format!("host reactor, intent → applied ({spool_calls} calls)"),
        &spooled,
        base50,
    );
    let over = |v: &[Duration], calls: usize| ms(p(v.to_vec(), 0.5)) - ms(base50) * calls as f64;
    println!(
        "\nactuator overhead beyond its fake systemctl calls (p50): systemd {:.2} ms, host reactor {:.2} ms",
        over(&direct, calls),
        over(&spooled, spool_calls)
    );
}
