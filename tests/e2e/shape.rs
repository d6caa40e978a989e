//! The shape of the house (issue 24): what an office's modules may import, how large a source
//! file may grow, that no crate's modules import each other in a circle, and the hand-kept
//! lists checked against what they name (the self-authenticating methods against the
//! contracts, the dev grants against the action catalogues). Each check returns the problems it
//! found; the tests of the tests below show that each one fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use lychd_runtime::Office;

/// The one exception to the size bound: parsers, which read best whole. Named by file.
const PARSERS: &[&str] = &[];

/// Longest office source file, in lines.
const MAX_LINES: usize = 500;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("invariant: the e2e crate is tests/ in the workspace")
        .to_owned()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The code of a file: before its module of tests (which comes last), without comments and
/// with string and character literals emptied.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            // A raw string: `r"…"`, `r#"…"#`.
            'r' if matches!(chars.peek(), Some('#' | '"'))
                && out
                    .chars()
                    .next_back()
                    .is_none_or(|c| !(c.is_alphanumeric() || c == '_')) =>
            {
                let mut hashes = 0;
                while chars.peek() == Some(&'#') {
                    chars.next();
                    hashes += 1;
                }
                if chars.next() != Some('"') {
                    out.push('r');
                    continue;
                }
                let close: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let mut body = String::new();
                for c in chars.by_ref() {
                    body.push(c);
                    if body.ends_with(&close) {
                        break;
                    }
                }
                out.push_str("\"\"");
            }
            '"' => {
                out.push('"');
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == '"' && !escaped {
                        break;
                    }
                    escaped = c == '\\' && !escaped;
                }
                out.push('"');
            }
            // A character literal (not a lifetime): `'x'`, `'\n'`, `'"'`.
            '\'' => {
                let ahead: Vec<char> = chars.clone().take(3).collect();
                let len = match ahead.as_slice() {
                    ['\\', _, '\''] => 3,
                    [_, '\'', ..] => 2,
                    _ => 0,
                };
                for _ in 0..len {
                    chars.next();
                }
                out.push_str("' '");
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether `code` names `word` as a whole identifier.
fn names(code: &str, word: &str) -> bool {
    code.match_indices(word).any(|(i, _)| {
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        let before = code[..i].chars().next_back().is_none_or(|c| !ident(c));
        let after = code[i + word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !ident(c));
        before && after
    })
}

/// Whether `code` has a path through `word` (`word::…`, `crate::word::…`).
fn names_path(code: &str, word: &str) -> bool {
    let with = format!("{word}::");
    code.match_indices(&with).any(|(i, _)| {
        code[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

fn office_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("services"))
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// Handlers (`src/grpc.rs`, `src/grpc/**`) name no store path; domain modules
/// (`src/domain.rs`, `src/domain/**`) name neither sqlx, tonic nor tokio and read no clock.
fn layers(root: &Path) -> Vec<String> {
    const CLOCKS: &[&str] = &[
        "SystemTime::now",
        "Instant::now",
        "Utc::now",
        "OffsetDateTime::now_utc",
    ];
    let mut p = Vec::new();
    for office in office_dirs(root) {
        let src = office.join("src");
        for file in rust_files(&src) {
            let inner = file.strip_prefix(&src).unwrap_or(&file);
            let first = inner
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .unwrap_or("")
                .trim_end_matches(".rs");
            let text = code(&std::fs::read_to_string(&file).unwrap_or_default());
            let name = relative(root, &file);
            if first == "grpc" && names_path(&text, "store") {
                p.push(format!("{name}: a handler module names the store"));
            }
            if first == "domain" {
                for word in ["sqlx", "tonic", "tokio"] {
                    if names(&text, word) {
                        p.push(format!("{name}: a domain module names {word}"));
                    }
                }
                for clock in CLOCKS {
                    if text.contains(clock) {
                        p.push(format!("{name}: a domain module reads the clock ({clock})"));
                    }
                }
            }
        }
    }
    p
}

/// Every office has a service layer: `src/service.rs` or `src/service/mod.rs`.
fn service_layers(root: &Path) -> Vec<String> {
    office_dirs(root)
        .into_iter()
        .filter(|o| !o.join("src/service.rs").is_file() && !o.join("src/service/mod.rs").is_file())
        .map(|o| {
            format!(
                "{}: no service layer (src/service.rs or src/service/)",
                relative(root, &o)
            )
        })
        .collect()
}

/// No office source file over [`MAX_LINES`] lines but the [`PARSERS`].
fn sizes(root: &Path) -> Vec<String> {
    let mut p = Vec::new();
    for office in office_dirs(root) {
        for file in rust_files(&office.join("src")) {
            let name = relative(root, &file);
            let lines = std::fs::read_to_string(&file)
                .unwrap_or_default()
                .lines()
                .count();
            if lines > MAX_LINES && !PARSERS.contains(&name.as_str()) {
                p.push(format!(
                    "{name}: {lines} lines (at most {MAX_LINES}, parsers excepted)"
                ));
            }
        }
    }
    p
}

/// A crate's modules, by path (`["dev", "bootstrap"]`; the root is `[]`), with their files.
fn modules(src: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut out = BTreeMap::new();
    for file in rust_files(src) {
        let inner = file.strip_prefix(src).unwrap_or(&file);
        let mut path: Vec<String> = inner
            .iter()
            .filter_map(|c| c.to_str())
            .map(|c| c.trim_end_matches(".rs").to_owned())
            .collect();
        if path.last().is_some_and(|l| l == "mod") {
            path.pop();
        }
        if path.len() == 1 && (path[0] == "lib" || path[0] == "main") {
            path.clear();
        }
        // A crate with both lib.rs and main.rs: the binary's root is its own crate.
        if inner == Path::new("main.rs") && src.join("lib.rs").is_file() {
            continue;
        }
        out.insert(path, file);
    }
    out
}

/// The paths a file's code names, each as its segments: `use` trees expanded (`a::{b, c::d}`),
/// and every other `x::y` path.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // `use` trees.
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let is_start = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let after = &rest[i + 4..];
        let Some(end) = after.find(';') else { break };
        if is_start {
            expand(&[], &after[..end], &mut out);
        }
        rest = &after[end..];
    }
    // Inline paths.
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        if ident(bytes[i]) && (i == 0 || !(ident(bytes[i - 1]) || bytes[i - 1] == ':')) {
            let mut segs = Vec::new();
            let mut j = i;
            loop {
                let start = j;
                while j < bytes.len() && ident(bytes[j]) {
                    j += 1;
                }
                segs.push(bytes[start..j].iter().collect::<String>());
                if j + 2 < bytes.len()
                    && bytes[j] == ':'
                    && bytes[j + 1] == ':'
                    && ident(bytes[j + 2])
                {
                    j += 2;
                } else {
                    break;
                }
            }
            if segs.len() > 1 {
                out.push(segs);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

fn expand(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let mut base = prefix.to_vec();
        base.extend(
            tree[..open]
                .split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let (mut depth, mut from) = (0, 0);
        for (k, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&base, &inner[from..k], out);
                    from = k + 1;
                }
                _ => {}
            }
        }
        expand(&base, &inner[from..], out);
    } else {
        let tree = tree.split(" as ").next().unwrap_or(tree);
        let mut path = prefix.to_vec();
        path.extend(
            tree.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        if !path.is_empty() {
            out.push(path);
        }
    }
}

/// The module a path names from module `from` (the longest prefix that is a module of the
/// crate), if it names one of the crate's modules.
fn resolve(from: &[String], path: &[String], known: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut segs = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            segs = &path[1..];
        }
        Some("self") => {
            base = from.to_vec();
            segs = &path[1..];
        }
        Some("super") => {
            base = from.to_vec();
            while segs.first().is_some_and(|s| s == "super") {
                base.pop();
                segs = &segs[1..];
            }
        }
        // A bare path names a child module of this one (or an external crate).
        _ => base = from.to_vec(),
    }
    let start = base.clone();
    let mut found = None;
    for s in segs {
        base.push(s.clone());
        if known.contains(&base) {
            found = Some(base.clone());
        } else {
            break;
        }
    }
    // A path naming an item of an ancestor (or of this module itself) names that module.
    let explicit = matches!(
        path.first().map(String::as_str),
        Some("crate" | "self" | "super")
    );
    found.or_else(|| explicit.then_some(start))
}

/// The import graph of one crate's modules: `a` → `b` when `a`'s code names a path into `b`.
/// A module naming its own ancestors is not an edge (a child may use its parent's items: that
/// is what nesting means, and a module of tests uses `super::*`).
fn import_graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mods = modules(src);
    let known: BTreeSet<Vec<String>> = mods.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (module, file) in &mods {
        let text = code(&std::fs::read_to_string(file).unwrap_or_default());
        let mut edges = BTreeSet::new();
        for path in paths(&text) {
            if let Some(to) = resolve(module, &path, &known)
                && to != *module
                && !module.starts_with(&to)
            {
                edges.insert(to);
            }
        }
        graph.insert(module.clone(), edges);
    }
    graph
}

