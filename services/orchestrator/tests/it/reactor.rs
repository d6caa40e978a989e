//! The host-reactor spool: the producer (`host-reactor` actuator) in this process, the
//! one-shot consumer as the office binary (`reactor consume`), `lychd-fake-systemctl` as the
//! host's systemd.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use lychd_orchestrator::actuator::{Actuator, Applied};
use lychd_orchestrator::domain::intent::TransitionIntent;
use lychd_orchestrator::reactor::producer::HostReactor;
use lychd_orchestrator::reactor::{WireIntent, delivery_name};
use serde_json::json;
use tokio::time::Instant;

use crate::host::{FakeHost, PathUnit, consume, names, registry, run, swap_a_evicting_b};

struct Spooled {
    host: FakeHost,
    config: PathBuf,
    digest: String,
}

fn digest_of(reg: &str) -> String {
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("o.toml");
    std::fs::write(&p, format!("[office]\n{reg}")).expect("write");
    let cfg = lychd_runtime::config::OfficeConfig::load(
        lychd_runtime::Office::Orchestrator,
        Some(&p),
        Vec::new(),
    )
    .expect("config");
    let s = lychd_orchestrator::config::load(&cfg).expect("settings");
    s.graph.digest().to_owned()
}

fn spooled() -> Spooled {
    let host = FakeHost::new(&["a", "b", "c"], &["b"]);
    let reg = registry(&["a", "b", "c"], |_| "http://127.0.0.1:9".into());
    let config = host.consumer_config(&reg, None);
    Spooled {
        config,
        digest: digest_of(&reg),
        host,
    }
}

fn producer(h: &FakeHost, claim: Duration) -> HostReactor {
    HostReactor::new(&h.spool, claim).expect("spool")
}

