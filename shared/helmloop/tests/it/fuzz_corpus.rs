//! Replays `fixtures/helmloop/fuzz-corpus/` (crashers and edge inputs): no
//! entry point panics, and each input lands in its expected result class.

use std::collections::BTreeSet;
use std::panic::catch_unwind;

use lychd_helmloop::validate::validate_document;
use lychd_helmloop::{
    Domain, Omit, ParseOptions, canonicalize_with, digest_json, parse, to_canonical_vec,
};
use serde_json::Value as Json;

/// Runs every entry point on `input`; returns `ok` or the error code.
fn class_of(input: &[u8]) -> String {
    let tree = parse(input);
    let streamed = canonicalize_with(input, ParseOptions::default(), Omit::Nothing);
    let digest = digest_json(Domain::Record, input);
    let report = validate_document(input);
    match (&tree, &streamed) {
        (Ok(v), Ok(bytes)) => {
            assert_eq!(
                &to_canonical_vec(v).expect("parsed value is canonical"),
                bytes
            );
            assert!(digest.is_ok());
            // The canonical form is a fixed point.
            assert_eq!(
                &lychd_helmloop::canonicalize(bytes).expect("re-parses"),
                bytes
            );
            "ok".to_owned()
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "tree and streaming parsers disagree");
            assert_eq!(digest.err(), Some(*a));
            assert_eq!(report.first_code(), Some(a.code().as_str()));
            a.code().as_str().to_owned()
        }
        _ => panic!("tree and streaming parsers disagree on acceptance"),
    }
}

#[test]
fn fuzz_corpus_replays_without_panic_in_expected_class() {
    let dir = crate::fixture("fuzz-corpus");
    let manifest: Json = serde_json::from_slice(&crate::read_fixture("fuzz-corpus/expected.json"))
        .expect("expected.json is json");
    let expected = manifest["expected"].as_object().expect("expected map");
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("fuzz-corpus exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "expected.json")
        .collect();
    let listed: BTreeSet<String> = expected.keys().cloned().collect();
    assert_eq!(on_disk, listed, "corpus files and expected.json disagree");
    assert!(listed.len() >= 30, "corpus too small");
    let mut failures = Vec::new();
    for (name, want) in expected {
        let input = std::fs::read(dir.join(name)).expect("corpus file");
        match catch_unwind(|| class_of(&input)) {
            Ok(got) if got == want.as_str().unwrap_or_default() => {}
            Ok(got) => failures.push(format!("{name}: got {got}, want {want}")),
            Err(_) => failures.push(format!("{name}: panicked")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
