//! `helmloop`: the HelmLoop v0.1 core CLI (resolutions §A "CLI contract").
//!
//! ```text
//! helmloop digest [--domain record|binding] [--canonical] FILE|-
//! helmloop validate <record-or-bundle.json>
//! ```
//!
//! Exit 0 on success; 1 on invalid input, with the error code as the first word
//! on stderr; 2 on a usage error (including an unreadable file).

use std::io::{Read, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
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

// `reduce`, `conformance` and `portability` join this enum when they exist.
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

fn finish(written: std::io::Result<()>, code: ExitCode) -> ExitCode {
    match written {
        Ok(()) => code,
        Err(e) => {
            eprintln!("IO_ERROR cannot write output: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
