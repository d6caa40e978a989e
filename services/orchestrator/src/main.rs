//! `lychd-orchestrator`: the Orchestrator office binary (`serve`, `migrate`, `healthcheck`).

fn main() -> std::process::ExitCode {
    lychd_runtime::cli::main(lychd_orchestrator::spec())
}
