//! Embeds the core conformance suite (`fixtures/helmloop/core`: its manifest and every case
//! file) and the two adapter suites (`fixtures/helmloop/adapters`) so `RunConformance` needs no
//! file at run time.

use std::fmt::Write;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../fixtures/helmloop/core");
    let root = root.canonicalize()?;
    let mut files: Vec<String> = std::fs::read_dir(root.join("cases"))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    let mut out = String::new();
    writeln!(
        out,
        "/// `manifest.json` of the core suite.\npub static MANIFEST: &[u8] = include_bytes!({:?});",
        root.join("manifest.json")
    )?;
    writeln!(
        out,
        "/// `(path relative to the manifest, bytes)` of every case file."
    )?;
    writeln!(out, "pub static CASES: &[(&str, &[u8])] = &[")?;
    for f in &files {
        writeln!(
            out,
            "    ({:?}, include_bytes!({:?})),",
            format!("cases/{f}"),
            root.join("cases").join(f)
        )?;
    }
    writeln!(out, "];")?;
    std::fs::write(
        PathBuf::from(std::env::var("OUT_DIR")?).join("core_suite.rs"),
        out,
    )?;
    println!("cargo:rerun-if-changed={}", root.display());
    println!("cargo:rerun-if-changed={}", root.join("cases").display());
    adapter_suites()
}

/// Embeds the adapter suites (`fixtures/helmloop/adapters`: the shared selection, and per
/// adapter its manifest and case files).
fn adapter_suites() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?)
        .join("../../fixtures/helmloop/adapters")
        .canonicalize()?;
    let mut out = String::new();
    writeln!(
        out,
        "/// `selection.json`.\npub static SELECTION: &[u8] = include_bytes!({:?});",
        root.join("selection.json")
    )?;
    for (name, dir) in [
        ("STANDALONE", "standalone"),
        ("BETTER_WORKFLOWS", "better-workflows"),
    ] {
        let base = root.join(dir);
        let mut files: Vec<String> = std::fs::read_dir(base.join("cases"))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        files.sort();
        writeln!(
            out,
            "/// `{dir}/manifest.json`.\npub static {name}_MANIFEST: &[u8] = include_bytes!({:?});",
            base.join("manifest.json")
        )?;
        writeln!(
            out,
            "/// `(path relative to the manifest, bytes)` of every `{dir}` case."
        )?;
        writeln!(out, "pub static {name}_CASES: &[(&str, &[u8])] = &[")?;
        for f in &files {
            writeln!(
                out,
                "    ({:?}, include_bytes!({:?})),",
                format!("cases/{f}"),
                base.join("cases").join(f)
            )?;
        }
        writeln!(out, "];")?;
        println!("cargo:rerun-if-changed={}", base.join("cases").display());
    }
    std::fs::write(
        PathBuf::from(std::env::var("OUT_DIR")?).join("adapter_suites.rs"),
        out,
    )?;
    println!("cargo:rerun-if-changed={}", root.display());
    Ok(())
}
