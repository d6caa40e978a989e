//! `lychd-dispatcher`: the Dispatcher office binary (`serve`, `migrate`, `healthcheck`).

fn main() -> std::process::ExitCode {
    lychd_runtime::cli::main(lychd_dispatcher::spec())
}
