//! Consistency of the house, in the manner of rust-analyzer's `tidy`: every office has what
//! deploying, running and reading about it needs, its catalogues agree with the docs and with
//! Ward's grammar, and the scaffold offices are still the template. Each check returns the
//! problems it found, so the tests of the tests below can show that it fails.

use std::path::{Path, PathBuf};

use lychd_runtime::Office;
use lychd_runtime::cli::OfficeSpec;

/// An office crate as the house knows it.
struct Entry {
    spec: OfficeSpec,
    /// The package name (`lychd-helmloop-service`: the binary is `lychd-helmloop`).
    package: &'static str,
    /// For an office still as the template made it: its Rust service name, generated server
    /// module and purpose line.
    scaffold: Option<(&'static str, &'static str, &'static str)>,
}

fn entries() -> Vec<Entry> {
    vec![
        Entry {
            spec: lychd_dispatcher::spec(),
            package: "lychd-dispatcher",
            scaffold: None,
        },
        Entry {
            spec: lychd_orchestrator::spec(),
            package: "lychd-orchestrator",
            scaffold: None,
        },
        Entry {
            spec: lychd_ward::spec(),
            package: "lychd-ward",
            scaffold: None,
        },
        Entry {
            spec: lychd_archive::spec(),
            package: "lychd-archive",
            scaffold: None,
        },
        Entry {
            spec: lychd_helmloop_service::spec(),
            package: "lychd-helmloop-service",
            scaffold: None,
        },
        Entry {
            spec: lychd_runner::spec(),
            package: "lychd-runner",
            scaffold: None,
        },
    ]
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("invariant: the e2e crate is tests/ in the workspace")
        .to_owned()
}

fn read(root: &Path, path: &str, problems: &mut Vec<String>) -> String {
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|_| {
        problems.push(format!("{path} is missing"));
        String::new()
    })
}

/// Every office of `Office::ALL` has exactly one entry, whose spec names it.
fn office_entries(entries: &[Entry]) -> Vec<String> {
    let mut problems = Vec::new();
    for office in Office::ALL {
        let n = entries.iter().filter(|e| e.spec.office == office).count();
        if n != 1 {
            problems.push(format!(
                "{office}: {n} entries in tidy's office list (want 1)"
            ));
        }
    }
    problems
}

/// Deployment: Quadlet units (serve and one-shot migrate), example configuration, Containerfile.
fn deployment(root: &Path, office: Office) -> Vec<String> {
    let mut p = Vec::new();
    let n = office.name();
    let unit = read(root, &format!("deploy/quadlet/lychd-{n}.container"), &mut p);
    for want in [
        format!("Exec=lychd-{n} --config /etc/lychd/{n}.toml serve"),
        format!("Requires=lychd-{n}-migrate.service"),
        format!("PublishPort=127.0.0.1:{0}:{0}", office.default_port()),
    ] {
        if !unit.is_empty() && !unit.contains(&want) {
            p.push(format!("deploy/quadlet/lychd-{n}.container lacks `{want}`"));
        }
    }
    let migrate = read(
        root,
        &format!("deploy/quadlet/lychd-{n}-migrate.container"),
        &mut p,
    );
    let want = format!("Exec=lychd-{n} --config /etc/lychd/{n}.toml migrate");
    if !migrate.is_empty() && !migrate.contains(&want) {
        p.push(format!(
            "deploy/quadlet/lychd-{n}-migrate.container lacks `{want}`"
        ));
    }
    read(root, &format!("deploy/config/{n}.toml"), &mut p);
    let containerfile = read(root, "deploy/Containerfile", &mut p);
    let binary = format!("/target/release/lychd-{n}");
    if !containerfile
        .split_whitespace()
        .any(|w| w.ends_with(&binary))
    {
        p.push(format!("deploy/Containerfile does not copy lychd-{n}"));
    }
    p
}

