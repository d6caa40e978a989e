//! The portability gate (spec §9): one case per rule, and one passing pair
//! built here. The receipts are built in the test, sealed with their record
//! digest, and bound in a host registry the test also builds.

use std::process::Command;

use lychd_helmloop::portability::{GateReport, Rule, gate};
use lychd_helmloop::{Map, Value, binding_digest, parse, record_digest, to_canonical_vec};

const BIN: &str = env!("CARGO_BIN_EXE_helmloop");
const EVALUATED_AT: &str = "2026-12-01T12:00:00.000Z";
const DAY_MS: i64 = 86_400_000;

fn d(tag: &str) -> String {
    binding_digest(&Value::from(tag)).expect("digest").render()
}

fn obj(members: &[(&str, Value)]) -> Value {
    let mut m = Map::new();
    for (k, v) in members {
        m.insert(*k, v.clone());
    }
    Value::Object(m)
}

fn policy() -> Value {
    obj(&[
        ("id", "helmloop-portability-policy-1".into()),
        ("protocolVersion", "0.1".into()),
        ("schemaBundleDigest", d("schema-bundle").into()),
        ("fixtureSetId", "helmloop-adapter-selection-v0.1".into()),
        ("fixtureSetDigest", d("fixture-set").into()),
        ("semanticCaseResultsDigest", d("results").into()),
        ("maxReceiptAgeMs", Value::Int(30 * DAY_MS)),
        (
            "trustedVerifiers",
            Value::Array(vec!["host-verifier-1".into()]),
        ),
    ])
}

/// One implementation's identity: every independence dimension from `tag`.
struct Runtime {
    family: &'static str,
    implementation: &'static str,
    instance: &'static str,
    identity: &'static str,
    repository: &'static str,
    tree: &'static str,
    adapter: &'static str,
    adapter_bytes: &'static str,
}

const ALPHA: Runtime = Runtime {
    family: "better-workflows",
    implementation: "bw-rust",
    instance: "bw-eu-1",
    identity: "bw-rust-build-77",
    repository: "https://git.example/bw/bw-rust",
    tree: "bw-rust-tree-77",
    adapter: "helmloop-better-workflows",
    adapter_bytes: "bw-adapter-bytes",
};

const BETA: Runtime = Runtime {
    family: "temporal-like",
    implementation: "tl-go",
    instance: "tl-us-2",
    identity: "tl-go-build-12",
    repository: "https://git.example/tl/tl-go",
    tree: "tl-go-tree-12",
    adapter: "helmloop-standalone",
    adapter_bytes: "standalone-adapter-bytes",
};

fn receipt(id: &str, rt: &Runtime, issued: &str) -> Value {
    let r = obj(&[
        ("receiptType", "PortabilityReceiptV1".into()),
        ("schemaVersion", "0.1".into()),
        ("id", id.into()),
        ("issuedAt", issued.into()),
        ("evidenceClass", "runtime-observation".into()),
        ("observationMode", "live-runtime".into()),
        ("fixtureDerived", false.into()),
        (
            "runtime",
            obj(&[
                ("family", rt.family.into()),
                ("implementationId", rt.implementation.into()),
                ("instanceId", rt.instance.into()),
                ("identityDigest", d(rt.identity).into()),
            ]),
        ),
        (
            "sourceBinding",
            obj(&[
                ("repository", rt.repository.into()),
                ("revision", format!("{}-rev", rt.implementation).into()),
                ("treeDigest", d(rt.tree).into()),
            ]),
        ),
        (
            "adapter",
            obj(&[
                ("id", rt.adapter.into()),
                ("digest", d(rt.adapter_bytes).into()),
                ("mappingId", rt.adapter.into()),
                (
                    "mappingDigest",
                    d(&format!("{}-mapping", rt.adapter)).into(),
                ),
            ]),
        ),
        (
            "validator",
            obj(&[
                ("id", "helmloop-rs".into()),
                ("digest", d("validator").into()),
            ]),
        ),
        ("protocolVersion", "0.1".into()),
        ("schemaBundleDigest", d("schema-bundle").into()),
        ("fixtureSetId", "helmloop-adapter-selection-v0.1".into()),
        ("fixtureSetDigest", d("fixture-set").into()),
        (
            "acceptancePolicyDigest",
            binding_digest(&policy()).expect("d").render().into(),
        ),
        (
            "caseResults",
            obj(&[
                ("format", "helmloop-semantic-case-results/v1".into()),
                ("digest", d("results").into()),
                ("caseCount", Value::Int(15)),
                ("failureCount", Value::Int(0)),
            ]),
        ),
        (
            "producerVerification",
            obj(&[
                ("receiptDigest", d(&format!("{id}-verification")).into()),
                ("verifierId", "host-verifier-1".into()),
            ]),
        ),
        (
            "timing",
            obj(&[
                ("startedAt", "2026-10-31T09:00:00.000Z".into()),
                ("finishedAt", "2026-10-31T09:05:00.000Z".into()),
            ]),
        ),
        (
            "limitations",
            Value::Array(vec![
                "one region; the 15 selected semantic cases only".into(),
            ]),
        ),
    ]);
    reseal(r)
}

