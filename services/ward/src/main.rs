//! `lychd-ward`: the Ward office binary (`serve`, `migrate`, `healthcheck`).

fn main() -> std::process::ExitCode {
    lychd_runtime::cli::main(lychd_ward::spec())
}
