//! TLS between offices (issue 30): rustls with the ring provider, configured by `[tls]`.
//!
//! - An office serves over TLS when `tls.cert_file` and `tls.key_file` name its certificate
//!   chain and key (PEM files, by reference: typically Podman secrets under `/run/secrets/`).
//! - With `tls.ca_file` too, the server asks every caller for a client certificate issued by
//!   that CA (optional at the handshake: operators and the console connect with server-only
//!   TLS), and the office calls its `https://` peers verifying their certificates against it,
//!   presenting its own certificate as its client certificate (mutual TLS between offices).
//! - An office's certificate names the office it is: a SAN DNS name `<office>.lychd.internal`
//!   ([`office_dns_name`]), besides the host names it is reached at. A certificate a caller
//!   presents must name exactly one office; where the caller's Ward session is an office
//!   principal (kind `service`, named after an office) the certificate must name that office,
//!   and a certificate naming an office must come with that office's session
//!   ([`check_peer`], run wherever the office resolves the caller's principal: in addition to
//!   the Ward session, never instead of it).
//! - Plaintext is the loopback default; on any other listen address, or to a peer that is not
//!   on loopback, it is refused at start unless `tls.allow_plaintext = true`.

use std::path::Path;

use lychd_auth::Principal;
use tonic::Status;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

use crate::Office;
use crate::config::ConfigError;
pub use crate::tls_config::{TlsConfig, is_loopback_url};

/// The refusals of a caller's certificate, in domain `lychd.tls`.
pub mod reasons {
    lychd_refusal::reasons! {
        /// the caller's client certificate names no office, or more than one (`<office>.lychd.internal`); nothing changed
        PEER_CERTIFICATE_NAMES_NO_OFFICE = PermissionDenied;
        /// the caller's client certificate and its Ward session name different offices (or the certificate names an office and the session is not an office's); nothing changed
        PEER_CERTIFICATE_OFFICE_MISMATCH = PermissionDenied;
        /// the caller's session is an office's, and an office calls over mutual TLS with its client certificate; nothing changed
        OFFICE_CERTIFICATE_REQUIRED = PermissionDenied;
    }
}

/// `lychd.tls`'s refusals.
pub const REFUSALS: lychd_refusal::Refusals =
    lychd_refusal::Refusals::new("lychd.tls", reasons::OWN);

/// The DNS name suffix of an office's identity in a certificate.
pub const OFFICE_NAME_SUFFIX: &str = ".lychd.internal";

/// The SAN DNS name that says a certificate is `office`'s: `ward.lychd.internal`.
pub fn office_dns_name(office: Office) -> String {
    format!("{}{OFFICE_NAME_SUFFIX}", office.name())
}

fn read_pem(field: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    let err = |reason: String| ConfigError::Secret {
        field: field.into(),
        path: path.display().to_string(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| err(e.kind().to_string()))?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(err("not a PEM file".into()));
    }
    Ok(bytes)
}

/// The certificates and key named by `[tls]`, read once at start.
#[derive(Clone, Default)]
pub struct Material {
    identity: Option<Identity>,
    ca: Option<Certificate>,
}

impl std::fmt::Debug for Material {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Material")
            .field("identity", &self.identity.as_ref().map(|_| "[redacted]"))
            .field("ca", &self.ca.is_some())
            .finish()
    }
}

impl Material {
    /// Read the files `cfg` names (an unreadable or non-PEM file is a [`ConfigError::Secret`]
    /// naming the field, never the contents).
    pub fn load(cfg: &TlsConfig) -> Result<Self, ConfigError> {
        let identity = match (&cfg.cert_file, &cfg.key_file) {
            (Some(cert), Some(key)) => Some(Identity::from_pem(
                read_pem("tls.cert_file", cert)?,
                read_pem("tls.key_file", key)?,
            )),
            _ => None,
        };
        let ca = cfg
            .ca_file
            .as_deref()
            .map(|p| read_pem("tls.ca_file", p).map(Certificate::from_pem))
            .transpose()?;
        Ok(Material { identity, ca })
    }

    /// The server's TLS: `None` for plaintext. With a CA, client certificates issued by it are
    /// verified (optional at the handshake; [`check_peer`] decides per call).
    pub fn server(&self) -> Option<ServerTlsConfig> {
        let identity = self.identity.clone()?;
        let mut tls = ServerTlsConfig::new().identity(identity);
        if let Some(ca) = &self.ca {
            tls = tls.client_ca_root(ca.clone()).client_auth_optional(true);
        }
        Some(tls)
    }

    /// The client's TLS for `https://` peers: their certificates verified against the CA,
    /// this office's certificate presented as its client certificate. `None` without a CA.
    pub fn client(&self) -> Option<ClientTlsConfig> {
        let ca = self.ca.clone()?;
        let mut tls = ClientTlsConfig::new().ca_certificate(ca);
        if let Some(identity) = &self.identity {
            tls = tls.identity(identity.clone());
        }
        Some(tls)
    }

    /// Server-only TLS for a caller that is no office (an operator, the console, a test): the
    /// CA only, no client certificate. `None` without a CA.
    pub fn anonymous_client(&self) -> Option<ClientTlsConfig> {
        Some(ClientTlsConfig::new().ca_certificate(self.ca.clone()?))
    }

    /// Mutual TLS is served: an identity and a CA.
    pub fn mutual(&self) -> bool {
        self.identity.is_some() && self.ca.is_some()
    }
}

