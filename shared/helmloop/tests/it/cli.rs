//! The `helmloop` binary: outputs, stderr first word and exit codes
//! (resolutions §A "CLI contract").

use std::io::Write;
use std::process::{Command, Output, Stdio};

use sha2::{Digest as _, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_helmloop");

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("helmloop binary runs");
    // A command that fails before reading its input closes the pipe early.
    match child.stdin.take().expect("stdin").write_all(stdin) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("write stdin: {e}"),
        _ => {}
    }
    child.wait_with_output().expect("helmloop exits")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn first_word(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn python_style_digest(prefix: &str, canonical: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(prefix.as_bytes());
    h.update([0u8]);
    h.update(canonical);
    format!("sha256:{}", hex::encode(h.finalize()))
}

#[test]
fn digest_defaults_to_record_domain_and_prints_one_line() {
    let input = br#"{ "b": 1, "digest": "sha256:x", "a": [true, null] }"#;
    let o = run(&["digest", "-"], input);
    assert_eq!(code(&o), 0, "{o:?}");
    let expected = python_style_digest("HelmLoop/v0.1/Record", br#"{"a":[true,null],"b":1}"#);
    assert_eq!(stdout(&o), format!("{expected}\n"));
    assert!(o.stderr.is_empty());
    let explicit = run(&["digest", "--domain", "record", "-"], input);
    assert_eq!(stdout(&explicit), stdout(&o));
}

#[test]
fn digest_binding_domain_keeps_the_digest_member() {
    let input = br#"{"b":1,"digest":"d","a":2}"#;
    let o = run(&["digest", "--domain", "binding", "-"], input);
    assert_eq!(code(&o), 0);
    let expected = python_style_digest("HelmLoop/v0.1/Binding", br#"{"a":2,"b":1,"digest":"d"}"#);
    assert_eq!(stdout(&o), format!("{expected}\n"));
}

#[test]
fn canonical_prints_the_hashed_bytes_without_newline() {
    let input =
        "{\"z\":\"\\u00e9\\n\",\"digest\":1,\"\\ue000\":0,\"\\ud83d\\ude00\":0}\n".as_bytes();
    let record = run(&["digest", "--canonical", "-"], input);
    assert_eq!(code(&record), 0);
    assert_eq!(
        stdout(&record),
        "{\"z\":\"\u{e9}\\n\",\"\u{1f600}\":0,\"\u{e000}\":0}"
    );
    let binding = run(
        &["digest", "--canonical", "--domain", "binding", "-"],
        input,
    );
    assert_eq!(
        stdout(&binding),
        "{\"digest\":1,\"z\":\"\u{e9}\\n\",\"\u{1f600}\":0,\"\u{e000}\":0}"
    );
}

#[test]
fn digest_of_a_fixture_file_matches_its_declared_digest() {
    let path = crate::fixture("records/outcome-contract-v1.json");
    let o = run(&["digest", path.to_str().unwrap()], b"");
    assert_eq!(code(&o), 0);
    let v = lychd_helmloop::parse(&std::fs::read(&path).unwrap()).unwrap();
    let declared = v
        .get("digest")
        .and_then(lychd_helmloop::Value::as_str)
        .unwrap();
    assert_eq!(stdout(&o), format!("{declared}\n"));
}

#[test]
fn invalid_input_exits_1_with_the_error_code_first_on_stderr() {
    let cases: [(&[u8], &str); 8] = [
        (b"{\"a\":1,\"a\":2}", "C14N_DUPLICATE_KEY"),
        (b"1.0", "C14N_NON_INTEGER_NUMBER"),
        (b"\xEF\xBB\xBF{}", "C14N_BOM"),
        (b"\"\xFF\"", "C14N_INVALID_UTF8"),
        (b"-0", "C14N_NEGATIVE_ZERO"),
        (b"{} {}", "C14N_TRAILING_INPUT"),
        (b"\"\\ud800\"", "C14N_LONE_SURROGATE"),
        (b"", "C14N_SYNTAX"),
    ];
    for (input, want) in cases {
        for args in [
            &["digest", "-"][..],
            &["digest", "--canonical", "-"],
            &["validate", "-"],
        ] {
            let o = run(args, input);
            assert_eq!(code(&o), 1, "{args:?} {want}");
            assert_eq!(first_word(&o), want, "{args:?}");
        }
        let o = run(&["digest", "-"], input);
        assert!(o.stdout.is_empty(), "no digest printed for invalid input");
    }
}

#[test]
fn error_output_does_not_echo_confidential_input() {
    let o = run(
        &["digest", "-"],
        br#"{"secret-token-123":1,"secret-token-123":2}"#,
    );
    assert_eq!(code(&o), 1);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("secret-token-123"));
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["digest"],
        &["bogus"],
        &["reduce", "x.json"],
        &["digest", "--domain", "other", "-"],
        &["digest", "--unknown-flag", "-"],
        &["validate"],
        &["digest", "a.json", "b.json"],
    ] {
        let o = run(args, b"{}");
        assert_eq!(code(&o), 2, "{args:?}: {o:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    let missing = run(&["digest", "/nonexistent/helmloop/input.json"], b"");
    assert_eq!(code(&missing), 2);
    assert_eq!(first_word(&missing), "IO_ERROR");
}

#[test]
fn help_and_version_exit_0() {
    let help = run(&["--help"], b"");
    assert_eq!(code(&help), 0);
    assert!(stdout(&help).contains("digest") && stdout(&help).contains("validate"));
    let version = run(&["--version"], b"");
    assert_eq!(code(&version), 0);
    assert!(stdout(&version).starts_with("helmloop "));
}

#[test]
fn validate_accepts_fixtures_and_prints_a_canonical_report() {
    for rel in [
        "records/execution-receipt-v1.json",
        "bundles/all-records.json",
        "bundles/evaluation-input.json",
    ] {
        let path = crate::fixture(rel);
        let o = run(&["validate", path.to_str().unwrap()], b"");
        assert_eq!(code(&o), 0, "{rel}: {}", String::from_utf8_lossy(&o.stdout));
        let out = stdout(&o);
        assert!(out.ends_with('\n'));
        let canonical =
            lychd_helmloop::canonicalize(out.trim_end().as_bytes()).expect("report is strict json");
        assert_eq!(canonical, out.trim_end().as_bytes(), "report is canonical");
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["valid"], true);
        assert_eq!(report["issues"], serde_json::json!([]));
    }
}

#[test]
fn validate_reports_sorted_issues_and_exits_1() {
    let bundle = crate::read_fixture("bundles/all-records.json");
    let mut j: serde_json::Value = serde_json::from_slice(&bundle).unwrap();
    j[3]["zzz"] = serde_json::json!(1);
    j[1]["issuedAt"] = serde_json::json!("yesterday");
    j[10].as_object_mut().unwrap().remove("observedAt");
    j[0]["schemaVersion"] = serde_json::json!("9.9");
    let o = run(
        &["validate", "-"],
        serde_json::to_string(&j).unwrap().as_bytes(),
    );
    assert_eq!(code(&o), 1);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["valid"], false);
    assert_eq!(report["kind"], "bundle");
    let issues = report["issues"].as_array().unwrap();
    let keys: Vec<(String, String)> = issues
        .iter()
        .map(|i| {
            (
                i["path"].as_str().unwrap().to_owned(),
                i["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_by(|a, b| {
        a.0.encode_utf16()
            .cmp(b.0.encode_utf16())
            .then(a.1.encode_utf16().cmp(b.1.encode_utf16()))
    });
    assert_eq!(keys, sorted, "issues sorted by UTF-16 code units");
    for want in [
        ("/0/schemaVersion", "PROTOCOL_VERSION_UNSUPPORTED"),
        ("/1/issuedAt", "RECORD_SCHEMA_INVALID"),
        ("/1/digest", "RECORD_DIGEST_MISMATCH"),
        ("/3/zzz", "RECORD_SCHEMA_INVALID"),
        ("/10/observedAt", "RECORD_SCHEMA_INVALID"),
    ] {
        assert!(
            keys.contains(&(want.0.to_owned(), want.1.to_owned())),
            "missing {want:?} in {keys:?}"
        );
    }
    assert_eq!(first_word(&o), keys[0].1);
}

#[test]
fn validate_of_unparsable_input_reports_the_parse_error() {
    let o = run(&["validate", "-"], b"{\"a\":1,}");
    assert_eq!(code(&o), 1);
    assert_eq!(first_word(&o), "C14N_SYNTAX");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["kind"], "unparsed");
    assert_eq!(report["issues"][0]["code"], "C14N_SYNTAX");
    assert_eq!(report["issues"][0]["offset"], 7);
}
