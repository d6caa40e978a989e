//! `helmloop`: the HelmLoop v0.1 core CLI (resolutions §A "CLI contract").
//!
//! ```text
//! helmloop digest [--domain record|binding] [--canonical] FILE|-
//! helmloop validate <record-or-bundle.json>
//! helmloop reduce <evaluation-input.json>
//! helmloop conformance --adapter core [--selection] [--fixtures DIR]
//! helmloop conformance --adapter standalone|better-workflows [--fixtures DIR]
//! helmloop portability <runtime-receipts.json>
//! ```
//!
//! Exit 0 on success; 1 on invalid input, with the error code as the first word
//! on stderr; 2 on a usage error (including an unreadable file).

use std::io::{Read, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use lychd_helmloop::adapter::Adapter;
use lychd_helmloop::adapter::suite::{AdapterReport, Selection};
use lychd_helmloop::validate::validate_document;
use lychd_helmloop::{DEFAULT_MAX_BYTES, Domain, Omit, ParseOptions, canonicalize_with};

#[derive(Parser)]
#[command(
    name = "helmloop",
    version,
    about = "HelmLoop v0.1 core: HL-C14N-1 digests and record validation"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the record (default) or binding digest of a JSON document, or its canonical bytes.
    Digest {
        /// Digest domain: `record` leaves out the top-level `digest` member.
        #[arg(long, value_enum, default_value_t = DomainArg::Record)]
        domain: DomainArg,
        /// Print the canonical bytes the domain hashes (no trailing newline) instead of the digest.
        #[arg(long)]
        canonical: bool,
        /// Input file, or `-` for standard input.
        file: String,
    },
    /// Strictly parse a record, an array of records or an evaluation input; check every record's
    /// schema and digest; print a JSON report.
    Validate {
        /// Input file, or `-` for standard input.
        file: String,
    },
    /// Reduce an evaluation input `{protocolVersion, context, records}` and print the
    /// ReductionResult (canonical JSON). Exit 0 on PASS, 1 on HOLD or REJECT or an unparsable
    /// input (the first word on stderr is the disposition or the C14N code).
    Reduce {
        /// Input file, or `-` for standard input.
        file: String,
    },
    /// Run a conformance suite and print its fixture-evidence report. Exit 0 only when every
    /// case passes.
    Conformance {
        /// Which suite: `core`, `standalone` or `better-workflows`.
        #[arg(long, value_enum)]
        adapter: AdapterArg,
        /// With `core`: run only the semantic cases the adapters share (the selection in
        /// `fixtures/helmloop/adapters/selection.json`), reported under its fixture set.
        #[arg(long)]
        selection: bool,
        /// Fixture directory (default: the repository's `fixtures/helmloop/core`, or
        /// `fixtures/helmloop/adapters` for an adapter, located from this crate's source
        /// directory at build time).
        #[arg(long)]
        fixtures: Option<std::path::PathBuf>,
    },
    /// Run the portability gate (spec §9) over `{acceptancePolicy, evaluatedAt, receipts,
    /// registry}` and print its report. Exit 0 only when the gate passes; otherwise exit 1 with
    /// the first failed rule's code first on stderr.
    Portability {
        /// Input file, or `-` for standard input.
        file: String,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum AdapterArg {
    Core,
    Standalone,
    BetterWorkflows,
}

#[derive(Clone, Copy, ValueEnum)]
enum DomainArg {
    Record,
    Binding,
}

const EXIT_INVALID: u8 = 1;
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and exit 0; usage errors exit 2.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Command::Digest {
            domain,
            canonical,
            file,
        } => digest(domain, canonical, &file),
        Command::Validate { file } => validate(&file),
        Command::Reduce { file } => reduce(&file),
        Command::Conformance {
            adapter: AdapterArg::Core,
            selection,
            fixtures,
        } => conformance(selection, fixtures),
        Command::Conformance {
            adapter: AdapterArg::Standalone,
            fixtures,
            ..
        } => adapter_conformance(Adapter::Standalone, fixtures),
        Command::Conformance {
            adapter: AdapterArg::BetterWorkflows,
            fixtures,
            ..
        } => adapter_conformance(Adapter::BetterWorkflows, fixtures),
        Command::Portability { file } => portability(&file),
    }
}

/// Reads the whole input, at most one byte past the parser's size cap (so an
/// oversized input still fails as `C14N_TOO_LARGE` without reading it all).
fn read_input(file: &str) -> Result<Vec<u8>, ExitCode> {
    let limit = DEFAULT_MAX_BYTES as u64 + 1;
    let mut buf = Vec::new();
    let result = if file == "-" {
        std::io::stdin().lock().take(limit).read_to_end(&mut buf)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(limit).read_to_end(&mut buf))
    };
    match result {
        Ok(_) => Ok(buf),
        Err(e) => {
            eprintln!("IO_ERROR cannot read input {file:?}: {e}");
            Err(ExitCode::from(EXIT_USAGE))
        }
    }
}

fn digest(domain: DomainArg, canonical: bool, file: &str) -> ExitCode {
    let input = match read_input(file) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let domain = match domain {
        DomainArg::Record => Domain::Record,
        DomainArg::Binding => Domain::Binding,
    };
    let omit: Omit = domain.omit();
    let bytes = match canonicalize_with(&input, ParseOptions::default(), omit) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let mut stdout = std::io::stdout().lock();
    let written = if canonical {
        stdout.write_all(&bytes)
    } else {
        let d = lychd_helmloop::digest_canonical(domain, &bytes);
        writeln!(stdout, "{d}")
    };
    finish(written.and_then(|()| stdout.flush()), ExitCode::SUCCESS)
}

