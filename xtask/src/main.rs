//! `cargo xtask`: the workspace's own tasks, in Rust (the alias is in `.cargo/config.toml`).
//!
//! - `cargo xtask new-office NAME [--purpose TEXT] [--service NAME] [--port N]`: make every
//!   place a new office needs (see `docs/new-office.md`). Refuses an office that exists.

mod new_office;
mod text;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: cargo xtask new-office NAME [--purpose TEXT] [--service NAME] [--port N]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let (task, rest) = args.split_first().ok_or(USAGE)?;
    match task.as_str() {
        "new-office" => {
            let request = parse_new_office(rest)?;
            let made = new_office::make(&root()?, &request)?;
            println!(
                "made office {} (`{}`, service {}, port {}):",
                request.name, made.office, made.service, made.port
            );
            for place in &made.places {
                println!("  {place}");
            }
            println!(
                "next: cargo build -p {}; cargo nextest run -p {} -p lychd-e2e tidy",
                made.package, made.package
            );
            Ok(())
        }
        _ => Err(USAGE.to_owned()),
    }
}

fn parse_new_office(args: &[String]) -> Result<new_office::Request, String> {
    let mut name = None;
    let mut request = new_office::Request::default();
    let mut args = args.iter();
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .cloned()
                .ok_or(format!("{a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--purpose" => request.purpose = Some(value()?),
            "--service" => request.service = Some(value()?),
            "--port" => {
                let port = value()?;
                request.port = Some(
                    port.parse()
                        .map_err(|_| format!("--port {port}: not a port"))?,
                );
            }
            _ if a.starts_with('-') => return Err(format!("unknown option {a}\n{USAGE}")),
            _ if name.is_none() => name = Some(a.clone()),
            _ => return Err(format!("one office at a time\n{USAGE}")),
        }
    }
    request.name = name.ok_or(USAGE)?;
    Ok(request)
}

/// The workspace root: the nearest directory from the current one up whose `Cargo.toml` is a
/// workspace's (`cargo xtask` runs in the directory it was called from; the binary may have
/// been built from another copy of the repository, so its own path is no guide).
fn root() -> Result<PathBuf, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    cwd.ancestors()
        .find(|d| {
            std::fs::read_to_string(d.join("Cargo.toml"))
                .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"))
        })
        .map(PathBuf::from)
        .ok_or(format!("{} is in no cargo workspace", cwd.display()))
}
