//! `lychd-fake-systemctl`: a test double of `systemctl --user` for the Orchestrator's
//! `systemd` actuator and the host-reactor consumer. Not for deployment.
//!
//! `lychd-fake-systemctl --state FILE [--user] VERB ARGS…`. The state file (JSON) programs the
//! unit states and faults; every invocation is appended to `FILE.log` (its arguments, one line)
//! before anything else. Verbs: `show --property=… -- UNITS` (blocks of `Id=`, `LoadState=`,
//! `ActiveState=`, and with `unit_dir` `FragmentPath=`, `DropInPaths=`), `list-jobs` (one line per unit with a pending job), `start`/`stop
//! --job-mode=fail -- TARGETS`. A started `lychd-animator-<a>.target` activates the target and its
//! service and, with `simhost`, starts unit `<a>` of the simulated host (`POST /units/<a>/start`);
//! stopping does the reverse. A unit named in `fail` fails its start (exit 1, the service left
//! `failed`), one in `fail_stop` its stop (exit 1, nothing changes). `exit` replaces every mutation's exit status (the effects
//! still happen); `hang_ms` sleeps after a mutation's effects (a job that outlives its caller).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// Unit name → `ActiveState`; a unit not listed is `not-found`.
    #[serde(default)]
    units: BTreeMap<String, String>,
    /// Units with a pending job.
    #[serde(default)]
    jobs: Vec<String>,
    /// Targets whose start fails.
    #[serde(default)]
    fail: Vec<String>,
    /// Targets whose stop fails.
    #[serde(default)]
    fail_stop: Vec<String>,
    /// The exit status of every mutation (effects still applied).
    #[serde(default)]
    exit: Option<u8>,
    /// Sleep after a mutation's effects, in milliseconds.
    #[serde(default)]
    hang_ms: u64,
    /// `host:port` of the simulated host's control API, if units mirror onto it.
    #[serde(default)]
    simhost: Option<String>,
    /// The unit directory: a listed unit's `FragmentPath` is `<unit_dir>/<unit>`, a service's
    /// `DropInPaths` every file of `<unit_dir>/<unit>.d/`.
    #[serde(default)]
    unit_dir: Option<String>,
}

fn load(path: &Path) -> State {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn save(path: &Path, state: &State) {
    let tmp = path.with_extension("tmp");
    let bytes = serde_json::to_vec_pretty(state).expect("serializable");
    std::fs::write(&tmp, bytes).expect("write state");
    std::fs::rename(&tmp, path).expect("publish state");
}

/// POST to the simulated host's control API; whether it answered 200.
fn post(authority: &str, path: &str) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(authority) else {
        return false;
    };
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200")
}

fn animator(unit: &str) -> Option<&str> {
    unit.strip_prefix("lychd-animator-")?
        .strip_suffix(".target")
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let Some(at) = args.iter().position(|a| a == "--state") else {
        eprintln!("lychd-fake-systemctl: --state FILE is required");
        return ExitCode::from(2);
    };
    let state_path = PathBuf::from(args.get(at + 1).cloned().unwrap_or_default());
    args.drain(at..=at + 1);
    args.retain(|a| a != "--user");
    let mut log_path = state_path.clone().into_os_string();
    log_path.push(".log");
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .expect("open the invocation log");
    writeln!(log, "{}", args.join(" ")).expect("log the invocation");
    drop(log);

    let mut state = load(&state_path);
    let verb = args.first().cloned().unwrap_or_default();
    let units: Vec<String> = args
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .cloned()
        .collect();
    match verb.as_str() {
        "show" => {
            let dir = state.unit_dir.clone().unwrap_or_default();
            let sources = |u: &str| {
                if dir.is_empty() {
                    return String::new();
                }
                let fragment = Path::new(&dir).join(u);
                let mut drop_ins: Vec<String> =
                    std::fs::read_dir(Path::new(&dir).join(format!("{u}.d")))
                        .map(|rd| {
                            rd.filter_map(Result::ok)
                                .map(|e| e.path().display().to_string())
                                .collect()
                        })
                        .unwrap_or_default();
                drop_ins.sort();
                let fragment = if fragment.is_file() {
                    fragment.display().to_string()
                } else {
                    String::new()
                };
                format!(
                    "FragmentPath={fragment}\nDropInPaths={}\n",
                    drop_ins.join(" ")
                )
            };
            let blocks: Vec<String> = units
                .iter()
                .map(|u| match state.units.get(u) {
                    Some(a) => format!("Id={u}\nLoadState=loaded\nActiveState={a}\n{}", sources(u)),
                    None => format!("Id={u}\nLoadState=not-found\nActiveState=inactive\n"),
                })
                .collect();
            print!("{}", blocks.join("\n"));
            ExitCode::SUCCESS
        }
        "list-jobs" => {
            for (i, u) in state.jobs.iter().enumerate() {
                println!("{} {u} start waiting", i + 1);
            }
            ExitCode::SUCCESS
        }
        "start" | "stop" => {
            let start = verb == "start";
            let mut code = 0u8;
            for unit in &units {
                let Some(a) = animator(unit).map(str::to_owned) else {
                    code = 5;
                    continue;
                };
                if !state.units.contains_key(unit) {
                    code = 5;
                    continue;
                }
                let service = format!("lychd-animator-{a}.service");
                let failing = if start { &state.fail } else { &state.fail_stop };
                let mut ok = !failing.contains(unit);
                if ok && let Some(host) = &state.simhost {
                    let verb = if start { "start" } else { "stop" };
                    ok = post(host, &format!("/units/{a}/{verb}"));
                }
                let (t, s) = match (start, ok) {
                    (true, true) => ("active", "active"),
                    (true, false) => ("inactive", "failed"),
                    (false, true) => ("inactive", "inactive"),
                    // A failed stop leaves the unit as it was.
                    (false, false) => {
                        code = 1;
                        continue;
                    }
                };
                if !ok {
                    code = 1;
                }
                state.units.insert(unit.clone(), t.to_owned());
                state.units.insert(service, s.to_owned());
            }
            save(&state_path, &state);
            if state.hang_ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(state.hang_ms));
            }
            ExitCode::from(state.exit.unwrap_or(code))
        }
        _ => {
            eprintln!("lychd-fake-systemctl: unsupported verb");
            ExitCode::from(1)
        }
    }
}