/// Sources and docs: contract, workspace dependency, code map, design, refusal catalogue.
fn sources_and_docs(root: &Path, entry: &Entry) -> Vec<String> {
    let mut p = Vec::new();
    let office = entry.spec.office;
    let n = office.name();
    read(root, &format!("proto/lychd/{n}/v1/{n}.proto"), &mut p);
    let cargo = read(root, "Cargo.toml", &mut p);
    let dep = format!("{} = {{ path = \"services/{n}\" }}", entry.package);
    if !cargo.contains(&dep) {
        p.push(format!("Cargo.toml lacks the workspace dependency `{dep}`"));
    }
    if !read(root, "ARCHITECTURE.md", &mut p).contains(&format!("services/{n}")) {
        p.push(format!(
            "ARCHITECTURE.md has no code-map entry naming services/{n}"
        ));
    }
    let design = read(root, "docs/design.md", &mut p);
    let title = entry
        .scaffold
        .map(|s| s.0)
        .unwrap_or_else(|| office.grpc_service().rsplit('.').next().unwrap_or(n));
    if !design.lines().any(|l| l == format!("## {title}")) {
        p.push(format!("docs/design.md has no `## {title}` section"));
    }
    if entry.spec.refusals.domain != office.domain() {
        p.push(format!(
            "{n}: refusals in domain {}",
            entry.spec.refusals.domain
        ));
    }
    let refusals = read(root, "docs/refusals.md", &mut p);
    p.extend(
        lychd_runtime::refusal::undocumented(&refusals, &entry.spec.refusals)
            .into_iter()
            .map(|d| format!("docs/refusals.md: {d}")),
    );
    p
}

