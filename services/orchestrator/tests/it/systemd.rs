//! The `systemd` actuator against `lychd-fake-systemctl`: the pre-world attestation, the
//! pending-job check, readback whatever the exit status, exactly one inverse, containment,
//! and the lifecycle lock.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use lychd_orchestrator::actuator::Applied;
use lychd_orchestrator::actuator::lock::LifecycleLock;
use lychd_orchestrator::actuator::systemd::{Report, Systemd};
use serde_json::json;
use tokio::time::Instant;

use crate::host::{FakeHost, graph_of, swap_a_evicting_b};

fn host() -> (FakeHost, Systemd) {
    let h = FakeHost::new(&["a", "b", "c"], &["b"]);
    let s = Systemd::new(&h.systemctl, &h.lock)
        .expect("attested")
        .with_sources(&graph_of(&["a", "b", "c"]));
    (h, s)
}

async fn apply(s: &Systemd) -> Report {
    s.apply_report(
        &swap_a_evicting_b("d"),
        Instant::now() + Duration::from_secs(10),
    )
    .await
}

#[tokio::test]
async fn a_swap_stops_the_evictee_then_starts_the_target_and_reads_back_the_desired_world() {
    let (h, s) = host();
    let r = apply(&s).await;
    assert_eq!((r.outcome, r.reason), (Applied::Applied, ""));
    assert_eq!(r.observed_active, Some(vec!["a".to_owned()]));
    assert_eq!(
        h.mutations(),
        [
            "stop --job-mode=fail -- lychd-animator-b.target",
            "start --job-mode=fail -- lychd-animator-a.target",
        ]
    );
    let log = h.log();
    assert!(
        log[0].starts_with("list-jobs"),
        "jobs checked first: {log:?}"
    );
    assert!(
        log[1].starts_with("show --property=Id,FragmentPath,DropInPaths"),
        "the loaded sources attested: {log:?}"
    );
    assert!(log[2].starts_with("show --property=Id,LoadState,ActiveState"));
    assert!(
        log.last().expect("readback").starts_with("show"),
        "read back after the job"
    );
    assert_eq!(h.active(), ["a"]);
}

#[tokio::test]
async fn a_stale_pre_world_is_refused_before_any_effect() {
    let (h, s) = host();
    h.program(|v| {
        v["units"]["lychd-animator-b.target"] = json!("inactive");
        v["units"]["lychd-animator-b.service"] = json!("inactive");
        v["units"]["lychd-animator-c.target"] = json!("active");
    });
    let r = apply(&s).await;
    assert_eq!(
        (r.outcome, r.reason),
        (Applied::NoEffect, "STALE_PRE_WORLD")
    );
    assert!(h.mutations().is_empty());
    // An unloaded generated target proves nothing either.
    h.program(|v| {
        v["units"]
            .as_object_mut()
            .expect("units")
            .remove("lychd-animator-a.target");
    });
    let r = apply(&s).await;
    assert_eq!(
        (r.outcome, r.reason),
        (Applied::NoEffect, "TOPOLOGY_NOT_ATTESTED")
    );
    let unattested = Systemd::new(&h.systemctl, &h.lock).expect("attested");
    let r = apply(&unattested).await;
    assert_eq!(
        (r.outcome, r.reason),
        (Applied::NoEffect, "TOPOLOGY_NOT_LOADED")
    );
    assert!(h.mutations().is_empty());
}

#[tokio::test]
async fn a_pending_job_on_a_relevant_unit_is_refused_before_any_effect() {
    let (h, s) = host();
    h.program(|v| v["jobs"] = json!(["lychd-animator-b.service"]));
    let r = apply(&s).await;
    assert_eq!((r.outcome, r.reason), (Applied::NoEffect, "PENDING_JOB"));
    assert!(h.mutations().is_empty());
    // A job on an unrelated unit does not matter.
    h.program(|v| v["jobs"] = json!(["unrelated.service"]));
    assert_eq!(apply(&s).await.outcome, Applied::Applied);
}

#[tokio::test]
async fn a_non_zero_exit_with_the_desired_world_observed_is_success() {
    let (h, s) = host();
    h.program(|v| v["exit"] = json!(1));
    let r = apply(&s).await;
    assert_eq!(r.outcome, Applied::Applied, "{r:?}");
    assert_eq!(h.active(), ["a"]);
}

#[tokio::test]
async fn a_failed_start_gets_exactly_one_inverse_and_the_prior_world_is_restored() {
    let (h, s) = host();
    h.program(|v| v["fail"] = json!(["lychd-animator-a.target"]));
    let r = apply(&s).await;
    assert_eq!(
        (r.outcome, r.reason),
        (Applied::Restored, "INVERSE_RESTORED")
    );
    assert_eq!(
        h.mutations(),
        [
            "stop --job-mode=fail -- lychd-animator-b.target",
            "start --job-mode=fail -- lychd-animator-a.target",
            "stop --job-mode=fail -- lychd-animator-a.target",
            "start --job-mode=fail -- lychd-animator-b.target",
        ]
    );
    assert_eq!(h.active(), ["b"]);
}

#[tokio::test]
async fn a_failed_stop_that_left_the_prior_world_is_a_restoration_without_an_inverse() {
    let (h, s) = host();
    h.program(|v| v["fail_stop"] = json!(["lychd-animator-b.target"]));
    let r = apply(&s).await;
    assert_eq!((r.outcome, r.reason), (Applied::Restored, "PRIOR_OBSERVED"));
    assert_eq!(h.mutations().len(), 1, "no start after a failed stop");
}

