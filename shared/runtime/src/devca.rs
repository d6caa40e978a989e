//! A throwaway certificate authority (rcgen) for `lychd dev --tls` and the tests: a CA, and
//! per-office certificates naming `<office>.lychd.internal` (plus `localhost` and `127.0.0.1`)
//! for both server and client authentication. Never for a deployment: its key sits next to
//! the certificates it signs.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

use crate::Office;

/// A CA that signs certificates.
pub struct DevCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A certificate and its key, PEM.
#[derive(Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The files of an issued certificate written to disk.
#[derive(Debug, Clone)]
pub struct Files {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

impl DevCa {
    /// A new CA named `name`, valid from a day ago for ten years.
    pub fn new(name: &str) -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::days(1);
        params.not_after = now + Duration::days(3650);
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(DevCa { cert, key })
    }

    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// A certificate for `names` (DNS names or IP addresses), valid between `not_before` and
    /// `not_after`, for server and client authentication.
    pub fn issue_for(
        &self,
        names: &[String],
        not_before: OffsetDateTime,
        not_after: OffsetDateTime,
    ) -> Result<Issued, rcgen::Error> {
        let mut params = CertificateParams::new(names.to_vec())?;
        if let Some(first) = names.first() {
            params.distinguished_name.push(DnType::CommonName, first);
        }
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = not_before;
        params.not_after = not_after;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// `office`'s certificate, valid for a year: `<office>.lychd.internal`, `localhost`,
    /// `127.0.0.1` and `extra` names.
    pub fn issue_office(&self, office: Office, extra: &[String]) -> Result<Issued, rcgen::Error> {
        let mut names = vec![
            crate::tls::office_dns_name(office),
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
        ];
        names.extend(extra.iter().cloned());
        let now = OffsetDateTime::now_utc();
        self.issue_for(&names, now - Duration::hours(1), now + Duration::days(365))
    }

    /// Write the CA's certificate to `dir/ca.pem` (its key stays in memory).
    pub fn write_ca(&self, dir: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("ca.pem");
        std::fs::write(&path, self.cert_pem())?;
        Ok(path)
    }
}

impl Issued {
    /// Write `dir/<name>.pem` and `dir/<name>.key` (the key readable by its owner only).
    pub fn write(&self, dir: &Path, name: &str) -> std::io::Result<Files> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir)?;
        let cert_file = dir.join(format!("{name}.pem"));
        let key_file = dir.join(format!("{name}.key"));
        std::fs::write(&cert_file, &self.cert_pem)?;
        std::fs::write(&key_file, &self.key_pem)?;
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600))?;
        Ok(Files {
            cert_file,
            key_file,
        })
    }
}
