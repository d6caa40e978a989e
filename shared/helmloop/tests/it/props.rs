//! Property tests of the HL-C14N-1 parser, serializer and digests.

use lychd_helmloop::{
    Domain, Map, Value, canonicalize, cmp_utf16, digest_canonical, digest_value, parse,
    to_canonical_vec,
};
use proptest::prelude::*;
use unicode_normalization::UnicodeNormalization;

/// Characters that exercise escaping, NFC and both sort traps.
fn interesting_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => proptest::char::range('a', 'e'),
        2 => proptest::char::range('0', '9'),
        1 => Just('"'),
        1 => Just('\\'),
        1 => Just('/'),
        1 => proptest::char::range('\u{0}', '\u{1f}'),
        1 => Just('\u{7f}'),
        1 => Just('\u{e9}'),
        1 => Just('e'),
        1 => Just('\u{301}'),
        1 => Just('\u{2028}'),
        1 => Just('\u{e000}'),
        1 => Just('\u{ffff}'),
        1 => Just('\u{fb01}'),
        1 => Just('\u{1f600}'),
        1 => Just('\u{10000}'),
        1 => Just('\u{d7ff}'),
        1 => any::<char>(),
    ]
}

/// An NFC string (generated, then normalized).
fn nfc_string() -> impl Strategy<Value = String> {
    proptest::collection::vec(interesting_char(), 0..8)
        .prop_map(|cs| cs.into_iter().collect::<String>().nfc().collect())
}

/// A member name; often with a long shared prefix, so that ordering and
/// duplicate detection must look past the first 8 bytes.
fn key_string() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            Just(""),
            Just("abcdefgh"),
            Just("abcdefgh\u{e9}"),
            Just("\u{1f600}\u{1f600}")
        ],
        nfc_string(),
    )
        .prop_map(|(p, s)| format!("{p}{s}").nfc().collect())
}

fn safe_int() -> impl Strategy<Value = i64> {
    prop_oneof![
        -20i64..20,
        Just(lychd_helmloop::MAX_SAFE_INTEGER),
        Just(-lychd_helmloop::MAX_SAFE_INTEGER),
        -lychd_helmloop::MAX_SAFE_INTEGER..=lychd_helmloop::MAX_SAFE_INTEGER,
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        safe_int().prop_map(Value::Int),
        nfc_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((key_string(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map>())),
        ]
    })
}