#[tokio::test]
async fn an_inverse_that_fails_is_contained_and_never_retried() {
    let (h, s) = host();
    h.program(|v| v["fail"] = json!(["lychd-animator-a.target", "lychd-animator-b.target"]));
    let r = apply(&s).await;
    assert_eq!(
        (r.outcome, r.reason),
        (Applied::Contained, "INVERSE_FAILED")
    );
    assert_eq!(
        h.mutations().len(),
        4,
        "the forward and exactly one inverse"
    );
    // A compensation that leaves neither world gets no inverse of its own.
    let (h, s) = host();
    h.program(|v| {
        v["units"]["lychd-animator-a.target"] = json!("active");
        v["units"]["lychd-animator-a.service"] = json!("active");
        v["units"]["lychd-animator-b.target"] = json!("inactive");
        v["units"]["lychd-animator-b.service"] = json!("inactive");
        v["fail"] = json!(["lychd-animator-b.target"]);
    });
    let inverse = swap_a_evicting_b("d").compensation();
    let r = s
        .apply_report(&inverse, Instant::now() + Duration::from_secs(10))
        .await;
    assert_eq!((r.outcome, r.reason), (Applied::Contained, "NEITHER_WORLD"));
    assert_eq!(h.mutations().len(), 2);
}

#[tokio::test]
async fn lock_contention_and_a_symlinked_or_wrong_mode_lock_file_are_no_effect_refusals() {
    let (h, s) = host();
    let held = LifecycleLock::acquire(&h.lock).expect("held by another");
    let r = apply(&s).await;
    assert_eq!((r.outcome, r.reason), (Applied::NoEffect, "LOCK_CONTENDED"));
    drop(held);
    // A symlink in place of the lock file.
    let real = h.dir.path().join("elsewhere.lock");
    std::fs::write(&real, b"").expect("write");
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let link = h.dir.path().join("linked.lock");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let linked = Systemd::new(&h.systemctl, &link).expect("attested");
    let r = apply(&linked).await;
    assert_eq!((r.outcome, r.reason), (Applied::NoEffect, "LOCK_UNSAFE"));
    // A lock file others may read.
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let loose = Systemd::new(&h.systemctl, &real).expect("attested");
    let r = apply(&loose).await;
    assert_eq!((r.outcome, r.reason), (Applied::NoEffect, "LOCK_UNSAFE"));
    assert!(h.log().is_empty(), "systemctl never ran");
}

#[tokio::test]
async fn systemctl_is_attested_at_start_and_pinned() {
    let h = FakeHost::new(&["a"], &[]);
    assert!(Systemd::new(std::path::Path::new("systemctl"), &h.lock).is_err());
    std::fs::set_permissions(&h.systemctl, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    assert_eq!(
        Systemd::new(&h.systemctl, &h.lock).err(),
        Some("must not be group- or other-writable")
    );
    std::fs::set_permissions(&h.systemctl, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (h, s) = host();
    // Replaced after attestation (another inode): refused before any call.
    let copy = h.dir.path().join("copy");
    std::fs::copy(&h.systemctl, &copy).expect("copy");
    std::fs::rename(&copy, &h.systemctl).expect("replace");
    let r = apply(&s).await;
    assert_eq!(
        (r.outcome, r.reason),
        (Applied::NoEffect, "SYSTEMCTL_CHANGED")
    );
    assert!(h.log().is_empty());
}

#[tokio::test]
async fn loaded_units_that_are_not_the_generated_ones_are_refused_before_any_effect() {
    let (h, s) = host();
    // An edited target (a conflict edge removed, say).
    let target = h.unit_dir().join("lychd-animator-b.target");
    let text = std::fs::read_to_string(&target).expect("target");
    std::fs::write(
        &target,
        text.replace("Conflicts=lychd-animator-a.target\n", ""),
    )
    .expect("edit");
    let r = apply(&s).await;
    assert_eq!(
        (r.outcome, r.reason),
        (Applied::NoEffect, "TOPOLOGY_NOT_ATTESTED")
    );
    std::fs::write(&target, text).expect("restore");
    // The service's binding drop-in missing.
    let drop_in = h
        .unit_dir()
        .join("lychd-animator-a.service.d/10-lychd-animator.conf");
    std::fs::remove_file(&drop_in).expect("remove");
    let r = apply(&s).await;
    assert_eq!(
        (r.outcome, r.reason),
        (Applied::NoEffect, "TOPOLOGY_NOT_ATTESTED")
    );
    // Generated for another registry (a fourth animator changes the digest and the edges).
    let other = Systemd::new(&h.systemctl, &h.lock)
        .expect("attested")
        .with_sources(&graph_of(&["a", "b", "c", "d"]));
    let r = apply(&other).await;
    assert_eq!(r.reason, "TOPOLOGY_NOT_ATTESTED");
    assert!(h.mutations().is_empty());
    // As generated: applied.
    std::fs::write(
        &drop_in,
        lychd_orchestrator::domain::units::generate(&graph_of(&["a", "b", "c"]))
            .into_iter()
            .find(|f| f.path == "lychd-animator-a.service.d/10-lychd-animator.conf")
            .expect("generated")
            .text,
    )
    .expect("restore");
    assert_eq!(apply(&s).await.outcome, Applied::Applied);
}