fn reseal(mut r: Value) -> Value {
    let digest = record_digest(&r).expect("digest").render();
    if let Value::Object(m) = &mut r {
        m.insert("digest", digest.into());
    }
    r
}

fn set(r: &mut Value, path: &[&str], to: Value) {
    let Value::Object(m) = r else {
        panic!("object")
    };
    if path.len() == 1 {
        m.insert(path[0], to);
    } else {
        set(m.get_mut(path[0]).expect("member"), &path[1..], to);
    }
}

/// The host registry entry binding `r` exactly.
fn entry(r: &Value) -> Value {
    let s = |p: &[&str]| {
        let mut v = r;
        for k in p {
            v = v.get(k).expect("member");
        }
        v.clone()
    };
    obj(&[
        ("receiptId", s(&["id"])),
        ("receiptDigest", s(&["digest"])),
        ("runtimeIdentityDigest", s(&["runtime", "identityDigest"])),
        (
            "producerVerificationReceiptDigest",
            s(&["producerVerification", "receiptDigest"]),
        ),
        ("verifierId", s(&["producerVerification", "verifierId"])),
    ])
}

fn input(receipts: &[Value], registry: &[Value]) -> Value {
    obj(&[
        ("format", "helmloop-portability-input/v1".into()),
        ("evaluatedAt", EVALUATED_AT.into()),
        ("acceptancePolicy", policy()),
        ("receipts", Value::Array(receipts.to_vec())),
        ("registry", Value::Array(registry.to_vec())),
    ])
}

/// Every receipt registered by the host.
fn registered(receipts: &[Value]) -> GateReport {
    let registry: Vec<Value> = receipts.iter().map(entry).collect();
    gate(&input(receipts, &registry)).expect("gate runs")
}

fn failures(r: &GateReport, index: usize) -> Vec<Rule> {
    r.receipts[index].failures.clone()
}

#[test]
fn a_fully_independent_fresh_host_verified_pair_passes() {
    let a = receipt("receipt-alpha", &ALPHA, "2026-11-30T10:00:00.000Z");
    let b = receipt("receipt-beta", &BETA, "2026-11-29T10:00:00.000Z");
    let r = registered(&[a, b]);
    assert!(r.passed(), "{}", r.to_json());
    assert_eq!(r.qualifying(), vec![0, 1]);
    assert_eq!(r.independent_pair(), Some((0, 1)));
    let v = r.to_value();
    assert!(
        v.get("scope")
            .and_then(Value::as_str)
            .is_some_and(|s| s.contains("not production readiness"))
    );
}

#[test]
fn two_aliases_of_one_implementation_are_not_independent() {
    // Relabelled family, implementation id, instance and adapter id: the same bytes.
    let alias = Runtime {
        family: "bw-renamed",
        implementation: "bw-rust-copy",
        instance: "bw-eu-1-alias",
        repository: "https://mirror.example/bw/bw-rust",
        adapter: "helmloop-bw-alias",
        ..ALPHA
    };
    let a = receipt("receipt-alpha", &ALPHA, "2026-11-30T10:00:00.000Z");
    let b = receipt("receipt-alias", &alias, "2026-11-30T11:00:00.000Z");
    let r = registered(&[a, b]);
    assert!(!r.passed());
    assert_eq!(r.qualifying(), vec![0, 1], "both are valid receipts");
    assert_eq!(r.gate_failures, vec![Rule::NoIndependentPair]);
    assert_eq!(
        r.pairs[0].shared,
        vec!["runtimeIdentityDigest", "sourceTreeDigest", "adapterDigest"]
    );
}