/// Reference serializer, independent of the crate: sorts members with
/// `encode_utf16` and escapes per resolutions §A.
fn reference(v: &Value, out: &mut String) {
    fn string(s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\u{c}' => out.push_str("\\f"),
                '\r' => out.push_str("\\r"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(n) => out.push_str(&n.to_string()),
        Value::String(s) => string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                reference(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut members: Vec<(&str, &Value)> = m.iter().collect();
            members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push('{');
            for (i, (k, x)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(k, out);
                out.push(':');
                reference(x, out);
            }
            out.push('}');
        }
    }
}

/// Renders `v` as valid but non-canonical JSON: members in a shuffled order,
/// random whitespace, random `\u` escapes (including surrogate pairs) and `\/`.
fn noisy(v: &Value, seed: &mut u64, out: &mut String) {
    fn next(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }
    fn ws(seed: &mut u64, out: &mut String) {
        for _ in 0..next(seed) % 3 {
            out.push([' ', '\t', '\n', '\r'][(next(seed) % 4) as usize]);
        }
    }
    fn string(s: &str, seed: &mut u64, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            let escape = next(seed).is_multiple_of(3);
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '/' if escape => out.push_str("\\/"),
                c if (c as u32) < 0x20 || escape => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        if next(seed).is_multiple_of(2) {
                            out.push_str(&format!("\\u{:04x}", u));
                        } else {
                            out.push_str(&format!("\\u{:04X}", u));
                        }
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
    ws(seed, out);
    match v {
        Value::Null | Value::Bool(_) | Value::Int(_) => reference(v, out),
        Value::String(s) => string(s, seed, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                noisy(x, seed, out);
            }
            ws(seed, out);
            out.push(']');
        }
        Value::Object(m) => {
            let mut members: Vec<(&str, &Value)> = m.iter().collect();
            for i in (1..members.len()).rev() {
                members.swap(i, (next(seed) % (i as u64 + 1)) as usize);
            }
            out.push('{');
            for (i, (k, x)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                ws(seed, out);
                string(k, seed, out);
                ws(seed, out);
                out.push(':');
                noisy(x, seed, out);
            }
            ws(seed, out);
            out.push('}');
        }
    }
    ws(seed, out);
}

fn canon(v: &Value) -> Vec<u8> {
    to_canonical_vec(v).expect("generated values are in the profile")
}

fn check_sorted(v: &Value) -> Result<(), TestCaseError> {
    match v {
        Value::Array(a) => a.iter().try_for_each(check_sorted),
        Value::Object(m) => {
            let keys: Vec<&str> = m.keys().collect();
            for w in keys.windows(2) {
                prop_assert!(
                    w[0].encode_utf16().lt(w[1].encode_utf16()),
                    "{:?} !< {:?}",
                    w[0],
                    w[1]
                );
            }
            m.iter().try_for_each(|(_, x)| check_sorted(x))
        }
        _ => Ok(()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn canon_parse_canon_is_identity(v in value()) {
        let c = canon(&v);
        let reparsed = parse(&c).expect("canonical bytes parse");
        prop_assert_eq!(&reparsed, &v);
        prop_assert_eq!(canon(&reparsed), c.clone());
        prop_assert_eq!(canonicalize(&c).expect("streams"), c);
    }

    #[test]
    fn member_order_is_utf16_code_unit_order(v in value(), seed in any::<u64>()) {
        let mut text = String::new();
        let mut s = seed;
        noisy(&v, &mut s, &mut text);
        let mut expected = String::new();
        reference(&v, &mut expected);
        let streamed = canonicalize(text.as_bytes()).expect("noisy rendering parses");
        prop_assert_eq!(String::from_utf8(streamed).unwrap(), expected.clone());
        let tree = parse(text.as_bytes()).expect("noisy rendering parses");
        check_sorted(&tree)?;
        prop_assert_eq!(String::from_utf8(canon(&tree)).unwrap(), expected);
    }

    #[test]
    fn nfc_check_matches_full_normalization(
        cs in proptest::collection::vec(prop_oneof![
            3 => interesting_char(),
            1 => proptest::char::range('\u{300}', '\u{36f}'),
            1 => proptest::char::range('\u{1100}', '\u{11ff}'),
            1 => proptest::char::range('\u{3040}', '\u{30ff}'),
            1 => proptest::char::range('\u{ac00}', '\u{ac20}'),
            1 => proptest::char::range('\u{f900}', '\u{f910}'),
        ], 0..24)
    ) {
        let s: String = cs.into_iter().collect();
        prop_assert_eq!(lychd_helmloop::is_nfc(&s), s.chars().eq(s.nfc()));
        let json = format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")
            .chars().map(|c| if (c as u32) < 0x20 { format!("\\u{:04x}", c as u32) } else { c.to_string() }).collect::<String>());
        let parsed = parse(json.as_bytes());
        prop_assert_eq!(parsed.is_ok(), s.chars().eq(s.nfc()), "{:?}", parsed);
    }

    #[test]
    fn cmp_utf16_matches_encode_utf16(a in nfc_string(), b in nfc_string()) {
        prop_assert_eq!(cmp_utf16(&a, &b), a.encode_utf16().cmp(b.encode_utf16()));
    }

    #[test]
    fn digest_changes_iff_canonical_bytes_change(a in value(), b in value()) {
        let (ca, cb) = (canon(&a), canon(&b));
        for domain in [Domain::Record, Domain::Binding] {
            let (da, db) = (digest_value(domain, &a).unwrap(), digest_value(domain, &b).unwrap());
            let (ra, rb) = (
                lychd_helmloop::canonical_for_domain(domain, &a).unwrap(),
                lychd_helmloop::canonical_for_domain(domain, &b).unwrap(),
            );
            prop_assert_eq!(ra == rb, da == db);
            prop_assert_eq!(digest_canonical(domain, &ra), da);
        }
        prop_assert_eq!(ca == cb, digest_value(Domain::Binding, &a).unwrap() == digest_value(Domain::Binding, &b).unwrap());
    }

    #[test]
    fn any_change_to_a_record_changes_its_digest_unless_it_is_the_digest(
        v in value(), extra in nfc_string(), x in value()
    ) {
        let mut m = match v { Value::Object(m) => m, other => [("k".to_owned(), other)].into_iter().collect() };
        let before = digest_value(Domain::Record, &Value::Object(m.clone())).unwrap();
        let mut with_digest = m.clone();
        with_digest.insert("digest", x.clone());
        prop_assert_eq!(digest_value(Domain::Record, &Value::Object(with_digest)).unwrap(), before);
        if extra != "digest" {
            let old = m.insert(extra, x.clone());
            let changed = old.as_ref() != Some(&x);
            let after = digest_value(Domain::Record, &Value::Object(m)).unwrap();
            prop_assert_eq!(changed, after != before);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_both_parsers_agree(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let tree = parse(&bytes);
        let streamed = canonicalize(&bytes);
        match (tree, streamed) {
            (Ok(v), Ok(c)) => prop_assert_eq!(canon(&v), c),
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(false, "disagree: {:?} vs {:?}", a.is_ok(), b.is_ok()),
        }
    }

    #[test]
    fn mutated_valid_json_never_panics_and_both_parsers_agree(
        v in value(), seed in any::<u64>(), at in any::<usize>(), byte in any::<u8>(), cut in any::<bool>()
    ) {
        let mut text = String::new();
        let mut s = seed;
        noisy(&v, &mut s, &mut text);
        let mut bytes = text.into_bytes();
        if !bytes.is_empty() {
            let i = at % bytes.len();
            if cut { bytes.truncate(i) } else { bytes[i] = byte }
        }
        let tree = parse(&bytes);
        let streamed = canonicalize(&bytes);
        match (tree, streamed) {
            (Ok(v), Ok(c)) => prop_assert_eq!(canon(&v), c),
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            (a, b) => prop_assert!(false, "disagree: {:?} vs {:?}", a.is_ok(), b.is_ok()),
        }
    }
}