/// Publish `bytes` into the inbox as `file` (mode 0600), as a producer would.
fn drop_in(h: &FakeHost, file: &str, bytes: &[u8]) -> PathBuf {
    std::fs::create_dir_all(h.inbox()).expect("inbox");
    std::fs::set_permissions(&h.spool, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::set_permissions(h.inbox(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let p = h.inbox().join(file);
    std::fs::write(&p, bytes).expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    p
}

fn wire(intent: &TransitionIntent) -> Vec<u8> {
    serde_json::to_vec(&WireIntent::from(intent)).expect("json")
}

fn file_of(intent: &TransitionIntent) -> String {
    format!("{}.json", delivery_name(intent))
}

async fn apply_through_path_unit(s: &Spooled, intent: &TransitionIntent) -> Applied {
    let unit = PathUnit::start(s.host.inbox(), s.config.clone());
    let applied = producer(&s.host, Duration::from_secs(10))
        .apply(intent, Instant::now() + Duration::from_secs(20))
        .await;
    unit.stop().await;
    applied
}

fn journal_has(h: &FakeHost, file: &str) -> bool {
    h.journal_files().iter().any(|f| f == file)
}

#[tokio::test]
async fn a_published_intent_is_claimed_kept_in_custody_applied_and_journaled_completed() {
    let s = spooled();
    let f = swap_a_evicting_b(&s.digest);
    assert_eq!(apply_through_path_unit(&s, &f).await, Applied::Applied);
    assert_eq!(s.host.active(), ["a"]);
    let name = delivery_name(&f);
    let files = s.host.journal_files();
    for suffix in ["completed", "custody", "intent"] {
        assert!(
            files.contains(&format!("{name}.{suffix}.json")),
            "{files:?}"
        );
    }
    assert!(
        !files
            .iter()
            .any(|f| f.contains("processing") || f.contains("acquiring")),
        "{files:?}"
    );
    assert!(names(&s.host.inbox()).is_empty());
    // The custody copy is private and its companion binds its digest.
    let copy = s.host.journal().join(format!("{name}.intent.json"));
    let mode = std::fs::metadata(&copy).expect("copy").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let custody: serde_json::Value = serde_json::from_slice(
        &std::fs::read(s.host.journal().join(format!("{name}.custody.json"))).expect("custody"),
    )
    .expect("json");
    assert_eq!(
        custody["sha256"],
        json!(lychd_orchestrator::reactor::sha256_hex(
            &std::fs::read(&copy).expect("copy")
        ))
    );
}

#[tokio::test]
async fn a_replayed_id_is_rejected_with_no_second_effect() {
    let s = spooled();
    let f = swap_a_evicting_b(&s.digest);
    assert_eq!(apply_through_path_unit(&s, &f).await, Applied::Applied);
    let before = s.host.mutations().len();
    drop_in(&s.host, &file_of(&f), &wire(&f));
    let (code, lines) = consume(&s.config).await;
    assert_eq!(code, 0);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].ends_with("rejected REPLAY"), "{lines:?}");
    assert_eq!(s.host.mutations().len(), before, "no second effect");
    assert!(journal_has(
        &s.host,
        &format!("{}.completed.json", delivery_name(&f))
    ));
}

#[tokio::test]
async fn a_stale_generation_is_declined_without_effect() {
    let s = spooled();
    let f = swap_a_evicting_b(&"0".repeat(64));
    assert_eq!(apply_through_path_unit(&s, &f).await, Applied::NoEffect);
    assert!(journal_has(
        &s.host,
        &format!("{}.declined.json", delivery_name(&f))
    ));
    assert!(s.host.mutations().is_empty());
    // A stale world (the host runs c, not b) is declined as well.
    let s = spooled();
    s.host.program(|v| {
        v["units"]["lychd-animator-b.target"] = json!("inactive");
        v["units"]["lychd-animator-b.service"] = json!("inactive");
        v["units"]["lychd-animator-c.target"] = json!("active");
    });
    let f = swap_a_evicting_b(&s.digest);
    assert_eq!(apply_through_path_unit(&s, &f).await, Applied::NoEffect);
    assert!(s.host.mutations().is_empty());
}

#[tokio::test]
async fn a_forged_compensation_is_rejected_without_effect() {
    let s = spooled();
    let f = swap_a_evicting_b(&s.digest);
    // No completed forward: any compensation is forged.
    let c = f.compensation();
    drop_in(&s.host, &file_of(&c), &wire(&c));
    let (_, lines) = consume(&s.config).await;
    assert_eq!(
        lines,
        [format!(
            "{} rejected FORGED_COMPENSATION",
            delivery_name(&c)
        )]
    );
    // After a completed forward, only its exact inverse is accepted.
    let s = spooled();
    let f = swap_a_evicting_b(&s.digest);
    assert_eq!(apply_through_path_unit(&s, &f).await, Applied::Applied);
    let mut forged = f.compensation();
    forged.launch = vec!["c".into()];
    drop_in(&s.host, &file_of(&forged), &wire(&forged));
    let before = s.host.mutations().len();
    let (_, lines) = consume(&s.config).await;
    assert_eq!(
        lines,
        [format!(
            "{} rejected FORGED_COMPENSATION",
            delivery_name(&forged)
        )]
    );
    assert_eq!(s.host.mutations().len(), before);
}

#[tokio::test]
async fn the_exact_compensation_of_a_completed_forward_restores_the_prior_world() {
    let s = spooled();
    let f = swap_a_evicting_b(&s.digest);
    assert_eq!(apply_through_path_unit(&s, &f).await, Applied::Applied);
    let c = f.compensation();
    assert_eq!(apply_through_path_unit(&s, &c).await, Applied::Applied);
    assert_eq!(s.host.active(), ["b"]);
    // Its replay has no effect.
    drop_in(&s.host, &file_of(&c), &wire(&c));
    let before = s.host.mutations().len();
    let (_, lines) = consume(&s.config).await;
    assert!(lines[0].ends_with("rejected REPLAY"), "{lines:?}");
    assert_eq!(s.host.mutations().len(), before);
}

#[tokio::test]
async fn oversize_symlinked_wrong_mode_and_wrong_owner_intents_are_rejected() {
    let s = spooled();
    let id = |n: u8| format!("{:032x}", u128::from(n));
    let mut f = swap_a_evicting_b(&s.digest);
    // Oversize: more than 64 KiB.
    f.id = id(1);
    let mut big = wire(&f);
    big.extend(std::iter::repeat_n(b' ', 64 * 1024));
    drop_in(&s.host, &file_of(&f), &big);
    // A symbolic link to a valid intent elsewhere.
    f.id = id(2);
    let elsewhere = s.host.dir.path().join("valid.json");
    std::fs::write(&elsewhere, wire(&f)).expect("write");
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::os::unix::fs::symlink(&elsewhere, s.host.inbox().join(file_of(&f))).expect("link");
    // Readable by others.
    f.id = id(3);
    let p = drop_in(&s.host, &file_of(&f), &wire(&f));
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    // Malformed: an unknown field.
    f.id = id(4);
    let mut v: serde_json::Value = serde_json::from_slice(&wire(&f)).expect("json");
    v["command"] = json!("rm -rf /");
    drop_in(
        &s.host,
        &file_of(&f),
        &serde_json::to_vec(&v).expect("json"),
    );
    let (code, mut lines) = consume(&s.config).await;
    assert_eq!(code, 0);
    lines.sort();
    assert_eq!(
        lines,
        [
            format!("{}-forward rejected OVERSIZE", id(1)),
            format!("{}-forward rejected SYMLINK", id(2)),
            format!("{}-forward rejected WRONG_MODE", id(3)),
            format!("{}-forward rejected MALFORMED", id(4)),
        ]
    );
    assert!(
        std::fs::read(&elsewhere).is_ok(),
        "the link target is untouched"
    );
    // Another owner than the configured producer.
    let me = nix::unistd::geteuid().as_raw();
    let other = s.host.consumer_config(
        &registry(&["a", "b", "c"], |_| "http://127.0.0.1:9".into()),
        Some(me.wrapping_add(1)),
    );
    f.id = id(5);
    drop_in(&s.host, &file_of(&f), &wire(&f));
    let (_, lines) = consume(&other).await;
    assert_eq!(lines, [format!("{}-forward rejected WRONG_OWNER", id(5))]);
    assert!(s.host.mutations().is_empty());
    assert!(names(&s.host.inbox()).is_empty(), "every delivery claimed");
}

#[tokio::test]
async fn a_contained_marker_declines_everything_until_recovered() {
    let s = spooled();
    s.host
        .program(|v| v["fail"] = json!(["lychd-animator-a.target", "lychd-animator-b.target"]));
    let f = swap_a_evicting_b(&s.digest);
    assert_eq!(apply_through_path_unit(&s, &f).await, Applied::Contained);
    assert!(journal_has(
        &s.host,
        &format!("{}.contained.json", delivery_name(&f))
    ));
    // Nothing runs now; a fresh intent for that world is declined while fenced.
    let mut g = f.clone();
    g.id = "1".repeat(32);
    g.evict = vec![];
    g.expected_active = vec![];
    let before = s.host.mutations().len();
    assert_eq!(apply_through_path_unit(&s, &g).await, Applied::NoEffect);
    assert!(journal_has(
        &s.host,
        &format!("{}.declined.json", delivery_name(&g))
    ));
    assert_eq!(s.host.mutations().len(), before);
    // Recovery needs a proved world: none yet (nothing runs: neither b nor a).
    let (_, lines) = run(&s.config, "recover").await;
    assert_eq!(
        lines,
        [format!("{} contained WORLD_NOT_PROVEN", delivery_name(&f))]
    );
    // The operator restores b by hand: the prior world is proved, the marker retires.
    s.host.program(|v| {
        v["fail"] = json!([]);
        v["units"]["lychd-animator-b.target"] = json!("active");
        v["units"]["lychd-animator-b.service"] = json!("active");
    });
    let (_, lines) = run(&s.config, "recover").await;
    assert_eq!(
        lines,
        [format!("{} contained RECOVERED", delivery_name(&f))]
    );
    let mut h = f.clone();
    h.id = "2".repeat(32);
    assert_eq!(apply_through_path_unit(&s, &h).await, Applied::Applied);
}

#[tokio::test]
async fn an_unclaimed_intent_is_retracted_after_the_claim_deadline_as_a_no_effect_decline() {
    let s = spooled();
    let f = swap_a_evicting_b(&s.digest);
    let started = Instant::now();
    let outcome = producer(&s.host, Duration::from_millis(200))
        .apply(&f, Instant::now() + Duration::from_secs(20))
        .await;
    assert_eq!(outcome, Applied::NoEffect);
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(names(&s.host.inbox()).is_empty(), "retracted");
    assert!(
        s.host.journal_files().is_empty(),
        "never claimed, nothing journaled"
    );
    // A consumer arriving late finds nothing.
    let (code, lines) = consume(&s.config).await;
    assert_eq!((code, lines.len()), (0, 0));
}

#[tokio::test]
async fn a_consumer_killed_mid_apply_leaves_processing_that_the_next_run_resolves_without_a_second_effect()
 {
    let s = spooled();
    s.host.program(|v| v["hang_ms"] = json!(1500));
    let f = swap_a_evicting_b(&s.digest);
    drop_in(&s.host, &file_of(&f), &wire(&f));
    let mut child = tokio::process::Command::new(crate::host::OFFICE_BIN)
        .args(["reactor", "consume", "--config"])
        .arg(&s.config)
        .spawn()
        .expect("consumer");
    // Killed while its start transaction hangs (the job outlives its caller).
    let until = Instant::now() + Duration::from_secs(10);
    while s.host.mutations().len() < 2 {
        assert!(Instant::now() < until, "the consumer reached systemd");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().await.expect("killed");
    let name = delivery_name(&f);
    assert!(journal_has(&s.host, &format!("{name}.processing.json")));
    assert!(
        s.host
            .journal_files()
            .iter()
            .all(|f| !f.ends_with("completed.json"))
    );
    // The next run classifies by readback (once the orphaned job landed), never applies again.
    let until = Instant::now() + Duration::from_secs(10);
    while s.host.active() != ["a"] {
        assert!(Instant::now() < until, "the orphaned start job lands");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    s.host.program(|v| v["hang_ms"] = json!(0));
    let mutations = s.host.mutations().len();
    let (code, lines) = consume(&s.config).await;
    assert_eq!(code, 0);
    assert_eq!(lines, [format!("{name} completed RESOLVED_DESIRED")]);
    assert_eq!(s.host.active(), ["a"]);
    assert_eq!(s.host.mutations().len(), mutations, "no second effect");
    assert!(!journal_has(&s.host, &format!("{name}.processing.json")));
}

#[tokio::test]
async fn a_consumer_finding_the_lock_held_does_nothing() {
    let s = spooled();
    let f = swap_a_evicting_b(&s.digest);
    drop_in(&s.host, &file_of(&f), &wire(&f));
    let held =
        lychd_orchestrator::actuator::lock::LifecycleLock::acquire(&s.host.lock).expect("held");
    let (code, lines) = consume(&s.config).await;
    assert_eq!((code, lines.len()), (75, 0));
    assert_eq!(names(&s.host.inbox()), [file_of(&f)], "still published");
    drop(held);
    let (code, _) = consume(&s.config).await;
    assert_eq!(code, 0);
    assert_eq!(s.host.active(), ["a"]);
}

/// The interrupted acquisition (claimed, no custody) is rejected without effect.
#[tokio::test]
async fn an_interrupted_acquisition_is_rejected_without_effect() {
    let s = spooled();
    let f = swap_a_evicting_b(&s.digest);
    let published = drop_in(&s.host, &file_of(&f), &wire(&f));
    std::fs::create_dir_all(s.host.journal()).expect("journal");
    std::fs::set_permissions(s.host.journal(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    let name = delivery_name(&f);
    std::fs::rename(
        &published,
        s.host.journal().join(format!("{name}.acquiring.json")),
    )
    .expect("claimed by a run that died");
    let (_, lines) = consume(&s.config).await;
    assert_eq!(lines, [format!("{name} rejected INTERRUPTED_ACQUISITION")]);
    assert!(s.host.mutations().is_empty());
}

/// The three-animator stack of the transition tests, actuated by `kind` (`host-reactor` with a
/// path unit running the consumer, or `systemd`) against a fake host mirroring onto the
/// simulated one.
async fn actuated_stack(
    kind: &str,
    knobs: &str,
) -> (crate::common::Stack, FakeHost, Option<PathUnit>) {
    use crate::common::{stack_actuated, three};
    let fake = FakeHost::new(&["a", "b", "c"], &["b"]);
    let mut consumer = None;
    let s = stack_actuated(&three(true), knobs, |host, registry| {
        fake.mirror(&host.control_endpoint());
        consumer = Some(fake.consumer_config(registry, None));
        match kind {
            "systemd" => format!(
                "[office.actuator]\nkind = \"systemd\"\nsystemctl = \"{}\"\nlock_file = \"{}\"\n",
                fake.systemctl.display(),
                fake.lock.display()
            ),
            _ => format!(
                "[office.actuator]\nkind = \"host-reactor\"\nspool = \"{}\"\nclaim_deadline_ms = 10000\n",
                fake.spool.display()
            ),
        }
    })
    .await;
    let unit = (kind != "systemd")
        .then(|| PathUnit::start(fake.inbox(), consumer.expect("consumer config")));
    (s, fake, unit)
}

#[tokio::test]
async fn the_rite_runs_end_to_end_through_the_reactor_with_the_fake_systemctl() {
    use lychd_proto::orchestrator::v1 as pb;
    let (s, fake, _unit) = actuated_stack("host-reactor", "warmup_timeout_ms = 15000\n").await;
    let o = s.transition("a:chat:m", 50, None).await.expect("hard swap");
    assert_eq!(o.phase(), pb::TransitionPhase::Completed, "{o:?}");
    assert!(s.host.ready("a").await && !s.host.running("b").await);
    assert_eq!(fake.active(), ["a"]);
    let name = format!("{}-forward", o.transition_id);
    assert!(journal_has(&fake, &format!("{name}.completed.json")));
    assert_eq!(s.open_closures("a").await + s.open_closures("b").await, 0);
    // A start that fails on the host: its own inverse restores a, the rite verifies a WARM
    // again and reopens as failed_restored.
    fake.program(|v| v["fail"] = json!(["lychd-animator-c.target"]));
    let o = s.transition("c:chat:m", 50, None).await.expect("answered");
    assert_eq!(o.phase(), pb::TransitionPhase::FailedRestored, "{o:?}");
    assert_eq!(o.detail, "ACTUATOR_RESTORED");
    assert!(journal_has(
        &fake,
        &format!("{}-forward.restored.json", o.transition_id)
    ));
    assert!(s.host.ready("a").await && !s.host.running("c").await);
    assert_eq!(s.open_closures("a").await + s.open_closures("c").await, 0);
    assert!(s.containments().await.is_empty());
}

#[tokio::test]
async fn a_runtime_that_never_warms_is_compensated_through_the_reactor() {
    use lychd_proto::orchestrator::v1 as pb;
    use lychd_testkit::simllama::UnitFaults;
    let (s, fake, _unit) = actuated_stack("host-reactor", "warmup_timeout_ms = 4000\n").await;
    s.host
        .set_faults(
            "a",
            UnitFaults {
                partial_start: true,
                ..UnitFaults::default()
            },
        )
        .await;
    let o = s.transition("a:chat:m", 50, None).await.expect("answered");
    assert_eq!(o.phase(), pb::TransitionPhase::FailedRestored, "{o:?}");
    assert_eq!(o.detail, "VERIFICATION_TIMEOUT");
    // The forward completed on the host; its exact inverse was accepted and applied.
    for f in ["forward.completed", "compensation.completed"] {
        assert!(
            journal_has(&fake, &format!("{}-{f}.json", o.transition_id)),
            "{f}"
        );
    }
    assert_eq!(fake.active(), ["b"]);
    assert!(s.host.ready("b").await && !s.host.running("a").await);
    assert_eq!(s.open_closures("a").await + s.open_closures("b").await, 0);
}

#[tokio::test]
async fn the_rite_runs_end_to_end_through_the_systemd_actuator() {
    use lychd_proto::orchestrator::v1 as pb;
    let (s, fake, _) = actuated_stack("systemd", "warmup_timeout_ms = 15000\n").await;
    let o = s.transition("a:chat:m", 50, None).await.expect("hard swap");
    assert_eq!(o.phase(), pb::TransitionPhase::Completed, "{o:?}");
    assert!(s.host.ready("a").await && !s.host.running("b").await);
    assert_eq!(
        fake.mutations(),
        [
            "stop --job-mode=fail -- lychd-animator-b.target",
            "start --job-mode=fail -- lychd-animator-a.target",
        ]
    );
    // The lock held by someone else: a no-effect decline, admission reopened.
    let held =
        lychd_orchestrator::actuator::lock::LifecycleLock::acquire(&fake.lock).expect("held");
    let o = s.transition("c:chat:m", 50, None).await.expect("answered");
    assert_eq!(o.phase(), pb::TransitionPhase::DeclinedNoEffect, "{o:?}");
    assert_eq!(o.detail, "ACTUATOR_NO_EFFECT");
    drop(held);
    assert_eq!(fake.mutations().len(), 2);
    assert_eq!(s.open_closures("a").await + s.open_closures("c").await, 0);
}

#[tokio::test]
async fn the_units_command_writes_the_generated_graph_and_bad_usage_is_refused() {
    let h = FakeHost::new(&["a"], &[]);
    let config = h.consumer_config(
        &registry(&["a", "b"], |_| "http://127.0.0.1:9".into()),
        None,
    );
    let out = h.dir.path().join("units");
    let done = tokio::process::Command::new(crate::host::OFFICE_BIN)
        .args(["units", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .output()
        .await
        .expect("units");
    assert!(done.status.success());
    let b = std::fs::read_to_string(out.join("lychd-animator-b.target")).expect("b");
    assert!(b.contains("Conflicts=lychd-animator-a.target"), "{b}");
    assert!(
        out.join("lychd-animator-a.service.d/10-lychd-animator.conf")
            .is_file()
    );
    let (code, _) = run(&config, "bogus").await;
    assert_eq!(code, 2);
    let missing = h.dir.path().join("missing.toml");
    let (code, _) = consume(&missing).await;
    assert_eq!(code, 1, "a configuration that does not load refuses to run");
}
