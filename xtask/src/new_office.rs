//! `new-office`: every place an office needs, made at once. Nothing is written unless every
//! place can be made, and an office that exists (in the `offices!` table, as a crate or as a
//! contract) is refused.

use std::path::{Path, PathBuf};

use crate::text::{self, Names};

/// What to make.
#[derive(Debug, Default)]
pub struct Request {
    /// `runner`, `probe-test`: lowercase letters, digits and single `-`.
    pub name: String,
    pub purpose: Option<String>,
    /// The gRPC service name (default: the name in CamelCase).
    pub service: Option<String>,
    /// The default port (default: one above the highest in the table).
    pub port: Option<u16>,
}

/// What was made.
#[derive(Debug)]
pub struct Made {
    /// The office's name in the table: schema, config prefix, binary suffix.
    pub office: String,
    pub service: String,
    pub package: String,
    pub port: u16,
    /// Every place made or changed, relative to the root.
    pub places: Vec<String>,
}

const DEFAULT_PURPOSE: &str = "what it does and never does is to be written";

/// One row of the `offices!` table in `shared/runtime/src/lib.rs`.
struct Row {
    variant: String,
    name: String,
    port: u16,
}

const RUNTIME_LIB: &str = "shared/runtime/src/lib.rs";

fn table(lib: &str) -> Result<Vec<Row>, String> {
    let start = lib
        .find("offices! {")
        .ok_or(format!("{RUNTIME_LIB}: no `offices!` table"))?;
    let body = &lib[start..];
    let body = &body[..body.find("\n}").unwrap_or(body.len())];
    let mut rows = Vec::new();
    for line in body.lines().skip(1) {
        let Some((variant, rest)) = line.trim().split_once("=>") else {
            continue;
        };
        let cells: Vec<&str> = rest.trim().trim_end_matches(';').split(',').collect();
        let [name, _service, port] = cells.as_slice() else {
            return Err(format!(
                "{RUNTIME_LIB}: cannot read the row `{}`",
                line.trim()
            ));
        };
        rows.push(Row {
            variant: variant.trim().to_owned(),
            name: name.trim().trim_matches('"').to_owned(),
            port: port
                .trim()
                .parse()
                .map_err(|_| format!("{RUNTIME_LIB}: bad port in `{}`", line.trim()))?,
        });
    }
    Ok(rows)
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = name.len() <= 24
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "office name {name:?}: 1..24 lowercase letters, digits and single `-`, starting with a letter"
        ))
    }
}