/// The office's actions are its own, Ward's grammar accepts them, and no handler names an
/// action outside the catalogue (`src/actions.rs`).
fn actions(root: &Path, office: Office, catalogue: &[lychd_runtime::auth::Action]) -> Vec<String> {
    let mut p = Vec::new();
    let n = office.name();
    if !catalogue.iter().any(|a| a.name == format!("{n}:describe")) {
        p.push(format!("{n}: no `{n}:describe` action"));
    }
    for a in catalogue {
        if !a.name.starts_with(&format!("{n}:")) {
            p.push(format!("{n}: action {} belongs to another office", a.name));
        }
        if lychd_ward::domain::grammar::Action::parse(a.name).is_err() {
            p.push(format!("{n}: action {} is not in Ward's grammar", a.name));
        }
    }
    let src = root.join(format!("services/{n}/src"));
    for file in rust_files(&src) {
        if file.ends_with("actions.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        // Tests may spell actions out; the module of tests comes last in a file.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for literal in code.split('"').skip(1).step_by(2) {
            let is_action = literal.split_once(':').is_some_and(|(o, verb)| {
                Office::from_name(o).is_some()
                    && !verb.is_empty()
                    && verb.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            });
            if is_action {
                p.push(format!(
                    "{}: action \"{literal}\" outside the action catalogue",
                    file.strip_prefix(root).unwrap_or(&file).display()
                ));
            }
        }
    }
    p
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

/// The template's files, rendered for an office.
fn render(template: &str, entry: &Entry, (service, server, purpose): (&str, &str, &str)) -> String {
    template
        .replace("{{package}}", entry.package)
        .replace("{{crate}}", &entry.package.replace('-', "_"))
        .replace("{{server_module}}", server)
        .replace("{{purpose}}", purpose)
        .replace("{{Office}}", service)
        .replace("{{office}}", entry.spec.office.name())
}

const TEMPLATE_FILES: &[(&str, &str)] = &[
    ("Cargo.toml.tmpl", "Cargo.toml"),
    ("src/lib.rs", "src/lib.rs"),
    ("src/main.rs", "src/main.rs"),
    ("src/grpc/mod.rs", "src/grpc/mod.rs"),
    ("src/service/mod.rs", "src/service/mod.rs"),
    ("src/store/mod.rs", "src/store/mod.rs"),
    ("src/domain/mod.rs", "src/domain/mod.rs"),
    ("src/actions.rs", "src/actions.rs"),
    ("src/error.rs", "src/error.rs"),
    ("migrations/0001_office.sql", "migrations/0001_office.sql"),
];

/// Source text as rustfmt may lay it out for any name: without whitespace and without the
/// trailing commas of wrapped lists.
fn laid_out(text: &str) -> String {
    let bare: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    bare.replace(",)", ")")
        .replace(",]", "]")
        .replace(",}", "}")
}

/// A scaffold office is exactly the template, rendered (and formatted: `cargo xtask
/// new-office` runs `cargo fmt`, which wraps lines by the length of the office's names).
fn scaffold(root: &Path, entry: &Entry) -> Vec<String> {
    let mut p = Vec::new();
    let Some(names) = entry.scaffold else {
        return p;
    };
    let n = entry.spec.office.name();
    for (template, file) in TEMPLATE_FILES {
        let want = render(
            &read(root, &format!("templates/office/{template}"), &mut p),
            entry,
            names,
        );
        let path = format!("services/{n}/{file}");
        let got = read(root, &path, &mut p);
        if laid_out(&got) != laid_out(&want) {
            p.push(format!("{path} differs from templates/office/{template}"));
        }
    }
    p
}

/// Every reason a Ward decision can deny with is in `lychd-auth`'s catalogue (which relays it),
/// with `UNAUTHENTICATED` exactly for the authentication failures.
fn relayed_ward_reasons() -> Vec<String> {
    use lychd_ward::domain::decision::Reason;
    let mut p = Vec::new();
    for r in Reason::ALL.into_iter().filter(|r| !r.allowed()) {
        let want = if r.is_authentication_failure() {
            tonic::Code::Unauthenticated
        } else {
            tonic::Code::PermissionDenied
        };
        match lychd_auth::reasons::OWN
            .iter()
            .find(|a| a.name == r.as_str())
        {
            Some(a) if a.code == want => {}
            Some(a) => p.push(format!(
                "lychd.auth relays {} as {:?}, not {want:?}",
                a.name, a.code
            )),
            None => p.push(format!(
                "lychd.auth does not list Ward's reason {}",
                r.as_str()
            )),
        }
    }
    p
}

/// HelmLoop's schema lists exactly the reducer's reason codes.
fn helmloop_reason_codes(root: &Path) -> Vec<String> {
    let mut p = Vec::new();
    let text = read(root, "schemas/helmloop-v0.1.schema.json", &mut p);
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let listed: Vec<&str> = schema["$defs"]["ReasonCode"]["enum"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let code: Vec<&str> = lychd_helmloop::reduce::ReasonCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    for c in &code {
        if !listed.contains(c) {
            p.push(format!("schema ReasonCode lacks {c}"));
        }
    }
    for c in &listed {
        if !code.contains(c) {
            p.push(format!(
                "schema ReasonCode lists {c}, which the reducer never answers"
            ));
        }
    }
    p
}

fn all_problems(root: &Path) -> Vec<String> {
    let entries = entries();
    let mut p = office_entries(&entries);
    for e in &entries {
        p.extend(deployment(root, e.spec.office));
        p.extend(sources_and_docs(root, e));
        p.extend(actions(root, e.spec.office, e.spec.actions));
        p.extend(scaffold(root, e));
    }
    let refusals = read(root, "docs/refusals.md", &mut p);
    for catalogue in [&lychd_auth::REFUSALS, &lychd_runtime::wire::REFUSALS] {
        p.extend(
            lychd_runtime::refusal::undocumented(&refusals, catalogue)
                .into_iter()
                .map(|d| format!("docs/refusals.md: {d}")),
        );
    }
    p.extend(helmloop_reason_codes(root));
    p.extend(relayed_ward_reasons());
    p
}

#[test]
fn the_house_is_consistent() {
    let problems = all_problems(&root());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A copy of what the checks read, to break on purpose.
fn copy_of_house() -> tempfile::TempDir {
    let from = root();
    let to = tempfile::tempdir().expect("tempdir");
    for dir in [
        "deploy",
        "docs",
        "proto/lychd",
        "services",
        "templates",
        "schemas",
    ] {
        copy_dir(&from.join(dir), &to.path().join(dir));
    }
    for file in ["Cargo.toml", "ARCHITECTURE.md"] {
        std::fs::copy(from.join(file), to.path().join(file)).expect("copy");
    }
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir").flatten() {
        let path = e.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            copy_dir(&path, &to.join(e.file_name()));
        } else {
            std::fs::copy(&path, to.join(e.file_name())).expect("copy");
        }
    }
}

#[test]
fn a_missing_quadlet_reason_or_action_fails_the_checks() {
    let house = copy_of_house();
    let root = house.path();
    assert_eq!(
        all_problems(root),
        Vec::<String>::new(),
        "the copy starts clean"
    );

    std::fs::remove_file(root.join("deploy/quadlet/lychd-archive-migrate.container")).unwrap();
    let refusals = std::fs::read_to_string(root.join("docs/refusals.md")).unwrap();
    let without = refusals.replace(
        "| `LEASE_EXPIRED` | `FAILED_PRECONDITION` |",
        "| `LEASE_GONE` | `FAILED_PRECONDITION` |",
    );
    std::fs::write(root.join("docs/refusals.md"), without).unwrap();
    let grpc = root.join("services/dispatcher/src/grpc/mod.rs");
    let handler = std::fs::read_to_string(&grpc).unwrap();
    std::fs::write(
        &grpc,
        handler.replacen("actions::READ", "\"dispatcher:peek\"", 1),
    )
    .unwrap();

    let problems = all_problems(root);
    for want in [
        "deploy/quadlet/lychd-archive-migrate.container is missing",
        "docs/refusals.md: lychd.dispatcher: LEASE_EXPIRED (FAILED_PRECONDITION) is not documented",
        "docs/refusals.md: lychd.dispatcher: LEASE_GONE (FAILED_PRECONDITION) is documented but not answered",
        "services/dispatcher/src/grpc/mod.rs: action \"dispatcher:peek\" outside the action catalogue",
    ] {
        assert!(
            problems.iter().any(|p| p == want),
            "{want} not in {problems:#?}"
        );
    }
    // (No office is a scaffold any more: the template check has no subject to break.)
    assert_eq!(problems.len(), 4, "{problems:#?}");
}

#[test]
fn every_office_needs_an_entry() {
    let mut entries = entries();
    entries.retain(|e| e.spec.office != Office::Archive);
    assert_eq!(
        office_entries(&entries),
        ["archive: 0 entries in tidy's office list (want 1)"]
    );
}

/// `docs/refusals.md`'s tables as the catalogues render them: common, shared, `lychd.auth`,
/// `lychd.wire`, `lychd.tls`, then each office's (its own reasons, then the shared ones it answers).
fn refusal_tables(entries: &[Entry]) -> Vec<(&'static str, String)> {
    use lychd_runtime::refusal::{COMMON, SHARED, office_table, render_table};
    let mut tables = vec![
        ("common", render_table(COMMON)),
        ("shared", render_table(SHARED)),
    ];
    for refusals in [
        &lychd_auth::REFUSALS,
        &lychd_runtime::wire::REFUSALS,
        &lychd_runtime::tls::REFUSALS,
    ] {
        tables.push((refusals.domain, office_table(refusals)));
    }
    for e in entries {
        tables.push((e.spec.refusals.domain, office_table(&e.spec.refusals)));
    }
    tables
}

/// The tables of `docs/refusals.md` are generated from the catalogues (the prose around them is
/// written by hand): `LYCHD_BLESS=1` rewrites them; otherwise a difference fails.
#[test]
fn refusal_tables_are_generated_from_the_catalogues() {
    let path = root().join("docs/refusals.md");
    let doc = std::fs::read_to_string(&path).expect("docs/refusals.md");
    let rendered = lychd_runtime::refusal::with_tables(&doc, &refusal_tables(&entries()))
        .unwrap_or_else(|e| panic!("docs/refusals.md: {e}"));
    if std::env::var_os("LYCHD_BLESS").is_some() {
        std::fs::write(&path, &rendered).expect("bless docs/refusals.md");
        return;
    }
    assert!(
        doc == rendered,
        "docs/refusals.md's tables differ from the catalogues: rerun this test with LYCHD_BLESS=1"
    );
}
