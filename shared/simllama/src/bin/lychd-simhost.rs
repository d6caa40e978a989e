//! `lychd-simhost`: the simulated host as its own process (what `lychd dev` runs, and the
//! Orchestrator's tests drive through its control API).
//!
//! ```text
//! lychd-simhost [--control 127.0.0.1:0] --unit NAME=MODEL[,MODEL…]… [--running NAME]… [--parent-pipe]
//! ```
//!
//! Every unit gets its own free loopback port; units named by `--running` start ready, the
//! others stopped. Once serving, it prints one JSON line on stdout —
//! `{"control":"http://…","units":{"<name>":"http://…"}}` — and serves until SIGINT or SIGTERM
//! (or, with `--parent-pipe`, until its stdin closes: the parent that spawned it is gone). The
//! control API is described in `lychd_simllama::host`.

use std::net::SocketAddr;
use std::process::ExitCode;

use lychd_simllama::SimHost;
use tokio::io::AsyncReadExt;
use tokio::signal::unix::{SignalKind, signal};

struct Args {
    control: SocketAddr,
    units: Vec<(String, Vec<String>)>,
    running: Vec<String>,
    parent_pipe: bool,
}

const USAGE: &str = "usage: lychd-simhost [--control ADDR] --unit NAME=MODEL[,MODEL...]... [--running NAME]... [--parent-pipe]";

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        control: "127.0.0.1:0".parse().expect("loopback"),
        units: Vec::new(),
        running: Vec::new(),
        parent_pipe: false,
    };
    while let Some(flag) = argv.next() {
        match flag.as_str() {
            "--control" => {
                let v = argv.next().ok_or("--control needs an address")?;
                args.control = v.parse().map_err(|_| "--control: not a socket address")?;
            }
            "--unit" => {
                let v = argv.next().ok_or("--unit needs NAME=MODEL[,MODEL...]")?;
                let (name, models) = v.split_once('=').ok_or("--unit: NAME=MODEL[,MODEL...]")?;
                let models: Vec<String> = models
                    .split(',')
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned)
                    .collect();
                if name.is_empty() || models.is_empty() {
                    return Err("--unit: a name and at least one model".into());
                }
                if args.units.iter().any(|(n, _)| n == name) {
                    return Err(format!("--unit: {name} twice"));
                }
                args.units.push((name.to_owned(), models));
            }
            "--running" => args
                .running
                .push(argv.next().ok_or("--running needs a unit name")?),
            "--parent-pipe" => args.parent_pipe = true,
            "--help" | "-h" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if args.units.is_empty() {
        return Err(format!("no unit declared\n{USAGE}"));
    }
    if let Some(r) = args
        .running
        .iter()
        .find(|r| !args.units.iter().any(|(n, _)| n == *r))
    {
        return Err(format!("--running {r}: no such unit"));
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let units: Vec<(&str, Vec<&str>)> = args
        .units
        .iter()
        .map(|(n, ms)| (n.as_str(), ms.iter().map(String::as_str).collect()))
        .collect();
    let units: Vec<(&str, &[&str])> = units.iter().map(|(n, ms)| (*n, &ms[..])).collect();
    let running: Vec<&str> = args.running.iter().map(String::as_str).collect();
    let host = SimHost::start_at(args.control, &units, &running).await;
    let mut endpoints = serde_json::Map::new();
    for (name, _) in &units {
        endpoints.insert((*name).to_owned(), host.endpoint(name).await.into());
    }
    println!(
        "{}",
        serde_json::json!({ "control": host.control_endpoint(), "units": endpoints })
    );
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("cannot install signal handlers");
        return ExitCode::FAILURE;
    };
    let parent_gone = async {
        if !args.parent_pipe {
            return std::future::pending().await;
        }
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 64];
        while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        () = parent_gone => {}
    }
    drop(host);
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, String> {
        parse(s.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn units_running_and_bad_arguments() {
        let a = args("--unit a=m1,m2 --unit b=m --running b --parent-pipe").expect("valid");
        assert_eq!(a.units[0], ("a".into(), vec!["m1".into(), "m2".into()]));
        assert_eq!(a.running, ["b"]);
        assert!(a.parent_pipe);
        assert!(args("").is_err(), "no unit");
        assert!(args("--unit a=").is_err(), "no model");
        assert!(args("--unit a=m --unit a=n").is_err(), "twice");
        assert!(
            args("--unit a=m --running z").is_err(),
            "unknown running unit"
        );
        assert!(args("--unit a=m --bogus").is_err());
    }
}
