//! `lychd dev --tls`: a throwaway CA and every office's certificate under `<state>/dev/tls`
//! (made anew at every start), and PostgreSQL's, so the whole stack runs over TLS: the
//! offices serve it and call each other over mutual TLS, PostgreSQL is reached with
//! `sslmode=verify-full`, and `lychd dev`'s own calls and the console verify with the CA.
//!
//! Once [`prepare`] ran, the stack's URLs are `https://` ([`super::configuration::loopback_url`]):
//! one stack per `lychd dev` process, so the choice is the process's.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use lychd_runtime::Office;
use lychd_runtime::devca::{DevCa, Issued};
use tonic::transport::{Certificate, ClientTlsConfig};

/// The CA's certificate file, once the stack runs over TLS.
static CA_FILE: OnceLock<PathBuf> = OnceLock::new();

/// Make the CA and every office's certificate in `dir`; PostgreSQL's is returned (for the
/// cluster to serve). From here on the stack runs over TLS.
pub(super) fn prepare(dir: &Path) -> anyhow::Result<Issued> {
    let ca = DevCa::new("lychd dev CA (throwaway)")?;
    let ca_file = ca.write_ca(dir)?;
    for office in Office::ALL {
        ca.issue_office(office, &[])?.write(dir, office.name())?;
    }
    let now = time::OffsetDateTime::now_utc();
    let postgres = ca.issue_for(
        &["localhost".to_owned(), "127.0.0.1".to_owned()],
        now - time::Duration::hours(1),
        now + time::Duration::days(365),
    )?;
    let _ = CA_FILE.set(ca_file);
    Ok(postgres)
}

/// The CA's certificate file, when the stack runs over TLS.
pub(super) fn ca_file() -> Option<&'static Path> {
    CA_FILE.get().map(PathBuf::as_path)
}

/// `office`'s certificate and key files.
pub(super) fn office_files(office: Office) -> Option<(PathBuf, PathBuf)> {
    let dir = ca_file()?.parent()?;
    Some((
        dir.join(format!("{}.pem", office.name())),
        dir.join(format!("{}.key", office.name())),
    ))
}

/// Server-only TLS verifying the offices with the CA (`lychd dev`'s own calls, as an
/// operator's: no client certificate).
pub(super) fn client() -> Option<ClientTlsConfig> {
    let pem = std::fs::read(ca_file()?).ok()?;
    Some(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))
}

/// The scheme of the stack's gRPC URLs.
pub(super) fn scheme() -> &'static str {
    if ca_file().is_some() { "https" } else { "http" }
}

/// How grpcurl reaches the offices: `-plaintext`, or `-cacert <ca.pem>`.
pub(super) fn grpcurl_transport() -> String {
    match ca_file() {
        Some(ca) => format!("-cacert {}", ca.display()),
        None => "-plaintext".to_owned(),
    }
}