#[test]
fn marginal_diversity_across_three_receipts_without_an_independent_pair_fails() {
    // A and B share only the adapter, B and C only the repository, A and C only the family:
    // every dimension has two values across the three, but no pair differs in all eight.
    let a_rt = Runtime {
        adapter: "shared-adapter",
        adapter_bytes: "shared-adapter-bytes",
        ..ALPHA
    };
    let b_rt = Runtime {
        repository: "https://git.example/shared",
        adapter: "shared-adapter",
        adapter_bytes: "shared-adapter-bytes",
        ..BETA
    };
    let c_rt = Runtime {
        family: ALPHA.family,
        implementation: "third-impl",
        instance: "third-instance",
        identity: "third-build",
        repository: "https://git.example/shared",
        tree: "third-tree",
        adapter: "third-adapter",
        adapter_bytes: "third-adapter-bytes",
    };
    let rs = [
        receipt("receipt-a", &a_rt, "2026-11-30T10:00:00.000Z"),
        receipt("receipt-b", &b_rt, "2026-11-30T10:00:00.000Z"),
        receipt("receipt-c", &c_rt, "2026-11-30T10:00:00.000Z"),
    ];
    let r = registered(&rs);
    assert_eq!(r.qualifying(), vec![0, 1, 2]);
    assert_eq!(r.gate_failures, vec![Rule::NoIndependentPair]);
    assert_eq!(r.pairs.len(), 3);
    assert!(
        r.pairs.iter().all(|p| !p.shared.is_empty()),
        "{:?}",
        r.pairs
    );
    let shared: Vec<_> = r.pairs.iter().map(|p| p.shared.clone()).collect();
    assert_eq!(
        shared,
        vec![
            vec!["adapterId", "adapterDigest"],
            vec!["runtimeFamily"],
            vec!["sourceRepository"],
        ]
    );
}

#[test]
fn a_self_declared_verification_without_a_host_binding_counts_zero() {
    let a = receipt("receipt-alpha", &ALPHA, "2026-11-30T10:00:00.000Z");
    let b = receipt("receipt-beta", &BETA, "2026-11-30T10:00:00.000Z");
    // The host registered only alpha; beta declares a verification nobody bound.
    let r = gate(&input(&[a.clone(), b.clone()], &[entry(&a)])).expect("runs");
    assert_eq!(failures(&r, 1), vec![Rule::NotHostVerified]);
    assert_eq!(
        r.gate_failures,
        vec![Rule::TooFewQualifying, Rule::NoIndependentPair]
    );
    // A registry entry that differs in one member of the tuple binds nothing either.
    let mut wrong = entry(&b);
    set(
        &mut wrong,
        &["producerVerificationReceiptDigest"],
        d("other").into(),
    );
    let r = gate(&input(&[a.clone(), b.clone()], &[entry(&a), wrong])).expect("runs");
    assert_eq!(failures(&r, 1), vec![Rule::NotHostVerified]);
    // A bound entry whose verifier the policy does not trust.
    let mut untrusted = receipt("receipt-beta", &BETA, "2026-11-30T10:00:00.000Z");
    set(
        &mut untrusted,
        &["producerVerification", "verifierId"],
        "self".into(),
    );
    let untrusted = reseal(untrusted);
    let r = registered(&[a, untrusted]);
    assert_eq!(failures(&r, 1), vec![Rule::VerifierUntrusted]);
}

#[test]
fn a_stale_receipt_counts_zero() {
    let a = receipt("receipt-alpha", &ALPHA, "2026-11-30T10:00:00.000Z");
    // Exactly the maximum age (30 days) before evaluatedAt: stale.
    let b = receipt("receipt-beta", &BETA, "2026-11-01T12:00:00.000Z");
    let r = registered(&[a.clone(), b]);
    assert_eq!(failures(&r, 1), vec![Rule::Stale]);
    assert!(!r.passed());
    // One millisecond younger: fresh.
    let b = receipt("receipt-beta", &BETA, "2026-11-01T12:00:00.001Z");
    let r = registered(&[a.clone(), b]);
    assert!(r.passed(), "{}", r.to_json());
    // Issued after evaluatedAt: not fresh either.
    let b = receipt("receipt-beta", &BETA, "2026-12-01T12:00:00.001Z");
    assert_eq!(failures(&registered(&[a, b]), 1), vec![Rule::Future]);
}

#[test]
fn a_result_digest_mismatch_counts_zero() {
    let a = receipt("receipt-alpha", &ALPHA, "2026-11-30T10:00:00.000Z");
    let mut b = receipt("receipt-beta", &BETA, "2026-11-30T10:00:00.000Z");
    set(
        &mut b,
        &["caseResults", "digest"],
        d("other-results").into(),
    );
    let r = registered(&[a, reseal(b)]);
    assert_eq!(failures(&r, 1), vec![Rule::ResultDigestMismatch]);
    assert_eq!(
        r.gate_failures,
        vec![Rule::TooFewQualifying, Rule::NoIndependentPair]
    );
}

/// A change to a receipt.
type Mutation = Box<dyn Fn(&mut Value)>;

