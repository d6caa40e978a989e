//! `lychd-simhost`: the simulated host as its own process (what `lychd dev` runs, and the
//! Orchestrator's tests drive through its control API).
//!
//! ```text
//! lychd-simhost [--control 127.0.0.1:0] --unit NAME=MODEL[,MODEL…]… [--running NAME]…
//!               [--device NAME=MIB]… [--memory UNIT=MIB@DEVICE]… [--parent-pipe]
//! ```
//!
//! Every unit gets its own free loopback port; units named by `--running` start ready, the
//! others stopped. `--device` declares a simulated GPU's capacity and `--memory` what a unit
//! holds on it while it runs (the control API's `PUT /devices/{name}` and
//! `PUT /units/{name}/memory`, set before anything is printed). Once serving, it prints one JSON line on stdout —
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
    devices: Vec<(String, u64)>,
    memory: Vec<(String, u64, String)>,
    parent_pipe: bool,
}

const USAGE: &str = "usage: lychd-simhost [--control ADDR] --unit NAME=MODEL[,MODEL...]... [--running NAME]... [--device NAME=MIB]... [--memory UNIT=MIB@DEVICE]... [--parent-pipe]";

/// `MIB` of `--device`/`--memory`: a whole number of MiB, at least 1.
fn mib(v: &str, flag: &str) -> Result<u64, String> {
    v.parse::<u64>()
        .ok()
        .filter(|m| *m > 0)
        .ok_or_else(|| format!("{flag}: MIB is a whole number of MiB, at least 1"))
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        control: "127.0.0.1:0".parse().expect("loopback"),
        units: Vec::new(),
        running: Vec::new(),
        devices: Vec::new(),
        memory: Vec::new(),
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
            "--device" => {
                let v = argv.next().ok_or("--device needs NAME=MIB")?;
                let (name, m) = v.split_once('=').ok_or("--device: NAME=MIB")?;
                if name.is_empty() {
                    return Err("--device: a name".into());
                }
                args.devices.push((name.to_owned(), mib(m, "--device")?));
            }
            "--memory" => {
                let v = argv.next().ok_or("--memory needs UNIT=MIB@DEVICE")?;
                let (unit, rest) = v.split_once('=').ok_or("--memory: UNIT=MIB@DEVICE")?;
                let (m, device) = rest.split_once('@').ok_or("--memory: UNIT=MIB@DEVICE")?;
                if device.is_empty() {
                    return Err("--memory: a device".into());
                }
                args.memory
                    .push((unit.to_owned(), mib(m, "--memory")?, device.to_owned()));
            }
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
    for (unit, _, device) in &args.memory {
        if !args.units.iter().any(|(n, _)| n == unit) {
            return Err(format!("--memory {unit}: no such unit"));
        }
        if !args.devices.iter().any(|(d, _)| d == device) {
            return Err(format!("--memory {unit}: no device {device} declared"));
        }
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
    for (device, capacity) in &args.devices {
        host.set_device(device, *capacity).await;
    }
    for (unit, held, device) in &args.memory {
        host.set_memory(unit, *held, Some(device)).await;
    }
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

    #[test]
    fn devices_and_what_a_unit_holds_on_one() {
        let a = args("--unit a=m --device gpu0=16000 --memory a=9500@gpu0").expect("valid");
        assert_eq!(a.devices, [("gpu0".into(), 16000)]);
        assert_eq!(a.memory, [("a".into(), 9500, "gpu0".into())]);
        assert!(args("--unit a=m --device gpu0=0").is_err(), "no capacity");
        assert!(
            args("--unit a=m --device gpu0=lots").is_err(),
            "not a number"
        );
        assert!(args("--unit a=m --device =5").is_err(), "no name");
        assert!(
            args("--unit a=m --device gpu0=5 --memory z=1@gpu0").is_err(),
            "unknown unit"
        );
        assert!(
            args("--unit a=m --memory a=1@gpu9").is_err(),
            "undeclared device"
        );
        assert!(args("--unit a=m --device gpu0=5 --memory a=1").is_err());
    }
}
