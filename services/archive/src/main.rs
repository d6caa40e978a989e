//! `lychd-archive`: the Archive office binary (`serve`, `migrate`, `healthcheck`).

fn main() -> std::process::ExitCode {
    lychd_runtime::cli::main(lychd_archive::spec())
}
