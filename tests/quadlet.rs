//! systemd INI of the Quadlet units (`deploy/quadlet/`), parsed in Rust with no external tool:
//! the unit checks (`e2e/quadlet.rs`) and the stack in containers (`containers/`) read the
//! same parse.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One parsed unit: section → key → values in order (a key may repeat).
#[derive(Debug, Default)]
pub struct Unit {
    pub sections: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

impl Unit {
    /// systemd's INI: `[Section]`, `Key=Value` (repeatable), comments `#`/`;`, a trailing
    /// backslash continues the line. Anything else is an error naming the line.
    pub fn parse(text: &str) -> Result<Unit, String> {
        let mut unit = Unit::default();
        let mut section: Option<String> = None;
        let mut pending = String::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if pending.is_empty()
                && (line.is_empty() || line.starts_with('#') || line.starts_with(';'))
            {
                continue;
            }
            if let Some(cont) = line.strip_suffix('\\') {
                pending.push_str(cont);
                pending.push(' ');
                continue;
            }
            let line = std::mem::take(&mut pending) + line;
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = Some(name.to_owned());
                unit.sections.entry(name.to_owned()).or_default();
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(format!("line {}: not `Key=Value`: {line}", n + 1));
            };
            let Some(section) = &section else {
                return Err(format!("line {}: `{key}` outside a section", n + 1));
            };
            unit.sections
                .get_mut(section)
                .expect("section entered")
                .entry(key.trim().to_owned())
                .or_default()
                .push(value.trim().to_owned());
        }
        if !pending.is_empty() {
            return Err("the last line continues past the end".into());
        }
        Ok(unit)
    }

    pub fn all(&self, section: &str, key: &str) -> Vec<&str> {
        self.sections
            .get(section)
            .and_then(|s| s.get(key))
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// The last value (systemd's rule for single-valued keys).
    pub fn one(&self, section: &str, key: &str) -> Option<&str> {
        self.all(section, key).last().copied()
    }

    /// Space-separated list values of every occurrence (`Requires=a b`, `Requires=c`).
    pub fn list(&self, section: &str, key: &str) -> BTreeSet<&str> {
        self.all(section, key)
            .into_iter()
            .flat_map(str::split_whitespace)
            .collect()
    }
}

/// Every file of the Quadlet directory, parsed.
pub fn load(dir: &Path, problems: &mut Vec<String>) -> BTreeMap<String, Unit> {
    let mut units = BTreeMap::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            problems.push(format!("{}: {e}", dir.display()));
            return units;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        match std::fs::read_to_string(entry.path())
            .map_err(|e| e.to_string())
            .and_then(|t| Unit::parse(&t))
        {
            Ok(unit) => {
                units.insert(name, unit);
            }
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }
    units
}
