//! Embeds the core conformance suite (`fixtures/helmloop/core`: its manifest and every case
//! file) so `RunConformance` needs no file at run time.

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
    Ok(())
}
