//! Reducer latency: the baseline PASS bundle of the core suite (14 records)
//! reduced in-process, then bundles grown to 50, 200 and 1,000 records by
//! adding distinct, valid, eligible evidence records. A plain `main` (no
//! criterion): `cargo bench -p lychd-helmloop --bench reduce`.
//!
//! Prints the load average; p50/p99 per reduction (30,000 timed reductions
//! after 2,000 warm-up ones) and reductions per second against the p99
//! target of 200 us, with the p99 of each tenth of the run (its spread shows
//! how much of the tail is other work on the machine); a same-run reference,
//! strict parse + canonicalize of the same input text, and the ratio to it,
//! which is steadier than absolute times on a shared machine; strict parse +
//! reduce of the text; and for the larger bundles the time per record
//! relative to the baseline bundle measured in the same run (1.0 = perfectly
//! linear). The input is parsed once.
//!
//! Then inputs at the 8 MiB size cap, each built to hit one check a hostile
//! caller could make expensive (resolutions §H.7: every check O(n log n),
//! a bundle at the cap reduces in well under a second): `expectedScope`
//! filled with distinct strings (uniqueness of array items), the same with
//! one duplicate (an invalid context), `trustedProducers` filled (trust
//! lookups) and filled with malformed items (an invalid context), `requiredEvidenceIds` filled beside thousands of
//! evidence records (claims × records), distinct evidence records only, and
//! one long supersession chain whose head is unresolved (propagation down a
//! chain), and one record with a million malformed items, alone and beside
//! an id-only reference (schema-invalid records judged without listing every
//! issue). Each is parsed and reduced a few times; the bench prints p50 and
//! max, and the ratio to the baseline bundle's reduce in the same run, in
//! time and per byte.

use std::hint::black_box;
use std::time::{Duration, Instant};

use lychd_helmloop::reduce::{Disposition, EvaluationInput, reduce};
use lychd_helmloop::{
    DEFAULT_MAX_BYTES, Map, Value, parse, policy_digest, record_digest, to_canonical_vec,
};

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

/// Canonical size an at-cap input is grown to (the parse cap is 8 MiB).
const CAP_TARGET: usize = DEFAULT_MAX_BYTES - 64 * 1024;

fn records_of(input: &Value) -> Vec<Value> {
    input
        .get("records")
        .and_then(Value::as_array)
        .map(<[Value]>::to_vec)
        .unwrap_or_default()
}

fn with(input: &Value, key: &str, value: Value) -> Value {
    let Value::Object(mut m) = input.clone() else {
        panic!("input is an object")
    };
    m.insert(key, value);
    Value::Object(m)
}

/// The input with context member `key` replaced and the policy digest
/// recomputed, so the frame stays usable and every stage runs.
fn with_control(input: &Value, key: &str, value: Value) -> Value {
    let Some(Value::Object(mut ctx)) = input.get("context").cloned() else {
        panic!("context")
    };
    ctx.insert(key, value);
    let digest = policy_digest(&Value::Object(ctx.clone())).expect("policy digest");
    if let Some(Value::Object(p)) = ctx.get_mut("policy") {
        p.insert("digest", Value::from(digest.render()));
    }
    with(input, "context", Value::Object(ctx))
}

fn seal(mut r: Value) -> Value {
    let d = record_digest(&r).expect("digest").render();
    if let Value::Object(m) = &mut r {
        m.insert("digest", Value::from(d));
    }
    r
}

fn size(v: &Value) -> usize {
    to_canonical_vec(v).expect("canonical").len()
}

/// Distinct strings `prefix-N` filling about `bytes` bytes of JSON.
fn strings(prefix: &str, bytes: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut used = 0;
    let mut n = 0;
    while used < bytes {
        let s = format!("{prefix}{n:08}");
        used += s.len() + 3;
        out.push(Value::from(s));
        n += 1;
    }
    out
}

/// A sealed copy of the baseline latency evidence with another id.
fn evidence_copy(template: &Value, id: &str, supersedes: Option<&Value>) -> Value {
    let Value::Object(mut r) = template.clone() else {
        panic!("record")
    };
    r.insert("id", Value::from(id));
    if let Some(p) = supersedes {
        let mut sup = Map::new();
        for k in ["recordType", "id", "digest"] {
            sup.insert(k, p.get(k).cloned().expect("ref member"));
        }
        sup.insert("reason", Value::from("supersede"));
        r.insert("supersedes", Value::Array(vec![Value::Object(sup)]));
    }
    seal(Value::Object(r))
}