/// The one office a certificate names (`<office>.lychd.internal` as a SAN DNS name); `None`
/// when it names none, or more than one (a wildcard names them all).
pub fn certificate_office(cert: &rustls_pki_types::CertificateDer<'_>) -> Option<Office> {
    let cert = webpki::EndEntityCert::try_from(cert).ok()?;
    let mut named = Office::ALL.into_iter().filter(|office| {
        rustls_pki_types::ServerName::try_from(office_dns_name(*office))
            .is_ok_and(|name| cert.verify_is_valid_for_subject_name(&name).is_ok())
    });
    let first = named.next()?;
    named.next().is_none().then_some(first)
}

/// The office a Ward principal is: kind `service`, named after an office.
pub fn principal_office(principal: &Principal) -> Option<Office> {
    (principal.kind == "service")
        .then(|| Office::from_name(&principal.name))
        .flatten()
}

/// Does the certificate the caller presented on this connection agree with its session's
/// principal? Only a request carrying its connection's TLS information is checked (a request a
/// handler rebuilt to ask again was checked when it arrived). `mutual`: the server verifies
/// client certificates, so an office's session without its certificate is refused.
pub fn check_peer(
    mutual: bool,
    extensions: &http::Extensions,
    principal: &Principal,
) -> Result<(), Status> {
    let Some(info) = extensions.get::<TlsConnectInfo<TcpConnectInfo>>() else {
        return Ok(());
    };
    let certs = info.peer_certs();
    let presented = match certs.as_deref().and_then(|c| c.first()) {
        Some(cert) => Some(
            certificate_office(cert)
                .ok_or_else(|| REFUSALS.refuse(reasons::PEER_CERTIFICATE_NAMES_NO_OFFICE))?,
        ),
        None => None,
    };
    match (presented, principal_office(principal)) {
        (None, None) => Ok(()),
        (None, Some(_)) if !mutual => Ok(()),
        (None, Some(_)) => Err(REFUSALS.refuse(reasons::OFFICE_CERTIFICATE_REQUIRED)),
        (Some(cert), Some(session)) if cert == session => Ok(()),
        (Some(_), _) => Err(REFUSALS.refuse(reasons::PEER_CERTIFICATE_OFFICE_MISMATCH)),
    }
}

/// The check an office's authorizer runs on every principal it resolves from a request.
pub fn peer_check(mutual: bool) -> lychd_auth::PeerCheck {
    std::sync::Arc::new(move |extensions, principal| check_peer(mutual, extensions, principal))
}

/// The client TLS an office uses to reach itself (its healthcheck, Ward's own session): the CA
/// of `[tls]`, verifying the certificate for `<office>.lychd.internal`. `None` when it serves
/// plaintext; an error when it serves TLS without a CA to verify itself with.
pub fn own_client(office: Office, cfg: &TlsConfig) -> Result<Option<ClientTlsConfig>, String> {
    if !cfg.serves_tls() {
        return Ok(None);
    }
    let material = Material::load(cfg).map_err(|e| e.to_string())?;
    let client = material
        .client()
        .ok_or("serving TLS, the office reaches itself only with tls.ca_file")?;
    Ok(Some(client.domain_name(office_dns_name(office))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devca::DevCa;

    fn der(pem: &str) -> rustls_pki_types::CertificateDer<'static> {
        let body: String = pem
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect::<Vec<_>>()
            .concat();
        let bytes = base64_decode(&body);
        rustls_pki_types::CertificateDer::from(bytes)
    }

    /// Standard base64 (the PEM body), without a dependency for one test.
    fn base64_decode(text: &str) -> Vec<u8> {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = Vec::new();
        let mut acc = 0u32;
        let mut bits = 0;
        for c in text.bytes().filter(|c| *c != b'=') {
            let v = ALPHABET.iter().position(|a| *a == c).expect("base64") as u32;
            acc = (acc << 6) | v;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        out
    }

    #[test]
    fn a_certificate_names_one_office_or_none() {
        let ca = DevCa::new("test").expect("ca");
        let now = time::OffsetDateTime::now_utc();
        let hour = time::Duration::hours(1);
        let issue = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
            der(&ca
                .issue_for(&names, now - hour, now + hour)
                .expect("issue")
                .cert_pem)
        };
        let ward = ca.issue_office(Office::Ward, &[]).expect("issue");
        assert_eq!(certificate_office(&der(&ward.cert_pem)), Some(Office::Ward));
        assert_eq!(certificate_office(&issue(&["operator.example"])), None);
        assert_eq!(certificate_office(&issue(&["*.lychd.internal"])), None);
        assert_eq!(
            certificate_office(&issue(&["ward.lychd.internal", "runner.lychd.internal"])),
            None
        );
        assert_eq!(
            certificate_office(&issue(&["runner.lychd.internal", "lychd-runner"])),
            Some(Office::Runner)
        );
    }

    #[test]
    fn unreadable_or_non_pem_files_are_refused_naming_the_field() {
        let dir = tempfile::tempdir().expect("tmp");
        let junk = dir.path().join("junk");
        std::fs::write(&junk, "not a certificate").expect("write");
        let cfg = TlsConfig {
            cert_file: Some(junk.clone()),
            key_file: Some(junk),
            ..TlsConfig::default()
        };
        let e = Material::load(&cfg).expect_err("not PEM").to_string();
        assert!(
            e.contains("tls.cert_file") && e.contains("not a PEM file"),
            "{e}"
        );
        let cfg = TlsConfig {
            ca_file: Some(dir.path().join("missing")),
            ..TlsConfig::default()
        };
        let e = Material::load(&cfg).expect_err("missing").to_string();
        assert!(e.contains("tls.ca_file"), "{e}");
        assert!(
            Material::load(&TlsConfig::default())
                .expect("plaintext")
                .server()
                .is_none()
        );
    }
}
