//! How catalogues are documented: `docs/refusals.md` holds, under a heading naming each domain
//! (`` ## `lychd.dispatcher` ``), a table rendered from its catalogue ([`with_tables`]); the
//! prose around the tables is kept. [`undocumented`] names what differs.

use crate::{COMMON, Reason, Refusals, code_name};

/// The table of `reasons`: `` | `REASON` | `CODE` | meaning | `` per reason, in order.
pub fn render_table(reasons: &[Reason]) -> String {
    table(reasons.iter().map(|r| (r, "")))
}

/// The table of an office's (or another domain's) catalogue: its own reasons, then the
/// [`shared`](crate::shared) ones it answers (marked, with the shared meaning).
pub fn office_table(refusals: &Refusals) -> String {
    table(
        refusals
            .own
            .iter()
            .map(|r| (r, ""))
            .chain(refusals.shared.iter().map(|r| (r, "shared: "))),
    )
}

fn table<'a>(rows: impl Iterator<Item = (&'a Reason, &'static str)>) -> String {
    let mut out = String::from("| reason | code | meaning |\n| --- | --- | --- |\n");
    for (r, note) in rows {
        out.push_str(&format!(
            "| `{}` | `{}` | {note}{} |\n",
            r.name,
            code_name(r.code),
            r.meaning.replace('|', "\\|")
        ));
    }
    out
}

/// `doc` with the table under each heading naming `` `section` `` replaced by the given one
/// (inserted after the heading when it has none); everything else is kept. Errs naming a
/// section that has no heading.
pub fn with_tables(doc: &str, tables: &[(&str, String)]) -> Result<String, String> {
    let mut lines: Vec<String> = doc.lines().map(str::to_owned).collect();
    for (section, table) in tables {
        let marker = format!("`{section}`");
        let heading = lines
            .iter()
            .position(|l| l.starts_with('#') && l.contains(&marker))
            .ok_or_else(|| format!("no section for `{section}`"))?;
        let end = lines[heading + 1..]
            .iter()
            .position(|l| l.starts_with('#'))
            .map_or(lines.len(), |i| heading + 1 + i);
        let first = (heading + 1..end).find(|&i| lines[i].trim_start().starts_with('|'));
        let rendered: Vec<String> = table.lines().map(str::to_owned).collect();
        match first {
            Some(start) => {
                let stop = (start..end)
                    .find(|&i| !lines[i].trim_start().starts_with('|'))
                    .unwrap_or(end);
                lines.splice(start..stop, rendered);
            }
            None => {
                let mut block = vec![String::new()];
                block.extend(rendered);
                lines.splice(heading + 1..heading + 1, block);
            }
        }
    }
    let mut out = lines.join("\n");
    if doc.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// How a refusal catalogue is documented: in `doc` (markdown), a heading line containing
/// `` `<domain>` `` followed by a table whose rows are `` | `REASON` | `CODE` | meaning | ``
/// (its own reasons and the shared ones it answers). Returns the differences between that
/// table and the catalogue (empty when equal); the common reasons are documented once under the
/// heading `` `common` ``, the shared ones under `` `shared` ``.
pub fn undocumented(doc: &str, refusals: &Refusals) -> Vec<String> {
    let mut problems = Vec::new();
    let answered: Vec<Reason> = refusals
        .own
        .iter()
        .chain(refusals.shared)
        .copied()
        .collect();
    for (section, reasons, both_ways) in [
        (refusals.domain, answered.as_slice(), true),
        ("common", COMMON, true),
        ("shared", refusals.shared, false),
    ] {
        if reasons.is_empty() && !both_ways {
            continue;
        }
        let Some(listed) = documented(doc, section) else {
            problems.push(format!("no section for `{section}`"));
            continue;
        };
        let answered: Vec<(String, String)> = reasons
            .iter()
            .map(|r| (r.name.to_owned(), code_name(r.code).to_owned()))
            .collect();
        for (name, code) in &answered {
            if !listed.contains(&(name.clone(), code.clone())) {
                problems.push(format!("{section}: {name} ({code}) is not documented"));
            }
        }
        if !both_ways {
            continue;
        }
        for (name, code) in &listed {
            if !answered.contains(&(name.clone(), code.clone())) {
                problems.push(format!(
                    "{section}: {name} ({code}) is documented but not answered"
                ));
            }
        }
    }
    problems
}

/// The `(reason, code)` rows of the table under the heading that names `section`.
fn documented(doc: &str, section: &str) -> Option<Vec<(String, String)>> {
    let marker = format!("`{section}`");
    let mut lines = doc
        .lines()
        .skip_while(|l| !(l.starts_with('#') && l.contains(&marker)));
    lines.next()?;
    let rows = lines
        .take_while(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let cells: Vec<&str> = l
                .trim()
                .strip_prefix('|')?
                .split('|')
                .map(str::trim)
                .collect();
            let name = cells.first()?.strip_prefix('`')?.strip_suffix('`')?;
            let code = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((name.to_owned(), code.to_owned()))
        })
        .collect();
    Some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Code, common};

    const A: Reason = Reason {
        name: "THING_GONE",
        code: Code::NotFound,
        meaning: "no such | thing",
    };

    #[test]
    fn tables_are_replaced_and_prose_kept() {
        let doc = "# T\n\nprose\n\n## `x`\n\nabout x\n\n| reason | code | meaning |\n| --- | --- | --- |\n| `OLD` | `OK` | old |\n\nafter\n## `y`\ny prose\n";
        let out = with_tables(
            doc,
            &[
                ("x", render_table(&[A])),
                ("y", render_table(&[common::INTERNAL])),
            ],
        )
        .expect("sections");
        assert_eq!(
            out,
            "# T\n\nprose\n\n## `x`\n\nabout x\n\n| reason | code | meaning |\n| --- | --- | --- |\n| `THING_GONE` | `NOT_FOUND` | no such \\| thing |\n\nafter\n## `y`\n\n| reason | code | meaning |\n| --- | --- | --- |\n| `INTERNAL` | `INTERNAL` | a bug or a broken invariant (logged, never detailed) |\ny prose\n"
        );
        assert_eq!(
            with_tables(&out, &[("x", render_table(&[A]))]),
            Ok(out.clone())
        );
        assert_eq!(
            with_tables(doc, &[("z", String::new())]),
            Err("no section for `z`".to_owned())
        );
    }
}
