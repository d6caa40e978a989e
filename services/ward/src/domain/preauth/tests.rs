//! Unit tests of `domain::preauth`.

use super::*;
use crate::domain::consent::{Binding, parse_arguments};

fn proposal(tool: &str, args: &str) -> Proposal {
    Proposal {
        run_id: "run-1".into(),
        effect_owner: "runner".into(),
        effect_id: "e".into(),
        effect_revision: 1,
        tool_name: tool.into(),
        deferred_call_id: "c".into(),
        class: EffectClass::Standard,
        binding: Binding::default(),
        arguments: parse_arguments(args.as_bytes()).expect("args"),
    }
}

fn one(text: &str) -> Result<Vec<Rule>, RuleError> {
    parse_set(&[("a.toml".to_owned(), text.to_owned())])
}

const BASE: &str = r#"
[[rule]]
slug = "write-reports"
effect_class = "standard"
principal = "*"
tool = "fs.write"
[rule.constraints.arguments]
mode = ["append", 420]
[rule.constraints.path_prefixes]
path = ["/srv/reports"]
"#;

#[test]
fn patterns_match_whole_segments_and_never_cross_separators() {
    let p = Pattern::parse("fs.*").expect("pattern");
    assert!(p.matches("fs.write"));
    assert!(!p.matches("fs.write.all"));
    assert!(!p.matches("fs"));
    assert!(!p.matches("fs."));
    assert!(!p.matches("fs:write"));
    let p = Pattern::parse("*").expect("pattern");
    assert!(p.matches("tool"));
    assert!(!p.matches("tool:x"));
    assert!(!p.matches("a/b"));
    for bad in ["", "fs.wr*", "**", "a..b", "a b", "fs.[ab]"] {
        assert!(Pattern::parse(bad).is_err(), "{bad:?}");
    }
    // A dash is part of a segment, not a separator.
    assert!(!Pattern::parse("tool-*").is_ok_and(|p| p.matches("tool-1")));
}

#[test]
fn arguments_must_be_present_and_equal_and_paths_component_wise() {
    let rule = &one(BASE).expect("rule")[0];
    assert!(rule.matches(
        &proposal("fs.write", r#"{"mode":"append","path":"/srv/reports/a"}"#),
        "runner"
    ));
    assert!(rule.matches(
        &proposal("fs.write", r#"{"mode":420,"path":"/srv/reports"}"#),
        "runner"
    ));
    for args in [
        r#"{"path":"/srv/reports/a"}"#,                      // mode absent
        r#"{"mode":null,"path":"/srv/reports/a"}"#,          // null is not a value
        r#"{"mode":"420","path":"/srv/reports/a"}"#,         // a string is not the integer
        r#"{"mode":"append","path":"/srv/reportsX/a"}"#,     // not component-wise under
        r#"{"mode":"append","path":"/srv/reports/../etc"}"#, // not clean
        r#"{"mode":"append","path":"srv/reports/a"}"#,       // not absolute
        r#"{"mode":"append","path":["/srv/reports/a"]}"#,    // not a string
    ] {
        assert!(
            !rule.matches(&proposal("fs.write", args), "runner"),
            "{args}"
        );
    }
    assert!(!rule.matches(
        &proposal("fs.delete", r#"{"mode":"append","path":"/srv/reports/a"}"#),
        "runner"
    ));
}

#[test]
fn a_rule_set_is_refused_with_file_and_field() {
    let cases = [
        (
            BASE.replace(
                "effect_class = \"standard\"",
                "effect_class = \"migration\"",
            ),
            "rule[0].effect_class",
        ),
        (
            BASE.replace("tool = \"fs.write\"", "tool = \"fs.wr*\""),
            "rule[0].tool",
        ),
        (
            BASE.replace("[rule.constraints.arguments]", "[rule.constraints.regex]"),
            "rule[0].constraints.regex",
        ),
        (
            BASE.replace("slug = \"write-reports\"", "slug = \"Write Reports\""),
            "rule[0].slug",
        ),
        (
            BASE.replace(
                "tool = \"fs.write\"",
                "tool = \"fs.write\"\nexpires_at = 2027-01-01T00:00:00",
            ),
            "rule[0].expires_at",
        ),
        (
            BASE.replace("effect_class = \"standard\"", "effect_class = \"bounded\""),
            "rule[0].effect_class",
        ),
        (
            BASE.replace("path = [\"/srv/reports\"]", "path = [\"/srv/../etc\"]"),
            "rule[0].constraints.path_prefixes.path",
        ),
        (
            BASE.replace("tool = \"fs.write\"", "tool = \"fs.write\"\nmax_uses = 0"),
            "rule[0].max_uses",
        ),
        (format!("{BASE}{BASE}"), "rule[1].slug"),
        // Not NFC (an `e` and a combining acute accent): not canonical, so not digestible.
        (
            BASE.replace("/srv/reports", "/srv/cafe\u{301}"),
            "rule[0].constraints.path_prefixes.path",
        ),
        (
            BASE.replace("420", "\"cafe\u{301}\""),
            "rule[0].constraints.arguments.mode",
        ),
    ];
    for (text, field) in cases {
        let e = one(&text).expect_err(field);
        assert_eq!(e.file, "a.toml");
        assert_eq!(e.field, field, "{e}");
    }
    let bounded = BASE.replace(
        "effect_class = \"standard\"",
        "effect_class = \"bounded\"\nexpires_at = 2027-01-01T00:00:00+01:00\nmax_uses = 3",
    );
    let rule = &one(&bounded).expect("a bounded rule with every limit")[0];
    assert_eq!(rule.expires_at, Some(1_798_758_000));
    // Slugs are unique across the files of one set.
    let e = parse_set(&[
        ("a.toml".into(), BASE.into()),
        ("b.toml".into(), BASE.into()),
    ])
    .expect_err("duplicate across files");
    assert_eq!(
        (e.file.as_str(), e.field.as_str()),
        ("b.toml", "rule[0].slug")
    );
    assert!(e.message.contains("a.toml"));
}

#[test]
fn the_policy_digest_moves_with_the_policy_not_the_file() {
    let a = &one(BASE).expect("rule")[0];
    let mut moved = a.clone();
    moved.source = "elsewhere.toml".into();
    assert_eq!(a.policy_digest(), moved.policy_digest());
    let changed = &one(&BASE.replace("420", "384")).expect("rule")[0];
    assert_ne!(a.policy_digest(), changed.policy_digest());
}