fn latency_template(base: &Value) -> Value {
    records_of(base)
        .into_iter()
        .find(|r| r.get("id").and_then(Value::as_str) == Some("evidence-latency-1"))
        .expect("latency evidence")
}

/// The at-cap inputs: `(name, input)`.
fn at_cap(base: &Value) -> Vec<(&'static str, Value)> {
    let room = CAP_TARGET - size(base);
    let mut out = Vec::new();
    let scope = strings("namespace/tenant/", room);
    out.push((
        "expectedScope filled, distinct",
        with_control(base, "expectedScope", Value::Array(scope.clone())),
    ));
    let mut dup = scope;
    let last = dup[0].clone();
    dup.push(last);
    dup.remove(1);
    out.push((
        "expectedScope filled, one duplicate",
        with_control(base, "expectedScope", Value::Array(dup)),
    ));
    let mut producers = strings("producer:", room);
    producers.push(Value::from("evidence-bot"));
    producers.push(Value::from("runner-7"));
    out.push((
        "trustedProducers filled",
        with_control(base, "trustedProducers", Value::Array(producers)),
    ));
    // Every item malformed (not an identifier): the context is invalid,
    // and the frame must classify it without listing every issue.
    out.push((
        "trustedProducers filled, every item malformed",
        with_control(
            base,
            "trustedProducers",
            Value::Array(strings("producer/", room)),
        ),
    ));
    // Half the room in required claim ids, half in evidence records.
    let claims = strings("crit-extra:", room / 2);
    let with_claims = with_control(base, "requiredEvidenceIds", Value::Array(claims));
    let n = records_of(base).len();
    let per_record = size(&grown(base, n + 1)) - size(base);
    let half = grown(&with_claims, n + room / 2 / per_record);
    out.push(("requiredEvidenceIds + evidence records", half));
    out.push((
        "evidence records only",
        grown(base, n + room / per_record - 1),
    ));
    // One chain of evidence records, each superseding the previous; the
    // head names a predecessor that is absent, so the whole chain is
    // unavailable and the reducer must propagate that down the chain.
    let template = latency_template(base);
    let mut missing = template.clone();
    if let Value::Object(m) = &mut missing {
        m.insert("id", Value::from("evidence-latency-absent"));
    }
    let mut prev = seal(missing);
    let mut records = records_of(base);
    let mut total = size(base);
    let mut k = 0;
    while total + per_record + 200 < CAP_TARGET {
        let r = evidence_copy(&template, &format!("evidence-chain-{k:06}"), Some(&prev));
        total += size(&r) + 1;
        records.push(r.clone());
        prev = r;
        k += 1;
    }
    out.push((
        "supersession chain, head unresolved",
        with(base, "records", Value::Array(records)),
    ));
    // One record whose `limitations` hold a million malformed items (an
    // invalid record the interpreter would list issue by issue), alone and
    // with an id-only reference beside them.
    let mut bad = template.clone();
    let items = (room.saturating_sub(4096)) / 8;
    if let Value::Object(m) = &mut bad {
        m.insert("id", Value::from("evidence-malformed"));
        m.insert(
            "limitations",
            Value::Array(
                (0..items)
                    .map(|i| Value::Int(1_000_000 + i as i64))
                    .collect(),
            ),
        );
    }
    let bad = seal(bad);
    let mut records = records_of(base);
    records.push(bad.clone());
    out.push((
        "one record with a million malformed items",
        with(base, "records", Value::Array(records)),
    ));
    let mut id_only = bad;
    if let Value::Object(m) = &mut id_only
        && let Some(Value::Object(c)) = m.get_mut("contractRef")
    {
        c.remove("digest");
    }
    let mut records = records_of(base);
    records.push(id_only);
    out.push((
        "the same with an id-only reference",
        with(base, "records", Value::Array(records)),
    ));
    out
}

struct Stats {
    p50: Duration,
    p99: Duration,
    max: Duration,
    per_sec: f64,
    /// p99 of each of `ROUNDS` consecutive slices of the samples, sorted:
    /// on a shared machine a slice without interference shows the code's own
    /// tail, one with it the scheduler's.
    round_p99: Vec<Duration>,
}

