//! The core conformance suite (`fixtures/helmloop/core/`) through the
//! library and through the `helmloop` binary, plus the `reduce` command.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Output, Stdio};

use lychd_helmloop::conformance::{Case, Report, fixture_set_digest, parse_manifest, run_case};
use lychd_helmloop::reduce::axes::{
    Authority, Evidence, Execution, ObservedOutcome, Promotion, Reconciliation,
};
use lychd_helmloop::reduce::{ReasonCode, reduce};
use lychd_helmloop::schema::{self, Shape};
use lychd_helmloop::validate::Channel;
use lychd_helmloop::{Value, parse};

use crate::{fixture, read_fixture};

const BIN: &str = env!("CARGO_BIN_EXE_helmloop");

/// Every case of the suite, in manifest order, with the manifest's digest.
pub fn load_cases() -> (String, Vec<(Case, String)>) {
    let (id, entries) =
        parse_manifest(&read_fixture("core/manifest.json")).expect("manifest parses");
    let cases = entries
        .into_iter()
        .map(|(case_id, file, digest)| {
            let case = Case::parse(&read_fixture(&format!("core/{file}")))
                .unwrap_or_else(|e| panic!("{case_id}: {e}"));
            assert_eq!(case.case_id, case_id, "{file}");
            (case, digest)
        })
        .collect();
    (id, cases)
}

/// The case whose ID ends with `-<slug>`.
pub fn case(slug: &str) -> Case {
    let (_, cases) = load_cases();
    cases
        .into_iter()
        .map(|(c, _)| c)
        .find(|c| c.case_id.ends_with(&format!("-{slug}")))
        .unwrap_or_else(|| panic!("no case {slug}"))
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("helmloop binary runs");
    match child.stdin.take().expect("stdin").write_all(stdin) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("write stdin: {e}"),
        _ => {}
    }
    child.wait_with_output().expect("helmloop exits")
}

