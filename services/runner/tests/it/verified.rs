//! The shared fixture of verified runs (issue 28 item 3: a run ends `SUCCEEDED` only on a
//! HelmLoop PASS it did not produce): an in-process Runner with the HelmLoop office beside it,
//! Ward delivering the owner records it issues, and the accountable owner approving every
//! owner-record and promotion consent as it is proposed (`lychd_testkit::verify`). A driver
//! made here asks that verifier (every test workflow names the owner in `verification`); the
//! path of a verified run is its steps' prefix, then the verifier's holds and changes, then
//! `verified_pass` by `helmloop` ([`assert_verified_path`]).

use std::time::{Duration, Instant};

use lychd_auth::credentials::SessionSource;
use lychd_runner::service::driver::{Driver, Stopped};
use lychd_runner::store::leases;
use lychd_runner::verifier::Verifier;
use lychd_runtime::client::Outgoing;
use lychd_testkit::verify::{Verification, free_port};
use lychd_testkit::{Spawned, spawn_office_with};
use secrecy::SecretString;
use uuid::Uuid;

use crate::common::{Stack, TESTER_ACTIONS, get};

/// How long a held verification waits before it is asked again in these tests (ms).
pub const RECHECK_MS: u64 = 100;

/// A Runner process's configuration `text` (TOML) with `verify_recheck_ms` = [`RECHECK_MS`] in
/// its `[office]` section (added when it has none).
pub fn office_text(text: &str) -> String {
    let line = format!("verify_recheck_ms = {RECHECK_MS}\n");
    if text.contains("verify_recheck_ms") {
        text.to_owned()
    } else if text.contains("[office]\n") {
        text.replacen("[office]\n", &format!("[office]\n{line}"), 1)
    } else {
        format!("{text}\n[office]\n{line}")
    }
}

/// A Runner (its `[office]` section `office`) with the verifier beside it, the owner
/// approving what is proposed.
pub async fn stack_with(office: &str) -> Stack {
    let mut table: toml::Table = office.parse().expect("office section");
    table
        .entry("verify_recheck_ms")
        .or_insert(toml::Value::Integer(RECHECK_MS as i64));
    // The office's own step loop calls HelmLoop at the port picked before it starts; a test's
    // drivers are given the verifier, so the port is picked just before HelmLoop binds it.
    let drives = table.get("drive") != Some(&toml::Value::Boolean(false));
    let port = if drives { free_port() } else { 0 };
    let mut spawned: Spawned = spawn_office_with(lychd_runner::spec(), move |c| {
        c.office = table;
        if drives {
            let endpoint = format!("http://127.0.0.1:{port}");
            c.peers.insert(
                "helmloop".into(),
                lychd_runtime::config::PeerConfig { endpoint },
            );
        }
    })
    .await;
    let mut v = Verification::beside(&mut spawned, port).await;
    v.approve_all();
    for action in TESTER_ACTIONS {
        spawned.allow(action, "run:*").await;
    }
    let session = SessionSource::start(
        spawned.ward_channel(),
        SecretString::from(v.credential.clone()),
        vec!["ward".into(), "helmloop".into()],
    );
    assert!(
        session.ready(Duration::from_secs(10)).await,
        "the runner's verifier session"
    );
    let verifier = Verifier::at(
        &v.helmloop_endpoint,
        &spawned.ward_endpoint(),
        Outgoing::new(Some(session)),
    )
    .expect("endpoints")
    .recheck_ms(RECHECK_MS);
    let client = lychd_proto::runner::v1::runner_client::RunnerClient::new(spawned.channel());
    Stack {
        spawned,
        client,
        verification: Some(Verified {
            _verification: v,
            verifier,
        }),
    }
}

/// The verifier beside a stack's Runner and what its drivers ask.
pub struct Verified {
    /// Kept for the stack's life: HelmLoop and the owner approving.
    pub _verification: Verification,
    pub verifier: Verifier,
}

/// [`stack_with`], the step loop off (runs stay where the API puts them until a test's
/// driver claims them).
pub async fn stack() -> Stack {
    stack_with("drive = false").await
}

impl Stack {
    /// The independent verifier a driver of this stack asks (none without the fixture: every
    /// verification is then held).
    pub fn verifier(&self) -> Verifier {
        self.verification
            .as_ref()
            .map_or_else(Verifier::none, |v| v.verifier.clone())
    }
}

