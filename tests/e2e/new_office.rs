//! One command for a new office: in a copy of the repository, `cargo xtask new-office
//! probe-test` makes every place the office needs; the office builds, its generated tests and
//! the house's tidy checks pass, and the same command again is refused. Slow (the copy's
//! workspace crates are compiled once more; dependencies come from the shared target
//! directory), and run with the suite.

use std::path::Path;
use std::process::Command;

fn copy_repository(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir").flatten() {
        let path = e.path();
        let name = e.file_name();
        if path.is_dir() {
            if [".git", "target", ".lychd"].iter().any(|n| name == *n) {
                continue;
            }
            copy_repository(&path, &to.join(&name));
        } else if path.is_file() {
            std::fs::copy(&path, to.join(&name)).expect("copy");
        }
    }
}

fn cargo(dir: &Path, target: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO"))
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo")
}

fn ok(what: &str, out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_new_office_is_one_command_and_builds_and_passes_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("invariant: the e2e crate is tests/ in the workspace");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let house = tempfile::tempdir().expect("tempdir");
    let copy = house.path();
    copy_repository(root, copy);
    // The copy's workspace crates get a version of their own, so their artifacts in the shared
    // target directory are the copy's and never replace the repository's (the test binaries
    // running this suite among them); dependencies are shared.
    let manifest = copy.join("Cargo.toml");
    let workspace = std::fs::read_to_string(&manifest).expect("Cargo.toml");
    std::fs::write(
        &manifest,
        workspace.replacen("\nversion = \"", "\nversion = \"0.0.0-new-office-check+", 1),
    )
    .expect("Cargo.toml");

    let made = cargo(copy, &target, &["xtask", "new-office", "probe-test"]);
    ok("cargo xtask new-office probe-test", &made);
    for place in [
        "services/probe_test/src/grpc/mod.rs",
        "services/probe_test/src/service/mod.rs",
        "services/probe_test/src/store/mod.rs",
        "services/probe_test/src/domain/mod.rs",
        "proto/lychd/probe_test/v1/probe_test.proto",
        "deploy/quadlet/lychd-probe_test.container",
        "deploy/config/probe_test.toml",
    ] {
        assert!(copy.join(place).is_file(), "{place} was not made");
    }
    let again = cargo(copy, &target, &["xtask", "new-office", "probe-test"]);
    assert!(
        !again.status.success(),
        "a second new-office was not refused"
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("has it already"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    ok(
        "cargo build -p lychd-probe-test",
        &cargo(
            copy,
            &target,
            &["build", "-p", "lychd-probe-test", "--bins"],
        ),
    );
    ok(
        "the new office's tests and the tidy checks",
        &cargo(
            copy,
            &target,
            &[
                "nextest",
                "run",
                "-p",
                "lychd-probe-test",
                "-p",
                "lychd-e2e",
                "-p",
                "lychd-runtime",
                "-E",
                "package(lychd-probe-test) or test(/^(tidy|quadlet)::/) or test(/deploy_provisioning_sql_matches_the_code|example_configs_load/)",
            ],
        ),
    );
}