/// The circles of a graph: its strongly connected components of more than one module
/// (Tarjan's algorithm).
fn circles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct Tarjan<'g> {
        graph: &'g BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'g Vec<String>, usize>,
        low: BTreeMap<&'g Vec<String>, usize>,
        stack: Vec<&'g Vec<String>>,
        on_stack: BTreeSet<&'g Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g Vec<String>) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

/// Every crate of the workspace with a `src/`: the offices, the shared crates, the xtask.
fn crate_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = office_dirs(root);
    if let Ok(shared) = std::fs::read_dir(root.join("shared")) {
        dirs.extend(shared.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
    }
    dirs.push(root.join("xtask"));
    dirs.retain(|d| d.join("src").is_dir());
    dirs.sort();
    dirs
}

/// No import circle between the modules of one crate.
fn import_circles(root: &Path) -> Vec<String> {
    let mut p = Vec::new();
    for dir in crate_dirs(root) {
        for circle in circles(&import_graph(&dir.join("src"))) {
            let names: Vec<String> = circle
                .iter()
                .map(|m| {
                    if m.is_empty() {
                        "crate".to_owned()
                    } else {
                        m.join("::")
                    }
                })
                .collect();
            p.push(format!(
                "{}: import circle between {}",
                relative(root, &dir),
                names.join(", ")
            ));
        }
    }
    p
}

