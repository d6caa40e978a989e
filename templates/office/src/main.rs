//! `lychd-{{office}}`: the {{Office}} office binary (`serve`, `migrate`, `healthcheck`).

fn main() -> std::process::ExitCode {
    lychd_runtime::cli::main({{crate}}::spec())
}
