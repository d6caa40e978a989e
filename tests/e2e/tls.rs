//! TLS between offices (issue 30): Ward served in-process over mutual TLS with certificates of a
//! throwaway CA; the hostile callers — a plaintext client, an untrusted CA, an expired
//! certificate, a certificate naming another office than the caller's session, one naming no
//! office, an office's session without its certificate — each refused.

use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_proto::ward::v1::{
    AuthenticateRequest, AuthorizeRequest, DescribeRequest, ExchangeCredentialRequest,
    PrincipalKind,
};
use lychd_runtime::Office;
use lychd_runtime::client::{Outgoing, channel_tls, peer_channel};
use lychd_runtime::devca::{DevCa, Issued};
use lychd_runtime::tls::TlsConfig;
use lychd_testkit::refusal::reason_and_domain;
use secrecy::SecretString;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

struct Pki {
    ca: DevCa,
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Self {
        Pki {
            ca: DevCa::new("lychd test CA").expect("ca"),
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// `[tls]` of Ward: its certificate, the CA (mutual TLS).
    fn ward_config(&self) -> TlsConfig {
        let files = self
            .ca
            .issue_office(Office::Ward, &[])
            .expect("issue")
            .write(self.dir.path(), "ward")
            .expect("write");
        TlsConfig {
            cert_file: Some(files.cert_file),
            key_file: Some(files.key_file),
            ca_file: Some(self.ca.write_ca(self.dir.path()).expect("ca")),
            allow_plaintext: false,
        }
    }

    fn client(&self, identity: Option<&Issued>) -> ClientTlsConfig {
        let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(self.ca.cert_pem()));
        match identity {
            Some(i) => tls.identity(Identity::from_pem(&i.cert_pem, &i.key_pem)),
            None => tls,
        }
    }
}

fn ward(
    endpoint: &str,
    tls: Option<ClientTlsConfig>,
    token: &str,
) -> WardClient<lychd_runtime::client::PeerChannel> {
    let outgoing = Outgoing::new(Some(lychd_auth::credentials::SessionSource::fixed(
        SecretString::from(token.to_owned()),
    )))
    .with_tls(tls);
    WardClient::new(peer_channel(endpoint, outgoing).expect("endpoint"))
}

async fn describe(
    client: &mut WardClient<lychd_runtime::client::PeerChannel>,
) -> Result<(), tonic::Status> {
    client
        .describe(DescribeRequest {
            include_peers: false,
        })
        .await
        .map(drop)
}

fn refused_by_tls(result: Result<(), tonic::Status>, want: &str) {
    let status = result.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert_eq!(
        reason_and_domain(&status),
        (want.to_owned(), "lychd.tls".to_owned()),
        "{status:?}"
    );
}

/// The call failed in the transport (no answer from the office: no gRPC status of its own),
/// for the TLS reason `why` (empty: any).
fn no_answer(result: Result<(), tonic::Status>, why: &str) {
    let status = result.expect_err("no answer");
    assert!(
        matches!(
            status.code(),
            tonic::Code::Unknown | tonic::Code::Unavailable
        ) && reason_and_domain(&status).0.is_empty(),
        "{status:?}"
    );
    assert!(format!("{status:?}").contains(why), "{status:?}");
}

#[tokio::test]
async fn mutual_tls_checks_the_certificate_against_the_session() {
    let pki = Pki::new();
    let tls = pki.ward_config();
    let s = lychd_testkit::spawn_office_with(lychd_ward::spec(), move |c| c.tls = tls).await;
    let endpoint = s.endpoint();
    assert!(endpoint.starts_with("https://"), "{endpoint}");

    // The tester (a human) over server-only TLS: served.
    let mut tester = ward(&endpoint, Some(pki.client(None)), &s.token);
    describe(&mut tester).await.expect("tester served over TLS");

    // An office's session: with its own certificate, served; with another office's, or none,
    // refused — and a human's session with an office's certificate is refused too.
    let (id, dispatcher_session) = s.principal(PrincipalKind::Service, "dispatcher").await;
    s.admin
        .clone()
        .allow_describe(&id, "ward")
        .await
        .expect("describe");
    let dispatcher_cert = pki.ca.issue_office(Office::Dispatcher, &[]).expect("issue");
    let runner_cert = pki.ca.issue_office(Office::Runner, &[]).expect("issue");
    let mut own = ward(
        &endpoint,
        Some(pki.client(Some(&dispatcher_cert))),
        &dispatcher_session,
    );
    describe(&mut own)
        .await
        .expect("the office's own certificate");
    let mut other = ward(
        &endpoint,
        Some(pki.client(Some(&runner_cert))),
        &dispatcher_session,
    );
    refused_by_tls(
        describe(&mut other).await,
        "PEER_CERTIFICATE_OFFICE_MISMATCH",
    );
    let mut bare = ward(&endpoint, Some(pki.client(None)), &dispatcher_session);
    refused_by_tls(describe(&mut bare).await, "OFFICE_CERTIFICATE_REQUIRED");
    let mut posing = ward(
        &endpoint,
        Some(pki.client(Some(&dispatcher_cert))),
        &s.token,
    );
    refused_by_tls(
        describe(&mut posing).await,
        "PEER_CERTIFICATE_OFFICE_MISMATCH",
    );

    // Ward's own methods, which resolve their caller in the statement that answers them, hold
    // the certificate against the caller's principal the same way: its own session
    // (Authenticate), an asker's (Authorize), and a credential exchanged (ExchangeCredential).
    let authenticate = |token: String| AuthenticateRequest {
        token,
        ..Default::default()
    };
    own.authenticate(authenticate(dispatcher_session.clone()))
        .await
        .expect("an office resolves its own session with its certificate");
    refused_by_tls(
        other
            .authenticate(authenticate(dispatcher_session.clone()))
            .await
            .map(drop),
        "PEER_CERTIFICATE_OFFICE_MISMATCH",
    );
    refused_by_tls(
        bare.authenticate(authenticate(dispatcher_session.clone()))
            .await
            .map(drop),
        "OFFICE_CERTIFICATE_REQUIRED",
    );
    s.admin
        .clone()
        .ensure_assignment(&id, "ward:decide", "decision:ward", "ward", "decide")
        .await
        .expect("the dispatcher may ask about sessions presented to Ward");
    let authorize = AuthorizeRequest {
        token: s.token.clone(),
        action: "ward:describe".to_owned(),
        object: "office:ward".to_owned(),
        audience: "ward".to_owned(),
        purpose: "describe".to_owned(),
        ..Default::default()
    };
    own.authorize(authorize.clone())
        .await
        .expect("an office asks Ward with its certificate");
    refused_by_tls(
        other.authorize(authorize.clone()).await.map(drop),
        "PEER_CERTIFICATE_OFFICE_MISMATCH",
    );
    refused_by_tls(
        bare.authorize(authorize).await.map(drop),
        "OFFICE_CERTIFICATE_REQUIRED",
    );
    let credential = s
        .admin
        .clone()
        .issue_standing(&id)
        .await
        .expect("credential");
    let exchange = ExchangeCredentialRequest {
        ttl_seconds: 0,
        audiences: vec!["ward".to_owned()],
    };
    let mut exchanging = ward(&endpoint, Some(pki.client(Some(&runner_cert))), &credential);
    refused_by_tls(
        exchanging
            .exchange_credential(exchange.clone())
            .await
            .map(drop),
        "PEER_CERTIFICATE_OFFICE_MISMATCH",
    );
    let mut exchanging = ward(
        &endpoint,
        Some(pki.client(Some(&dispatcher_cert))),
        &credential,
    );
    exchanging
        .exchange_credential(exchange)
        .await
        .expect("an office exchanges its credential with its certificate");

    // A certificate of the CA that names no office.
    let now = time::OffsetDateTime::now_utc();
    let nobody = pki
        .ca
        .issue_for(
            &["operator.example".to_owned()],
            now - time::Duration::hours(1),
            now + time::Duration::hours(1),
        )
        .expect("issue");
    let mut anonymous = ward(&endpoint, Some(pki.client(Some(&nobody))), &s.token);
    refused_by_tls(
        describe(&mut anonymous).await,
        "PEER_CERTIFICATE_NAMES_NO_OFFICE",
    );

    // An expired client certificate fails the handshake: no answer at all.
    let expired = pki
        .ca
        .issue_for(
            &[lychd_runtime::tls::office_dns_name(Office::Dispatcher)],
            now - time::Duration::days(2),
            now - time::Duration::days(1),
        )
        .expect("issue");
    let mut stale = ward(
        &endpoint,
        Some(pki.client(Some(&expired))),
        &dispatcher_session,
    );
    no_answer(describe(&mut stale).await, "CertificateExpired");

    // A client that trusts another CA refuses Ward's certificate.
    let stranger = DevCa::new("another CA").expect("ca");
    let untrusted =
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(stranger.cert_pem()));
    let mut doubting = ward(&endpoint, Some(untrusted), &s.token);
    no_answer(describe(&mut doubting).await, "UnknownIssuer");

