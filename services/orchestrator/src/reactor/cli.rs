//! The office binary's host-side commands, which need no database and no peer:
//!
//! - `lychd-orchestrator reactor consume --config FILE`: the one-shot consumer (exit 0 after
//!   journaling every published intent; 75 when the lifecycle lock is held or unsafe, nothing
//!   done; 1 when the configuration or the spool is refused);
//! - `lychd-orchestrator reactor recover --config FILE`: mark recovered each containment whose
//!   recorded world a fresh readback proves;
//! - `lychd-orchestrator units --config FILE --out DIR`: write the generated animator units.
//!
//! Each prints one line per delivery (`name class reason`); never an intent's content.

use std::path::PathBuf;
use std::process::ExitCode;

use lychd_runtime::Office;
use lychd_runtime::config::OfficeConfig;

use super::consumer::{Consumer, RunRefusal, Summary};
use crate::config::Settings;

const EX_USAGE: u8 = 2;
const EX_TEMPFAIL: u8 = 75;

/// `--config FILE` (and `--out DIR` when `out` is wanted) from `args`.
fn flags(args: &[String], out: bool) -> Option<(PathBuf, Option<PathBuf>)> {
    let (mut config, mut dir) = (None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--config" => config = Some(PathBuf::from(it.next()?)),
            "--out" if out => dir = Some(PathBuf::from(it.next()?)),
            _ => return None,
        }
    }
    Some((config?, dir))
}

fn settings(file: &std::path::Path) -> Result<Settings, String> {
    let cfg = OfficeConfig::load(Office::Orchestrator, Some(file), std::env::vars())
        .map_err(|e| e.to_string())?;
    crate::config::load(&cfg).map_err(|e| e.to_string())
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()
}

/// `reactor consume|recover --config FILE`.
pub fn reactor(args: &[String]) -> ExitCode {
    let usage = || {
        eprintln!("usage: lychd-orchestrator reactor consume|recover --config FILE");
        ExitCode::from(EX_USAGE)
    };
    let Some((verb, rest)) = args.split_first() else {
        return usage();
    };
    let recover = match verb.as_str() {
        "consume" => false,
        "recover" => true,
        _ => return usage(),
    };
    let Some((file, _)) = flags(rest, false) else {
        return usage();
    };
    let consumer = match settings(&file).and_then(|s| Consumer::new(&s)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("lychd-orchestrator reactor: refusing to run: {e}");
            return ExitCode::from(1);
        }
    };
    let Some(rt) = runtime() else {
        return ExitCode::from(1);
    };
    let done = rt.block_on(async {
        if recover {
            consumer.recover().await
        } else {
            consumer.run().await
        }
    });
    match done {
        Ok(done) => {
            for Summary {
                name,
                class,
                reason,
            } in done
            {
                println!("{name} {} {reason}", class.as_str());
            }
            ExitCode::SUCCESS
        }
        Err(RunRefusal::Lock(reason)) => {
            eprintln!("lychd-orchestrator reactor: nothing done: {reason}");
            ExitCode::from(EX_TEMPFAIL)
        }
    }
}

/// `units --config FILE --out DIR`.
pub fn units(args: &[String]) -> ExitCode {
    let Some((file, Some(out))) = flags(args, true) else {
        eprintln!("usage: lychd-orchestrator units --config FILE --out DIR");
        return ExitCode::from(EX_USAGE);
    };
    let settings = match settings(&file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lychd-orchestrator units: refusing to run: {e}");
            return ExitCode::from(1);
        }
    };
    for f in crate::domain::units::generate(&settings.graph) {
        let path = out.join(&f.path);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, &f.text));
        if let Err(e) = written {
            eprintln!("lychd-orchestrator units: {}: {}", path.display(), e.kind());
            return ExitCode::from(1);
        }
        println!("{}", f.path);
    }
    ExitCode::SUCCESS
}