#[test]
fn every_other_receipt_rule_names_itself() {
    let a = receipt("receipt-alpha", &ALPHA, "2026-11-30T10:00:00.000Z");
    let cases: Vec<(&str, Mutation, Rule)> = vec![
        (
            "fixture",
            Box::new(|r| set(r, &["evidenceClass"], "fixture".into())),
            Rule::NotLiveRuntime,
        ),
        (
            "synthetic",
            Box::new(|r| set(r, &["observationMode"], "synthetic".into())),
            Rule::NotLiveRuntime,
        ),
        (
            "fixture-derived",
            Box::new(|r| set(r, &["fixtureDerived"], true.into())),
            Rule::NotLiveRuntime,
        ),
        (
            "protocol",
            Box::new(|r| set(r, &["protocolVersion"], "0.2".into())),
            Rule::ProtocolMismatch,
        ),
        (
            "schema",
            Box::new(|r| set(r, &["schemaBundleDigest"], d("x").into())),
            Rule::SchemaBundleMismatch,
        ),
        (
            "fixture-set",
            Box::new(|r| set(r, &["fixtureSetDigest"], d("x").into())),
            Rule::FixtureSetMismatch,
        ),
        (
            "policy",
            Box::new(|r| set(r, &["acceptancePolicyDigest"], d("x").into())),
            Rule::AcceptancePolicyMismatch,
        ),
        (
            "failed",
            Box::new(|r| set(r, &["caseResults", "failureCount"], Value::Int(1))),
            Rule::CasesFailed,
        ),
        (
            "limitations",
            Box::new(|r| set(r, &["limitations"], Value::Array(vec![]))),
            Rule::LimitationsMissing,
        ),
        (
            "timing",
            Box::new(|r| {
                set(
                    r,
                    &["timing", "finishedAt"],
                    "2026-10-31T08:00:00.000Z".into(),
                )
            }),
            Rule::TimingInvalid,
        ),
        (
            "unknown-member",
            Box::new(|r| set(r, &["extra"], true.into())),
            Rule::SchemaInvalid,
        ),
    ];
    for (name, mutate, rule) in cases {
        let mut b = receipt("receipt-beta", &BETA, "2026-11-30T10:00:00.000Z");
        mutate(&mut b);
        let r = registered(&[a.clone(), reseal(b)]);
        assert_eq!(failures(&r, 1), vec![rule], "{name}");
        assert!(!r.passed(), "{name}");
    }
    // A body changed after sealing.
    let mut b = receipt("receipt-beta", &BETA, "2026-11-30T10:00:00.000Z");
    let registry = vec![entry(&a), entry(&b)];
    set(
        &mut b,
        &["limitations"],
        Value::Array(vec!["edited".into()]),
    );
    let r = gate(&input(&[a.clone(), b], &registry)).expect("runs");
    assert!(failures(&r, 1).contains(&Rule::DigestMismatch));
    // The same receipt twice is one observation.
    let r = registered(&[a.clone(), a]);
    assert_eq!(failures(&r, 1), vec![Rule::Duplicate]);
}

#[test]
fn cli_portability_names_the_failed_rule_and_exits_by_verdict() {
    let dir = std::env::temp_dir().join(format!("helmloop-portability-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let a = receipt("receipt-alpha", &ALPHA, "2026-11-30T10:00:00.000Z");
    let b = receipt("receipt-beta", &BETA, "2026-11-30T10:00:00.000Z");
    let pass = dir.join("pass.json");
    let regs = [entry(&a), entry(&b)];
    std::fs::write(
        &pass,
        to_canonical_vec(&input(&[a.clone(), b.clone()], &regs)).expect("c"),
    )
    .expect("w");
    let o = Command::new(BIN)
        .args(["portability", pass.to_str().expect("utf8")])
        .output()
        .expect("runs");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = parse(&o.stdout[..o.stdout.len() - 1]).expect("json");
    assert_eq!(v.get("passed"), Some(&Value::Bool(true)));
    let fail = dir.join("fail.json");
    std::fs::write(
        &fail,
        to_canonical_vec(&input(&[a.clone(), b], &[entry(&a)])).expect("c"),
    )
    .expect("w");
    let o = Command::new(BIN)
        .args(["portability", fail.to_str().expect("utf8")])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.starts_with("PORTABILITY_TOO_FEW_QUALIFYING"),
        "{stderr}"
    );
    let v = parse(&o.stdout[..o.stdout.len() - 1]).expect("json");
    let beta = &v
        .get("receipts")
        .and_then(Value::as_array)
        .expect("receipts")[1];
    assert_eq!(beta.get("id"), Some(&Value::from("receipt-beta")));
    assert_eq!(
        beta.get("failures")
            .and_then(Value::as_array)
            .map(|f| f[0].clone()),
        Some(obj(&[
            ("code", "PORTABILITY_NOT_HOST_VERIFIED".into()),
            ("rule", "host-registry".into())
        ]))
    );
    // An input that is not a gate input at all.
    let bad = dir.join("bad.json");
    std::fs::write(&bad, b"{\"format\":\"other\"}").expect("w");
    let o = Command::new(BIN)
        .args(["portability", bad.to_str().expect("utf8")])
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("PORTABILITY_INPUT_INVALID"));
    std::fs::remove_dir_all(&dir).expect("clean up");
}
