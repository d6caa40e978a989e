//! Throughput of canonicalize + record digest, HL-C14N-1 (this crate) against
//! `serde_json` + `serde_json_canonicalizer` (RFC 8785) on the same inputs, in
//! the same run. A plain `main` (no criterion): `cargo bench -p lychd-helmloop
//! --bench canon`. Prints MB/s (10^6 bytes of input per second, best of
//! interleaved rounds) and the ratio.

use std::hint::black_box;
use std::time::Instant;

use sha2::{Digest as _, Sha256};

/// Deterministic pseudo-random numbers (64-bit LCG), so inputs are stable.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() as usize) % xs.len()]
    }
}

const WORDS: &[&str] = &[
    "deploy",
    "ledger",
    "reconcile",
    "provider",
    "évaluation",
    "café",
    "naïve",
    "outcome",
    "authority",
    "grant",
    "revision",
    "北京",
    "データ",
    "Zürich",
    "evidence",
    "policy",
    "🚀",
    "quote\\\"d",
    "line\\nbreak",
    "tab\\there",
    "slash/ok",
];

fn sentence(rng: &mut Lcg, words: usize) -> String {
    (0..words)
        .map(|_| rng.pick(WORDS))
        .collect::<Vec<_>>()
        .join(" ")
}

fn hex_digest(rng: &mut Lcg) -> String {
    let mut s = String::from("sha256:");
    while s.len() < 71 {
        s.push_str(&format!("{:08x}", rng.next() as u32));
    }
    s.truncate(71);
    s
}

/// One receipt-like record (~2.5 KB), keys deliberately not in canonical order.
fn receipt(rng: &mut Lcg, n: u64) -> String {
    let d = |rng: &mut Lcg| hex_digest(rng);
    format!(
        concat!(
            r#"{{"schemaVersion":"0.1","recordType":"ExecutionReceiptV1","id":"receipt-{n}","#,
            r#""subject":{{"kind":"service","ownerId":"owner-{o}","id":"svc-{n}"}},"#,
            r#""source":{{"system":"ci","producer":"runner-{o}","locator":"https://ci.example/run/{n}"}},"#,
            r#""revision":{{"id":"rev-{n}","digest":"{d1}"}},"#,
            r#""policy":{{"revision":"7","id":"policy-main","digest":"{d2}"}},"#,
            r#""issuedAt":"2025-03-01T12:00:{s:02}.123Z","digest":"{d3}","#,
            r#""contractRef":{{"recordType":"OutcomeContractV1","id":"contract-{o}","digest":"{d4}"}},"#,
            r#""executionId":"exec-{n}","attemptId":"attempt-1","executor":{{"kind":"runner","id":"runner-{o}"}},"#,
            r#""action":"deploy.apply","actionParameters":{{"replicas":{r},"region":"eu-west-{o}","#,
            r#""flags":[true,false,null,{r},-{rn}],"note":"{note}","10":1,"9":2,"1":3}},"#,
            r#""scope":["cluster/eu","namespace/payments","service/api-{o}"],"#,
            r#""authority":{{"required":true,"grantRef":{{"recordType":"AuthorityGrantV1","id":"grant-{n}","digest":"{d5}"}}}},"#,
            r#""status":"succeeded","startedAt":"2025-03-01T11:59:00.000Z","finishedAt":"2025-03-01T11:59:59.999Z","#,
            r#""resourceOwnership":{{"ownerId":"owner-{o}","instanceId":"inst-{n}","parentInstanceId":"inst-root"}},"#,
            r#""providerReport":{{"name":"k8s","requestId":"req-{n}","requestedState":"Running","#,
            r#""reportedState":"Running","queryLocator":"k8s://eu/payments/api-{o}"}},"#,
            r#""limitations":["{l1}","{l2}","{l3}"],"counters":[{c1},{c2},{c3},{c4},9007199254740991,-9007199254740991]}}"#
        ),
        n = n,
        o = n % 7,
        s = n % 60,
        r = rng.next() % 1000,
        rn = rng.next() % 1000 + 1,
        d1 = d(rng),
        d2 = d(rng),
        d3 = d(rng),
        d4 = d(rng),
        d5 = d(rng),
        note = sentence(rng, 24),
        l1 = sentence(rng, 30),
        l2 = sentence(rng, 30),
        l3 = sentence(rng, 30),
        c1 = rng.next(),
        c2 = rng.next() % 100,
        c3 = rng.next(),
        c4 = rng.next() % 5,
    )
}

