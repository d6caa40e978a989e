//! `lychd-helmloop`: the HelmLoop office binary (`serve`, `migrate`, `healthcheck`).

fn main() -> std::process::ExitCode {
    lychd_runtime::cli::main(lychd_helmloop_service::spec())
}