    // A plaintext client gets no answer from a TLS server.
    let plain = endpoint.replacen("https://", "http://", 1);
    let mut plaintext = ward(&plain, None, &s.token);
    no_answer(describe(&mut plaintext).await, "");

    // Health stays open over TLS.
    let channel = channel_tls(&endpoint, Some(&pki.client(None))).expect("channel");
    let serving = tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .expect("health")
        .into_inner()
        .status;
    assert_eq!(serving, 1, "SERVING");
    s.stop().await;
}

/// PostgreSQL over TLS: a cluster serving a certificate of a throwaway CA. The runtime role
/// connects with `sslmode=verify-full` and `sslrootcert` (by reference) and its session is
/// encrypted; against a CA that did not issue the server's certificate, the pool `serve` makes
/// is refused with the certificate's error.
#[tokio::test]
async fn postgres_over_tls_verifies_the_server_certificate() {
    let pki = Pki::new();
    let cluster = lychd_pg::Cluster::new(pki.dir.path().join("pg")).expect("cluster");
    cluster.init().expect("initdb");
    let now = time::OffsetDateTime::now_utc();
    let server = pki
        .ca
        .issue_for(
            &["localhost".to_owned(), "127.0.0.1".to_owned()],
            now - time::Duration::hours(1),
            now + time::Duration::days(1),
        )
        .expect("issue");
    cluster
        .enable_tls(&server.cert_pem, &server.key_pem)
        .expect("tls");
    let port = lychd_pg::free_port().expect("port");
    cluster
        .start(port, lychd_pg::Durability::Throwaway)
        .expect("start");
    lychd_pg::provision(port, "lychd").await.expect("provision");

    let ca = pki.ca.write_ca(pki.dir.path()).expect("ca");
    let other_dir = pki.dir.path().join("other");
    let other = DevCa::new("another CA")
        .expect("ca")
        .write_ca(&other_dir)
        .expect("ca");
    let pool_with = |root: &std::path::Path| {
        let url = format!(
            "postgres://{}@127.0.0.1:{port}/lychd?sslmode=verify-full&sslrootcert={}",
            Office::Ward.runtime_role(),
            root.display()
        );
        let opts = lychd_runtime::db::connect_options(&url, None, Office::Ward).expect("url");
        lychd_runtime::db::pool(opts, 1)
    };
    let encrypted = async {
        let pool = pool_with(&ca).await?;
        let ssl: bool =
            sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
                .fetch_one(&pool)
                .await?;
        pool.close().await;
        Ok::<_, sqlx::Error>(ssl)
    }
    .await;
    let refused = pool_with(&other).await;
    cluster.stop().expect("stop");
    assert!(
        encrypted.expect("verified connection"),
        "the session is encrypted"
    );
    let error = refused.expect_err("a CA that did not issue the server's certificate");
    let text = error.to_string();
    assert!(
        text.contains("UnknownIssuer") || text.contains("certificate"),
        "{text}"
    );
}