fn document(rng: &mut Lcg, target: usize) -> String {
    let mut s = String::from(r#"{"protocolVersion":"0.1","records":["#);
    let mut n = 0;
    while s.len() < target {
        if n > 0 {
            s.push(',');
        }
        s.push_str(&receipt(rng, n));
        n += 1;
    }
    s.push_str(r#"],"context":{"evaluatedAt":"2025-03-02T00:00:00.000Z"}}"#);
    s
}

fn ours(input: &[u8]) -> [u8; 32] {
    let d = lychd_helmloop::digest_json(lychd_helmloop::Domain::Record, input)
        .expect("bench input is valid HL-C14N-1");
    *d.as_bytes()
}

fn baseline(input: &str) -> [u8; 32] {
    let v: serde_json::Value = serde_json::from_str(input).expect("bench input is json");
    let bytes = serde_json_canonicalizer::to_vec(&v).expect("baseline canonicalizes");
    let mut h = Sha256::new();
    h.update(b"HelmLoop/v0.1/Record\0");
    h.update(&bytes);
    h.finalize().into()
}

/// Rounds per measurement; each round times both implementations back to
/// back, and the best round of each is reported (robust against a busy host).
const ROUNDS: u32 = 7;

fn measure(name: &str, input: &str, iterations: u32) -> (f64, f64) {
    // Warm up and cross-check: for the binding domain both must give the same bytes.
    let ours_bytes = lychd_helmloop::canonicalize(input.as_bytes()).expect("valid");
    let v: serde_json::Value = serde_json::from_str(input).expect("json");
    let theirs = serde_json_canonicalizer::to_vec(&v).expect("canonical");
    assert_eq!(
        ours_bytes, theirs,
        "{name}: canonical bytes differ from RFC 8785"
    );
    for _ in 0..iterations / 10 + 1 {
        black_box(ours(black_box(input.as_bytes())));
        black_box(baseline(black_box(input)));
    }
    let per_round = iterations / ROUNDS + 1;
    let mb = input.len() as f64 * f64::from(per_round) / 1e6;
    let (mut ours_best, mut base_best) = (0f64, 0f64);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for _ in 0..per_round {
            black_box(ours(black_box(input.as_bytes())));
        }
        ours_best = ours_best.max(mb / t.elapsed().as_secs_f64());
        let t = Instant::now();
        for _ in 0..per_round {
            black_box(baseline(black_box(input)));
        }
        base_best = base_best.max(mb / t.elapsed().as_secs_f64());
    }
    println!(
        "{name:<10} {:>8} bytes  ours {ours_best:>8.1} MB/s  serde_json+jcs {base_best:>8.1} MB/s  ratio {:>5.2}x",
        input.len(),
        ours_best / base_best
    );
    (ours_best, base_best)
}

fn main() {
    let mut rng = Lcg(0x4865_6c6d_4c6f_6f70);
    let record = receipt(&mut rng, 42);
    let doc = document(&mut rng, 500 * 1024);
    println!("canonicalize + record digest (HL-C14N-1 vs serde_json_canonicalizer / RFC 8785)");
    let (a_ours, a_base) = measure("record", &record, 40_000);
    let (b_ours, b_base) = measure("document", &doc, 300);
    println!(
        "summary: record {:.2}x, document {:.2}x, document {:.0} MB/s (targets: >=3x both, >=300 MB/s document)",
        a_ours / a_base,
        b_ours / b_base,
        b_ours
    );
}
