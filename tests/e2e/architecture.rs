//! `ARCHITECTURE.md` cannot go stale: every repository path it names in backticks or links
//! exists, and every "`symbol` in `path`" (or "`symbol` macro in `path`") names a symbol that
//! is in that file — so a change recipe that points at a moved or renamed thing fails here.

use std::path::Path;

/// A backticked span that names a repository path: relative, no spaces, no placeholders.
fn is_path(span: &str) -> bool {
    const ROOTS: [&str; 9] = [
        "services/",
        "shared/",
        "proto/",
        "tests/",
        "deploy/",
        "docs/",
        "templates/",
        "xtask/",
        "schemas/",
    ];
    ROOTS.iter().any(|r| span.starts_with(r))
        && !span.contains([' ', '<', '*', '{'])
        && !span.contains("::")
}

/// The backticked spans of `text`, in order.
fn spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The identifier a symbol span names: `live!` → `live`, `plan()` → `plan`,
/// `lychd_runtime::paging` → `paging`.
fn identifier(symbol: &str) -> &str {
    let last = symbol.rsplit("::").next().unwrap_or(symbol);
    last.trim_end_matches(['!', '(', ')'])
}

/// Whether `text` holds `ident` as a whole word.
fn holds_word(text: &str, ident: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(ident).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + ident.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The problems of the map `text` against the repository at `root`.
fn problems(root: &Path, text: &str) -> Vec<String> {
    let mut p = Vec::new();
    let exists = |path: &str| root.join(path).exists();
    for span in spans(text) {
        if is_path(span) && !exists(span) {
            p.push(format!(
                "ARCHITECTURE.md names `{span}`, which does not exist"
            ));
        }
    }
    for link in text.split("](").skip(1) {
        let target = link.split(')').next().unwrap_or_default();
        if !target.contains("://") && !exists(target) {
            p.push(format!(
                "ARCHITECTURE.md links to {target}, which does not exist"
            ));
        }
    }
    // "`symbol` in `path`" and "`symbol` <word> in `path`": the symbol is in the file.
    let parts: Vec<&str> = text.split('`').collect();
    for i in (1..parts.len().saturating_sub(2)).step_by(2) {
        let (symbol, between, path) = (parts[i], parts[i + 1], parts[i + 2]);
        let between = between.trim();
        let joins = between == "in"
            || between
                .strip_suffix(" in")
                .is_some_and(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase()));
        if !joins || is_path(symbol) || !is_path(path) || !path.ends_with(".rs") {
            continue;
        }
        let ident = identifier(symbol);
        match std::fs::read_to_string(root.join(path)) {
            Ok(source) if holds_word(&source, ident) => {}
            Ok(_) => p.push(format!(
                "ARCHITECTURE.md says `{symbol}` is in `{path}`, which has no `{ident}`"
            )),
            Err(_) => {} // reported above as a missing path
        }
    }
    p
}

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn map() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

#[test]
fn the_architecture_map_names_only_what_exists() {
    let p = problems(&root(), &map());
    assert!(p.is_empty(), "{}", p.join("\n"));
}

/// The check catches a moved file, a broken link and a renamed symbol (and the map holds
/// recipes for it to check at all).
#[test]
fn a_stale_path_link_or_symbol_fails_the_check() {
    let map = map();
    let recipes = map.split('`').filter(|s| s.ends_with(".rs")).count();
    assert!(recipes >= 20, "the map names only {recipes} source files");
    for (from, to, expected) in [
        (
            "`shared/refusal/src/declare.rs`",
            "`shared/refusal/src/declared.rs`",
            "`shared/refusal/src/declared.rs`, which does not exist",
        ),
        (
            "(docs/dispatcher.md)",
            "(docs/dispatch.md)",
            "links to docs/dispatch.md",
        ),
        (
            "`order_key` in",
            "`order_by_key` in",
            "has no `order_by_key`",
        ),
        ("`live!` macro in", "`alive!` macro in", "has no `alive`"),
    ] {
        assert!(map.contains(from), "the map no longer says {from}");
        let p = problems(&root(), &map.replacen(from, to, 1));
        assert!(
            p.iter().any(|p| p.contains(expected)),
            "{from} → {to} was not caught: {p:?}"
        );
    }
}
