//! Every office: `migrate` then `serve`; reflection lists its services to grpcurl; health says
//! SERVING; `healthcheck` exits 0, and non-zero once the office is down; the API refuses a
//! missing or wrong credential with a reason and answers the right one.

use std::time::Duration;

use lychd_runtime::Office;
use lychd_testkit::{Sandbox, bin_path};

use crate::{grpcurl, text};

async fn healthcheck(office: Office, addr: std::net::SocketAddr) -> std::process::ExitStatus {
    tokio::process::Command::new(bin_path(&office.binary()))
        .args([
            "healthcheck",
            "--addr",
            &addr.to_string(),
            "--timeout-ms",
            "2000",
        ])
        .output()
        .await
        .expect("run healthcheck")
        .status
}

#[tokio::test(flavor = "multi_thread")]
async fn every_office_migrates_serves_and_answers_grpcurl() {
    let mut sandbox = Sandbox::builder().all_offices().start().await;
    let auth = format!("authorization: Bearer {}", sandbox.token);
    for office in Office::ALL {
        let addr = sandbox.office(office).addr.to_string();

        let list = grpcurl(&["-plaintext", &addr, "list"]);
        assert!(
            list.status.success(),
            "{office}: grpcurl list failed: {}",
            text(&list.stderr)
        );
        let services: Vec<String> = text(&list.stdout).lines().map(str::to_owned).collect();
        assert_eq!(
            services,
            vec![
                "grpc.health.v1.Health".to_owned(),
                "grpc.reflection.v1.ServerReflection".to_owned(),
                "grpc.reflection.v1alpha.ServerReflection".to_owned(),
                office.grpc_service().to_owned(),
            ],
            "{office}: reflection lists exactly its own services"
        );

        let health = grpcurl(&["-plaintext", &addr, "grpc.health.v1.Health/Check"]);
        assert!(
            text(&health.stdout).contains("\"SERVING\""),
            "{office}: {}",
            text(&health.stdout)
        );

        let method = format!("{}/Describe", office.grpc_service());
        let ok = grpcurl(&["-plaintext", "-H", &auth, "-d", "{}", &addr, &method]);
        assert!(
            ok.status.success(),
            "{office}: Describe failed: {}",
            text(&ok.stderr)
        );
        let desc: serde_json::Value = serde_json::from_slice(&ok.stdout).expect("json");
        assert_eq!(desc["office"]["office"], office.name());
        assert_eq!(
            desc["office"]["schemaVersion"],
            crate::latest_migration(office).to_string()
        );

        let missing = grpcurl(&["-plaintext", "-d", "{}", &addr, &method]);
        let err = text(&missing.stderr);
        assert!(!missing.status.success());
        assert!(
            err.contains("Unauthenticated") && err.contains("CREDENTIAL_MISSING"),
            "{office}: {err}"
        );

        let wrong = grpcurl(&[
            "-plaintext",
            "-H",
            "authorization: Bearer not-the-credential",
            "-d",
            "{}",
            &addr,
            &method,
        ]);
        let err = text(&wrong.stderr);
        assert!(
            err.contains("Unauthenticated") && err.contains("SESSION_UNKNOWN"),
            "{office}: {err}"
        );
        assert!(
            !err.contains("not-the-credential"),
            "{office}: refusal echoes the credential"
        );

        let unknown_field = grpcurl(&[
            "-plaintext",
            "-H",
            &auth,
            "-d",
            "{\"no_such_field\": 1}",
            &addr,
            &method,
        ]);
        assert!(
            !unknown_field.status.success(),
            "{office}: unknown request field accepted"
        );

        assert!(
            healthcheck(office, sandbox.office(office).addr)
                .await
                .success(),
            "{office}: healthcheck"
        );
    }
    for office in Office::ALL {
        let addr = sandbox.office(office).addr;
        let p = sandbox.office_mut(office);
        p.signal(nix::sys::signal::Signal::SIGTERM);
        let status = p
            .wait_exit(Duration::from_secs(15))
            .await
            .expect("office stops");
        assert!(status.success(), "{office}: exit {status}");
        let log = p.log();
        assert!(
            !log.contains(&sandbox.token),
            "{office}: credential appears in the log"
        );
        assert!(
            !healthcheck(office, addr).await.success(),
            "{office}: healthcheck passes while down"
        );
    }
}

/// A message wire-compatible with `DescribeRequest` plus a filler field (unknown to the office).
#[derive(Clone, PartialEq, prost::Message)]
struct PaddedDescribe {
    #[prost(bool, tag = "1")]
    include_peers: bool,
    #[prost(bytes = "vec", tag = "15")]
    filler: Vec<u8>,
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_request_is_refused_and_the_office_keeps_serving() {
    use std::str::FromStr;
    let mut sandbox = Sandbox::builder().office(Office::Ward).start().await;
    let p = sandbox.office(Office::Ward);
    let mut grpc = tonic::client::Grpc::new(crate::channel_with(&p.endpoint(), &sandbox.token));
    grpc.ready().await.expect("ready");
    let path = http::uri::PathAndQuery::from_str("/lychd.ward.v1.Ward/Describe").expect("path");
    let codec =
        tonic_prost::ProstCodec::<PaddedDescribe, lychd_proto::ward::v1::DescribeResponse>::default(
        );
    // Larger than server.max_message_bytes (default 4 MiB).
    let big = PaddedDescribe {
        include_peers: false,
        filler: vec![b'x'; 5 * 1024 * 1024],
    };
    let status = grpc
        .unary(tonic::Request::new(big), path.clone(), codec.clone())
        .await
        .expect_err("oversized request must be refused");
    assert!(
        matches!(
            status.code(),
            tonic::Code::ResourceExhausted | tonic::Code::OutOfRange
        ),
        "unexpected status {status:?}"
    );
    // A normal-sized request with the unknown field still works.
    grpc.ready().await.expect("ready");
    let small = PaddedDescribe {
        include_peers: false,
        filler: vec![b'x'; 16],
    };
    let ok = grpc
        .unary(tonic::Request::new(small), path, codec)
        .await
        .expect("small request served");
    assert_eq!(ok.into_inner().office.expect("office").office, "ward");
    sandbox.stop().await;
}