/// Slices of the timed calls reported separately.
const ROUNDS: usize = 10;

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// Times `iters` calls of `f`, one sample each, after `warmup` untimed calls.
fn measure<T>(f: impl Fn() -> T, warmup: usize, iters: usize) -> Stats {
    for _ in 0..warmup {
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
    let mut round_p99: Vec<Duration> = samples
        .chunks(iters.div_ceil(ROUNDS))
        .map(|round| {
            let mut round = round.to_vec();
            round.sort();
            percentile(&round, 0.99)
        })
        .collect();
    round_p99.sort();
    samples.sort();
    Stats {
        p50: percentile(&samples, 0.50),
        p99: percentile(&samples, 0.99),
        max: percentile(&samples, 1.0),
        per_sec: iters as f64 / total.as_secs_f64(),
        round_p99,
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `/proc/loadavg` (1, 5 and 15 minute load), when there is one.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Reductions of the baseline bundle timed for p50/p99 (after warm-up).
const BASELINE_ITERS: usize = 30_000;
const WARMUP: usize = 2_000;
/// The p99 target for the baseline bundle on one core.
const TARGET_P99_US: f64 = 200.0;

fn main() {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    println!("load average {} on {cores} cores (start)", load());
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
    let s = measure(|| reduce(&input).disposition, WARMUP, BASELINE_ITERS);
    println!(
        "reduce baseline ({n_base} records, {BASELINE_ITERS} reductions): p50 {:.1} us, p99 {:.1} us, max {:.1} us, {:.0} reductions/s; p99 target {TARGET_P99_US:.0} us {}",
        us(s.p50),
        us(s.p99),
        us(s.max),
        s.per_sec,
        if us(s.p99) <= TARGET_P99_US {
            "met"
        } else {
            "NOT met"
        }
    );
    let rounds = &s.round_p99;
    println!(
        "  p99 of each of {} rounds of {}: min {:.1} us, median {:.1} us, max {:.1} us",
        rounds.len(),
        BASELINE_ITERS / ROUNDS,
        us(rounds[0]),
        us(rounds[rounds.len() / 2]),
        us(rounds[rounds.len() - 1])
    );
    // Same-run reference: strict parse + canonicalize of the same input text.
    let text = to_canonical_vec(&base).expect("canonical");
    let c = measure(
        || to_canonical_vec(&parse(&text).expect("parses")).expect("canonical"),
        WARMUP,
        BASELINE_ITERS,
    );
    println!(
        "strict parse + canonicalize, same input ({} bytes): p50 {:.1} us, p99 {:.1} us, {:.0} /s",
        text.len(),
        us(c.p50),
        us(c.p99),
        c.per_sec
    );
    println!(
        "reduce / (parse + canonicalize): {:.2}x at p50, {:.2}x at p99",
        us(s.p50) / us(c.p50),
        us(s.p99) / us(c.p99)
    );
    let p = measure(
        || {
            lychd_helmloop::reduce_bytes(&text)
                .expect("parses")
                .disposition
        },
        WARMUP,
        BASELINE_ITERS,
    );
    println!(
        "parse + reduce baseline: p50 {:.1} us, p99 {:.1} us, {:.0} /s",
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
        // About the same number of records reduced for every size.
        let iters = (300_000 / total).max(300);
        let g = measure(|| reduce(&big).disposition, iters / 10, iters);
        let per_record = us(g.p50) / total as f64;
        println!(
            "reduce {total:>4} records ({iters:>5} reductions): p50 {:>8.1} us, p99 {:>8.1} us, {:>7.0} /s, {:.2} us/record at p50 ({:.2}x baseline per record)",
            us(g.p50),
            us(g.p99),
            g.per_sec,
            per_record,
            per_record / base_per_record
        );
    }
    // At the size cap: parse + reduce of the text, as a server would.
    let base_text_len = text.len() as f64;
    for (name, input) in at_cap(&base) {
        let text = to_canonical_vec(&input).expect("canonical");
        assert!(text.len() <= DEFAULT_MAX_BYTES, "{name}: within the cap");
        let parsed = EvaluationInput::parse(&text).expect("parses");
        let disposition = reduce(&parsed).disposition;
        let r = measure(|| reduce(&parsed).disposition, 1, 5);
        let pr = measure(
            || {
                lychd_helmloop::reduce_bytes(&text)
                    .expect("parses")
                    .disposition
            },
            1,
            5,
        );
        let bytes_ratio = text.len() as f64 / base_text_len;
        println!(
            "at cap: {name} ({} bytes, {}): reduce p50 {:.1} ms, max {:.1} ms ({:.0}x baseline reduce, {:.2}x per byte); parse + reduce p50 {:.1} ms",
            text.len(),
            disposition.as_str(),
            us(r.p50) / 1000.0,
            us(r.max) / 1000.0,
            us(r.p50) / us(s.p50),
            us(r.p50) / us(s.p50) / bytes_ratio,
            us(pr.p50) / 1000.0,
        );
    }
    println!("load average {} (end)", load());
}
