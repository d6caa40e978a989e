//! The HelmLoop office as a real process, driven with grpcurl exactly as `docs/helmloop.md`
//! shows: `Digest` of a record file and `Reduce` of an evaluation input file, each `bytes`
//! field given as `base64 -w0 FILE`; the answers are the library's own.

use lychd_runtime::Office;
use lychd_testkit::Sandbox;

use crate::text;

/// The commands of `docs/helmloop.md` ("grpcurl"), with `$ADDR` and `$TOKEN` set, run from
/// the repository root.
const DIGEST: &str = r#"grpcurl -plaintext -H "authorization: Bearer $TOKEN" \
  -d "{\"document\": \"$(base64 -w0 fixtures/helmloop/records/outcome-contract-v1.json)\"}" \
  "$ADDR" lychd.helmloop.v1.HelmLoop/Digest"#;
const REDUCE: &str = r#"grpcurl -plaintext -H "authorization: Bearer $TOKEN" \
  -d "{\"input\": \"$(base64 -w0 fixtures/helmloop/bundles/evaluation-input.json)\"}" \
  "$ADDR" lychd.helmloop.v1.HelmLoop/Reduce"#;

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("invariant: the e2e crate is tests/ in the workspace")
        .to_owned()
}

fn sh(script: &str, addr: &str, token: &str) -> std::process::Output {
    let grpcurl = lychd_testkit::grpcurl();
    let path = format!(
        "{}:{}",
        grpcurl.parent().expect("grpcurl dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(root())
        .env("PATH", path)
        .env("ADDR", addr)
        .env("TOKEN", token)
        .output()
        .expect("run sh")
}

#[test]
fn the_documented_commands_are_the_ones_tested() {
    let doc = std::fs::read_to_string(root().join("docs/helmloop.md")).expect("docs/helmloop.md");
    for command in [DIGEST, REDUCE] {
        assert!(doc.contains(command), "docs/helmloop.md shows:\n{command}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn grpcurl_digests_and_reduces_json_given_as_base64() {
    let mut sandbox = Sandbox::builder().office(Office::HelmLoop).start().await;
    let mut admin = sandbox.admin();
    for (action, object) in [
        ("helmloop:check", "office:helmloop"),
        ("helmloop:reduce", "office:helmloop"),
    ] {
        let verb = action.split_once(':').map(|(_, v)| v).unwrap_or(action);
        admin
            .ensure_assignment(&sandbox.operator_id, action, object, "helmloop", verb)
            .await
            .expect("assign");
    }
    let addr = sandbox.office(Office::HelmLoop).addr.to_string();

    let out = sh(DIGEST, &addr, &sandbox.token);
    assert!(out.status.success(), "Digest: {}", text(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("grpcurl JSON");
    let record = std::fs::read(root().join("fixtures/helmloop/records/outcome-contract-v1.json"))
        .expect("fixture");
    let value = lychd_helmloop::parse(&record).expect("record");
    assert_eq!(
        answer["digest"].as_str(),
        value.get("digest").and_then(lychd_helmloop::Value::as_str),
        "the record's own digest"
    );

    let out = sh(REDUCE, &addr, &sandbox.token);
    assert!(out.status.success(), "Reduce: {}", text(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("grpcurl JSON");
    let input = std::fs::read(root().join("fixtures/helmloop/bundles/evaluation-input.json"))
        .expect("bundle");
    let expected = lychd_helmloop::reduce_bytes(&input).expect("input parses");
    assert_eq!(
        answer["summary"]["inputDigest"].as_str(),
        Some(expected.input_digest.render().as_str())
    );
    assert_eq!(
        answer["summary"]["disposition"].as_str(),
        Some(format!("DISPOSITION_{}", expected.disposition.as_str()).as_str())
    );
    // The result bytes, decoded as an operator would (`| jq -r .result | base64 -d`).
    let result_b64 = answer["result"].as_str().expect("result");
    let decoded = std::process::Command::new("sh")
        .arg("-c")
        .arg("printf %s \"$B64\" | base64 -d")
        .env("B64", result_b64)
        .output()
        .expect("base64 -d");
    assert_eq!(text(&decoded.stdout), expected.to_json());

    // Malformed JSON is refused with its C14N code, also through grpcurl.
    let bad = sh(
        r#"printf '{"a":1,"a":2}' > "$TMPDIR_/bad.json" && grpcurl -plaintext -H "authorization: Bearer $TOKEN" -d "{\"document\": \"$(base64 -w0 "$TMPDIR_/bad.json")\"}" "$ADDR" lychd.helmloop.v1.HelmLoop/Digest"#
            .replace("$TMPDIR_", &sandbox.dir.path().display().to_string())
            .as_str(),
        &addr,
        &sandbox.token,
    );
    assert!(!bad.status.success());
    let err = text(&bad.stderr);
    assert!(
        err.contains("InvalidArgument") && err.contains("C14N_DUPLICATE_KEY"),
        "{err}"
    );
    sandbox.stop().await;
}