/// Claim and drive runs with `d` until run `id` has ended (at most 60 s): a held verification
/// gives the run back, to be claimed again once its recheck is due. The last drive stops
/// idle; the ended run.
pub async fn drive_to_end(s: &Stack, d: &Driver, id: Uuid) -> lychd_proto::runner::v1::Run {
    let t = Instant::now();
    let mut c = s.client.clone();
    loop {
        let run = get(&mut c, &id.to_string()).await.expect("get");
        if !run.terminal_category.is_empty() {
            return run;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "run {id} has not ended: {} ({:?})",
            run.state,
            run.verification
        );
        match leases::claim(&s.spawned.ctx.pool, d.holder(), 60_000)
            .await
            .expect("claim")
        {
            Some(claimed) => {
                let stopped = d.drive(claimed).await.expect("drive");
                assert_ne!(stopped, Stopped::Fenced, "nobody else drives run {id}");
            }
            None => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// The triggers the independent verifier adds after `ready_to_verify`: held (and changed back
/// to `VERIFY`) at least once — the owner approves only what was proposed — then `verified_pass`.
pub fn verifier_tail(tail: &[&str]) -> bool {
    let Some((last, holds)) = tail.split_last() else {
        return false;
    };
    *last == "verified_pass"
        && !holds.is_empty()
        && holds
            .chunks(2)
            .all(|pair| pair == ["verification_hold", "verification_changed"])
}

/// `triggers` is exactly `prefix` (the run's steps, through `ready_to_verify`), then the
/// verifier's holds and changes, then `verified_pass`.
pub fn assert_verified_path(triggers: &[&str], prefix: &[&str]) {
    assert_eq!(prefix.last(), Some(&"ready_to_verify"), "{prefix:?}");
    assert!(
        triggers.len() > prefix.len() && triggers[..prefix.len()] == *prefix,
        "{triggers:?} starts with {prefix:?}"
    );
    assert!(
        verifier_tail(&triggers[prefix.len()..]),
        "after the steps, the verifier's holds then a PASS: {triggers:?}"
    );
}

#[test]
fn the_verifier_tail_is_holds_then_a_pass() {
    for ok in [
        &["verification_hold", "verification_changed", "verified_pass"][..],
        &[
            "verification_hold",
            "verification_changed",
            "verification_hold",
            "verification_changed",
            "verified_pass",
        ],
    ] {
        assert!(verifier_tail(ok), "{ok:?}");
    }
    for bad in [
        &["verified_pass"][..],
        &[],
        &["verification_hold", "verified_pass"],
        &["verification_hold", "verification_changed"],
        &["verification_changed", "verification_hold", "verified_pass"],
        &[
            "verification_hold",
            "verification_changed",
            "verified_pass",
            "x",
        ],
    ] {
        assert!(!verifier_tail(bad), "{bad:?}");
    }
}

/// Every obligation of the run holds, yet no verifier's PASS: a verifier that never answers
/// (HelmLoop's address answers nothing) leaves the run in `VERIFY`, asked again; one that is
/// not there holds it for review (`WAIT_VERIFICATION`, `VERIFIER_NOT_CONFIGURED`). Neither
/// ends it `SUCCEEDED`, however often it is driven (issue 28: unknown is not success).
#[tokio::test]
async fn closed_obligations_without_a_pass_never_succeed() {
    let mut s = crate::common::stack().await;
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let silent = Verifier::at(&nowhere, &nowhere, Outgoing::default())
        .expect("endpoints")
        .recheck_ms(50);
    let cases = [
        (
            "silent",
            crate::steps::driver(&s).with_verifier(silent),
            "VERIFY",
        ),
        (
            "absent",
            crate::steps::driver(&s).with_verifier(Verifier::none().recheck_ms(50)),
            "WAIT_VERIFICATION",
        ),
    ];
    for (name, d, held_in) in cases {
        let id = crate::steps::start_tasks_with(&mut s, name, None).await;
        let t = Instant::now();
        let mut drives = 0;
        while t.elapsed() < Duration::from_millis(1_500) {
            if let Some(run) = leases::claim(&s.spawned.ctx.pool, d.holder(), 60_000)
                .await
                .expect("claim")
            {
                assert!(
                    matches!(d.drive(run).await.expect("drive"), Stopped::Waiting(_)),
                    "{name}: given back to be asked again"
                );
                drives += 1;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(drives >= 2, "{name}: asked more than once ({drives})");
        let run = get(&mut s.client, &id.to_string()).await.expect("run");
        assert_eq!(
            (run.state.as_str(), run.terminal_category.as_str()),
            (held_in, ""),
            "{name}"
        );
        // Every obligation holds: the steps' results closed it.
        let body = crate::steps::checkpoint(&mut s, id, 0).await;
        assert_eq!(body["results"].as_array().map(Vec::len), Some(3), "{body}");
        let p = crate::steps::path(&mut s, id).await;
        let triggers = crate::steps::triggers(&p);
        assert!(triggers.contains(&"ready_to_verify"), "{triggers:?}");
        assert!(!triggers.contains(&"verified_pass"), "{name}: {triggers:?}");
        if held_in == "WAIT_VERIFICATION" {
            let v = run.verification.expect("verification");
            assert_eq!(
                (v.disposition.as_str(), v.reasons.as_slice()),
                ("HOLD", &["VERIFIER_NOT_CONFIGURED".to_owned()][..])
            );
            assert!(v.obligations_closed && !v.independent_pass, "{v:?}");
        }
    }
}