fn camel(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut c = part.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// tonic's module name of a service's server: the service in snake case, then `_server`.
fn snake(service: &str) -> String {
    let mut out = String::new();
    for (i, c) in service.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Every file of `dir`, relative to it, sorted.
fn files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let path = e.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap_or(&path).to_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The files to write: (path relative to the root, contents, whether it must be new).
type Plan = Vec<(String, String, bool)>;

pub fn make(root: &Path, request: &Request) -> Result<Made, String> {
    check_name(&request.name)?;
    let name = request.name.as_str();
    let office = name.replace('-', "_");
    let service = request.service.clone().unwrap_or_else(|| camel(name));
    if !service.starts_with(|c: char| c.is_ascii_uppercase())
        || !service.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(format!(
            "service name {service:?}: CamelCase letters and digits"
        ));
    }
    let package = format!("lychd-{name}");
    let krate = package.replace('-', "_");
    let purpose = request
        .purpose
        .clone()
        .unwrap_or(DEFAULT_PURPOSE.to_owned());
    let read = |path: &str| text::read(&root.join(path));

    let lib = read(RUNTIME_LIB)?;
    let rows = table(&lib)?;
    if let Some(row) = rows
        .iter()
        .find(|r| r.name == office || r.variant == service)
    {
        return Err(format!(
            "office {name}: the table has it already (`{} => \"{}\"`)",
            row.variant, row.name
        ));
    }
    for dir in [
        format!("services/{office}"),
        format!("proto/lychd/{office}"),
    ] {
        if root.join(&dir).exists() {
            return Err(format!("office {name}: {dir} exists already"));
        }
    }
    let port = match request.port {
        Some(p) => p,
        None => rows.iter().map(|r| r.port).max().unwrap_or(50050) + 1,
    };
    if rows.iter().any(|r| r.port == port) {
        return Err(format!("port {port} is another office's"));
    }
    let ward_port = rows
        .iter()
        .find(|r| r.name == "ward")
        .map(|r| r.port)
        .ok_or("the table has no ward")?;
    let last = rows.last().ok_or("the table is empty")?.name.clone();
    let names = Names::new(vec![
        ("package", package.clone()),
        ("crate", krate.clone()),
        ("server_module", format!("{}_server", snake(&service))),
        ("purpose", purpose.clone()),
        ("Office", service.clone()),
        ("office", office.clone()),
        ("OFFICE", office.to_uppercase()),
        ("port", port.to_string()),
        // Its Prometheus scrape endpoint: the port + 1000 (docs/operations.md, "Metrics").
        ("metrics_port", (u32::from(port) + 1000).to_string()),
        ("ward_port", ward_port.to_string()),
    ]);

    let mut plan: Plan = Vec::new();
    // The crate, rendered from the template.
    let template = root.join("templates/office");
    for file in files(&template)? {
        let body = names.render(&text::read(&template.join(&file))?)?;
        let to = file.to_string_lossy().trim_end_matches(".tmpl").to_owned();
        plan.push((format!("services/{office}/{to}"), body, true));
    }
    // Its contract, its deployment.
    let house = root.join("templates/house");
    for (template, to) in [
        (
            "office.proto",
            format!("proto/lychd/{office}/v1/{office}.proto"),
        ),
        (
            "quadlet.container",
            format!("deploy/quadlet/lychd-{office}.container"),
        ),
        (
            "quadlet-migrate.container",
            format!("deploy/quadlet/lychd-{office}-migrate.container"),
        ),
        ("config.toml", format!("deploy/config/{office}.toml")),
    ] {
        let body = names.render(&text::read(&house.join(template))?)?;
        plan.push((to, body, true));
    }

    // Its name, once: the table.
    let row = format!("    {service} => \"{office}\", \"{service}\", {port};\n");
    let lib = text::insert_before(
        &lib,
        |l| l.starts_with("offices! {"),
        |l| l == "}",
        &row,
        "the offices! table",
    )?;
    plan.push((RUNTIME_LIB.to_owned(), lib, false));

    let proto = read("proto/src/lib.rs")?;
    let module = format!(
        "pub mod {office} {{\n    pub mod v1 {{\n        tonic::include_proto!(\"lychd.{office}.v1\");\n    }}\n}}\n"
    );
    plan.push((
        "proto/src/lib.rs".to_owned(),
        format!("{}{module}", proto.trim_end().to_owned() + "\n"),
        false,
    ));

    let cargo = read("Cargo.toml")?;
    let office_packages: Vec<String> = cargo
        .lines()
        .filter(|l| l.contains("path = \"services/"))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    let cargo = text::insert_after_last(
        &cargo,
        |l| l.contains("path = \"services/"),
        &format!("{package} = {{ path = \"services/{office}\" }}"),
        "the workspace dependencies of the offices",
    )?;
    plan.push(("Cargo.toml".to_owned(), cargo, false));

    // The end-to-end crate links every office: its dependency, `spec_of`, tidy's list.
    let e2e = read("tests/Cargo.toml")?;
    let e2e = text::insert_after_last(
        &e2e,
        |l| {
            office_packages
                .iter()
                .any(|p| l.starts_with(&format!("{p}.workspace")))
        },
        &format!("{package}.workspace = true"),
        "the offices in tests/Cargo.toml",
    )?;
    plan.push(("tests/Cargo.toml".to_owned(), e2e, false));
    let main = read("tests/e2e/main.rs")?;
    let main = text::insert_after_last(
        &main,
        |l| l.trim_start().starts_with("Office::") && l.trim_end().ends_with("::spec(),"),
        &format!("        Office::{service} => {krate}::spec(),"),
        "spec_of in tests/e2e/main.rs",
    )?;
    plan.push(("tests/e2e/main.rs".to_owned(), main, false));
    let tidy = read("tests/e2e/tidy.rs")?;
    let entry = format!(
        "        Entry {{\n            spec: {krate}::spec(),\n            package: \"{package}\",\n            scaffold: Some((\"{service}\", \"{}_server\", {purpose:?})),\n        }},\n",
        snake(&service)
    );
    let tidy = text::insert_before(
        &tidy,
        |l| l.starts_with("fn entries()"),
        |l| l == "    ]",
        &entry,
        "entries() in tests/e2e/tidy.rs",
    )?;
    plan.push(("tests/e2e/tidy.rs".to_owned(), tidy, false));

    // The image, the provisioning.
    let containerfile = read("deploy/Containerfile")?;
    let binary = format!("/src/target/release/lychd-{office}");
    if !containerfile.contains(" /usr/local/bin/") {
        return Err("deploy/Containerfile: no `COPY … /usr/local/bin/`".to_owned());
    }
    let containerfile =
        containerfile.replacen(" /usr/local/bin/", &format!(" {binary} /usr/local/bin/"), 1);
    plan.push(("deploy/Containerfile".to_owned(), containerfile, false));
    let target = read("deploy/quadlet/lychd.target")?;
    let wants = target
        .lines()
        .find(|l| l.starts_with("Wants="))
        .ok_or("deploy/quadlet/lychd.target: no `Wants=`")?;
    let target = target.replacen(
        wants,
        &format!("{wants} lychd-{office}-migrate.service lychd-{office}.service"),
        1,
    );
    plan.push(("deploy/quadlet/lychd.target".to_owned(), target, false));
    // Provisioning sets the new office's role passwords from their secrets: mount them after
    // the last office's.
    let provision = read("deploy/quadlet/lychd-provision.container")?;
    let last_secret = provision
        .lines()
        .rfind(|l| l.starts_with("Secret=lychd-") && l.contains("-app-password,"))
        .ok_or(
            "deploy/quadlet/lychd-provision.container: no `Secret=lychd-<office>-app-password`",
        )?;
    let options = last_secret
        .split_once(',')
        .map(|(_, o)| o)
        .ok_or("deploy/quadlet/lychd-provision.container: a `Secret=` without options")?;
    let provision = provision.replacen(
        last_secret,
        &format!(
            "{last_secret}\nSecret=lychd-{office}-owner-password,{options}\nSecret=lychd-{office}-app-password,{options}"
        ),
        1,
    );
    plan.push((
        "deploy/quadlet/lychd-provision.container".to_owned(),
        provision,
        false,
    ));
    plan.push((
        "deploy/postgres/provision.sql".to_owned(),
        provisioning(&read("deploy/postgres/provision.sql")?, &last, &office)?,
        false,
    ));

    // The docs.
    let refusals = read("docs/refusals.md")?;
    plan.push((
        "docs/refusals.md".to_owned(),
        format!(
            "{}\n\n## `lychd.{office}`\n\nThe {service} office's own reasons (none yet).\n\n| reason | code | meaning |\n| --- | --- | --- |\n",
            refusals.trim_end()
        ),
        false,
    ));
    let section = format!(
        "## {service}\n\n**Built today:** the office as `cargo xtask new-office {name}` makes it: `Describe`,\nits schema `{office}` and roles, its deployment. The office: {purpose}.\n\n"
    );
    let design = read("docs/design.md")?;
    let design = match design.lines().any(|l| l == "## Cross-office flows") {
        true => text::insert_before(
            &design,
            |l| l == "## Cross-office flows",
            |l| l == "## Cross-office flows",
            &section,
            "docs/design.md",
        )?,
        false => format!("{}\n\n{section}", design.trim_end()),
    };
    plan.push(("docs/design.md".to_owned(), design, false));
    let map = format!(
        "#### `services/{office}/` — `{package}` (scaffold), binary `lychd-{office}`\nThe {service} office: {purpose}. Made by `cargo xtask new-office {name}`: `grpc/`, `service/`, `store/`,\n`domain/`, `actions.rs`, `error.rs`, `migrations/`.\n\n**API:** `lychd.{office}.v1.{service}`.\n\n"
    );
    plan.push((
        "ARCHITECTURE.md".to_owned(),
        code_map(&read("ARCHITECTURE.md")?, &map),
        false,
    ));

    // Every place is known: write them.
    let mut places = Vec::new();
    for (path, body, new) in &plan {
        let full = root.join(path);
        if *new {
            text::create(&full, body)?;
        } else {
            text::write(&full, body)?;
        }
        places.push(path.clone());
    }
    // The edited Rust files as rustfmt writes them (best effort: without rustfmt they are
    // still correct, only formatted by hand).
    let formatted = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
        .args(["fmt", "--all"])
        .current_dir(root)
        .status()
        .is_ok_and(|s| s.success());
    if !formatted {
        eprintln!("xtask: `cargo fmt --all` did not run; format the new office before committing");
    }
    Ok(Made {
        office,
        service,
        package,
        port,
        places,
    })
}

/// `deploy/postgres/provision.sql` with the office's roles and schema after `last`'s (what
/// `lychd_runtime::db::provision_all_sql` generates once the table names it; its test keeps
/// the file equal).
fn provisioning(sql: &str, last: &str, office: &str) -> Result<String, String> {
    let blocks: Vec<&str> = sql.split("\n\n").collect();
    let roles = blocks
        .iter()
        .position(|b| b.contains(&format!("rolname = 'lychd_{last}_owner'")))
        .ok_or(format!("provision.sql: no roles of {last}"))?;
    let schema = blocks
        .iter()
        .position(|b| b.starts_with(&format!("CREATE SCHEMA IF NOT EXISTS {last} ")))
        .ok_or(format!("provision.sql: no schema of {last}"))?;
    // Every mention of `last` as a name of its own (`lychd_{last}_owner`, `SCHEMA {last}`).
    let rename = |b: &str| {
        let mut out = String::new();
        let mut rest = b;
        while let Some(i) = rest.find(last) {
            let before = rest[..i].chars().next_back();
            let after = rest[i + last.len()..].chars().next();
            let own = before.is_none_or(|c| !c.is_ascii_alphanumeric())
                && after.is_none_or(|c| !c.is_ascii_alphanumeric());
            out.push_str(&rest[..i]);
            out.push_str(if own { office } else { last });
            rest = &rest[i + last.len()..];
        }
        out.push_str(rest);
        out
    };
    let mut out: Vec<String> = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        out.push((*b).to_owned());
        if i == roles {
            out.push(rename(b));
        }
        if i == schema {
            // The last block ends the file with a newline: so does its copy.
            let copy = rename(b);
            let last_line = out.pop().unwrap_or_default();
            out.push(last_line.trim_end().to_owned());
            out.push(copy);
        }
    }
    Ok(out.join("\n\n"))
}

