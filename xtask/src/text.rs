//! Small text edits of the workspace's files: placeholders, and lines inserted at anchors.

use std::path::Path;

/// The names a template's `{{placeholder}}`s stand for.
pub struct Names {
    pairs: Vec<(&'static str, String)>,
}

impl Names {
    pub fn new(pairs: Vec<(&'static str, String)>) -> Self {
        Names { pairs }
    }

    /// `template` with every `{{key}}` replaced; an unknown placeholder is an error.
    pub fn render(&self, template: &str) -> Result<String, String> {
        let mut out = template.to_owned();
        for (key, value) in &self.pairs {
            out = out.replace(&format!("{{{{{key}}}}}"), value);
        }
        match out.find("{{") {
            // `{{{Office}` in a `use` tree renders to `{Name`: only a `{{` left over is one.
            Some(i) if out[i..].contains("}}") && is_placeholder(&out[i..]) => Err(format!(
                "unknown placeholder near `{}`",
                &out[i..(i + 24).min(out.len())]
            )),
            _ => Ok(out),
        }
    }
}

fn is_placeholder(at: &str) -> bool {
    let inner = &at[2..];
    inner.find("}}").is_some_and(|end| {
        inner[..end]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

pub fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Write a file that must not exist yet.
pub fn create(path: &Path, text: &str) -> Result<(), String> {
    if path.exists() {
        return Err(format!("{} exists already", path.display()));
    }
    write(path, text)
}

/// `text` with `insert` (whole lines) put after the last line for which `after` holds.
pub fn insert_after_last(
    text: &str,
    after: impl Fn(&str) -> bool,
    insert: &str,
    what: &str,
) -> Result<String, String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let at = lines
        .iter()
        .rposition(|l| after(l.trim_end_matches('\n')))
        .ok_or(format!("no anchor for {what}"))?;
    Ok(splice(&lines, at + 1, insert))
}

/// `text` with `insert` (whole lines) put before the first line for which `before` holds, at
/// or after line `from` (the first line for which `start` holds).
pub fn insert_before(
    text: &str,
    start: impl Fn(&str) -> bool,
    before: impl Fn(&str) -> bool,
    insert: &str,
    what: &str,
) -> Result<String, String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let from = lines
        .iter()
        .position(|l| start(l.trim_end_matches('\n')))
        .ok_or(format!("no anchor for {what}"))?;
    let at = lines[from..]
        .iter()
        .position(|l| before(l.trim_end_matches('\n')))
        .ok_or(format!("no anchor for {what}"))?;
    Ok(splice(&lines, from + at, insert))
}

fn splice(lines: &[&str], at: usize, insert: &str) -> String {
    let mut out: String = lines[..at].concat();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(insert);
    if !insert.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&lines[at..].concat());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_render_and_unknown_ones_are_refused() {
        let names = Names::new(vec![
            ("office", "runner".into()),
            ("Office", "Runner".into()),
        ]);
        assert_eq!(
            names.render("use a::{{{Office}}, {{office}}};").as_deref(),
            Ok("use a::{Runner, runner};")
        );
        assert!(names.render("{{port}}").is_err());
    }

    #[test]
    fn lines_go_after_the_last_anchor_and_before_the_first_end() {
        let text = "a = 1\nb = 2\nc\n";
        assert_eq!(
            insert_after_last(text, |l| l.contains('='), "x = 3", "x").as_deref(),
            Ok("a = 1\nb = 2\nx = 3\nc\n")
        );
        assert_eq!(
            insert_before(text, |l| l.starts_with('b'), |l| l == "c", "y\n", "y").as_deref(),
            Ok("a = 1\nb = 2\ny\nc\n")
        );
        assert!(insert_after_last(text, |l| l == "z", "", "z").is_err());
    }
}