fn all_shape_problems(root: &Path) -> Vec<String> {
    let mut p = layers(root);
    p.extend(service_layers(root));
    p.extend(sizes(root));
    p.extend(import_circles(root));
    p
}

#[test]
fn every_office_has_the_shape() {
    let problems = all_shape_problems(&root());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The methods of each service in the contracts, by full service name.
fn contract_methods() -> BTreeMap<String, Vec<String>> {
    use prost::Message;
    let fds = prost_types::FileDescriptorSet::decode(lychd_proto::FILE_DESCRIPTOR_SET)
        .expect("the descriptor set decodes");
    let mut out = BTreeMap::new();
    for file in &fds.file {
        for service in &file.service {
            out.insert(
                format!("{}.{}", file.package(), service.name()),
                service.method.iter().map(|m| m.name().to_owned()).collect(),
            );
        }
    }
    out
}

/// Each office's self-authenticating methods are methods of its own service, and every other
/// method of its service is authenticated by the layer (none is open).
fn self_authenticating(
    office: Office,
    listed: &[&str],
    contracts: &BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    use lychd_auth::layer::{Gate, gate};
    let mut p = Vec::new();
    let service = office.grpc_service();
    let Some(methods) = contracts.get(service) else {
        return vec![format!("{office}: no service {service} in the contracts")];
    };
    let paths: Vec<String> = methods.iter().map(|m| format!("/{service}/{m}")).collect();
    for l in listed {
        if !paths.iter().any(|path| path == l) {
            p.push(format!(
                "{office}: self-authenticating {l} is no method of {service}"
            ));
        }
    }
    for path in &paths {
        let want = if listed.contains(&path.as_str()) {
            Gate::Handler
        } else {
            Gate::Layer
        };
        let got = gate(path, listed);
        if got != want {
            p.push(format!(
                "{office}: {path} is {got:?} at the layer, not {want:?}"
            ));
        }
    }
    p
}

#[test]
fn the_self_authenticating_methods_are_the_offices_own_and_every_other_is_authenticated() {
    let contracts = contract_methods();
    let mut p = Vec::new();
    for office in Office::ALL {
        p.extend(self_authenticating(
            office,
            crate::spec_of(office).self_authenticating,
            &contracts,
        ));
    }
    assert!(p.is_empty(), "{}", p.join("\n"));
}

/// The grants `lychd provision enroll` and `lychd dev` make (plain data, linked from the
/// operator tool's library as it is compiled there).
use lychd::grants as dev_grants;

/// The backticked method names a catalogue entry's meaning gives (`Lease`, `RenewLease`).
fn methods_of(meaning: &str) -> Vec<&str> {
    meaning
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|m| {
            m.chars().next().is_some_and(char::is_uppercase) && m.chars().all(char::is_alphanumeric)
        })
        .collect()
}

