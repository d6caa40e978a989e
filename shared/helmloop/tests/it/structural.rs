//! The structural validator (the reducer's fast schema check) against the
//! JSON Schema interpreter it replaces on the hot path: every shape compiles,
//! and both give the same verdict on every conformance input, record, context
//! and result, on every single mutation of every record fixture, on random
//! multi-mutations, and on a grid of timestamps.

use std::collections::BTreeSet;

use lychd_helmloop::reduce::reduce;
use lychd_helmloop::schema::{self, BUNDLE_JSON, RecordType, Shape};
use lychd_helmloop::{MAX_SAFE_INTEGER, Map, Value, parse};
use proptest::prelude::*;

use crate::core_suite::load_cases;

const SHAPES: [Shape; 13] = [
    Shape::Record(RecordType::OutcomeContract),
    Shape::Record(RecordType::AuthorityGrant),
    Shape::Record(RecordType::ExecutionReceipt),
    Shape::Record(RecordType::EvidenceRecord),
    Shape::Record(RecordType::AssuranceDecision),
    Shape::Record(RecordType::PromotionDecision),
    Shape::Record(RecordType::ReconciliationRecord),
    Shape::Record(RecordType::LearningSignal),
    Shape::AnyRecord,
    Shape::EvaluationContext,
    Shape::EvaluationInput,
    Shape::ReductionResult,
    Shape::PortabilityReceipt,
];

/// Both validators on one instance; returns the verdict.
fn agree(shape: Shape, v: &Value, what: &dyn Fn() -> String) -> bool {
    let interpreted = schema::is_valid(shape, &v.to_serde());
    let structural = schema::structural_is_valid(shape, v).expect("shape compiles");
    assert_eq!(
        structural,
        interpreted,
        "{shape:?} disagrees on {}: {}",
        what(),
        lychd_helmloop::to_canonical_string(v).unwrap_or_default()
    );
    assert_eq!(schema::is_valid_value(shape, v), interpreted);
    structural
}

fn record_shape(v: &Value) -> Option<Shape> {
    v.get("recordType")
        .and_then(Value::as_str)
        .and_then(RecordType::from_name)
        .map(Shape::Record)
}

/// The record fixtures (one or more per type).
fn record_fixtures() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(crate::fixture("records")).expect("records dir") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let v = parse(&std::fs::read(&path).expect("readable")).expect("parses");
        out.push((name, v));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 8);
    out
}

#[test]
fn every_shape_compiles_to_the_structural_validator() {
    for shape in SHAPES {
        assert!(
            schema::structural_is_valid(shape, &Value::Null).is_some(),
            "{shape:?} does not compile structurally"
        );
    }
}

#[test]
fn structural_validator_agrees_on_the_conformance_suite() {
    let (_, cases) = load_cases();
    let mut seen = BTreeSet::new();
    let mut valid_records = 0;
    for (c, _) in &cases {
        let input = c.input.value();
        let id = || c.case_id.clone();
        agree(Shape::EvaluationInput, input, &id);
        if let Some(ctx) = input.get("context") {
            agree(Shape::EvaluationContext, ctx, &id);
        }
        agree(Shape::ReductionResult, &reduce(&c.input).to_value(), &id);
        let records = input
            .get("records")
            .and_then(Value::as_array)
            .unwrap_or(&[]);
        for r in records {
            if !seen.insert(lychd_helmloop::to_canonical_vec(r).unwrap_or_default()) {
                continue;
            }
            for shape in &SHAPES[..9] {
                let ok = agree(*shape, r, &id);
                valid_records += usize::from(ok && Some(*shape) == record_shape(r));
            }
        }
    }
    assert!(valid_records > 20, "the suite has valid records");
}

