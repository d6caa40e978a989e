//! `[tls]` of an office's configuration (what `crate::tls` serves and calls with): the
//! certificate, key and CA files by reference, and whether plaintext off loopback is allowed.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[tls]`: certificates and keys by reference. Every field is optional; none set is plaintext.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// The office's certificate chain (PEM): served, and presented to peers as its client
    /// certificate. Must name `<office>.lychd.internal` when offices call each other.
    pub cert_file: Option<PathBuf>,
    /// The certificate's private key (PEM).
    pub key_file: Option<PathBuf>,
    /// The CA (PEM) that issued the offices' certificates: verifies the peers this office calls
    /// over `https://` and, when serving TLS, the client certificates of its callers.
    pub ca_file: Option<PathBuf>,
    /// Serve (or call peers) without TLS on a non-loopback address. Default false: refused.
    pub allow_plaintext: bool,
}

impl TlsConfig {
    /// Serves TLS (a certificate and key are named).
    pub fn serves_tls(&self) -> bool {
        self.cert_file.is_some()
    }

    /// Mutual TLS: serving TLS and verifying callers' certificates against `ca_file`.
    pub fn mutual(&self) -> bool {
        self.serves_tls() && self.ca_file.is_some()
    }

    /// The checks serde cannot express: `(field, message)` of the first problem.
    pub fn validate<'a>(
        &self,
        listen: SocketAddr,
        peers: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), (String, String)> {
        let bad = |f: &str, m: &str| Err((format!("tls.{f}"), m.to_owned()));
        if self.cert_file.is_some() != self.key_file.is_some() {
            return bad(
                "key_file",
                "cert_file and key_file are given together or not at all",
            );
        }
        if !self.serves_tls() && !listen.ip().is_loopback() && !self.allow_plaintext {
            return Err((
                "server.listen".into(),
                "plaintext on a non-loopback address is refused: give tls.cert_file and \
                 tls.key_file, or set tls.allow_plaintext = true"
                    .into(),
            ));
        }
        for (name, endpoint) in peers {
            let field = format!("peers.{name}.endpoint");
            if endpoint.starts_with("https://") {
                if self.ca_file.is_none() {
                    return Err((field, "an https:// peer needs tls.ca_file".into()));
                }
            } else if !self.allow_plaintext && !is_loopback_url(endpoint) {
                return Err((
                    field,
                    "plaintext to a non-loopback peer is refused: use https:// with \
                     tls.ca_file, or set tls.allow_plaintext = true"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

/// Is the host of `url` (`http://host:port/…`) a loopback address or `localhost`?
pub fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    fn field(cfg: &TlsConfig, at: &str, peers: &[(&str, &str)]) -> Option<String> {
        cfg.validate(listen(at), peers.iter().copied())
            .err()
            .map(|(f, _)| f)
    }

    #[test]
    fn plaintext_off_loopback_is_refused_unless_allowed() {
        let plain = TlsConfig::default();
        assert_eq!(field(&plain, "127.0.0.1:1", &[]), None);
        assert_eq!(field(&plain, "[::1]:1", &[]), None);
        assert_eq!(
            field(&plain, "0.0.0.0:1", &[]).as_deref(),
            Some("server.listen")
        );
        assert_eq!(
            field(
                &plain,
                "127.0.0.1:1",
                &[("ward", "http://lychd-ward:50053")]
            )
            .as_deref(),
            Some("peers.ward.endpoint")
        );
        assert_eq!(
            field(&plain, "127.0.0.1:1", &[("ward", "http://localhost:50053")]),
            None
        );
        let allowed = TlsConfig {
            allow_plaintext: true,
            ..TlsConfig::default()
        };
        assert_eq!(
            field(
                &allowed,
                "0.0.0.0:1",
                &[("ward", "http://lychd-ward:50053")]
            ),
            None
        );
    }

    #[test]
    fn tls_needs_key_with_certificate_and_a_ca_for_https_peers() {
        let half = TlsConfig {
            cert_file: Some("/run/secrets/c".into()),
            ..TlsConfig::default()
        };
        assert_eq!(
            field(&half, "0.0.0.0:1", &[]).as_deref(),
            Some("tls.key_file")
        );
        let served = TlsConfig {
            key_file: Some("/run/secrets/k".into()),
            ..half
        };
        assert_eq!(field(&served, "0.0.0.0:1", &[]), None);
        assert_eq!(
            field(
                &served,
                "0.0.0.0:1",
                &[("ward", "https://lychd-ward:50053")]
            )
            .as_deref(),
            Some("peers.ward.endpoint")
        );
        assert!(!served.mutual());
        let mutual = TlsConfig {
            ca_file: Some("/run/secrets/ca".into()),
            ..served
        };
        assert!(mutual.mutual());
        assert_eq!(
            field(
                &mutual,
                "0.0.0.0:1",
                &[("ward", "https://lychd-ward:50053")]
            ),
            None
        );
    }
}