fn first_word(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn every_case_passes_through_the_library() {
    let (id, cases) = load_cases();
    assert_eq!(id, "helmloop-core-v0.1");
    assert!(cases.len() >= 80, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for (case, manifest_digest) in &cases {
        assert_eq!(
            &case.case_digest.render(),
            manifest_digest,
            "{}",
            case.case_id
        );
        let r = run_case(case);
        if !r.passed() {
            failures.push(format!("{}: {:?}", r.case_id, r.failures));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing case(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    let plain: Vec<Case> = cases.into_iter().map(|(c, _)| c).collect();
    let report = Report::run("core", &id, &plain, vec![]);
    assert!(report.all_passed());
    let v = report.to_value();
    assert_eq!(v.get("evidenceClass"), Some(&Value::from("fixture")));
    assert_eq!(v.get("runtimeObservation"), Some(&Value::Bool(false)));
    assert_eq!(v.get("portabilityEligible"), Some(&Value::Bool(false)));
    let digests: Vec<_> = plain.iter().map(|c| c.case_digest).collect();
    assert_eq!(
        v.get("fixtureSetDigest").and_then(Value::as_str),
        Some(fixture_set_digest(&id, &digests).render().as_str())
    );
}

#[test]
fn the_oracle_fails_on_a_missing_an_extra_or_a_misplaced_code() {
    let base = case("tampered-evidence-body");
    assert!(run_case(&base).passed());
    let mutate = |f: &dyn Fn(&mut Case)| {
        let mut c = base.clone();
        f(&mut c);
        run_case(&c).failures
    };
    let missing = mutate(&|c| {
        c.expected.hold.clear();
    });
    assert_eq!(
        missing,
        vec!["hold: unexpected ASSURANCE_INSUFFICIENT".to_owned()]
    );
    let extra = mutate(&|c| {
        c.expected.reject.insert("EXECUTION_FAILED".into());
    });
    assert_eq!(extra, vec!["reject: missing EXECUTION_FAILED".to_owned()]);
    let moved = mutate(&|c| {
        c.expected.hold.remove("ASSURANCE_INSUFFICIENT");
        c.expected.reject.insert("ASSURANCE_INSUFFICIENT".into());
    });
    assert_eq!(
        moved,
        vec![
            "reject: missing ASSURANCE_INSUFFICIENT".to_owned(),
            "hold: unexpected ASSURANCE_INSUFFICIENT".to_owned()
        ]
    );
    let axis = mutate(&|c| c.expected.axes[1].1 = "FRESH".into());
    assert_eq!(
        axis,
        vec!["axes.evidence: expected FRESH, got INVALID".to_owned()]
    );
}

#[test]
fn the_committed_cases_are_the_generator_output() {
    let script = fixture("gen_core_cases.py");
    let out = Command::new("python3").arg(&script).arg("--check").output().unwrap_or_else(|e| {
        panic!("python3 is required to check the fixtures against their generator (install python3): {e}")
    });
    assert!(
        out.status.success(),
        "fixtures/helmloop/core drifted from gen_core_cases.py; rerun it:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn expectations_use_known_codes_in_their_own_channel_and_cover_every_reachable_state() {
    let (_, cases) = load_cases();
    let mut codes = BTreeSet::new();
    let mut states: BTreeSet<(String, String)> = BTreeSet::new();
    let mut dispositions = BTreeSet::new();
    for (c, _) in &cases {
        for (name, channel) in [
            (&c.expected.reject, Channel::Reject),
            (&c.expected.hold, Channel::Hold),
        ] {
            for code in name {
                let known =
                    ReasonCode::from_code(code).unwrap_or_else(|| panic!("{}: {code}", c.case_id));
                assert_eq!(
                    known.channel(),
                    channel,
                    "{}: {code} in the wrong channel",
                    c.case_id
                );
                codes.insert(known);
            }
        }
        for (axis, state) in &c.expected.axes {
            states.insert((axis.clone(), state.clone()));
        }
        dispositions.insert(c.expected.disposition.clone());
    }
    let uncovered: Vec<_> = ReasonCode::ALL
        .iter()
        .filter(|c| !codes.contains(c))
        .collect();
    assert!(uncovered.is_empty(), "codes no case expects: {uncovered:?}");
    let mut all: Vec<(String, &str)> = Vec::new();
    all.extend(
        Execution::ALL
            .iter()
            .map(|s| ("execution".into(), s.as_str())),
    );
    all.extend(
        Evidence::ALL
            .iter()
            .map(|s| ("evidence".into(), s.as_str())),
    );
    all.extend(
        Authority::ALL
            .iter()
            .map(|s| ("authority".into(), s.as_str())),
    );
    all.extend(
        Promotion::ALL
            .iter()
            .map(|s| ("promotion".into(), s.as_str())),
    );
    all.extend(
        Reconciliation::ALL
            .iter()
            .map(|s| ("reconciliation".into(), s.as_str())),
    );
    all.extend(
        ObservedOutcome::ALL
            .iter()
            .map(|s| ("observedOutcome".into(), s.as_str())),
    );
    let missing: Vec<_> = all
        .iter()
        .filter(|(a, s)| !states.contains(&(a.clone(), (*s).to_owned())))
        .collect();
    // v0.1 evaluates one terminal-or-unknown receipt: RESERVED and RUNNING
    // are in the enum but unreachable (resolutions §E).
    assert_eq!(
        missing,
        vec![
            &("execution".to_owned(), "RESERVED"),
            &("execution".to_owned(), "RUNNING")
        ]
    );
    assert_eq!(dispositions.len(), 3);
}

#[test]
fn every_result_is_valid_under_the_result_schema() {
    let (_, cases) = load_cases();
    for (c, _) in &cases {
        let result = reduce(&c.input);
        let issues = schema::validate(Shape::ReductionResult, &result.to_value().to_serde());
        assert!(issues.is_empty(), "{}: {issues:?}", c.case_id);
        let text = result.to_json();
        assert_eq!(
            parse(text.as_bytes()).expect("canonical"),
            result.to_value()
        );
    }
}

#[test]
fn cli_conformance_core_reports_fixture_evidence_and_exits_0() {
    let o = run(&["conformance", "--adapter", "core"], b"");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report = parse(&o.stdout[..o.stdout.len() - 1]).expect("one canonical json line");
    assert_eq!(report.get("evidenceClass"), Some(&Value::from("fixture")));
    assert_eq!(report.get("runtimeObservation"), Some(&Value::Bool(false)));
    assert_eq!(report.get("portabilityEligible"), Some(&Value::Bool(false)));
    assert_eq!(
        report.get("fixtureSetId"),
        Some(&Value::from("helmloop-core-v0.1"))
    );
    assert_eq!(report.get("passed"), Some(&Value::Bool(true)));
    let semantic = report.get("semanticCaseResults").expect("results");
    assert_eq!(
        semantic.get("format"),
        Some(&Value::from("helmloop-semantic-case-results/v1"))
    );
    let cases = semantic
        .get("cases")
        .and_then(Value::as_array)
        .expect("cases");
    let (_, loaded) = load_cases();
    assert_eq!(cases.len(), loaded.len());
    for c in cases {
        for k in ["caseId", "disposition", "axes", "reasonCodes", "failures"] {
            assert!(c.get(k).is_some(), "{k}");
        }
        assert_eq!(
            c.get("axes").and_then(Value::as_object).map(|m| m.len()),
            Some(6)
        );
        assert!(c.get("reasonCodes").and_then(|r| r.get("reject")).is_some());
        assert!(c.get("reasonCodes").and_then(|r| r.get("hold")).is_some());
    }
    // The same fixture set through --fixtures gives the same digest.
    let again = run(
        &[
            "conformance",
            "--adapter",
            "core",
            "--fixtures",
            fixture("core").to_str().expect("utf-8 path"),
        ],
        b"",
    );
    assert_eq!(again.status.code(), Some(0));
    let again = parse(&again.stdout[..again.stdout.len() - 1]).expect("json");
    assert_eq!(
        again.get("fixtureSetDigest"),
        report.get("fixtureSetDigest")
    );
}

#[test]
fn cli_conformance_exits_1_when_a_case_fails_and_2_on_usage_errors() {
    let dir = std::env::temp_dir().join(format!("helmloop-core-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("cases")).expect("temp dir");
    let mut case = parse(&read_fixture("core/cases/core-001-pass-baseline.json")).expect("case");
    if let Value::Object(m) = &mut case
        && let Some(Value::Object(e)) = m.get_mut("expected")
    {
        e.insert("disposition", Value::from("HOLD"));
    }
    let text = lychd_helmloop::to_canonical_string(&case).expect("canonical");
    std::fs::write(dir.join("cases/one.json"), &text).expect("write case");
    let digest = lychd_helmloop::binding_digest(&case)
        .expect("digest")
        .render();
    let manifest = format!(
        r#"{{"fixtureSetId":"scratch","cases":[{{"caseId":"core-001-pass-baseline","file":"cases/one.json","caseDigest":"{digest}"}}]}}"#
    );
    std::fs::write(dir.join("manifest.json"), manifest).expect("write manifest");
    let o = run(
        &[
            "conformance",
            "--adapter",
            "core",
            "--fixtures",
            dir.to_str().expect("path"),
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(first_word(&o), "CONFORMANCE_FAILED");
    let report = parse(&o.stdout[..o.stdout.len() - 1]).expect("json");
    assert_eq!(report.get("passed"), Some(&Value::Bool(false)));
    // A case file that no longer matches its manifest digest is a fixture error.
    std::fs::write(dir.join("cases/one.json"), text.replace("HOLD", "PASS")).expect("rewrite");
    let o = run(
        &[
            "conformance",
            "--adapter",
            "core",
            "--fixtures",
            dir.to_str().expect("path"),
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(1));
    let report = parse(&o.stdout[..o.stdout.len() - 1]).expect("json");
    assert_eq!(
        report
            .get("fixtureErrors")
            .and_then(Value::as_array)
            .map(<[Value]>::len),
        Some(1)
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
    for args in [
        &["conformance"][..],
        &["conformance", "--adapter", "nonsense"],
        &[
            "conformance",
            "--adapter",
            "core",
            "--fixtures",
            "/nonexistent/helmloop",
        ],
        &["reduce"],
    ] {
        assert_eq!(run(args, b"").status.code(), Some(2), "{args:?}");
    }
}

fn input_text(slug: &str) -> Vec<u8> {
    lychd_helmloop::to_canonical_vec(case(slug).input.value()).expect("canonical")
}

#[test]
fn cli_reduce_prints_the_result_and_exits_by_disposition() {
    let o = run(&["reduce", "-"], &input_text("pass-baseline"));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.stdout.last(), Some(&b'\n'));
    let result = parse(&o.stdout[..o.stdout.len() - 1]).expect("canonical result");
    assert_eq!(result.get("disposition"), Some(&Value::from("PASS")));
    assert!(schema::validate(Shape::ReductionResult, &result.to_serde()).is_empty());

    let hold = run(&["reduce", "-"], &input_text("promotion-pending"));
    assert_eq!(hold.status.code(), Some(1));
    assert_eq!(first_word(&hold), "HOLD");
    let reject = run(&["reduce", "-"], &input_text("execution-failed"));
    assert_eq!(reject.status.code(), Some(1));
    assert_eq!(first_word(&reject), "REJECT");
    assert!(String::from_utf8_lossy(&reject.stderr).contains("EXECUTION_FAILED"));

    let broken = run(
        &["reduce", "-"],
        br#"{"protocolVersion":"0.1","protocolVersion":"0.1"}"#,
    );
    assert_eq!(broken.status.code(), Some(1));
    assert_eq!(first_word(&broken), "C14N_DUPLICATE_KEY");
    assert!(broken.stdout.is_empty());

    let file = run(
        &[
            "reduce",
            fixture("bundles/evaluation-input.json")
                .to_str()
                .expect("path"),
        ],
        b"",
    );
    assert_eq!(
        file.status.code(),
        Some(1),
        "the core-I example input lacks consumed heads"
    );
    let r = parse(&file.stdout[..file.stdout.len() - 1]).expect("json");
    assert_ne!(r.get("disposition"), Some(&Value::from("PASS")));
}
