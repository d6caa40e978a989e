//! Reducer latency: the baseline PASS bundle of the core suite (14 records)
//! reduced in-process, then bundles grown to 50, 200 and 1,000 records by
//! adding distinct, valid, eligible evidence records. A plain `main` (no
//! criterion): `cargo bench -p lychd-helmloop --bench reduce`.
//!
//! Prints p50/p99 per reduction and reductions per second, and for the
//! larger bundles the time per record relative to the baseline bundle
//! measured in the same run (1.0 = perfectly linear). The input is parsed
//! once; a separate line times strict parse + reduce of the input text.

use std::hint::black_box;
use std::time::{Duration, Instant};

use lychd_helmloop::reduce::{Disposition, EvaluationInput, reduce};
use lychd_helmloop::{Value, parse, record_digest, to_canonical_vec};

fn baseline() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/helmloop/core/cases/core-001-pass-baseline.json"
    );
    let bytes = std::fs::read(path).expect("baseline case (run gen_core_cases.py)");
    parse(&bytes)
        .expect("case parses")
        .get("input")
        .cloned()
        .expect("case input")
}

/// The baseline input with `extra` additional latency evidence records, each
/// a distinct, correctly sealed copy of the baseline's latency evidence.
fn grown(base: &Value, total: usize) -> Value {
    let Value::Object(mut input) = base.clone() else {
        panic!("input is an object")
    };
    let Some(Value::Array(mut records)) = input.remove("records") else {
        panic!("records")
    };
    let template = records
        .iter()
        .find(|r| r.get("id").and_then(Value::as_str) == Some("evidence-latency-1"))
        .cloned()
        .expect("latency evidence");
    let mut n = 0;
    while records.len() < total {
        let Value::Object(mut r) = template.clone() else {
            unreachable!("records are objects")
        };
        r.insert("id", Value::from(format!("evidence-latency-extra-{n}")));
        r.insert("claim", Value::from(format!("repeat measurement {n}")));
        let mut v = Value::Object(r);
        let d = record_digest(&v).expect("digest").render();
        if let Value::Object(m) = &mut v {
            m.insert("digest", Value::from(d));
        }
        records.push(v);
        n += 1;
    }
    input.insert("records", Value::Array(records));
    Value::Object(input)
}

struct Stats {
    p50: Duration,
    p99: Duration,
    per_sec: f64,
}

fn measure(f: impl Fn() -> Disposition, iters: usize) -> Stats {
    for _ in 0..iters.min(200) {
        black_box(f());
    }
    let mut samples = Vec::with_capacity(iters);
    let start = Instant::now();
    for _ in 0..iters {
        let t = Instant::now();
        black_box(f());
        samples.push(t.elapsed());
    }
    let total = start.elapsed();
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Stats {
        p50: at(0.50),
        p99: at(0.99),
        per_sec: iters as f64 / total.as_secs_f64(),
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let base = baseline();
    let n_base = base
        .get("records")
        .and_then(Value::as_array)
        .map_or(0, <[Value]>::len);
    let input = EvaluationInput::from_value(base.clone());
    assert_eq!(
        reduce(&input).disposition,
        Disposition::Pass,
        "baseline passes"
    );
    let s = measure(|| reduce(&input).disposition, 20_000);
    println!(
        "reduce baseline ({n_base} records): p50 {:.1} us, p99 {:.1} us, {:.0} reductions/s",
        us(s.p50),
        us(s.p99),
        s.per_sec
    );
    let text = to_canonical_vec(&base).expect("canonical");
    let p = measure(
        || {
            lychd_helmloop::reduce_bytes(&text)
                .expect("parses")
                .disposition
        },
        20_000,
    );
    println!(
        "parse + reduce baseline ({} bytes): p50 {:.1} us, p99 {:.1} us, {:.0} /s",
        text.len(),
        us(p.p50),
        us(p.p99),
        p.per_sec
    );
    let base_per_record = us(s.p50) / n_base as f64;
    for total in [50, 200, 1000] {
        let big = EvaluationInput::from_value(grown(&base, total));
        assert_eq!(
            reduce(&big).disposition,
            Disposition::Pass,
            "{total} records pass"
        );
        let iters = (200_000 / total).max(200);
        let g = measure(|| reduce(&big).disposition, iters);
        let per_record = us(g.p50) / total as f64;
        println!(
            "reduce {total:>4} records: p50 {:>8.1} us, p99 {:>8.1} us, {:>7.0} /s, {:.2} us/record ({:.2}x baseline per record)",
            us(g.p50),
            us(g.p99),
            g.per_sec,
            per_record,
            per_record / base_per_record
        );
    }
}
