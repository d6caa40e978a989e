//! `docs/operations.md`, the operator runbook, run as written: every ```` ```sh runbook ````
//! block, in order, as one `bash` script (`set -eo pipefail`) against a fresh
//! `lychd dev --ephemeral`, with only `LYCHD_STATE` set (the runbook defines every other
//! variable itself). Each line ending in `# refused: REASON` must have been refused with that
//! reason; every office's API must appear in the runbook.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use lychd_runtime::Office;

use crate::Interrupted;

/// How long the runbook may run.
const RUNBOOK_TIMEOUT: Duration = Duration::from_secs(240);
/// How long `lychd dev` has to serve.
const STACK_START: Duration = Duration::from_secs(90);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The runbook's command blocks, in order.
fn blocks(doc: &str) -> Vec<String> {
    doc.split("```sh runbook\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap_or_default().to_owned())
        .collect()
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The last warnings and errors each office of the stack under `state` logged.
fn warnings(state: &Path) -> String {
    let Ok(logs) = std::fs::read_dir(state.join("dev/logs")) else {
        return "(no logs)".into();
    };
    let mut logs: Vec<PathBuf> = logs.filter_map(|e| e.ok().map(|e| e.path())).collect();
    logs.sort();
    logs.iter()
        .map(|log| {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let worrying: Vec<&str> = text
                .lines()
                .filter(|l| l.contains(r#""level":"WARN""#) || l.contains(r#""level":"ERROR""#))
                .collect();
            format!("{}:\n{}", log.display(), tail(&worrying.join("\n"), 10))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The reasons the runbook expects refusals with.
fn expected_refusals(script: &str) -> Vec<String> {
    script
        .lines()
        .filter_map(|l| {
            l.split_once("# refused: ")
                .map(|(_, r)| r.trim().to_owned())
        })
        .collect()
}

#[test]
fn blocks_and_expected_refusals_are_read_from_the_markdown() {
    let doc = "x\n```sh runbook\na\nb || true  # refused: R1\n```\ny\n```sh\nnot run\n```\n```sh runbook\nc\n```\n";
    let blocks = blocks(doc);
    assert_eq!(blocks, ["a\nb || true  # refused: R1\n", "c\n"]);
    assert_eq!(expected_refusals(&blocks.concat()), ["R1"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_command_of_the_runbook_runs_as_written_against_lychd_dev() {
    let doc = std::fs::read_to_string(repo().join("docs/operations.md")).expect("runbook");
    let script = blocks(&doc).concat();
    assert!(
        !script.is_empty(),
        "no `sh runbook` block in docs/operations.md"
    );
    for office in Office::ALL {
        assert!(
            script.contains(&format!("lychd.{}.v1.", office.name())),
            "the runbook never calls {office}"
        );
    }

    let state = tempfile::tempdir().expect("tmp");
    let started = Instant::now();
    let mut stack = Interrupted::dev(state.path(), lychd_pg::free_port().expect("port"), &[]);
    let endpoints = state.path().join("dev/endpoints.json");
    stack.until_written(&endpoints, STACK_START).await;
    eprintln!(
        "lychd dev --ephemeral: every office serving after {:?}",
        started.elapsed()
    );

    // The runbook reads `fixtures/` from the repository root and writes its scratch files to the
    // working directory: a directory of its own with the fixtures linked in.
    let work = tempfile::tempdir().expect("work dir");
    std::os::unix::fs::symlink(repo().join("fixtures"), work.path().join("fixtures"))
        .expect("link");
    let grpcurl = lychd_testkit::grpcurl();
    let path = format!(
        "{}:{}",
        grpcurl.parent().expect("grpcurl dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let ran = Instant::now();
    let run = tokio::process::Command::new("bash")
        .arg("-c")
        // A failing command names itself and its line of the script (the runbook's blocks, in order).
        .arg(format!(
            "set -eo pipefail\ntrap 'echo \"runbook: line $((LINENO - 2)) failed (exit $?): $BASH_COMMAND\" >&2' ERR\n{script}"
        ))
        .current_dir(work.path())
        .env("PATH", path)
        .env("LYCHD_STATE", state.path())
        .env_remove("LYCHD_OPERATOR_CREDENTIAL")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(RUNBOOK_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| panic!("the runbook did not finish within {RUNBOOK_TIMEOUT:?}"))
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The failing command's own words first: a long report is cut in the middle.
    assert!(
        out.status.success(),
        "the runbook failed ({}):\n--- stderr\n{stderr}\n--- the offices' warnings\n{}\n--- stdout (last 60 lines)\n{}",
        out.status,
        warnings(state.path()),
        tail(&stdout, 60)
    );
    eprintln!("the runbook ran in {:?}", ran.elapsed());
    let refusals = expected_refusals(&script);
    assert!(!refusals.is_empty());
    for reason in refusals {
        assert!(
            stderr.contains(&format!("\"reason\":\"{reason}\"")),
            "a command of the runbook was not refused with {reason}:\n{stderr}"
        );
    }
    // What the runbook's own checks print: the verdict seen on the watch, a completed
    // transition, the reduction's disposition.
    for seen in [
        "CONSENT_STATE_GRANTED",
        "TRANSITION_PHASE_COMPLETED",
        "DISPOSITION_REJECT",
    ] {
        assert!(
            stdout.contains(seen),
            "the runbook's output lacks {seen}:\n{stdout}"
        );
    }
    assert!(
        !work.path().join("runner-1.credential").exists(),
        "the runbook removes the credential file it wrote"
    );
}
