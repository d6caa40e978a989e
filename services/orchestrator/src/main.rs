//! `lychd-orchestrator`: the Orchestrator office binary (`serve`, `migrate`, `healthcheck`),
//! and its host-side commands that need no database (`reactor consume|recover`, `units`).

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match args.get(1).map(String::as_str) {
        Some("reactor") => lychd_orchestrator::reactor::cli::reactor(&args[2..]),
        Some("units") => lychd_orchestrator::reactor::cli::units(&args[2..]),
        _ => lychd_runtime::cli::main(lychd_orchestrator::spec()),
    }
}