/// One step into a value.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Every path inside `v` (not the root).
fn paths(v: &Value, prefix: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter() {
                prefix.push(Seg::Key(k.to_owned()));
                out.push(prefix.clone());
                paths(x, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                prefix.push(Seg::Index(i));
                out.push(prefix.clone());
                paths(x, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn at_mut<'a>(v: &'a mut Value, path: &[Seg]) -> &'a mut Value {
    path.iter().fold(v, |cur, seg| match (cur, seg) {
        (Value::Object(m), Seg::Key(k)) => m.get_mut(k).expect("path exists"),
        (Value::Array(a), Seg::Index(i)) => &mut a[*i],
        _ => panic!("path exists"),
    })
}

/// One mutation of the node at a path.
#[derive(Debug, Clone)]
enum Op {
    Replace(Value),
    Remove,
    AddMember,
    DuplicateFirst,
    Clear,
}

fn apply(v: &Value, path: &[Seg], op: &Op) -> Value {
    let mut out = v.clone();
    match op {
        Op::Replace(x) => *at_mut(&mut out, path) = x.clone(),
        Op::Remove => {
            let (last, parent) = path.split_last().expect("not the root");
            match (at_mut(&mut out, parent), last) {
                (Value::Object(m), Seg::Key(k)) => {
                    m.remove(k);
                }
                (Value::Array(a), Seg::Index(i)) => {
                    a.remove(*i);
                }
                _ => unreachable!(),
            }
        }
        Op::AddMember => {
            if let Value::Object(m) = at_mut(&mut out, path) {
                m.insert("unexpectedMember", Value::Int(1));
            }
        }
        Op::DuplicateFirst => {
            if let Value::Array(a) = at_mut(&mut out, path)
                && let Some(first) = a.first().cloned()
            {
                a.push(first);
            }
        }
        Op::Clear => match at_mut(&mut out, path) {
            Value::Array(a) => a.clear(),
            Value::Object(m) => *m = Map::new(),
            _ => {}
        },
    }
    out
}

/// Every string constant of the bundle (`const`, `enum`), so mutations reach
/// every `if` condition and enumeration.
fn schema_constants() -> BTreeSet<String> {
    /// Strings inside `const`/`enum` values (`constant`), and the schemas
    /// nested anywhere else.
    fn walk(j: &serde_json::Value, constant: bool, out: &mut BTreeSet<String>) {
        match j {
            serde_json::Value::String(s) if constant => {
                out.insert(s.clone());
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, constant, out)),
            serde_json::Value::Object(o) => {
                for (k, x) in o {
                    walk(x, constant || k == "const" || k == "enum", out);
                }
            }
            _ => {}
        }
    }
    let bundle: serde_json::Value = serde_json::from_str(BUNDLE_JSON).expect("bundle");
    let mut out = BTreeSet::new();
    walk(&bundle, false, &mut out);
    assert!(out.contains("consumed") && out.contains("promote") && out.contains("accepted"));
    out
}

/// Replacement values: every type, boundary strings and integers (the
/// schema's own constants come separately).
fn pool() -> Vec<Value> {
    let s = |x: &str| Value::from(x);
    let out = vec![
        Value::Null,
        Value::Bool(true),
        Value::Bool(false),
        Value::Int(0),
        Value::Int(1),
        Value::Int(-1),
        Value::Int(MAX_SAFE_INTEGER),
        Value::Int(-MAX_SAFE_INTEGER),
        s(""),
        s("x"),
        s("é"),
        s("-leading-dash"),
        s("a b"),
        s(&"a".repeat(128)),
        s(&"a".repeat(129)),
        s("2025-01-22T10:00:00.000Z"),
        s("2024-02-29T00:00:00.000Z"),
        s("2025-02-29T00:00:00.000Z"),
        s("2025-04-31T00:00:00.000Z"),
        s("2025-01-22T10:00:00Z"),
        s("2025-01-22T10:00:60.000Z"),
        s("2025-01-22t10:00:00.000z"),
        s(&format!("sha256:{}", "a".repeat(64))),
        s(&format!("sha256:{}", "A".repeat(64))),
        s(&format!("sha256:{}", "a".repeat(63))),
        Value::Array(Vec::new()),
        Value::Array(vec![s("x")]),
        Value::Array(vec![s("x"), s("x")]),
        Value::Array(vec![Value::Int(1)]),
        Value::Object(Map::new()),
    ];
    out
}

/// Every mutation: the pool, the schema constants, and the structural ops.
fn all_ops() -> Vec<Op> {
    let mut ops: Vec<Op> = pool().into_iter().map(Op::Replace).collect();
    ops.extend(
        schema_constants()
            .iter()
            .map(|c| Op::Replace(Value::from(c.as_str()))),
    );
    ops.extend([Op::Remove, Op::AddMember, Op::DuplicateFirst, Op::Clear]);
    ops
}

/// Every mutation of one record fixture: `(valid, invalid)` verdict counts.
/// A path holding a schema constant (an enumeration or an `if` condition)
/// gets every constant; other paths get the generic pool, the structural
/// ops and a rotating window of the constants.
fn mutate_fixture(name: &str, record: &Value) -> (usize, usize) {
    let constants: Vec<Value> = schema_constants()
        .iter()
        .map(|c| Value::from(c.as_str()))
        .collect();
    let mut generic: Vec<Op> = pool().into_iter().map(Op::Replace).collect();
    generic.extend([Op::Remove, Op::AddMember, Op::DuplicateFirst, Op::Clear]);
    let own = record_shape(record).expect("typed fixture");
    let mut all = Vec::new();
    paths(record, &mut Vec::new(), &mut all);
    let (mut valid, mut invalid) = (0, 0);
    for (n, path) in all.iter().enumerate() {
        let mut current = record.clone();
        let is_constant = constants.contains(at_mut(&mut current, path));
        let window = if is_constant { constants.len() } else { 6 };
        let ops = generic.iter().cloned().chain(
            (0..window).map(|k| Op::Replace(constants[(n * 6 + k) % constants.len()].clone())),
        );
        for op in ops {
            let m = apply(record, path, &op);
            if agree(own, &m, &|| format!("{name} {path:?} {op:?}")) {
                valid += 1;
            } else {
                invalid += 1;
            }
        }
    }
    agree(own, &apply(record, &[], &Op::AddMember), &|| {
        name.to_owned()
    });
    agree(Shape::AnyRecord, record, &|| name.to_owned());
    (valid, invalid)
}

#[test]
fn structural_validator_agrees_on_every_single_mutation_of_every_record_fixture() {
    let fixtures = record_fixtures();
    // Two halves on two threads: the interpreter is slow in debug builds.
    let (a, b) = fixtures.split_at(fixtures.len() / 2);
    let run = |part: &[(String, Value)]| {
        part.iter()
            .map(|(name, r)| mutate_fixture(name, r))
            .fold((0, 0), |acc, x| (acc.0 + x.0, acc.1 + x.1))
    };
    let ((v1, i1), (v2, i2)) = std::thread::scope(|s| {
        let h = s.spawn(|| run(a));
        let second = run(b);
        (h.join().expect("no panic"), second)
    });
    let (valid, invalid) = (v1 + v2, i1 + i2);
    assert!(
        valid > 100 && invalid > 1000,
        "{valid} valid, {invalid} invalid"
    );
}

#[test]
fn structural_validator_agrees_on_mutations_of_the_context() {
    let (_, cases) = load_cases();
    let input = cases[0].0.input.value().clone();
    let ctx = input.get("context").expect("context").clone();
    let ops = all_ops();
    let mut all = Vec::new();
    paths(&ctx, &mut Vec::new(), &mut all);
    for path in &all {
        for op in &ops {
            let m = apply(&ctx, path, op);
            agree(Shape::EvaluationContext, &m, &|| format!("{path:?} {op:?}"));
        }
    }
}

#[test]
fn structural_validator_agrees_on_a_grid_of_timestamps() {
    let (_, record) = record_fixtures()
        .into_iter()
        .find(|(n, _)| n == "evidence-record-v1.json")
        .expect("evidence fixture");
    let shape = Shape::Record(RecordType::EvidenceRecord);
    let mut valid = 0;
    for year in [
        "0000", "0004", "1900", "1999", "2000", "2023", "2024", "2100", "9999",
    ] {
        for month in 0..=13 {
            for day in 0..=32 {
                for time in [
                    "00:00:00.000",
                    "23:59:59.999",
                    "24:00:00.000",
                    "12:60:00.000",
                ] {
                    let t = format!("{year}-{month:02}-{day:02}T{time}Z");
                    let mut m = record.clone();
                    if let Value::Object(o) = &mut m {
                        o.insert("observedAt", Value::from(t.as_str()));
                    }
                    valid += usize::from(agree(shape, &m, &|| t.clone()));
                }
            }
        }
    }
    // Nine years of 365 days, four of them leap years (0000, 0004, 2000,
    // 2024), at two valid times of day.
    assert_eq!(valid, 2 * (9 * 365 + 4));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Several mutations at once, at random paths of a random fixture.
    #[test]
    fn structural_validator_agrees_on_random_multi_mutations(
        pick in any::<prop::sample::Index>(),
        steps in proptest::collection::vec(
            (any::<prop::sample::Index>(), any::<prop::sample::Index>()), 1..5),
    ) {
        let fixtures = record_fixtures();
        let (name, mut record) = fixtures[pick.index(fixtures.len())].clone();
        let ops = all_ops();
        for (p, o) in &steps {
            let mut all = Vec::new();
            paths(&record, &mut Vec::new(), &mut all);
            if all.is_empty() {
                break;
            }
            record = apply(&record, &all[p.index(all.len())], &ops[o.index(ops.len())]);
        }
        let shape = record_shape(&record).unwrap_or(Shape::AnyRecord);
        agree(shape, &record, &|| format!("{name} {steps:?}"));
        agree(Shape::AnyRecord, &record, &|| format!("{name} {steps:?}"));
    }
}