fn validate(file: &str) -> ExitCode {
    let input = match read_input(file) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let report = validate_document(&input);
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "{}", report.to_json()).and_then(|()| stdout.flush());
    if let Some(code) = report.first_code() {
        eprintln!(
            "{code} {} issue(s) in {} ({} record(s) checked)",
            report.issues.len(),
            report.kind.as_str(),
            report.records
        );
        return finish(written, ExitCode::from(EXIT_INVALID));
    }
    finish(written, ExitCode::SUCCESS)
}

fn reduce(file: &str) -> ExitCode {
    let input = match read_input(file) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let result = match lychd_helmloop::reduce_bytes(&input) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "{}", result.to_json()).and_then(|()| stdout.flush());
    if result.is_pass() {
        return finish(written, ExitCode::SUCCESS);
    }
    let first = result.reject.first().or(result.hold.first());
    eprintln!(
        "{} {}",
        result.disposition.as_str(),
        first.map_or("", |c| c.as_str())
    );
    finish(written, ExitCode::from(EXIT_INVALID))
}

/// The default fixture directory: `fixtures/helmloop/core` of the repository
/// this binary was built from.
fn default_fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/helmloop/core")
}

fn default_adapter_fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/helmloop/adapters")
}

fn read_file(path: &std::path::Path) -> Result<Vec<u8>, ExitCode> {
    std::fs::read(path).map_err(|e| {
        eprintln!("IO_ERROR cannot read {}: {e}", path.display());
        ExitCode::from(EXIT_USAGE)
    })
}

fn conformance(selection: bool, fixtures: Option<std::path::PathBuf>) -> ExitCode {
    use lychd_helmloop::conformance::{Case, Report, parse_manifest};
    let selected = if selection {
        let path = default_adapter_fixtures().join("selection.json");
        let bytes = match read_file(&path) {
            Ok(b) => b,
            Err(code) => return code,
        };
        match Selection::parse(&bytes) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(EXIT_INVALID);
            }
        }
    } else {
        None
    };
    let dir = fixtures.unwrap_or_else(default_fixtures);
    let manifest_path = dir.join("manifest.json");
    let manifest = match std::fs::read(&manifest_path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("IO_ERROR cannot read {}: {e}", manifest_path.display());
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let (mut set_id, mut entries) = match parse_manifest(&manifest) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let mut errors = Vec::new();
    if let Some(sel) = &selected {
        for (id, digest) in &sel.cases {
            if !entries.iter().any(|(c, _, d)| c == id && d == digest) {
                errors.push(format!(
                    "{id}: selected case not in the core manifest with that digest"
                ));
            }
        }
        entries.retain(|(c, _, _)| sel.cases.iter().any(|(s, _)| s == c));
        set_id = sel.fixture_set_id.clone();
    }
    let mut cases = Vec::new();
    for (case_id, rel, digest) in entries {
        let path = dir.join(&rel);
        let case = std::fs::read(&path)
            .map_err(|e| format!("{case_id}: cannot read {rel}: {e}"))
            .and_then(|b| Case::parse(&b).map_err(|e| format!("{case_id}: {e}")));
        match case {
            Ok(c) if c.case_id != case_id => {
                errors.push(format!("{rel}: caseId differs from manifest"))
            }
            Ok(c) if c.case_digest.render() != digest => {
                errors.push(format!("{case_id}: case digest differs from manifest"))
            }
            Ok(c) => cases.push(c),
            Err(e) => errors.push(e),
        }
    }
    let report = Report::run("core", &set_id, &cases, errors);
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "{}", report.to_json()).and_then(|()| stdout.flush());
    if report.all_passed() {
        return finish(written, ExitCode::SUCCESS);
    }
    let failed = report.results.iter().filter(|r| !r.passed()).count();
    eprintln!(
        "CONFORMANCE_FAILED {failed} of {} case(s) failed, {} fixture error(s)",
        report.results.len(),
        report.fixture_errors.len()
    );
    finish(written, ExitCode::from(EXIT_INVALID))
}

fn adapter_conformance(adapter: Adapter, fixtures: Option<std::path::PathBuf>) -> ExitCode {
    let dir = fixtures.unwrap_or_else(default_adapter_fixtures);
    let (selection, manifest) = match (
        read_file(&dir.join("selection.json")),
        read_file(&dir.join(adapter.name()).join("manifest.json")),
    ) {
        (Ok(s), Ok(m)) => (s, m),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    let cases = dir.join(adapter.name());
    let read = |rel: &str| std::fs::read(cases.join(rel)).map_err(|e| e.to_string());
    let report = match AdapterReport::from_files(adapter, &selection, &manifest, &read) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "{}", report.to_json()).and_then(|()| stdout.flush());
    if report.all_passed() {
        return finish(written, ExitCode::SUCCESS);
    }
    let failed = report.results.iter().filter(|r| !r.passed()).count();
    eprintln!(
        "CONFORMANCE_FAILED {failed} of {} case(s) failed, {} fixture error(s)",
        report.results.len(),
        report.fixture_errors.len()
    );
    finish(written, ExitCode::from(EXIT_INVALID))
}

fn portability(file: &str) -> ExitCode {
    let input = match read_input(file) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let report = match lychd_helmloop::portability::gate_bytes(&input) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "{}", report.to_json()).and_then(|()| stdout.flush());
    if report.passed() {
        return finish(written, ExitCode::SUCCESS);
    }
    eprintln!(
        "{} portability gate failed ({} qualifying receipt(s))",
        report.first_code().unwrap_or("PORTABILITY_FAILED"),
        report.qualifying().len()
    );
    finish(written, ExitCode::from(EXIT_INVALID))
}

fn finish(written: std::io::Result<()>, code: ExitCode) -> ExitCode {
    match written {
        Ok(()) => code,
        Err(e) => {
            eprintln!("IO_ERROR cannot write output: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