/// The constant an `actions!` block declares `action` under (`NAME = "office:verb";`), or "".
fn const_name(source: &str, action: &str) -> String {
    let needle = format!("= \"{action}\";");
    source
        .lines()
        .find(|l| l.trim_end().ends_with(&needle))
        .and_then(|l| l.split('=').next())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "\u{0}".to_owned())
}

fn snake(method: &str) -> String {
    let mut out = String::new();
    for (i, c) in method.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Every dev grant names an action of its office's catalogue, on an object type that office
/// decides on; and a service principal holds an action only if its office calls a method the
/// action decides (nothing more than its flows need).
fn dev_grants(root: &Path, contracts: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut p = Vec::new();
    type Grants = &'static [(&'static str, &'static str)];
    let holders: [(&str, Option<Office>, Grants); 4] = [
        ("the operator", None, dev_grants::OPERATOR_GRANTS),
        ("ward", Some(Office::Ward), dev_grants::WARD_GRANTS),
        (
            "orchestrator",
            Some(Office::Orchestrator),
            dev_grants::ORCHESTRATOR_GRANTS,
        ),
        ("runner", Some(Office::Runner), dev_grants::RUNNER_GRANTS),
    ];
    let source = |office: Office| -> String {
        rust_files(&root.join(format!("services/{}/src", office.name())))
            .iter()
            .map(|f| code(&std::fs::read_to_string(f).unwrap_or_default()))
            .collect()
    };
    let raw_source = |office: Office| -> String {
        rust_files(&root.join(format!("services/{}/src", office.name())))
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap_or_default())
            .collect()
    };
    for (holder, office, grants) in holders {
        for (action, object) in grants {
            let owner = action
                .split_once(':')
                .and_then(|(o, _)| Office::from_name(o));
            let Some(owner) = owner else {
                p.push(format!("{holder}: {action} names no office"));
                continue;
            };
            let catalogue = crate::spec_of(owner).actions;
            let Some(entry) = catalogue.iter().find(|a| a.name == *action) else {
                p.push(format!(
                    "{holder}: {action} is not in {owner}'s action catalogue"
                ));
                continue;
            };
            let kind = object.split_once(':').map_or(*object, |(k, _)| k);
            if !raw_source(owner).contains(&format!("\"{kind}:")) {
                p.push(format!(
                    "{holder}: {owner} decides {action} on no `{kind}:` object"
                ));
            }
            let Some(office) = office else { continue };
            let methods = &contracts[owner.grpc_service()];
            let named: Vec<&str> = methods_of(entry.meaning)
                .into_iter()
                .filter(|m| methods.iter().any(|x| x == m))
                .collect();
            let code = source(office);
            // An office's own action its principal holds for effect-time authority: the office
            // asks Ward about its own session immediately before its effect (the Runner's
            // effect permission), which its source does by the action's constant.
            let own_effect = owner == office
                && entry.meaning.contains("immediately before")
                && code.contains(&format!(
                    "actions::{}",
                    const_name(&raw_source(office), action)
                ));
            if !own_effect
                && !named
                    .iter()
                    .any(|m| code.contains(&format!(".{}(", snake(m))))
            {
                p.push(format!(
                    "{holder}: holds {action}, but calls none of {named:?} at {owner}"
                ));
            }
        }
    }
    p
}

#[test]
fn every_dev_grant_is_a_catalogued_action_a_flow_needs() {
    let p = dev_grants(&root(), &contract_methods());
    assert!(p.is_empty(), "{}", p.join("\n"));
}

#[test]
fn a_store_call_in_a_handler_a_clock_in_the_domain_a_long_file_and_a_circle_fail() {
    let house = tempfile::tempdir().expect("tempdir");
    let root = house.path();
    let write = |path: &str, text: &str| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "services/probe/src/lib.rs",
        "mod grpc;\nmod domain;\nmod a;\nmod b;\n",
    );
    write(
        "services/probe/src/grpc/mod.rs",
        "// store:: in a comment is fine\nfn f() { crate::store::leases::find(); }\n",
    );
    write(
        "services/probe/src/domain/rule.rs",
        "use tokio::time;\nfn now() { let _ = std::time::SystemTime::now(); }\n#[cfg(test)]\nmod tests { use sqlx::PgPool; }\n",
    );
    write(
        "services/probe/src/a.rs",
        "use crate::b::B;\npub struct A;\n",
    );
    write(
        "services/probe/src/b/mod.rs",
        &format!(
            "use super::a::A;\nmod c;\npub struct B;\n{}",
            "\n".repeat(MAX_LINES)
        ),
    );
    // A child using its parent's items (and its tests using `super::*`) is no circle.
    write(
        "services/probe/src/b/c.rs",
        "use super::B;\n#[cfg(test)]\nmod tests { use super::*; }\n",
    );
    let mut problems = all_shape_problems(root);
    problems.sort();
    assert_eq!(
        problems,
        [
            "services/probe/src/b/mod.rs: 503 lines (at most 500, parsers excepted)",
            "services/probe/src/domain/rule.rs: a domain module names tokio",
            "services/probe/src/domain/rule.rs: a domain module reads the clock (SystemTime::now)",
            "services/probe/src/grpc/mod.rs: a handler module names the store",
            "services/probe: import circle between a, b",
            "services/probe: no service layer (src/service.rs or src/service/)",
        ]
    );
}