/// `ARCHITECTURE.md` with `entry` after the last office in its code map (at the end when the
/// map lists none).
fn code_map(doc: &str, entry: &str) -> String {
    let lines: Vec<&str> = doc.split_inclusive('\n').collect();
    let Some(last) = lines.iter().rposition(|l| l.starts_with("#### `services/")) else {
        return format!("{}\n\n{entry}", doc.trim_end());
    };
    let next = lines[last + 1..]
        .iter()
        .position(|l| l.starts_with('#'))
        .map_or(lines.len(), |n| last + 1 + n);
    let mut out: String = lines[..next].concat();
    out.push_str(entry);
    out.push_str(&lines[next..].concat());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_office_name() {
        assert_eq!(camel("probe-test"), "ProbeTest");
        assert_eq!(snake("ProbeTest"), "probe_test");
        assert_eq!(snake("HelmLoop"), "helm_loop");
        assert!(check_name("probe-test").is_ok());
        for bad in ["", "Probe", "probe-", "pro--be", "1probe", "probe_test"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_table_is_read() {
        let lib = "offices! {\n    Ward => \"ward\", \"Ward\", 50053;\n    HelmLoop => \"helmloop\", \"HelmLoop\", 50055;\n}\n";
        let rows = table(lib).expect("table");
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (
                rows[1].variant.as_str(),
                rows[1].name.as_str(),
                rows[1].port
            ),
            ("HelmLoop", "helmloop", 50055)
        );
    }

    #[test]
    fn provisioning_gets_the_offices_roles_and_schema_after_the_last() {
        let sql = "-- head\n\nDO $$ rolname = 'lychd_a_owner' lychd_a_app $$;\n\nREVOKE;\n\nCREATE SCHEMA IF NOT EXISTS a AUTHORIZATION lychd_a_owner;\n  SET search_path = a; -- a schema\n";
        assert_eq!(
            provisioning(sql, "a", "b").expect("sql"),
            "-- head\n\nDO $$ rolname = 'lychd_a_owner' lychd_a_app $$;\n\nDO $$ rolname = 'lychd_b_owner' lychd_b_app $$;\n\nREVOKE;\n\nCREATE SCHEMA IF NOT EXISTS a AUTHORIZATION lychd_a_owner;\n  SET search_path = a; -- a schema\n\nCREATE SCHEMA IF NOT EXISTS b AUTHORIZATION lychd_b_owner;\n  SET search_path = b; -- b schema\n"
        );
    }
}
