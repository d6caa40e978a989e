//! Runs every vector of `fixtures/helmloop/canonical-vectors.json`.

use std::collections::BTreeSet;

use lychd_helmloop::{
    Domain, ErrorCode, Omit, ParseOptions, binding_digest, canonicalize_with, digest_json_with,
    parse_with, record_digest, to_canonical_vec, to_canonical_vec_omit,
};
use serde_json::Value as Json;

struct Vector {
    name: String,
    input: Vec<u8>,
    options: ParseOptions,
    body: Json,
}

fn load() -> (Json, Vec<Vector>) {
    let doc: Json = serde_json::from_slice(&crate::read_fixture("canonical-vectors.json"))
        .expect("canonical-vectors.json is json");
    let mut out = Vec::new();
    for v in doc["vectors"].as_array().expect("vectors array") {
        let name = v["name"].as_str().expect("name").to_owned();
        let input = match (v.get("input"), v.get("inputHex")) {
            (Some(Json::String(s)), None) => s.as_bytes().to_vec(),
            (None, Some(Json::String(h))) => hex::decode(h).expect("inputHex is hex"),
            _ => panic!("vector {name}: exactly one of input/inputHex"),
        };
        let options = ParseOptions {
            max_bytes: v
                .get("maxBytes")
                .and_then(Json::as_u64)
                .map_or(lychd_helmloop::DEFAULT_MAX_BYTES, |n| n as usize),
        };
        out.push(Vector {
            name,
            input,
            options,
            body: v.clone(),
        });
    }
    (doc, out)
}

fn check_positive(v: &Vector) -> Result<(), String> {
    let expect = |k: &str| {
        v.body[k]
            .as_str()
            .map(str::to_owned)
            .ok_or(format!("no {k}"))
    };
    let canonical = expect("canonical")?;
    let record_canonical = v.body["recordCanonical"]
        .as_str()
        .map_or(canonical.clone(), str::to_owned);
    let record_digest_s = expect("recordDigest")?;
    let binding_digest_s = expect("bindingDigest")?;

    let streamed = canonicalize_with(&v.input, v.options, Omit::Nothing)
        .map_err(|e| format!("streaming canonicalize failed: {e}"))?;
    if streamed != canonical.as_bytes() {
        return Err(format!(
            "streamed canonical {:?}",
            String::from_utf8_lossy(&streamed)
        ));
    }
    let streamed_record = canonicalize_with(&v.input, v.options, Omit::TopLevelDigest)
        .map_err(|e| format!("record canonicalize failed: {e}"))?;
    if streamed_record != record_canonical.as_bytes() {
        return Err("streamed record canonical differs".into());
    }
    let tree = parse_with(&v.input, v.options).map_err(|e| format!("parse failed: {e}"))?;
    if to_canonical_vec(&tree).map_err(|e| e.to_string())? != canonical.as_bytes() {
        return Err("tree canonical differs".into());
    }
    if to_canonical_vec_omit(&tree, Omit::TopLevelDigest).map_err(|e| e.to_string())?
        != record_canonical.as_bytes()
    {
        return Err("tree record canonical differs".into());
    }
    let rd = digest_json_with(Domain::Record, &v.input, v.options).map_err(|e| e.to_string())?;
    let bd = digest_json_with(Domain::Binding, &v.input, v.options).map_err(|e| e.to_string())?;
    if rd.to_string() != record_digest_s || bd.to_string() != binding_digest_s {
        return Err(format!("digests differ: record {rd} binding {bd}"));
    }
    if record_digest(&tree).map_err(|e| e.to_string())?.to_string() != record_digest_s
        || binding_digest(&tree)
            .map_err(|e| e.to_string())?
            .to_string()
            != binding_digest_s
    {
        return Err("value digests differ".into());
    }
    // Canonical text is a fixed point.
    let again = canonicalize_with(canonical.as_bytes(), ParseOptions::default(), Omit::Nothing)
        .map_err(|e| format!("canonical text does not re-parse: {e}"))?;
    if again != canonical.as_bytes() {
        return Err("canonical text is not a fixed point".into());
    }
    Ok(())
}

fn check_negative(v: &Vector) -> Result<(), String> {
    let code = v.body["errorCode"].as_str().ok_or("no errorCode")?;
    let offset = v.body["errorOffset"].as_u64().ok_or("no errorOffset")? as usize;
    let results = [
        parse_with(&v.input, v.options).map(|_| ()),
        canonicalize_with(&v.input, v.options, Omit::Nothing).map(|_| ()),
        canonicalize_with(&v.input, v.options, Omit::TopLevelDigest).map(|_| ()),
        digest_json_with(Domain::Record, &v.input, v.options).map(|_| ()),
    ];
    for r in results {
        match r {
            Ok(()) => return Err("accepted".into()),
            Err(e) => {
                if e.code().as_str() != code || e.offset() != Some(offset) {
                    return Err(format!(
                        "got {} at {:?}, want {code} at {offset}",
                        e.code(),
                        e.offset()
                    ));
                }
                if !e.to_string().starts_with(code) {
                    return Err("display does not start with the code".into());
                }
            }
        }
    }
    Ok(())
}

#[test]
fn every_canonical_vector_holds() {
    let (_, vectors) = load();
    let mut failures = Vec::new();
    for v in &vectors {
        let r = if v.body.get("errorCode").is_some() {
            check_negative(v)
        } else {
            check_positive(v)
        };
        if let Err(e) = r {
            failures.push(format!("{}: {e}", v.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} vector(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn vectors_cover_every_rule_and_count() {
    let (doc, vectors) = load();
    assert!(vectors.len() >= 80, "only {} vectors", vectors.len());
    let names: BTreeSet<&str> = vectors.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names.len(), vectors.len(), "vector names are unique");
    let codes: BTreeSet<&str> = vectors
        .iter()
        .filter_map(|v| v.body["errorCode"].as_str())
        .collect();
    for c in ErrorCode::ALL {
        assert!(codes.contains(c.as_str()), "no negative vector for {c}");
    }
    let positives = vectors
        .iter()
        .filter(|v| v.body.get("canonical").is_some())
        .count();
    assert_eq!(doc["positiveCount"].as_u64(), Some(positives as u64));
    assert_eq!(
        doc["negativeCount"].as_u64(),
        Some((vectors.len() - positives) as u64)
    );
    // Both sort traps, every escape, both integer bounds, top-level-only digest removal.
    for required in [
        "sort-trap-astral-vs-e000-escaped",
        "sort-trap-integer-like",
        "escape-b",
        "escape-f",
        "escape-n",
        "escape-r",
        "escape-t",
        "escape-quote",
        "escape-backslash",
        "escape-solidus",
        "escape-u-controls",
        "escape-surrogate-pair",
        "max-safe",
        "min-safe",
        "max-safe-plus-one",
        "min-safe-minus-one",
        "digest-nested-kept",
        "digest-top-level-removed",
    ] {
        assert!(names.contains(required), "missing vector {required}");
    }
}