#[test]
fn a_listed_method_that_is_not_the_offices_fails() {
    let contracts = contract_methods();
    let listed = [
        "/lychd.dispatcher.v1.Dispatcher/Lease",
        "/lychd.dispatcher.v1.Dispatcher/Leese",
        "/lychd.ward.v1.Ward/Authorize",
    ];
    assert_eq!(
        self_authenticating(Office::Dispatcher, &listed, &contracts),
        [
            "dispatcher: self-authenticating /lychd.dispatcher.v1.Dispatcher/Leese is no method of lychd.dispatcher.v1.Dispatcher",
            "dispatcher: self-authenticating /lychd.ward.v1.Ward/Authorize is no method of lychd.dispatcher.v1.Dispatcher",
        ]
    );
}

#[test]
fn use_trees_and_paths_resolve_to_modules() {
    let known: BTreeSet<Vec<String>> = [
        vec![],
        vec!["dev".to_owned()],
        vec!["dev".to_owned(), "bootstrap".to_owned()],
        vec!["dev".to_owned(), "cluster".to_owned()],
    ]
    .into_iter()
    .collect();
    let from = ["dev".to_owned(), "bootstrap".to_owned()];
    let found: BTreeSet<Vec<String>> = paths(
        "use super::{cluster::Cluster, Layout};\nuse crate::dev::cluster as c;\nfn f() { super::super::main(); std::fs::read(); }",
    )
    .iter()
    .filter_map(|p| resolve(&from, p, &known))
    .collect();
    assert_eq!(
        found,
        [
            vec![],
            vec!["dev".to_owned()],
            vec!["dev".to_owned(), "cluster".to_owned()],
        ]
        .into_iter()
        .collect()
    );
}

/// Every way `dir` (a client crate) could link an office: a dependency on an office crate or on
/// the office runtime or auth crates (which hold an office's configuration and credentials), or
/// a path into one in its sources.
fn client_links_an_office(dir: &Path) -> Vec<String> {
    let mut p = Vec::new();
    let forbidden: Vec<String> = Office::ALL
        .iter()
        .map(|o| {
            o.binary()
                .replace("lychd-helmloop", "lychd-helmloop-service")
        })
        .chain(["lychd-runtime".to_owned(), "lychd-auth".to_owned()])
        .collect();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    for line in manifest.lines() {
        let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
        if forbidden.iter().any(|f| f == name) {
            p.push(format!("{}: depends on {name}", dir.display()));
        }
    }
    for file in rust_files(&dir.join("src")) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for crate_name in &forbidden {
            let path = format!("{}::", crate_name.replace('-', "_"));
            if text.contains(&path) {
                p.push(format!("{}: names {path}", file.display()));
            }
        }
    }
    p
}

/// The operators' console is a client: it links no office crate and neither the runtime nor
/// the auth crate, only the generated clients of `lychd-proto` (ARCHITECTURE.md).
#[test]
fn the_console_links_no_office() {
    let problems = client_links_an_office(&root().join("apps/console"));
    assert!(problems.is_empty(), "{problems:#?}");

    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(dir.path().join("src")).expect("src");
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[dependencies]\nlychd-ward.workspace = true\nlychd-proto.workspace = true\n",
    )
    .expect("manifest");
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "fn f() { lychd_auth::admin::exchange(); }\n",
    )
    .expect("lib");
    let problems = client_links_an_office(dir.path());
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].ends_with("depends on lychd-ward"),
        "{problems:#?}"
    );
    assert!(problems[1].ends_with("names lychd_auth::"), "{problems:#?}");
}
